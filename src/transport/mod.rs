//! The HTTP edge: request guards (Host/Origin, Accept, Content-Type, body size, protocol-version
//! header), the mapping of refusals to HTTP + JSON-RPC errors, and the two MCP transports
//! (`streamable`: 2025-03-26 and later; `legacy`: 2024-11-05 HTTP+SSE).

pub mod legacy;
pub mod sse;
pub mod streamable;

use actix_web::http::Method;

use crate::tenant::{split_tenant_path, Tenant, TenantPolicy};

use std::time::Duration;

use actix_web::http::header::{self, HeaderMap};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use futures_util::StreamExt;

use crate::config::ServerConfig;
use crate::protocol::jsonrpc::{self, RpcError};
use crate::protocol::{Payload, ProtocolVersion};
use crate::session::core::{Frame, FrameReceiver, Refusal};

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC code for an unknown or ended session (implementation-defined server error).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// An HTTP error whose body is a JSON-RPC error response without id.
#[derive(Debug)]
pub struct HttpError {
    pub status: StatusCode,
    pub error: RpcError,
}

impl HttpError {
    pub fn new(status: StatusCode, error: RpcError) -> Self {
        HttpError { status, error }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, RpcError::invalid_request(message))
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            RpcError::new(SESSION_NOT_FOUND, message),
        )
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            RpcError::new(jsonrpc::SERVER_REFUSED, message),
        )
    }
}

impl From<Refusal> for HttpError {
    fn from(r: Refusal) -> Self {
        HttpError::new(
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            r.error,
        )
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.error)
    }
}

impl ResponseError for HttpError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            builder.insert_header((header::RETRY_AFTER, "5"));
        }
        builder
            .content_type("application/json")
            .json(jsonrpc::error_message(None, &self.error))
    }
}

/// Routes `/t/{tenant}/{mcp|sse|messages}` by hand: the path is split once, with no pattern
/// matching on the hot path, then the tenant is resolved and the transport's handler called.
pub async fn tenant_endpoint(
    req: HttpRequest,
    body: web::Payload,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    let endpoint = match split_tenant_path(req.path()) {
        Some((_, endpoint @ ("mcp" | "sse" | "messages"))) => endpoint,
        _ => {
            return Err(HttpError::new(
                StatusCode::NOT_FOUND,
                RpcError::invalid_request(format!("Not Found: {}", req.path())),
            ))
        }
    };
    let method = req.method().clone();
    match (endpoint, method) {
        ("mcp", Method::POST) => {
            streamable::post(req.clone(), body, Tenant::resolve(&req)?, edge).await
        }
        ("mcp", Method::GET) => streamable::get(req.clone(), Tenant::resolve(&req)?, edge).await,
        ("mcp", Method::DELETE) => {
            streamable::delete(req.clone(), Tenant::resolve(&req)?, edge).await
        }
        ("sse", Method::GET) => legacy::open(req.clone(), Tenant::resolve(&req)?, edge).await,
        ("messages", Method::POST) => {
            legacy::message(req.clone(), body, Tenant::resolve(&req)?, edge).await
        }
        (_, method) => Err(HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            RpcError::invalid_request(format!("Method Not Allowed: {method} {}", req.path())),
        )),
    }
}

/// Everything checked before a tenant's MCP request is handled: DNS-rebinding protection (Host
/// and Origin, including the tenant's own allowed origins, 403), then the tenant's status (403
/// when suspended) and request rate (429).
pub fn admit(
    edge: &EdgePolicy,
    req: &HttpRequest,
    tenant: &crate::tenant::TenantHandle,
) -> Result<(), HttpError> {
    edge.check_host_and_origin(req, &tenant.policy)?;
    tenant.policy.admit()
}

/// What the edge checks, from configuration.
#[derive(Debug, Clone)]
pub struct EdgePolicy {
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    pub keepalive: Duration,
}

