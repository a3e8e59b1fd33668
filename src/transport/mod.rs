//! The HTTP edge: the tenants' MCP endpoints (`routes`: `/t/{tenant}/mcp`, `/sse`,
//! `/messages`) and their one extractor (`Admitted`: tenant, then admission — Host/Origin,
//! suspension, the tenant's rate — then the principal and its own rate; rates are counted
//! across replicas by the cluster quotas), request guards
//! (Accept, Content-Type, body size, protocol-version header), the one mapping of domain refusals
//! to HTTP + JSON-RPC errors, the two MCP transports (`streamable`: 2025-03-26 and later;
//! `legacy`: 2024-11-05 HTTP+SSE), SSE framing, and forwarding to the replica that owns a
//! session (`forward`).

pub mod body_deadline;
pub mod cors;
pub mod endpoint;
pub mod forward;
pub mod legacy;
pub mod routes;
pub mod sse;
pub mod stateless;
pub mod streamable;

use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Payload as DevPayload;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse, ResponseError};
use futures_util::future::{ready, Either, LocalBoxFuture, Ready};
use futures_util::StreamExt;

use crate::auth::{AuthService, Challenge, Principal};
use crate::config::ServerConfig;
use crate::protocol::jsonrpc::{self, RpcError};
use crate::protocol::{Payload, ProtocolVersion};
use crate::session::{Caller, Refusal, SessionError, StreamItem, StreamReceiver};
use crate::tenant::{PolicyRefusal, TenantDirectory, TenantHandle, TenantPolicy};

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// Set on a request one replica forwards to the session's owner (never forwarded again).
pub const FORWARDED_HEADER: &str = "x-harbor-forwarded";
/// Set with `x-harbor-forwarded`: proof that the forwarding replica counted the request against
/// the tenant's rates (`forward::counted_proof`), so its owner does not count it again.
pub const COUNTED_HEADER: &str = "x-harbor-counted";
/// Names the replica that answered (operators and failover drills read it).
pub const REPLICA_HEADER: &str = "x-harbor-replica";
/// On a 503: this replica is draining and holds no session any more (another one takes over).
pub const DRAINING_HEADER: &str = "x-harbor-draining";
// The names above as `HeaderName`s, looked up without parsing a name per request.
pub(crate) const SESSION: HeaderName = HeaderName::from_static(SESSION_HEADER);
pub(crate) const VERSION: HeaderName = HeaderName::from_static(VERSION_HEADER);
/// `Content-Type` of a JSON answer, without the copy a `&str` is turned into on every response.
pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");
const FORWARDED: HeaderName = HeaderName::from_static(FORWARDED_HEADER);
const REPLICA: HeaderName = HeaderName::from_static(REPLICA_HEADER);
pub(crate) const COUNTED: HeaderName = HeaderName::from_static(COUNTED_HEADER);

/// JSON-RPC code for an unknown or ended session (implementation-defined server error).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// An HTTP error whose body is a JSON-RPC error response without id.
#[derive(Debug)]
pub struct HttpError {
    pub status: StatusCode,
    pub error: RpcError,
    /// Refused because this replica is draining.
    draining: bool,
    /// `WWW-Authenticate` or `Allow`, for the statuses that carry them.
    header: ExtraHeader,
    /// `Retry-After` in seconds, when the refusal knows it (a rate limit).
    retry_after: Option<u64>,
    /// Answered with `Connection: close`: the request's body was left unread.
    close: bool,
}

/// The header a refusal carries beside its status (at most one: each goes with one status).
#[derive(Debug)]
enum ExtraHeader {
    None,
    /// `WWW-Authenticate`: the bearer challenge of an unauthorized request.
    Challenge(String),
    /// `Allow` of a 405: the methods the resource serves (RFC 9110 §15.5.6).
    Allow(&'static str),
}

impl HttpError {
    pub fn new(status: StatusCode, error: RpcError) -> Self {
        HttpError {
            status,
            error,
            draining: false,
            header: ExtraHeader::None,
            retry_after: None,
            close: false,
        }
    }
    /// The same refusal, closing the connection after it: for a request whose body was left
    /// unread (too large, or too slow), so that the server does not go on reading the rest.
    pub fn closing(self) -> Self {
        HttpError {
            close: true,
            ..self
        }
    }
    /// 405 saying `message`, with `allow` (the methods the resource serves) as its `Allow`.
    pub fn method_not_allowed(message: impl Into<String>, allow: &'static str) -> Self {
        HttpError {
            header: ExtraHeader::Allow(allow),
            ..Self::new(
                StatusCode::METHOD_NOT_ALLOWED,
                RpcError::invalid_request(message),
            )
        }
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
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            RpcError::new(jsonrpc::SERVER_REFUSED, message),
        )
    }
}

