//! The 2024-11-05 HTTP+SSE transport: `GET /t/{tenant}/sse` opens a session and its one SSE
//! stream (first event `endpoint`), `POST /t/{tenant}/messages?sessionId=…` sends messages,
//! answered on that stream. The session ends when the stream closes, so it lives on the replica
//! holding the stream: messages that reach another replica are forwarded there.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::forward::{ForwardError, Forwarder};
use super::{
    check_content_type, check_sse_accept, parse_body, read_tenant_body, session_not_found, sse,
    sse_response, Admitted, EdgePolicy, HttpError,
};
use crate::session::actor::{OpenLegacy, Post, Terminate};
use crate::session::locate::{self, Located};
use crate::session::{Reply, TransportKind};

pub async fn open(
    req: HttpRequest,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    check_sse_accept(&req)?;
    let tenant = &admitted.tenant;
    let (id, addr) = tenant
        .sessions
        .start(TransportKind::Legacy, admitted.principal_value())
        .await?;
    let endpoint = format!("/t/{}/messages?sessionId={id}", tenant.slug);
    let rx = match addr.send(OpenLegacy { endpoint }).await {
        Ok(Some(rx)) => rx,
        // Its actor failed while opening the stream (the session ends with it).
        _ => {
            addr.do_send(Terminate);
            return Err(HttpError::unavailable(
                "Service Unavailable: the session could not be opened; retry",
            ));
        }
    };
    let on_close = Box::new(move || addr.do_send(Terminate));
    Ok(sse_response(
        HttpResponse::Ok(),
        sse::SseBody::new(None, rx, edge.keepalive, Some(on_close), &tenant.slug),
    ))
}

#[derive(Deserialize)]
pub struct MessagesQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

pub async fn message(
    req: HttpRequest,
    body: web::Payload,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
    forwarder: web::Data<Forwarder>,
) -> Result<HttpResponse, HttpError> {
    check_content_type(&req)?;
    let query = web::Query::<MessagesQuery>::from_query(req.query_string())
        .map_err(|_| HttpError::bad_request("Bad Request: malformed query string"))?;
    let id = query.session_id.as_deref().ok_or_else(|| {
        HttpError::bad_request("Bad Request: the sessionId query parameter is required")
    })?;
    let sessions = &admitted.tenant.sessions;
    let located = locate::locate(sessions, id, TransportKind::Legacy, admitted.forwarded).await?;
    let raw = read_tenant_body(body, &req, &admitted, &edge).await?;
    let payload = parse_body(&raw)?;
    admitted.count_batch(&payload).await?;
    let entry = match located {
        Located::Here(entry) => {
            admitted.check_owner(entry.owner.as_ref())?;
            entry
        }
        Located::Elsewhere { url, lease } => {
            let let_go = locate::let_go(sessions, id, &lease);
            return match forwarder.forward(&url, &req, raw, let_go).await {
                Ok(response) => Ok(response),
                Err(ForwardError::Failed(e)) => Err(e),
                // The stream was the session: with its replica gone (or drained), so is the
                // session.
                Err(ForwardError::Unreachable) => Err(session_not_found()),
            };
        }
    };
    match locate::deliver(sessions, id, entry, Post::new(payload)).await? {
        Reply::Refused(r) => Err(r.into()),
        Reply::Accepted | Reply::Json(_) | Reply::Stream(_) => {
            Ok(HttpResponse::Accepted().body("Accepted"))
        }
    }
}
