//! Streamable HTTP (2025-03-26 … 2025-11-25) at `/t/{tenant}/mcp` (a POST of the stateless
//! 2026-07-28 revision goes to `stateless`): POST sends messages (answered
//! with JSON, an SSE stream, or 202), GET opens the standalone stream or resumes one after
//! `Last-Event-ID`, DELETE ends the session. A session held by another replica is reached by
//! forwarding (requests) or over the bus (answers and notifications, which need no body back).

use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;

use super::forward::{ForwardError, Forwarder};
use super::stateless;
use super::{
    check_content_type, check_post_accept, check_sse_accept, check_version, check_version_header,
    parse_body, read_tenant_body, respond_with_first, session_not_found, sse, sse_response,
    Admitted, EdgePolicy, HttpError,
};
use crate::cluster::EventId;

const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
use crate::protocol::{Message, Payload, RpcError};
use crate::session::actor::{OpenStream, Post, Terminate};
use crate::session::direct::{self, Direct};
use crate::session::locate::{self, Located};
use crate::session::{Reply, SessionError, StreamItem, TransportKind};
use crate::tenant::{owner_topic, OwnerMessage};

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
    let tenant = &admitted.tenant;
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
    // Answers and notifications need nothing back: the bus can take one to another owner. Not
    // a batch (refused or taken by the revision the owner knows) nor a principal's message (the
    // owner checks it is the session's): those are forwarded, so the client gets the owner's
    // status, not a 202 for something the owner then drops.
    // Nor `notifications/initialized`: the owner must have it before the client's next
    // request (which may be forwarded over HTTP and overtake a bus message) asks the client
    // anything.
    let bus_first = matches!(payload, Payload::Single(_))
        && admitted.principal.is_none()
        && !has_requests(&payload)
        && !matches!(&payload, Payload::Single(Message::Notification(n)) if n.method == "notifications/initialized");
    let entry = match reach(&admitted, id, &req, &forwarder, raw, bus_first).await? {
        Reached::Forwarded(response) => return Ok(response),
        Reached::Here(entry) => entry,
    };
    // A request that needs nothing of the session's own state is answered here, without the
    // hop through the session actor's mailbox; so is `notifications/initialized`.
    if direct::acknowledge(&entry, &payload) {
        return Ok(HttpResponse::Accepted().finish());
    }
    let payload = match direct::answer(&tenant.sessions, &entry, payload) {
        Direct::Done(body) => return Ok(json_response(body)),
        Direct::Wait(answer) => return Ok(json_response(answer.await)),
        Direct::Actor(payload) => payload,
    };
    // Boxed: the common requests are answered above, and this future would otherwise size
    // theirs (each request's future is moved whole).
    match Box::pin(locate::deliver(
        &tenant.sessions,
        id,
        entry,
        Post::new(payload),
    ))
    .await?
    {
        Reply::Accepted => Ok(HttpResponse::Accepted().finish()),
        Reply::Refused(r) => Err(r.into()),
        Reply::Json(body) => Ok(json_response(body)),
        Reply::Stream(mut rx) => {
            let first = rx.recv().await;
            Ok(respond_with_first(
                first,
                rx,
                edge.keepalive,
                None,
                &tenant.slug,
            ))
        }
    }
}

/// A POST without a session: only `initialize`, which opens one (answered by the new
/// session's core before its actor starts: `TenantSessions::open`).
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
        .open(admitted.principal_value(), request)
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
        Reply::Refused(refusal) => Err(refusal.into()),
        Reply::Stream(mut rx) => {
            let first = rx.recv().await;
            Ok(respond_with_first(
                first,
                rx,
                keepalive,
                None,
                &admitted.tenant.slug,
            ))
        }
        Reply::Accepted => Err(HttpError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            RpcError::internal("initialize produced no answer"),
        )),
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
    let tenant = &admitted.tenant;
    let entry = match reach(&admitted, id, &req, &forwarder, Bytes::new(), false).await? {
        Reached::Forwarded(response) => return Ok(response),
        Reached::Here(entry) => entry,
    };
    let mut rx = locate::deliver(&tenant.sessions, id, entry, OpenStream { last_event_id })
        .await?
        .ok_or_else(|| HttpError::from(SessionError::Unavailable("session restarted".into())))?;
    if let Some(last) = last_event_id {
        match rx.recv().await {
            Some(StreamItem::Resumed) => {}
            Some(StreamItem::UnknownEvent(_)) | None => {
                return Err(HttpError::bad_request(format!(
                    "Unknown Last-Event-ID {last}: nothing to resume"
                )))
            }
            Some(other) => {
                return Ok(sse_response(
                    HttpResponse::Ok(),
                    sse::SseBody::new(Some(other), rx, edge.keepalive, None, &tenant.slug),
                ))
            }
        }
    }
    Ok(sse_response(
        HttpResponse::Ok(),
        sse::SseBody::new(None, rx, edge.keepalive, None, &tenant.slug),
    ))
}