pub(crate) fn session_not_found() -> HttpError {
    HttpError::not_found(
        "Session not found: it never existed, expired or was terminated; initialize a new one",
    )
}

/// The one mapping of session refusals to HTTP.
impl From<SessionError> for HttpError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::NotFound => session_not_found(),
            SessionError::AtCapacity(max) => HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                RpcError::new(
                    jsonrpc::SERVER_REFUSED,
                    format!("Too Many Requests: this tenant's limit of {max} sessions is reached"),
                ),
            ),
            SessionError::PrincipalAtCapacity(max) => HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                RpcError::new(
                    jsonrpc::SERVER_REFUSED,
                    format!("Too Many Requests: your limit of {max} sessions is reached; end one (DELETE) first"),
                ),
            ),
            SessionError::Draining => HttpError {
                draining: true,
                ..HttpError::unavailable(
                    "Service Unavailable: this server is shutting down; retry (another server takes over)",
                )
            },
            SessionError::Unavailable(why) => {
                tracing::warn!(reason = %why, "session unavailable");
                HttpError::unavailable("Service Unavailable: session state is unreachable; retry shortly")
            }
            SessionError::Moved(_) => HttpError::unavailable(
                "Service Unavailable: the session is moving between servers; retry",
            ),
            SessionError::UnknownEvent(last) => {
                HttpError::bad_request(format!("Unknown Last-Event-ID {last}: nothing to resume"))
            }
            SessionError::OwnerFailed => HttpError::new(
                StatusCode::BAD_GATEWAY,
                RpcError::internal(
                    "Bad Gateway: the server holding this session did not answer; retry",
                ),
            ),
        }
    }
}

impl From<Refusal> for HttpError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Invalid(e) => HttpError::new(StatusCode::BAD_REQUEST, e),
            Refusal::Failed(e) => HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, e),
        }
    }
}

impl From<PolicyRefusal> for HttpError {
    fn from(r: PolicyRefusal) -> Self {
        match r {
            PolicyRefusal::Suspended => HttpError::forbidden("Forbidden: this tenant is suspended"),
            PolicyRefusal::RateLimited {
                retry_after,
                principal,
            } => HttpError {
                // Whole seconds, rounded up: a client retrying then is let in.
                retry_after: Some(retry_after.as_micros().div_ceil(1_000_000).max(1) as u64),
                ..HttpError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    RpcError::new(
                        jsonrpc::SERVER_REFUSED,
                        if principal {
                            "Too Many Requests: your request rate limit is reached"
                        } else {
                            "Too Many Requests: this tenant's request rate limit is reached"
                        },
                    ),
                )
            },
        }
    }
}

/// A refused token: 401 (missing, invalid, expired, wrong audience), 403 (insufficient scope),
/// 400 (token in the query string), 503 (keys unreachable), with the bearer challenge.
impl From<Challenge> for HttpError {
    fn from(c: Challenge) -> Self {
        let status = StatusCode::from_u16(c.status).unwrap_or(StatusCode::UNAUTHORIZED);
        let reason = status.canonical_reason().unwrap_or("Unauthorized");
        HttpError {
            header: c
                .www_authenticate
                .map_or(ExtraHeader::None, ExtraHeader::Challenge),
            ..HttpError::new(
                status,
                RpcError::new(
                    jsonrpc::SERVER_REFUSED,
                    format!("{reason}: {}", c.description),
                ),
            )
        }
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
        match &self.header {
            ExtraHeader::None => {}
            ExtraHeader::Challenge(challenge) => {
                builder.insert_header((header::WWW_AUTHENTICATE, challenge.as_str()));
            }
            ExtraHeader::Allow(allow) => {
                builder.insert_header((header::ALLOW, *allow));
            }
        }
        match self.status {
            StatusCode::TOO_MANY_REQUESTS => {
                let seconds = self.retry_after.unwrap_or(5);
                builder.insert_header((header::RETRY_AFTER, seconds.to_string()));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                builder.insert_header((header::RETRY_AFTER, "1"));
                if self.draining {
                    builder.insert_header((DRAINING_HEADER, "1"));
                }
            }
            _ => {}
        }
        if self.close {
            builder.force_close();
        }
        builder
            .content_type(JSON)
            .json(jsonrpc::error_message(None, &self.error))
    }
}

