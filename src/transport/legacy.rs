//! The 2024-11-05 HTTP+SSE transport: `GET /t/{tenant}/sse` opens a session and its one SSE
//! stream (first event `endpoint`), `POST /t/{tenant}/messages?sessionId=…` sends messages,
//! answered on that stream. The session ends when the stream closes.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::streamable::{deliver, find_session, start_session};
use super::{
    check_content_type, check_sse_accept, read_payload, sse, sse_response, EdgePolicy, HttpError,
};
use crate::session::actor::{OpenLegacy, Post, Terminate};
use crate::session::core::Reply;
use crate::session::TransportKind;
use crate::tenant::Tenant;

pub async fn open(
    req: HttpRequest,
    Tenant(tenant): Tenant,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    super::admit(&edge, &req, &tenant)?;
    check_sse_accept(&req)?;
    let (id, addr) = start_session(&tenant, TransportKind::Legacy)?;
    let endpoint = format!("/t/{}/messages?sessionId={id}", tenant.slug);
    let rx = match addr.send(OpenLegacy { endpoint }).await {
        Ok(Some(rx)) => rx,
        _ => return Err(super::streamable::session_not_found()),
    };
    let on_close = Box::new(move || addr.do_send(Terminate));
    Ok(sse_response(
        HttpResponse::Ok(),
        sse::SseBody::new(None, rx, edge.keepalive, Some(on_close)),
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
    Tenant(tenant): Tenant,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    super::admit(&edge, &req, &tenant)?;
    check_content_type(&req)?;
    let query = web::Query::<MessagesQuery>::from_query(req.query_string())
        .map_err(|_| HttpError::bad_request("Bad Request: malformed query string"))?;
    let id = query.session_id.as_deref().ok_or_else(|| {
        HttpError::bad_request("Bad Request: the sessionId query parameter is required")
    })?;
    let entry = find_session(&tenant, id, TransportKind::Legacy)?;
    let payload = read_payload(body, &req, edge.max_body_bytes).await?;
    match deliver(&tenant, id, entry, Post(payload)).await? {
        Reply::Refused(r) => Err(r.into()),
        Reply::Accepted | Reply::Json(_) | Reply::Stream(_) => {
            Ok(HttpResponse::Accepted().body("Accepted"))
        }
    }
}
