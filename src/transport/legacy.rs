//! The 2024-11-05 HTTP+SSE transport: `GET /t/{tenant}/sse` opens a session and its one SSE
//! stream (first event `endpoint`), `POST /t/{tenant}/messages?sessionId=…` sends messages,
//! answered on that stream. The session ends when the stream closes, so it lives on the replica
//! holding the stream: messages that reach another replica are relayed there (the front door,
//! `session::Sessions`, decides).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::forward::{Forwarder, Relayed};
use super::{
    check_content_type, check_sse_accept, parse_body, read_tenant_body, sse, sse_response,
    Admitted, EdgePolicy, HttpError,
};
use crate::session::{Reached, Reply};

pub async fn open(
    req: HttpRequest,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    check_sse_accept(&req)?;
    let tenant = &admitted.tenant;
    let stream = tenant
        .sessions
        .open_legacy(admitted.caller(), |id| {
            format!("/t/{}/messages?sessionId={id}", tenant.slug)
        })
        .await?;
    Ok(sse_response(
        HttpResponse::Ok(),
        sse::SseBody::new(
            None,
            stream.rx,
            edge.keepalive,
            Some(stream.on_close),
            &tenant.slug,
        ),
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
    let target = sessions.find_legacy(admitted.caller(), id).await?;
    let raw = read_tenant_body(body, &req, &admitted, &edge).await?;
    let payload = parse_body(&raw)?;
    admitted.count_batch(&payload).await?;
    let relay = Relayed::new(&forwarder, &req, raw);
    match sessions.post_legacy(target, id, payload, &relay).await? {
        Reached::Relayed(response) => Ok(response),
        Reached::Here(Reply::Refused(r)) => Err(r.into()),
        Reached::Here(Reply::Accepted | Reply::Json(_) | Reply::Stream(_)) => {
            Ok(HttpResponse::Accepted().body("Accepted"))
        }
    }
}