/// Mounts `/t/{tenant}/…`: `mcp` (Streamable HTTP), `sse` and `messages` (legacy HTTP+SSE).
/// Wrong methods are 405 and unknown paths 404, with JSON-RPC error bodies.
pub fn configure(cfg: &mut web::ServiceConfig, replica_id: &str) {
    // One service for the three endpoints of every tenant (`routes`: matched without a regex),
    // registered first so an MCP request is matched before any other `/t/{tenant}/…` route
    // (OAuth, discovery, elicitation pages) is tried. Other paths under `/t/{tenant}` fall
    // through to those routes or to the app's `not_found`.
    cfg.service(routes::Endpoints::new(replica_id));
}

async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refused_edge(&req, live_tenant(&req).as_ref()) {
        return refused.error_response();
    }
    // Only an endpoint's path is routed here.
    let allow = endpoint::endpoint_of(req.match_info().as_str())
        .map_or("POST", |(_, endpoint)| endpoint.methods());
    HttpError::method_not_allowed(
        format!("Method Not Allowed: {} {}", req.method(), req.path()),
        allow,
    )
    .error_response()
}

pub async fn not_found(req: HttpRequest) -> HttpResponse {
    HttpError::new(
        StatusCode::NOT_FOUND,
        RpcError::invalid_request(format!("Not Found: {}", req.path())),
    )
    .error_response()
}

/// A request the edge let in: its tenant (live on this replica), admitted (Host/Origin allowed,
/// tenant active, within its rate and the principal's), and who is calling (`None` on open tenants; a protected
/// tenant's requests carry a valid bearer token).
pub struct Admitted {
    pub tenant: TenantHandle,
    pub principal: Option<Arc<Principal>>,
    /// Another replica forwarded this request to us (its owner).
    pub forwarded: bool,
    /// It was counted against the tenant's rates here (not upstream, and the tenant may have
    /// a rate): a batch's other messages are counted the same way ([`Admitted::count_batch`]).
    counted: bool,
}

impl Admitted {
    /// Who sends the request, as sessions see it.
    pub fn caller(&self) -> Caller<'_> {
        Caller {
            principal: self.principal.as_ref(),
            forwarded: self.forwarded,
        }
    }
}

impl FromRequest for Admitted {
    type Error = HttpError;
    type Future = Either<
        Ready<Result<Admitted, HttpError>>,
        LocalBoxFuture<'static, Result<Admitted, HttpError>>,
    >;

    fn from_request(req: &HttpRequest, _: &mut DevPayload) -> Self::Future {
        match live_tenant(req) {
            Some(tenant) if tenant.policy.is_open_and_unmetered() => {
                Either::Left(ready(Admitted::at_once(req, tenant)))
            }
            live => Either::Right(Box::pin(Admitted::awaiting(req.clone(), live))),
        }
    }
}

impl Admitted {
    /// The common request, admitted without awaiting anything: its tenant is live on this
    /// replica, open and without a request rate. No future is boxed for it (the full path's,
    /// which may await a tenant read from the store, a token check or a shared quota, is written
    /// into a fresh allocation on every request).
    fn at_once(req: &HttpRequest, tenant: TenantHandle) -> Result<Admitted, HttpError> {
        admit_host_and_origin(req, &tenant)?;
        tenant.policy.admit()?;
        Ok(Admitted {
            forwarded: req.headers().contains_key(FORWARDED),
            tenant,
            principal: None,
            counted: false,
        })
    }