impl EdgePolicy {
    pub fn from_config(c: &ServerConfig) -> Self {
        EdgePolicy {
            allowed_hosts: c
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            allowed_origins: c
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            max_body_bytes: c.max_body_bytes,
            keepalive: Duration::from_secs(c.sse_keepalive_secs),
        }
    }

    /// DNS-rebinding protection: the `Host` must name this server and a present `Origin` must be
    /// allowed; otherwise 403.
    pub fn check_host_and_origin(
        &self,
        req: &HttpRequest,
        tenant: &TenantPolicy,
    ) -> Result<(), HttpError> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.host_allowed(&host_name(host)) {
            return Err(HttpError::forbidden(format!(
                "Forbidden: Host {host:?} is not allowed"
            )));
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let origin = origin
                .to_str()
                .unwrap_or("")
                .trim_end_matches('/')
                .to_ascii_lowercase();
            let allowed = self.allowed_origins.iter().any(|o| o == &origin)
                || tenant.allows_origin(&origin)
                || origin.split_once("://").is_some_and(|(scheme, rest)| {
                    matches!(scheme, "http" | "https") && is_loopback_name(&host_name(rest))
                });
            if !allowed {
                return Err(HttpError::forbidden(format!(
                    "Forbidden: Origin {origin:?} is not allowed"
                )));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, name: &str) -> bool {
        is_loopback_name(name) || self.allowed_hosts.iter().any(|h| h == "*" || h == name)
    }
}

/// The host name of a `host[:port]` (IPv6 literals keep their brackets), lowercased.
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.starts_with('[') {
        return authority
            .split_inclusive(']')
            .next()
            .unwrap_or("")
            .to_string();
    }
    authority.split(':').next().unwrap_or("").to_string()
}

fn is_loopback_name(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// Does the `Accept` header admit `wanted` (`application/json`, `text/event-stream`)?
pub fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let kind = wanted.split('/').next().unwrap_or(wanted);
    headers
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let media = item.split(';').next().unwrap_or("").trim();
            media.eq_ignore_ascii_case(wanted)
                || media == "*/*"
                || media
                    .strip_suffix("/*")
                    .is_some_and(|k| k.eq_ignore_ascii_case(kind))
        })
}

/// A POST must list JSON (and, on Streamable HTTP, SSE) in `Accept` (406).
pub fn check_post_accept(req: &HttpRequest) -> Result<(), HttpError> {
    if accepts(req.headers(), "application/json") && accepts(req.headers(), "text/event-stream") {
        return Ok(());
    }
    Err(HttpError::new(
        StatusCode::NOT_ACCEPTABLE,
        RpcError::invalid_request("Not Acceptable: the Accept header must list both application/json and text/event-stream"),
    ))
}

/// A POST body must be JSON (415).
pub fn check_content_type(req: &HttpRequest) -> Result<(), HttpError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type
        .split(';')
        .next()
        .map(str::trim)
        .map(str::to_ascii_lowercase)
        .as_deref()
        == Some("application/json")
    {
        return Ok(());
    }
    Err(HttpError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        RpcError::invalid_request("Unsupported Media Type: Content-Type must be application/json"),
    ))
}

/// A GET stream must accept SSE (406).
pub fn check_sse_accept(req: &HttpRequest) -> Result<(), HttpError> {
    if accepts(req.headers(), "text/event-stream") {
        Ok(())
    } else {
        Err(HttpError::new(
            StatusCode::NOT_ACCEPTABLE,
            RpcError::invalid_request(
                "Not Acceptable: the Accept header must list text/event-stream",
            ),
        ))
    }
}

/// `MCP-Protocol-Version`, when present, must name a revision we serve (400).
pub fn check_version_header(req: &HttpRequest) -> Result<Option<ProtocolVersion>, HttpError> {
    match req.headers().get(VERSION_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(ProtocolVersion::parse)
            .map(Some)
            .ok_or_else(|| {
                HttpError::bad_request(format!(
                    "Bad Request: unsupported MCP-Protocol-Version {v:?}"
                ))
            }),
    }
}

