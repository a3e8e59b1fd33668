//! Each `oauth` tenant's authorization server, served under its issuer `/t/{tenant}`:
//! discovery (RFC 9728 resource metadata, RFC 8414 and OpenID Connect metadata, JWKS), client
//! registration (RFC 7591/7592, pre-registered clients, Client ID Metadata Documents), the
//! login/consent page and its federated variant, the token endpoint (authorization code with
//! PKCE S256, rotating refresh tokens, client credentials) and revocation (RFC 7009). Errors
//! are OAuth error JSON (`error`, `error_description`); the page shows its errors rather than
//! redirecting anywhere it cannot trust.

pub mod attempts;
pub mod authorize;
pub mod clients;
pub mod discovery;
pub mod elicitation_page;
pub mod fallback;
pub mod page;
pub mod token;

use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use serde_json::json;

use crate::auth::{AuthError, AuthService};
use crate::store::{OAuthSettings, StoreError, TenantAuth};
use crate::tenant::{TenantDirectory, TenantHandle};

/// Mounts the authorization-server routes (before the MCP `/t/{tenant}` scope).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/t/{tenant}/oauth")
            .wrap(actix_web::middleware::from_fn(body_deadline))
            .wrap(cors())
            .route("/authorize", web::get().to(authorize::show))
            .route("/authorize", web::post().to(authorize::submit))
            .route("/callback", web::get().to(authorize::callback))
            .route("/token", web::post().to(token::token))
            .route("/revoke", web::post().to(token::revoke))
            .route("/register", web::post().to(clients::register))
            .route("/register/{client_id}", web::get().to(clients::read))
            .route("/register/{client_id}", web::put().to(clients::update))
            .route("/register/{client_id}", web::delete().to(clients::delete))
            .route("/jwks", web::get().to(discovery::jwks))
            .default_service(web::to(|req| preflight_or_refusal(req, endpoint_methods))),
    )
    .service(
        web::scope("/t/{tenant}/.well-known")
            .wrap(cors())
            .route("/{doc}", web::get().to(discovery::appended))
            .route(
                "/{doc}/{rest:.*}",
                web::get().to(discovery::appended_with_rest),
            )
            .default_service(web::to(|req| preflight_or_refusal(req, document_methods))),
    )
    .service(
        web::scope("/.well-known")
            .wrap(cors())
            .route("/{doc}", web::get().to(fallback::metadata))
            .route("/{doc}/{rest:.*}", web::get().to(discovery::inserted))
            .default_service(web::to(|req| preflight_or_refusal(req, document_methods))),
    )
    // 2025-03-26 default endpoints, on hosts dedicated to a tenant.
    .service(
        root_endpoint("/authorize", "GET, POST, OPTIONS")
            .route(web::get().to(fallback::authorize_show))
            .route(web::post().to(fallback::authorize_submit))
            .wrap(actix_web::middleware::from_fn(body_deadline))
            .wrap(cors()),
    )
    .service(
        root_endpoint("/token", "POST, OPTIONS")
            .route(web::post().to(fallback::token))
            .wrap(actix_web::middleware::from_fn(body_deadline))
            .wrap(cors()),
    )
    .service(
        root_endpoint("/register", "POST, OPTIONS")
            .route(web::post().to(fallback::register))
            .wrap(actix_web::middleware::from_fn(body_deadline))
            .wrap(cors()),
    );
}

/// A 2025-03-26 default endpoint at the root (its routes added by the caller), answered like a
/// tenant's own: other methods are refused with `allow` on a host dedicated to a tenant, 404 on
/// a shared host whatever the method (`fallback::refusal`).
fn root_endpoint(path: &str, allow: &'static str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(move |req, auth| {
        fallback::refusal(req, auth, allow)
    }))
}

/// A request body must arrive in time (`crate::transport::body_deadline`): 408 as an OAuth error, or as
/// a page for the sign-in form (`/authorize`, posted by a browser, shows its errors).
async fn body_deadline(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<actix_web::body::BoxBody>,
) -> Result<actix_web::dev::ServiceResponse, actix_web::Error> {
    let timed_out: crate::transport::body_deadline::TimedOut = if req.path().ends_with("/authorize")
    {
        page::form_too_slow
    } else {
        |patience| {
            let description = crate::transport::body_deadline::too_slow(patience);
            OAuthError::new(StatusCode::REQUEST_TIMEOUT, "invalid_request", description)
                .error_response()
        }
    };
    crate::transport::body_deadline::within(req, next, timed_out).await
}