    /// Every check, awaiting what it needs (`live`: the tenant as this replica holds it).
    async fn awaiting(req: HttpRequest, live: Option<TenantHandle>) -> Result<Admitted, HttpError> {
        let (tenant, directory, slug) = admitted_tenant(&req, live).await?;
        tenant.policy.admit()?;
        // Counted once: a request forwarded to its session's owner carries the forwarding
        // replica's proof that it was counted there (a client cannot make one).
        let counted_upstream = forward::was_counted(&directory.sealer, &req);
        let quotas = &*tenant.sessions.replica().backends.quotas;
        if !counted_upstream {
            rate_limited(slug, tenant.policy.within_rate(quotas, slug, None, 1).await)?;
        }
        let auth = tenant.policy.auth();
        let principal = match *auth {
            crate::store::TenantAuth::None => None,
            _ => app_data::<AuthService>(&req)?
                .authenticate(&req, slug, &auth)
                .await
                .map_err(HttpError::from)?,
        };
        if let Some(p) = principal
            .as_ref()
            .filter(|_| !counted_upstream && tenant.policy.limits_principals())
        {
            let id = crate::auth::quota_id(&p.binding());
            let counted = tenant.policy.within_rate(quotas, slug, Some(&id), 1).await;
            rate_limited(slug, counted)?;
        }
        Ok(Admitted {
            tenant,
            principal,
            forwarded: req.headers().contains_key(FORWARDED),
            counted: !counted_upstream,
        })
    }

    /// Counts a JSON-RPC batch's messages after its first against the rates the request was
    /// counted against when it was admitted: a batch of 100 messages is 100 requests, refused
    /// whole (429) when they do not fit.
    pub fn count_batch(
        &self,
        payload: &Payload,
    ) -> impl std::future::Future<Output = Result<(), HttpError>> + '_ {
        let more = match payload {
            Payload::Batch(items) if self.counted => items.len().saturating_sub(1),
            _ => 0,
        };
        // Boxed: batches are rare, and their counting would otherwise size every request's
        // future.
        async move {
            match more {
                0 => Ok(()),
                more => Box::pin(self.count_more(more)).await,
            }
        }
    }

    async fn count_more(&self, more: usize) -> Result<(), HttpError> {
        let (tenant, slug) = (&self.tenant, &*self.tenant.slug);
        let quotas = &*tenant.sessions.replica().backends.quotas;
        let more = u32::try_from(more).unwrap_or(u32::MAX);
        // The principal's rate first: a principal over its own rate does not spend the tenant's.
        if let Some(p) = self
            .principal
            .as_ref()
            .filter(|_| tenant.policy.limits_principals())
        {
            let id = crate::auth::quota_id(&p.binding());
            let counted = tenant
                .policy
                .within_rate_after_first(quotas, slug, Some(&id), more)
                .await;
            rate_limited(slug, counted)?;
        }
        let counted = tenant
            .policy
            .within_rate_after_first(quotas, slug, None, more)
            .await;
        rate_limited(slug, counted)
    }
}

/// Shared state the app registered (503 before it has: the server is not ready).
fn app_data<T: 'static>(req: &HttpRequest) -> Result<&web::Data<T>, HttpError> {
    req.app_data::<web::Data<T>>()
        .ok_or_else(|| HttpError::unavailable("Service Unavailable: not ready"))
}

/// The tenant an endpoint's path names, when it is live on this replica.
fn live_tenant(req: &HttpRequest) -> Option<TenantHandle> {
    let directory = req.app_data::<web::Data<TenantDirectory>>()?;
    directory
        .registry
        .get(endpoint::tenant_of(req.match_info().as_str()))
}

/// The tenant an endpoint's path names (and that name), live on this replica, with its Host and
/// Origin admitted (`cors` notes an admitted origin): 404 for an unknown tenant, 403 for a
/// refused Host or Origin, 503 while the tenant store cannot say. `live`: [`live_tenant`].
async fn admitted_tenant(
    req: &HttpRequest,
    live: Option<TenantHandle>,
) -> Result<(TenantHandle, &web::Data<TenantDirectory>, &str), HttpError> {
    let slug = endpoint::tenant_of(req.match_info().as_str());
    let directory = app_data::<TenantDirectory>(req)?;
    // A tenant not live here yet is read from the store: boxed, so that this rare path does
    // not size the future of every request that awaits this one.
    let tenant = match live {
        Some(tenant) => Ok(Some(tenant)),
        None => Box::pin(directory.resolve(slug)).await,
    };
    let tenant = tenant
        .map_err(|e| {
            tracing::warn!(error = %e, "tenant lookup failed");
            HttpError::unavailable(if e.is_unavailable() {
                "Service Unavailable: the tenant store is unreachable; retry shortly"
            } else {
                // Its record does not read here (written by a newer version, say).
                "Service Unavailable: this replica cannot serve the tenant right now"
            })
        })?
        .ok_or_else(|| unknown_tenant(req, slug))?;
    admit_host_and_origin(req, &tenant)?;
    Ok((tenant, directory, slug))
}

