//! Streamable HTTP (2025-03-26 … 2025-11-25) at `/t/{tenant}/mcp` (a POST of the stateless
//! 2026-07-28 revision goes to `stateless`): POST sends messages (answered with JSON, an SSE
//! stream, or 202), GET opens the standalone stream or resumes one after `Last-Event-ID`, DELETE
//! ends the session. The session is reached through the front door (`session::Sessions`), which
//! finds it here or at the replica holding it; what it answers is mapped to HTTP here.

use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;

use super::forward::{Forwarder, Relayed};
use super::stateless;
use super::{
    check_content_type, check_post_accept, check_sse_accept, check_version, check_version_header,
    parse_body, read_tenant_body, respond_with_first, sse, sse_response, Admitted, EdgePolicy,
    HttpError,
};
use crate::cluster::EventId;
use crate::protocol::{Message, Payload, RpcError};
use crate::session::{Reached, Reply};

const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

pub async fn post(
    req: HttpRequest,
    body: web::Payload,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
    forwarder: web::Data<Forwarder>,
) -> Result<HttpResponse, HttpError> {
    check_post_accept(&req)?;
    check_content_type(&req)?;
    let raw = read_tenant_body(body, &req, &admitted, &edge).await?;
    let payload = parse_body(&raw)?;
    admitted.count_batch(&payload).await?;
    let version = req.headers().get(super::VERSION);
    if stateless::is_stateless(version, &payload) {
        return stateless::post(req, payload, admitted, edge).await;
    }
    check_version(&req, version)?;
    let Some(id) = session_header(&req)? else {
        // Boxed: opening a session is once per session, and its future would otherwise size
        // that of every request (each request's future is moved whole).
        return Box::pin(initialize(&admitted, payload, edge.keepalive)).await;
    };
    if is_initialize(&payload) {
        return Err(HttpError::bad_request(
            "Bad Request: initialize opens a new session and must be sent without Mcp-Session-Id",
        ));
    }
    let relay = Relayed::new(&forwarder, &req, raw);
    let tenant = &admitted.tenant;
    match tenant
        .sessions
        .post(admitted.caller(), id, payload, &relay)
        .await?
    {
        Reached::Relayed(response) => Ok(response),
        Reached::Here(reply) => respond(reply, edge.keepalive, &tenant.slug).await,
    }
}

/// The HTTP answer to what a session replied to a POST: 202, plain JSON, or a stream whose
/// first item decides JSON or SSE.
async fn respond(
    reply: Reply,
    keepalive: Duration,
    tenant: &str,
) -> Result<HttpResponse, HttpError> {
    match reply {
        Reply::Accepted => Ok(HttpResponse::Accepted().finish()),
        Reply::Refused(r) => Err(r.into()),
        Reply::Json(body) => Ok(json_response(body)),
        Reply::Stream(mut rx) => {
            let first = rx.recv().await;
            Ok(respond_with_first(first, rx, keepalive, None, tenant))
        }
    }
}

/// A POST without a session: only `initialize`, which opens one (answered by the new
/// session's core before its actor starts).
async fn initialize(
    admitted: &Admitted,
    payload: Payload,
    keepalive: Duration,
) -> Result<HttpResponse, HttpError> {
    let request = match payload {
        Payload::Single(Message::Request(r)) if r.method == "initialize" => r,
        batch @ Payload::Batch(_) if is_initialize(&batch) => {
            return Err(HttpError::new(
                StatusCode::BAD_REQUEST,
                RpcError::invalid_request(
                    "JSON-RPC batches are not accepted before initialization (initialize cannot be batched)",
                ),
            ))
        }
        _ => return Err(HttpError::bad_request("Bad Request: Mcp-Session-Id header is required (send initialize first to open a session)")),
    };
    let (reply, session) = admitted
        .tenant
        .sessions
        .open(admitted.caller(), request)
        .await?;
    match reply {
        Reply::Json(body) => {
            let mut response = json_response(body);
            if let Some(id) = session {
                if let Ok(value) = HeaderValue::from_str(&id) {
                    response.headers_mut().insert(super::SESSION, value);
                }
            }
            Ok(response)
        }
        Reply::Accepted => Err(HttpError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            RpcError::internal("initialize produced no answer"),
        )),
        other => respond(other, keepalive, &admitted.tenant.slug).await,
    }
}

fn json_response(body: Bytes) -> HttpResponse {
    HttpResponse::Ok().content_type(super::JSON).body(body)
}

pub async fn get(
    req: HttpRequest,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
    forwarder: web::Data<Forwarder>,
) -> Result<HttpResponse, HttpError> {
    check_sse_accept(&req)?;
    check_version_header(&req)?;
    let id = required_session_header(&req)?;
    let last_event_id = match req.headers().get(LAST_EVENT_ID) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<EventId>().ok())
                .ok_or_else(|| HttpError::bad_request("Bad Request: malformed Last-Event-ID"))?,
        ),
    };
    let relay = Relayed::new(&forwarder, &req, Bytes::new());
    let tenant = &admitted.tenant;
    match tenant
        .sessions
        .stream(admitted.caller(), id, last_event_id, &relay)
        .await?
    {
        Reached::Relayed(response) => Ok(response),
        Reached::Here((first, rx)) => Ok(sse_response(
            HttpResponse::Ok(),
            sse::SseBody::new(first, rx, edge.keepalive, None, &tenant.slug),
        )),
    }
}

pub async fn delete(
    req: HttpRequest,
    admitted: Admitted,
    forwarder: web::Data<Forwarder>,
) -> Result<HttpResponse, HttpError> {
    check_version_header(&req)?;
    let id = required_session_header(&req)?;
    let relay = Relayed::new(&forwarder, &req, Bytes::new());
    match admitted
        .tenant
        .sessions
        .close(admitted.caller(), id, &relay)
        .await?
    {
        Reached::Relayed(response) => Ok(response),
        Reached::Here(()) => Ok(HttpResponse::Ok().finish()),
    }
}

fn session_header(req: &HttpRequest) -> Result<Option<&str>, HttpError> {
    match req.headers().get(super::SESSION) {
        None => Ok(None),
        Some(v) => crate::header_text(v)
            .map(Some)
            .ok_or_else(|| HttpError::bad_request("Bad Request: malformed Mcp-Session-Id")),
    }
}

/// GET and DELETE always name a session.
fn required_session_header(req: &HttpRequest) -> Result<&str, HttpError> {
    session_header(req)?
        .ok_or_else(|| HttpError::bad_request("Bad Request: Mcp-Session-Id header is required"))
}

fn is_initialize(payload: &Payload) -> bool {
    match payload {
        Payload::Single(Message::Request(r)) => r.method == "initialize",
        Payload::Batch(items) => items
            .iter()
            .any(|m| matches!(m, Ok(Message::Request(r)) if r.method == "initialize")),
        _ => false,
    }
}