pub async fn delete(
    req: HttpRequest,
    admitted: Admitted,
    forwarder: web::Data<Forwarder>,
) -> Result<HttpResponse, HttpError> {
    check_version_header(&req)?;
    let id = required_session_header(&req)?;
    match reach(&admitted, id, &req, &forwarder, Bytes::new(), false).await? {
        Reached::Forwarded(response) => Ok(response),
        Reached::Here(entry) => {
            locate::deliver(&admitted.tenant.sessions, id, entry, Terminate).await?;
            Ok(HttpResponse::Ok().finish())
        }
    }
}

enum Reached {
    Here(std::sync::Arc<crate::session::supervisor::SessionEntry>),
    Forwarded(HttpResponse),
}

/// Finds the session a request names: held here, or reached at its owner — over the bus for a
/// body of answers and notifications only (`bus_first`), else by forwarding the request with
/// `body` — or taken over here when the owner cannot be reached or has let it go. Another
/// replica that took it over first is forwarded to in turn.
async fn reach(
    admitted: &Admitted,
    id: &str,
    req: &HttpRequest,
    forwarder: &Forwarder,
    body: Bytes,
    bus_first: bool,
) -> Result<Reached, HttpError> {
    let sessions = &admitted.tenant.sessions;
    let (url, lease) =
        match locate::locate(sessions, id, TransportKind::Streamable, admitted.forwarded).await? {
            Located::Here(entry) => {
                admitted.check_owner(entry.owner.as_ref())?;
                return Ok(Reached::Here(entry));
            }
            Located::Elsewhere { url, lease } => (url, lease),
        };
    // Boxed, as `locate`'s own slow path: most requests find their session here, and this
    // would otherwise size the future of every request (each request's future is moved whole).
    Box::pin(async move {
        if bus_first {
            let message = OwnerMessage {
                tenant: admitted.tenant.slug.to_string(),
                session: id.to_string(),
                body: String::from_utf8_lossy(&body).into_owned(),
                owner: admitted.principal.as_ref().map(|p| p.binding().to_string()),
            };
            if let Ok(bytes) = serde_json::to_vec(&message) {
                let bus = &sessions.replica.backends.bus;
                // Nobody listening on the owner's topic: it died; forwarding fails and we take
                // over.
                let topic = owner_topic(&lease.replica);
                if bus.publish(&topic, Bytes::from(bytes)).await.unwrap_or(0) > 0 {
                    return Ok(Reached::Forwarded(HttpResponse::Accepted().finish()));
                }
            }
        }
        let (mut url, mut lease) = (url, lease);
        // A second owner is tried once: another replica took the session over first.
        for attempt in 0..2 {
            let let_go = locate::let_go(sessions, id, &lease);
            match forwarder.forward(&url, req, body.clone(), let_go).await {
                Ok(response) => return Ok(Reached::Forwarded(response)),
                Err(ForwardError::Failed(e)) => return Err(e),
                Err(ForwardError::Unreachable) => {}
            }
            match locate::take_over(sessions, id, TransportKind::Streamable, lease).await? {
                Located::Here(entry) => {
                    admitted.check_owner(entry.owner.as_ref())?;
                    return Ok(Reached::Here(entry));
                }
                Located::Elsewhere {
                    url: next,
                    lease: held,
                } if attempt == 0 => {
                    (url, lease) = (next, held);
                }
                Located::Elsewhere { .. } => break,
            }
        }
        Err(session_not_found())
    })
    .await
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

/// Whether a body holds requests (which need an answer body) or only answers/notifications.
fn has_requests(payload: &Payload) -> bool {
    match payload {
        Payload::Single(Message::Request(_)) => true,
        Payload::Single(_) => false,
        Payload::Batch(items) => items
            .iter()
            .any(|m| matches!(m, Ok(Message::Request(_)) | Err(_))),
    }
}