/// 404 for a tenant nobody serves, but 403 first for a refused Host or Origin (checked against
/// the server's own allowances): a present, invalid Origin is 403 whatever else is wrong
/// (streamable-http.mdx MUST).
fn unknown_tenant(req: &HttpRequest, slug: &str) -> HttpError {
    refused_edge(req, None)
        .unwrap_or_else(|| HttpError::not_found(format!("Unknown tenant: {slug}")))
}

/// The 403 a request gets for its Host or Origin (`tenant`: whose origins it may come from).
fn refused_edge(req: &HttpRequest, tenant: Option<&TenantHandle>) -> Option<HttpError> {
    let edge = app_data::<EdgePolicy>(req).ok()?;
    let open = TenantPolicy::default();
    let policy = tenant.map_or(&open, |t| &*t.policy);
    edge.check_host_and_origin(req, policy).err()
}

/// The request's Host and Origin admitted for this tenant (403 otherwise); an admitted origin is
/// noted for the CORS headers.
fn admit_host_and_origin(req: &HttpRequest, tenant: &TenantHandle) -> Result<(), HttpError> {
    if let Some(origin) = app_data::<EdgePolicy>(req)?.check_host_and_origin(req, &tenant.policy)? {
        cors::admitted(req, origin);
    }
    Ok(())
}

/// A refused rate is counted in `mcp_harbor_rate_limited`.
fn rate_limited(tenant: &str, counted: Result<(), PolicyRefusal>) -> Result<(), HttpError> {
    counted.map_err(|refusal| {
        crate::observe::metrics::global().rate_limited(tenant);
        refusal.into()
    })
}

/// What the edge checks, from configuration.
#[derive(Debug, Clone)]
pub struct EdgePolicy {
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    /// How long a body may take to arrive (`server.body_timeout_secs`).
    pub body_timeout: Duration,
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
            body_timeout: Duration::from_secs_f64(c.body_timeout_secs),
            keepalive: Duration::from_secs(c.sse_keepalive_secs),
        }
    }

    /// DNS-rebinding protection: the `Host` must name this server and a present `Origin` must be
    /// allowed; otherwise 403. Gives the admitted `Origin` (`None`: the request has none).
    pub fn check_host_and_origin<'r>(
        &self,
        req: &'r HttpRequest,
        tenant: &TenantPolicy,
    ) -> Result<Option<&'r HeaderValue>, HttpError> {
        // HTTP/1.1 sends Host; HTTP/2 sends the :authority the request URI carries.
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(crate::header_text)
            .or_else(|| req.uri().authority().map(|a| a.as_str()))
            .unwrap_or("");
        if !self.host_allowed(&host_name(host)) {
            return Err(HttpError::forbidden(format!(
                "Forbidden: Host {host:?} is not allowed"
            )));
        }
        let sent = req.headers().get(header::ORIGIN);
        if let Some(origin) = sent {
            let origin = crate::header_text(origin)
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
        Ok(sent)
    }

    fn host_allowed(&self, name: &str) -> bool {
        is_loopback_name(name) || self.allowed_hosts.iter().any(|h| h == "*" || h == name)
    }
}

/// The host name of a `host[:port]` (IPv6 literals keep their brackets), lowercased (copied
/// only when it is not lowercase already: this is on every request).
fn host_name(authority: &str) -> std::borrow::Cow<'_, str> {
    // By byte (the header is ASCII; `split` on a char goes through the general searcher).
    let authority = authority.trim_ascii();
    let bytes = authority.as_bytes();
    let end = if authority.starts_with('[') {
        bytes
            .iter()
            .position(|&b| b == b']')
            .map_or(bytes.len(), |i| i + 1)
    } else {
        bytes.iter().position(|&b| b == b':').unwrap_or(bytes.len())
    };
    let name = &authority[..end];
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        name.to_ascii_lowercase().into()
    } else {
        name.into()
    }
}

fn is_loopback_name(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// Does the `Accept` header admit `wanted` (`application/json`, `text/event-stream`)? Read as
/// bytes in one pass (this is on every request); a value that is not ASCII (what
/// `HeaderValue::to_str` refuses, see [`crate::header_text`]) admits nothing.
pub fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    media_ranges(headers).any(|media| admits(media, wanted.as_bytes()))
}