/// Browser-based MCP clients (the Inspector) call discovery, registration and the token
/// endpoint from another origin; none of these use cookies.
fn cors() -> actix_web::middleware::DefaultHeaders {
    actix_web::middleware::DefaultHeaders::new()
        .add((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .add((
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            "WWW-Authenticate, Location",
        ))
}

/// A scope's default service: a browser's preflight is answered; a path of the scope asked with
/// a method it does not serve (`methods` of the rest of the path after the scope) is 405 with
/// `Allow` (RFC 9110 §15.5.6); any other path is 404.
async fn preflight_or_refusal(
    req: HttpRequest,
    methods: fn(&str) -> Option<&'static str>,
) -> HttpResponse {
    if req.method() == actix_web::http::Method::OPTIONS {
        return preflight();
    }
    let Some(allow) = methods(req.match_info().unprocessed()) else {
        return OAuthError::not_found(format!("no such endpoint: {}", req.path())).error_response();
    };
    method_not_allowed(&req, allow)
}

/// The answer to a browser's preflight on any authorization-server endpoint.
fn preflight() -> HttpResponse {
    HttpResponse::NoContent()
        .insert_header((
            header::ACCESS_CONTROL_ALLOW_METHODS,
            "GET, POST, PUT, DELETE, OPTIONS",
        ))
        .insert_header((
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            "Authorization, Content-Type, MCP-Protocol-Version",
        ))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, "600"))
        .finish()
}

/// 405 with `Allow` and an OAuth error body.
fn method_not_allowed(req: &HttpRequest, allow: &'static str) -> HttpResponse {
    let mut response = OAuthError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request",
        format!("{} is not served at {}", req.method(), req.path()),
    )
    .error_response();
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    response
}

/// The methods an endpoint under `/t/{tenant}/oauth` serves (`rest`: its path after that),
/// `None` when it is no endpoint.
fn endpoint_methods(rest: &str) -> Option<&'static str> {
    match rest {
        "/authorize" => Some("GET, POST, OPTIONS"),
        "/callback" | "/jwks" => Some("GET, OPTIONS"),
        "/token" | "/revoke" | "/register" => Some("POST, OPTIONS"),
        _ => rest
            .strip_prefix("/register/")
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
            .then_some("GET, PUT, DELETE, OPTIONS"),
    }
}

/// The methods a discovery document under a `.well-known` serves (`rest`: the path after it,
/// `/{document}` or `/{document}/…`), `None` when it names no document.
fn document_methods(rest: &str) -> Option<&'static str> {
    let document = rest.strip_prefix('/')?.split('/').next()?;
    [discovery::PRM, discovery::ASM, discovery::OIDC]
        .contains(&document)
        .then_some("GET, OPTIONS")
}

/// What the authorization server keeps in memory on each replica.
pub struct OAuthState {
    pub documents: clients::MetadataDocuments,
    /// Failed sign-ins per user and per client address, a minute at a time.
    pub limiter: attempts::AttemptLimiter,
    /// Client registrations per client address and per tenant, an hour at a time.
    pub registrations: attempts::AttemptLimiter,
}

impl OAuthState {
    /// `quotas`: where attempts are counted (the cluster's, shared by the replicas).
    pub fn new(quotas: std::sync::Arc<dyn crate::cluster::Quotas>) -> Self {
        OAuthState {
            documents: clients::MetadataDocuments::default(),
            limiter: attempts::AttemptLimiter::new(quotas.clone(), authorize::LOGIN_WINDOW),
            registrations: attempts::AttemptLimiter::new(quotas, clients::REGISTRATION_WINDOW),
        }
    }
}

/// An OAuth error response: `{"error", "error_description"}`.
#[derive(Debug)]
pub struct OAuthError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: String,
    /// `WWW-Authenticate` (401 on client authentication or registration tokens).
    pub challenge: Option<String>,
    /// `Retry-After` on a 429 (a 503 always says 1 s).
    pub retry_after: Option<std::time::Duration>,
}

impl OAuthError {
    pub fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            error,
            description: description.into(),
            challenge: None,
            retry_after: None,
        }
    }
    pub fn bad(error: &'static str, description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error, description)
    }
    pub fn invalid_client(description: impl Into<String>, basic: bool) -> Self {
        OAuthError {
            challenge: basic.then(|| "Basic realm=\"mcp-harbor\"".to_string()),
            ..Self::new(StatusCode::UNAUTHORIZED, "invalid_client", description)
        }
    }
    /// 429 with `Retry-After`: an attempt over its limit.
    pub fn too_many(description: impl Into<String>, retry_after: std::time::Duration) -> Self {
        OAuthError {
            retry_after: Some(retry_after),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
                description,
            )
        }
    }
    pub fn not_found(description: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", description)
    }
    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %e, "authorization server dependency failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "the authorization server is temporarily unavailable; retry shortly",
        )
    }
}

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.error,
            self.description
        )
    }
}

