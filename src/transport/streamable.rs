//! Streamable HTTP (2025-03-26 … 2025-11-25) at `/t/{tenant}/mcp`: POST sends messages (answered
//! with JSON, an SSE stream, or 202), GET opens the standalone stream or resumes one after
//! `Last-Event-ID`, DELETE ends the session.

use std::sync::Arc;
use std::time::Duration;

use actix::{Addr, Handler};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::{
    check_content_type, check_post_accept, check_sse_accept, check_version_header, read_payload,
    respond_with_first, sse, sse_response, EdgePolicy, HttpError, SESSION_HEADER,
};
use crate::eventlog::EventId;
use crate::protocol::{Message, Payload, RpcError};
use crate::session::actor::{OpenStream, Post, SessionActor, Terminate};
use crate::session::core::{Frame, Reply};
use crate::session::supervisor::{AtCapacity, SessionEntry};
use crate::session::TransportKind;
use crate::tenant::{Tenant, TenantHandle};

pub async fn post(
    req: HttpRequest,
    body: web::Payload,
    Tenant(tenant): Tenant,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    super::admit(&edge, &req, &tenant)?;
    check_post_accept(&req)?;
    check_content_type(&req)?;
    check_version_header(&req)?;
    let payload = read_payload(body, &req, edge.max_body_bytes).await?;
    let Some(id) = session_header(&req)? else {
        return initialize(&tenant, payload, edge.keepalive).await;
    };
    if is_initialize(&payload) {
        return Err(HttpError::bad_request(
            "Bad Request: initialize opens a new session and must be sent without Mcp-Session-Id",
        ));
    }
    let entry = find_session(&tenant, id, TransportKind::Streamable)?;
    match deliver(&tenant, id, entry, Post(payload)).await? {
        Reply::Accepted => Ok(HttpResponse::Accepted().finish()),
        Reply::Refused(r) => Err(r.into()),
        Reply::Json(body) => Ok(json_response(body)),
        Reply::Stream(mut rx) => {
            let first = rx.recv().await;
            Ok(respond_with_first(first, rx, edge.keepalive, None))
        }
    }
}

/// A POST without a session: only `initialize`, which opens one.
async fn initialize(
    tenant: &TenantHandle,
    payload: Payload,
    keepalive: Duration,
) -> Result<HttpResponse, HttpError> {
    if !is_initialize(&payload) {
        return Err(HttpError::bad_request("Bad Request: Mcp-Session-Id header is required (send initialize first to open a session)"));
    }
    let (id, addr) = start_session(tenant, TransportKind::Streamable)?;
    let reply = addr.send(Post(payload)).await.map_err(|_| unavailable())?;
    let (first, rx) = match reply {
        Reply::Json(body) => (Some(Frame::Json(body)), None),
        Reply::Stream(mut rx) => (rx.recv().await, Some(rx)),
        Reply::Refused(refusal) => {
            addr.do_send(Terminate);
            return Err(refusal.into());
        }
        Reply::Accepted => (None, None),
    };
    // A refused initialize (bad params) leaves no session behind.
    let ok = match &first {
        Some(Frame::Json(body)) => {
            serde_json::from_slice::<Value>(body).is_ok_and(|v| v.get("result").is_some())
        }
        _ => false,
    };
    if !ok {
        addr.do_send(Terminate);
    }
    let session = ok.then_some(&*id);
    Ok(match (first, rx) {
        (Some(Frame::Json(body)), _) => {
            let mut response = json_response(body);
            if let Some(id) = session {
                if let Ok(value) = actix_web::http::header::HeaderValue::from_str(id) {
                    response.headers_mut().insert(
                        actix_web::http::header::HeaderName::from_static(SESSION_HEADER),
                        value,
                    );
                }
            }
            response
        }
        (first, Some(rx)) => respond_with_first(first, rx, keepalive, session),
        (_, None) => {
            return Err(HttpError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                RpcError::internal("initialize produced no answer"),
            ))
        }
    })
}

fn json_response(body: bytes::Bytes) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}

pub async fn get(
    req: HttpRequest,
    Tenant(tenant): Tenant,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    super::admit(&edge, &req, &tenant)?;
    check_sse_accept(&req)?;
    check_version_header(&req)?;
    let id = required_session_header(&req)?;
    let last_event_id = match req.headers().get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<EventId>().ok())
                .ok_or_else(|| HttpError::bad_request("Bad Request: malformed Last-Event-ID"))?,
        ),
    };
    let entry = find_session(&tenant, id, TransportKind::Streamable)?;
    let rx = deliver(&tenant, id, entry, OpenStream { last_event_id }).await??;
    Ok(sse_response(
        HttpResponse::Ok(),
        sse::SseBody::new(None, rx, edge.keepalive, None),
    ))
}

pub async fn delete(
    req: HttpRequest,
    Tenant(tenant): Tenant,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    super::admit(&edge, &req, &tenant)?;
    check_version_header(&req)?;
    let id = required_session_header(&req)?;
    let entry = find_session(&tenant, id, TransportKind::Streamable)?;
    entry
        .addr
        .send(Terminate)
        .await
        .map_err(|_| session_not_found())?;
    Ok(HttpResponse::Ok().finish())
}

fn session_header(req: &HttpRequest) -> Result<Option<&str>, HttpError> {
    match req.headers().get(SESSION_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| HttpError::bad_request("Bad Request: malformed Mcp-Session-Id")),
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

pub(crate) fn session_not_found() -> HttpError {
    HttpError::not_found(
        "Session not found: it never existed, expired or was terminated; initialize a new one",
    )
}

fn unavailable() -> HttpError {
    HttpError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        RpcError::internal("Service Unavailable: the tenant is shutting down"),
    )
}

/// A session of this tenant and transport; anything else is 404 (other tenants' sessions too).
pub(crate) fn find_session(
    tenant: &TenantHandle,
    id: &str,
    transport: TransportKind,
) -> Result<SessionEntry, HttpError> {
    let entry = tenant
        .sessions
        .get(id)
        .filter(|e| e.transport == transport)
        .ok_or_else(session_not_found)?;
    entry.activity.touch();
    Ok(entry)
}

pub(crate) fn start_session(
    tenant: &TenantHandle,
    transport: TransportKind,
) -> Result<(Arc<str>, Addr<SessionActor>), HttpError> {
    tenant
        .sessions
        .start(transport, tenant.supervisor.clone())
        .map_err(|AtCapacity(max)| {
            HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                RpcError::new(
                    crate::protocol::jsonrpc::SERVER_REFUSED,
                    format!("Too Many Requests: this tenant's limit of {max} sessions is reached"),
                ),
            )
        })
}

/// Sends `msg` to the session's actor. If the actor just died (a crash the supervisor is
/// restarting), waits for the restarted one.
pub(crate) async fn deliver<M>(
    tenant: &TenantHandle,
    id: &str,
    mut entry: SessionEntry,
    msg: M,
) -> Result<M::Result, HttpError>
where
    M: actix::Message + Send + 'static,
    M::Result: Send,
    SessionActor: Handler<M>,
{
    for _ in 0..10 {
        if entry.addr.connected() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        entry = tenant.sessions.get(id).ok_or_else(session_not_found)?;
    }
    entry.addr.send(msg).await.map_err(|_| session_not_found())
}