/// The media ranges of every `Accept` header, parameters dropped.
fn media_ranges(headers: &HeaderMap) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all(header::ACCEPT)
        .map(|v| v.as_bytes())
        .filter(|v| v.is_ascii())
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|item| {
            item.split(|&b| b == b';')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
}

/// Does media range `media` admit the type `wanted`?
fn admits(media: &[u8], wanted: &[u8]) -> bool {
    let kind = wanted.split(|&b| b == b'/').next().unwrap_or(wanted);
    media.eq_ignore_ascii_case(wanted)
        || media == b"*/*"
        || media
            .strip_suffix(b"/*")
            .is_some_and(|k| k.eq_ignore_ascii_case(kind))
}

/// A POST must list JSON (and, on Streamable HTTP, SSE) in `Accept` (406).
pub fn check_post_accept(req: &HttpRequest) -> Result<(), HttpError> {
    // What nearly every client sends (the transport page's own example), compared whole.
    if req
        .headers()
        .get(header::ACCEPT)
        .is_some_and(|v| v.as_bytes() == b"application/json, text/event-stream")
    {
        return Ok(());
    }
    // Otherwise both in one pass over the header.
    let (mut json, mut sse) = (false, false);
    for media in media_ranges(req.headers()) {
        json |= admits(media, b"application/json");
        sse |= admits(media, b"text/event-stream");
    }
    if json && sse {
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
        .map(|v| v.as_bytes())
        .filter(|v| v.is_ascii())
        .unwrap_or_default();
    let media = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if media.eq_ignore_ascii_case(b"application/json") {
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

/// `MCP-Protocol-Version`, when present, must name a session-era revision (400 with
/// UnsupportedProtocolVersion, listing what is served). GET and DELETE do not exist in the
/// stateless revision (405).
pub fn check_version_header(req: &HttpRequest) -> Result<Option<ProtocolVersion>, HttpError> {
    check_version(req, req.headers().get(VERSION))
}

/// [`check_version_header`] of a header already looked up.
pub fn check_version(
    req: &HttpRequest,
    version: Option<&HeaderValue>,
) -> Result<Option<ProtocolVersion>, HttpError> {
    match version {
        None => Ok(None),
        Some(v) => {
            let text = String::from_utf8_lossy(v.as_bytes());
            if ProtocolVersion::parse_modern(&text).is_some() {
                return Err(HttpError::method_not_allowed(
                    format!(
                        "Method Not Allowed: protocol version {text} has no {} on the MCP \
                         endpoint (POST only; no sessions)",
                        req.method()
                    ),
                    "POST, OPTIONS",
                ));
            }
            ProtocolVersion::parse(&text).map(Some).ok_or_else(|| {
                let mut error = crate::protocol::stateless::unsupported_version(&text);
                error.message =
                    format!("Unsupported protocol version: MCP-Protocol-Version {text:?}");
                HttpError::new(StatusCode::BAD_REQUEST, error)
            })
        }
    }
}

/// Reads the body up to `limit` bytes (413) and within `patience` of its head (408).
pub async fn read_body(
    mut body: web::Payload,
    req: &HttpRequest,
    limit: usize,
    patience: Duration,
) -> Result<bytes::Bytes, HttpError> {
    let too_large = || {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            RpcError::invalid_request(format!("Payload Too Large: the body exceeds {limit} bytes")),
        )
        .closing()
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(crate::header_text)
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let too_slow = || {
        HttpError::new(
            StatusCode::REQUEST_TIMEOUT,
            RpcError::invalid_request(format!(
                "Request Timeout: the body did not arrive within {} s",
                patience.as_secs_f64()
            )),
        )
        .closing()
    };
    let mut buf = web::BytesMut::new();
    // The whole body within `patience`: the server's request timeout covers the head only,
    // and a client trickling a body (or sending none after its head) would hold the
    // connection and its buffer for ever.
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        // What has already arrived is taken without a timer: a body that came with its head
        // (the common case) costs no timer set and cancelled. A later chunk that is ready at
        // once is still refused after the deadline (a client sending just fast enough to be
        // ready at every read would otherwise never meet it).
        let next = match futures_util::FutureExt::now_or_never(body.next()) {
            Some(next) if buf.is_empty() || tokio::time::Instant::now() < deadline => next,
            Some(_) => return Err(too_slow()),
            None => match tokio::time::timeout_at(deadline, body.next()).await {
                Ok(next) => next,
                Err(_) => return Err(too_slow()),
            },
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| {
            HttpError::bad_request(format!("Bad Request: could not read the body: {e}"))
        })?;
        // A body with its Content-Length that came in one chunk (the common case) is taken as
        // it is: no copy, and no waiting on the end of a payload that cannot hold more.
        if buf.is_empty() && declared == Some(chunk.len()) {
            return Ok(chunk);
        }
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        if buf.is_empty() {
            // Room for what has come and a little more, not for what the client declared: a
            // declared 4 MiB that never arrives reserves nothing.
            buf.reserve(declared.unwrap_or(1024).min(limit).min(64 * 1024));
        }
        buf.extend_from_slice(&chunk);
        if declared == Some(buf.len()) {
            break;
        }
    }
    Ok(buf.freeze())
}

/// Reads a body for a tenant's MCP endpoint: within the tenant's body limit (and the server's),
/// and with no message over the tenant's message limit (413 either way).
pub async fn read_tenant_body(
    body: web::Payload,
    req: &HttpRequest,
    admitted: &Admitted,
    edge: &EdgePolicy,
) -> Result<bytes::Bytes, HttpError> {
    let policy = &admitted.tenant.policy;
    let raw = read_body(
        body,
        req,
        policy.max_body_bytes(edge.max_body_bytes),
        edge.body_timeout,
    )
    .await?;
    check_message_sizes(&raw, policy.max_message_bytes())?;
    Ok(raw)
}

/// 413 when a message of the body (the body itself, or a member of a batch) is over `limit`
/// bytes. A body within the limit is not looked into; malformed JSON is left to the parser.
fn check_message_sizes(raw: &[u8], limit: usize) -> Result<(), HttpError> {
    if raw.len() <= limit {
        return Ok(());
    }
    let too_large = |size: usize| {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            RpcError::invalid_request(format!(
                "Payload Too Large: a message of {size} bytes exceeds this tenant's limit of {limit} bytes per message"
            )),
        )
    };
    let is_batch = raw
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'[');
    if !is_batch {
        return Err(too_large(raw.len()));
    }
    match serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(raw) {
        Ok(members) => match members.iter().map(|m| m.get().len()).find(|&n| n > limit) {
            Some(size) => Err(too_large(size)),
            None => Ok(()),
        },
        Err(_) => Ok(()),
    }
}