impl ResponseError for OAuthError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        let mut b = HttpResponse::build(self.status);
        b.insert_header((header::CACHE_CONTROL, "no-store"));
        if let Some(c) = &self.challenge {
            b.insert_header((header::WWW_AUTHENTICATE, c.as_str()));
        }
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: asking again sooner is refused again.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            b.insert_header((header::RETRY_AFTER, secs.max(1).to_string()));
        } else if self.status == StatusCode::SERVICE_UNAVAILABLE {
            b.insert_header((header::RETRY_AFTER, "1"));
        }
        b.json(json!({ "error": self.error, "error_description": self.description }))
    }
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> Self {
        OAuthError::unavailable(e)
    }
}

impl From<AuthError> for OAuthError {
    fn from(e: AuthError) -> Self {
        OAuthError::unavailable(e)
    }
}

/// A tenant and its authorization-server settings (404 unless the tenant uses `oauth`).
pub struct AsTenant {
    pub handle: TenantHandle,
    pub settings: OAuthSettings,
    pub issuer: String,
    pub base: String,
}

pub const INVALID_TARGET: &str = "resource must be this tenant's MCP server URL";

impl AsTenant {
    /// The resource (RFC 8707) a request names, checked to be one of this tenant's; the
    /// Streamable HTTP endpoint when none is named.
    pub fn resource(&self, requested: Option<&String>) -> Option<String> {
        let resources = crate::auth::resources(&self.base, &self.handle.slug);
        match requested {
            None => resources.into_iter().next(),
            Some(r) => resources.into_iter().find(|x| same_resource(x, r)),
        }
    }
}

/// Whether two resource URIs name the same server: a trailing `/` aside, the scheme and host
/// compared case-insensitively (the authorization page: implementations SHOULD accept upper
/// case there), the path exactly.
pub fn same_resource(a: &str, b: &str) -> bool {
    fn split(uri: &str) -> (&str, &str, &str) {
        let uri = uri.trim_end_matches('/');
        let Some((scheme, rest)) = uri.split_once("://") else {
            return ("", "", uri);
        };
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        (scheme, authority, path)
    }
    let (a, b) = (split(a), split(b));
    a.0.eq_ignore_ascii_case(b.0) && a.1.eq_ignore_ascii_case(b.1) && a.2 == b.2
}

pub async fn as_tenant(
    req: &HttpRequest,
    slug: &str,
    auth: &AuthService,
) -> Result<AsTenant, OAuthError> {
    let handle = resolve(req, slug).await?;
    match &*handle.policy.auth() {
        TenantAuth::Oauth(settings) => {
            let base = crate::auth::base_url(req, &auth.config);
            Ok(AsTenant {
                issuer: crate::auth::issuer(&base, slug),
                settings: settings.clone(),
                handle,
                base,
            })
        }
        _ => Err(OAuthError::not_found(format!(
            "tenant {slug:?} has no authorization server here"
        ))),
    }
}

pub async fn resolve(req: &HttpRequest, slug: &str) -> Result<TenantHandle, OAuthError> {
    let directory = req
        .app_data::<web::Data<TenantDirectory>>()
        .ok_or_else(|| OAuthError::unavailable("no tenant directory"))?;
    directory
        .resolve(slug)
        .await
        .map_err(OAuthError::unavailable)?
        .ok_or_else(|| OAuthError::not_found(format!("unknown tenant {slug:?}")))
}

/// Constant-time comparison of two hashes.
pub fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::same_resource;

    #[test]
    fn resources_compare_scheme_and_host_without_case() {
        let ours = "https://mcp.example.com/t/acme/mcp";
        for same in [
            ours,
            "https://mcp.example.com/t/acme/mcp/",
            "HTTPS://MCP.Example.COM/t/acme/mcp",
        ] {
            assert!(same_resource(ours, same), "{same}");
        }
        for other in [
            "https://mcp.example.com/t/ACME/mcp",
            "https://mcp.example.com/t/acme",
            "https://mcp.example.com:8443/t/acme/mcp",
            "http://mcp.example.com/t/acme/mcp",
            "mcp.example.com/t/acme/mcp",
        ] {
            assert!(!same_resource(ours, other), "{other}");
        }
    }
}