/// Reads the body up to the configured limit (413) and parses it as JSON-RPC (400 with -32700
/// or -32600).
pub async fn read_payload(
    mut body: web::Payload,
    req: &HttpRequest,
    limit: usize,
) -> Result<Payload, HttpError> {
    let too_large = || {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            RpcError::invalid_request(format!("Payload Too Large: the body exceeds {limit} bytes")),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut buf = web::BytesMut::with_capacity(declared.unwrap_or(1024).min(limit));
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            HttpError::bad_request(format!("Bad Request: could not read the body: {e}"))
        })?;
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    jsonrpc::parse_payload(&buf).map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, e))
}

/// Turns a session's frames into the HTTP answer: plain JSON when the first frame is the whole
/// answer, an SSE stream otherwise, 202 when nothing is owed (a cancelled request).
pub async fn respond_with_frames(
    mut rx: FrameReceiver,
    keepalive: Duration,
    session_id: Option<&str>,
) -> HttpResponse {
    let first = rx.recv().await;
    respond_with_first(first, rx, keepalive, session_id)
}

/// As `respond_with_frames`, once the first frame has been received.
pub fn respond_with_first(
    first: Option<Frame>,
    rx: FrameReceiver,
    keepalive: Duration,
    session_id: Option<&str>,
) -> HttpResponse {
    let mut builder = match first {
        None => HttpResponse::Accepted(),
        Some(_) => HttpResponse::Ok(),
    };
    if let Some(id) = session_id {
        builder.insert_header((SESSION_HEADER, id));
    }
    match first {
        None => builder.finish(),
        Some(Frame::Json(body)) => builder.content_type("application/json").body(body),
        Some(Frame::Sse(event)) => {
            sse_response(builder, sse::SseBody::new(Some(event), rx, keepalive, None))
        }
    }
}

pub fn sse_response(
    mut builder: actix_web::HttpResponseBuilder,
    body: sse::SseBody,
) -> HttpResponse {
    builder
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn policy() -> EdgePolicy {
        EdgePolicy {
            allowed_hosts: vec!["mcp.example.com".into()],
            allowed_origins: vec!["https://app.example.com".into()],
            max_body_bytes: 1024,
            keepalive: Duration::from_secs(1),
        }
    }

    #[test]
    fn host_and_origin_allow_list() {
        let p = policy();
        let ok = |host: &str, origin: Option<&str>| {
            let mut r = TestRequest::default().insert_header(("host", host));
            if let Some(o) = origin {
                r = r.insert_header(("origin", o));
            }
            p.check_host_and_origin(&r.to_http_request(), &TenantPolicy::default())
                .is_ok()
        };
        assert!(ok("localhost:3000", None));
        assert!(ok("127.0.0.1:8080", Some("http://127.0.0.1:8080")));
        assert!(ok("[::1]:8080", Some("http://localhost:5173")));
        assert!(ok("mcp.example.com", Some("https://app.example.com")));
        assert!(!ok("evil.example.com", Some("http://evil.example.com")));
        assert!(!ok("localhost:3000", Some("http://evil.example.com")));
        assert!(!ok("localhost.evil.com", None));
    }

    #[test]
    fn accept_matching() {
        let r = TestRequest::default()
            .insert_header(("accept", "application/json, text/event-stream"))
            .to_http_request();
        assert!(
            accepts(r.headers(), "text/event-stream") && accepts(r.headers(), "application/json")
        );
        let r = TestRequest::default()
            .insert_header(("accept", "text/html"))
            .to_http_request();
        assert!(!accepts(r.headers(), "application/json"));
        let r = TestRequest::default()
            .insert_header(("accept", "*/*"))
            .to_http_request();
        assert!(accepts(r.headers(), "text/event-stream"));
    }
}