/// Parses a body as JSON-RPC (400 with -32700 or -32600).
pub fn parse_body(body: &[u8]) -> Result<Payload, HttpError> {
    jsonrpc::parse_payload(body).map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, e))
}

/// Turns a session's stream, once its first item has been received, into the HTTP answer: plain
/// JSON when the first item is the whole answer, an SSE stream otherwise; a stream that ends at
/// once when nothing is owed (a cancelled request: a request's answer is JSON or a stream, never
/// a bare 202).
pub fn respond_with_first(
    first: Option<StreamItem>,
    rx: StreamReceiver,
    keepalive: Duration,
    session_id: Option<&str>,
    tenant: &str,
) -> HttpResponse {
    let mut builder = HttpResponse::Ok();
    if let Some(id) = session_id {
        builder.insert_header((SESSION, id));
    }
    match first {
        None => sse_response(builder, futures_util::stream::empty()),
        Some(StreamItem::Json(body)) => builder.content_type(JSON).body(body),
        Some(item) => sse_response(
            builder,
            sse::SseBody::new(Some(item), rx, keepalive, None, tenant),
        ),
    }
}

pub fn sse_response<S>(mut builder: actix_web::HttpResponseBuilder, body: S) -> HttpResponse
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, actix_web::Error>> + 'static,
{
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

    #[test]
    fn host_names_are_read_from_authorities() {
        for (authority, name) in [
            ("Example.COM:8080", "example.com"),
            ("example.com", "example.com"),
            (" localhost:1 ", "localhost"),
            ("[::1]:8080", "[::1]"),
            ("[::1]", "[::1]"),
            ("[::1", "[::1"),
            (":80", ""),
            ("", ""),
        ] {
            assert_eq!(host_name(authority), name, "{authority:?}");
        }
    }

    fn policy() -> EdgePolicy {
        EdgePolicy {
            allowed_hosts: vec!["mcp.example.com".into()],
            allowed_origins: vec!["https://app.example.com".into()],
            max_body_bytes: 1024,
            body_timeout: Duration::from_secs(30),
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
