//! Authorization: who is calling a protected tenant. Each tenant is an OAuth 2.1 protected
//! resource (`store::TenantAuth`): open (`none`), served by the platform's own authorization
//! server (`oauth`) or by the tenant's own issuer (`external`). This module
//! holds what both sides share — the principal, secrets sealed at rest, signing keys, token
//! issuing and verification — and the resource-server check every MCP request passes
//! (`AuthService::authenticate`), whose refusals carry the `WWW-Authenticate` challenge.

pub mod address;
pub mod keys;
pub mod password;
pub mod seal;
pub mod tokens;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::HttpRequest;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use crate::config::AuthConfig;
use crate::store::{ExternalIssuer, OAuthSettings, SqlStore, StoreError, TenantAuth};
pub use keys::KeyRing;
pub use seal::{SealError, Sealer};
use tokens::{JwksCache, TokenRejection};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
    /// An outside server (issuer metadata, JWKS, client metadata document) failed us.
    #[error("{0}")]
    Upstream(String),
}

/// Who is calling: the token's issuer, subject and client, and what it may do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Principal {
    pub issuer: String,
    pub subject: String,
    pub client_id: String,
    pub scopes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When the access token that names this principal expires (unix seconds; never shown).
    #[serde(skip)]
    pub token_expires_at: Option<i64>,
}

impl Principal {
    /// What a session is bound to: a refreshed token keeps it, another principal does not.
    pub fn binding(&self) -> Arc<str> {
        binding_of(&self.issuer, &self.subject, &self.client_id)
    }
    /// Whether `binding` is this principal's [`Self::binding`] (compared in place: this is on
    /// every request to a protected tenant's session).
    pub fn has_binding(&self, binding: &str) -> bool {
        let b = binding.as_bytes();
        let (i, s, c) = (
            self.issuer.as_bytes(),
            self.subject.as_bytes(),
            self.client_id.as_bytes(),
        );
        b.len() == i.len() + s.len() + c.len() + 2
            && b.starts_with(i)
            && b[i.len()] == b'\n'
            && b[i.len() + 1..].starts_with(s)
            && b[i.len() + 1 + s.len()] == b'\n'
            && b.ends_with(c)
    }
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

pub fn binding_of(issuer: &str, subject: &str, client_id: &str) -> Arc<str> {
    format!("{issuer}\n{subject}\n{client_id}").into()
}

/// A principal's id in shared quota keys: a fixed-length digest of its binding (keys stay
/// short, and the issuer and subject are not spelled out in Redis).
pub fn quota_id(binding: &str) -> String {
    let mut digest = hash_secret(binding);
    digest.truncate(32);
    digest
}

/// The binding of a principal as its JSON form (sessions keep the JSON form).
pub fn binding_of_value(principal: &Value) -> Option<Arc<str>> {
    let text = |k: &str| principal.get(k).and_then(Value::as_str);
    Some(binding_of(
        text("issuer")?,
        text("subject")?,
        text("client_id")?,
    ))
}

/// SHA-256 (hex) of a token or secret: what the database keeps.
pub fn hash_secret(secret: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// 256 random bits, base64url.
pub fn random_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// The external base URL (`https://host[:port]`): configured, or taken from the request
/// (Host and the scheme, honouring `Forwarded`/`X-Forwarded-*` from a TLS-terminating proxy).
pub fn base_url(req: &HttpRequest, config: &AuthConfig) -> String {
    if !config.public_url.is_empty() {
        return config.public_url.trim_end_matches('/').to_string();
    }
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

/// Whether `base` is what `base_url` gives for `req`, found without building the URL when the
/// request names its host the plain way (no `Forwarded`/`X-Forwarded-*` headers, an origin-form
/// target): then it is the `Host` header (or the server's host name) with the listener's scheme.
/// Every request to a protected tenant asks this (its token's cache entry is bound to the base).
fn is_base_of(base: &str, req: &HttpRequest, config: &AuthConfig) -> bool {
    use actix_web::http::header::{HeaderName, FORWARDED, HOST};
    // Names, not strings: a string is parsed into a header name on every lookup.
    const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
    const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
    if !config.public_url.is_empty() {
        return base == config.public_url.trim_end_matches('/');
    }
    let headers = req.headers();
    let plain = !headers.contains_key(FORWARDED)
        && !headers.contains_key(X_FORWARDED_PROTO)
        && !headers.contains_key(X_FORWARDED_HOST)
        && req.uri().scheme().is_none()
        && req.uri().authority().is_none();
    let host = headers.get(HOST).map(|h| h.to_str());
    match (plain, host) {
        (true, Some(Ok(host))) => {
            let scheme = if req.app_config().secure() {
                "https"
            } else {
                "http"
            };
            base.strip_prefix(scheme)
                .and_then(|rest| rest.strip_prefix("://"))
                == Some(host)
        }
        _ => base == base_url(req, config),
    }
}

/// A tenant's issuer identifier.
pub fn issuer(base: &str, tenant: &str) -> String {
    format!("{base}/t/{tenant}")
}

/// The resource identifiers of a tenant (RFC 8707 `resource`, token `aud`): its Streamable HTTP
/// endpoint first (canonical), its legacy SSE endpoint, and the tenant URL itself.
pub fn resources(base: &str, tenant: &str) -> Vec<String> {
    let t = issuer(base, tenant);
    vec![format!("{t}/mcp"), format!("{t}/sse"), t]
}

/// Where the Protected Resource Metadata of `resource` is (RFC 9728 path insertion).
pub fn resource_metadata_url(base: &str, resource: &str) -> String {
    let path = resource.strip_prefix(base).unwrap_or("");
    format!("{base}/.well-known/oauth-protected-resource{path}")
}

/// A refused request: the HTTP status, the OAuth error code and the `WWW-Authenticate` value.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub status: u16,
    pub description: String,
    pub www_authenticate: Option<String>,
}

/// What the edge needs to check tokens.
pub struct AuthService {
    pub store: SqlStore,
    pub sealer: Arc<Sealer>,
    pub keys: KeyRing,
    pub jwks: JwksCache,
    pub config: AuthConfig,
    /// Where outside fetches (JWKS, issuer metadata, client metadata documents) go out.
    pub egress: crate::egress::Egress,
    /// `server.trusted_proxies`: whose `X-Forwarded-For` names the client address.
    trusted_proxies: Vec<ipnet::IpNet>,
    metadata: Mutex<HashMap<String, (Instant, Value)>>,
    metadata_failures: tokens::RecentFailures,
    /// Tokens already verified on this replica (a signature check costs far more than a
    /// lookup), until they expire or the tenant's auth settings change. Keyed by the token
    /// itself (looked up without copying it); each entry names the tenant and base URL it was
    /// verified for, and counts only there.
    verified: parking_lot::RwLock<crate::FastMap<Box<[u8]>, Verified>>,
}

/// A verified token: its principal, expiry, and where and under which settings it was checked.
struct Verified {
    principal: Arc<Principal>,
    expires_at: i64,
    settings: Arc<TenantAuth>,
    tenant: Box<str>,
    base: Box<str>,
}

/// Most verified tokens remembered per replica.
const VERIFIED_CAPACITY: usize = 20_000;

impl AuthService {
    pub fn new(
        store: SqlStore,
        sealer: Arc<Sealer>,
        config: AuthConfig,
        egress: crate::egress::Egress,
        trusted_proxies: Vec<ipnet::IpNet>,
    ) -> Result<AuthService, AuthError> {
        Ok(AuthService {
            store,
            sealer,
            keys: KeyRing::default(),
            jwks: JwksCache::new(egress.client().clone()),
            config,
            egress,
            trusted_proxies,
            metadata: Mutex::new(HashMap::new()),
            metadata_failures: tokens::RecentFailures::default(),
            verified: parking_lot::RwLock::new(crate::FastMap::default()),
        })
    }

    /// What limits counted per client address count `req` under (see
    /// [`address::client_address`] and [`address::limit_key`]).
    pub fn client_address(&self, req: &actix_web::HttpRequest) -> String {
        address::client_address(req, &self.trusted_proxies)
            .map_or_else(|| "unknown".to_string(), address::limit_key)
    }

    /// Checks an outside URL before fetching it: https (http only to loopback in development),
    /// and no private address unless allowed.
    pub fn check_outside_url(&self, url: &str) -> Result<(), String> {
        self.egress.check_url(url)
    }

    /// An outside issuer's metadata (OpenID discovery, then RFC 8414), cached for 10 minutes.
    pub async fn issuer_metadata(&self, issuer: &str) -> Result<Value, AuthError> {
        if let Some((at, doc)) = self.metadata.lock().get(issuer) {
            if at.elapsed() < Duration::from_secs(600) {
                return Ok(doc.clone());
            }
        }
        if let Some(e) = self.metadata_failures.recent(issuer) {
            return Err(e);
        }
        let outcome = self.fetch_issuer_metadata(issuer).await;
        self.metadata_failures.note(issuer, outcome)
    }

    async fn fetch_issuer_metadata(&self, issuer: &str) -> Result<Value, AuthError> {
        self.check_outside_url(issuer)
            .map_err(|e| AuthError::Upstream(format!("{issuer}: {e}")))?;
        let trimmed = issuer.trim_end_matches('/');
        let mut candidates = vec![format!("{trimmed}/.well-known/openid-configuration")];
        if let Ok(url) = url::Url::parse(trimmed) {
            let origin = url.origin().ascii_serialization();
            let path = url.path().trim_end_matches('/');
            candidates.push(format!(
                "{origin}/.well-known/oauth-authorization-server{path}"
            ));
            candidates.push(format!("{origin}/.well-known/openid-configuration{path}"));
        }
        let mut last = AuthError::Upstream(format!("{issuer}: no metadata"));
        for url in candidates {
            match tokens::fetch_json(self.jwks.http(), &url).await {
                Ok(doc) if doc.get("issuer").and_then(Value::as_str) == Some(issuer) => {
                    self.metadata
                        .lock()
                        .insert(issuer.to_string(), (Instant::now(), doc.clone()));
                    return Ok(doc);
                }
                Ok(_) => {
                    last = AuthError::Upstream(format!("{url}: issuer does not match {issuer}"))
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The resource-server check: `Ok(None)` on an open tenant, the principal on a valid token,
    /// else the challenge to answer with.
    pub async fn authenticate(
        &self,
        req: &HttpRequest,
        tenant: &str,
        auth: &Arc<TenantAuth>,
    ) -> Result<Option<Arc<Principal>>, Challenge> {
        let required: &[String] = match &**auth {
            TenantAuth::None => return Ok(None),
            TenantAuth::Oauth(o) => &o.required_scopes,
            TenantAuth::External(e) => &e.required_scopes,
        };
        let challenge = |status: u16, error: Option<&str>, description: String| {
            let base = base_url(req, &self.config);
            let endpoint = if req.match_info().as_str().ends_with("/mcp") {
                "mcp"
            } else {
                "sse"
            };
            let resource = format!("{}/{endpoint}", issuer(&base, tenant));
            let metadata = resource_metadata_url(&base, &resource);
            // A quote from a forwarded host must not end the parameter early.
            let metadata = metadata.replace('"', "%22");
            let mut value = format!("Bearer resource_metadata=\"{metadata}\"");
            if !required.is_empty() {
                value.push_str(&format!(", scope=\"{}\"", required.join(" ")));
            }
            if let Some(error) = error {
                value.push_str(&format!(
                    ", error=\"{error}\", error_description=\"{}\"",
                    description.replace('"', "'")
                ));
            }
            Challenge {
                status,
                description,
                www_authenticate: Some(value),
            }
        };
        let query = req.query_string();
        if !query.is_empty()
            && query
                .split('&')
                .any(|kv| kv.split('=').next() == Some("access_token"))
        {
            return Err(challenge(
                400,
                Some("invalid_request"),
                "access tokens in the query string are refused; send Authorization: Bearer".into(),
            ));
        }
        // RFC 6750 §3: a request with no Bearer credentials (no header, another scheme) gets
        // the bare challenge; a Bearer credential that is not `Bearer <b64token>` is malformed,
        // 400 invalid_request.
        let token =
            match req.headers().get(actix_web::http::header::AUTHORIZATION) {
                None => return Err(challenge(
                    401,
                    None,
                    "this MCP server requires authorization: send Authorization: Bearer <token>"
                        .into(),
                )),
                Some(v) => match bearer_bytes(v.as_bytes()) {
                    Some(token) => token,
                    None => return Err(challenge(
                        401,
                        None,
                        "this MCP server takes Bearer tokens: send Authorization: Bearer <token>"
                            .into(),
                    )),
                },
            };
        let invalid = |r: TokenRejection| challenge(401, Some("invalid_token"), r.description());
        let now = tokens::now_secs();
        // Looked up as the header's bytes: a token found was a valid b64token when it was
        // verified (the same bytes), so only one not found is checked character by character
        // (a JWT of several hundred bytes on every request to a protected tenant, the costliest
        // part of its token check).
        let cached = self.verified.read().get(token).and_then(|v| {
            (v.expires_at > now
                && Arc::ptr_eq(&v.settings, auth)
                && *v.tenant == *tenant
                && is_base_of(&v.base, req, &self.config))
            .then(|| v.principal.clone())
        });
        let principal = match cached {
            Some(p) => p,
            None => {
                let Some(token) = b64token(token) else {
                    return Err(challenge(
                        400,
                        Some("invalid_request"),
                        "the Authorization header must be 'Bearer <token>' (RFC 6750 b64token)"
                            .into(),
                    ));
                };
                let base = base_url(req, &self.config);
                // Boxed: a token is verified once (then found above), and what verifying awaits
                // (keys, an introspection call) would otherwise size every request's future.
                let (principal, expires_at) = Box::pin(self.verify(token, &base, tenant, auth))
                    .await
                    .map_err(|e| match e {
                        Ok(r) => invalid(r),
                        Err(e) => unavailable(e),
                    })?;
                let mut verified = self.verified.write();
                if verified.len() >= VERIFIED_CAPACITY {
                    verified.retain(|_, v| v.expires_at > now);
                    if verified.len() >= VERIFIED_CAPACITY {
                        verified.clear();
                    }
                }
                let principal = Arc::new(principal);
                verified.insert(
                    token.as_bytes().into(),
                    Verified {
                        principal: principal.clone(),
                        expires_at,
                        settings: auth.clone(),
                        tenant: tenant.into(),
                        base: base.as_str().into(),
                    },
                );
                principal
            }
        };
        let missing: Vec<&String> = required
            .iter()
            .filter(|s| !principal.scopes.contains(s))
            .collect();
        if !missing.is_empty() {
            return Err(challenge(
                403,
                Some("insufficient_scope"),
                format!(
                    "the access token lacks the scope(s) {}",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            ));
        }
        Ok(Some(principal))
    }

    /// Checks a token's signature and claims: the principal and when the token expires.
    async fn verify(
        &self,
        token: &str,
        base: &str,
        tenant: &str,
        auth: &TenantAuth,
    ) -> Result<(Principal, i64), Result<TokenRejection, AuthError>> {
        match auth {
            TenantAuth::None => Err(Ok(TokenRejection::Other("this tenant is open".into()))),
            TenantAuth::Oauth(settings) => self.verify_own(token, base, tenant, settings).await,
            TenantAuth::External(settings) => self.verify_external(token, settings).await,
        }
    }

    /// Verifies one of the tenant's own access tokens.
    pub async fn verify_own(
        &self,
        token: &str,
        base: &str,
        tenant: &str,
        _settings: &OAuthSettings,
    ) -> Result<(Principal, i64), Result<TokenRejection, AuthError>> {
        let iss = issuer(base, tenant);
        let audiences = resources(base, tenant);
        let keys = self
            .keys
            .get(&self.store, &self.sealer, tenant)
            .await
            .map_err(Err)?;
        let claims = match tokens::verify_own(token, &keys, &iss, &audiences) {
            Err(TokenRejection::UnknownKey) => {
                // Another replica may have rotated: reload once.
                let keys = self
                    .keys
                    .load(&self.store, &self.sealer, tenant)
                    .await
                    .map_err(Err)?;
                tokens::verify_own(token, &keys, &iss, &audiences)
            }
            other => other,
        }
        .map_err(Ok)?;
        let principal = Principal {
            issuer: claims.iss,
            subject: claims.sub,
            client_id: claims.client_id,
            scopes: claims
                .scope
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            name: claims.name,
            token_expires_at: Some(claims.exp),
        };
        Ok((principal, claims.exp))
    }

    async fn verify_external(
        &self,
        token: &str,
        settings: &ExternalIssuer,
    ) -> Result<(Principal, i64), Result<TokenRejection, AuthError>> {
        // What no key can make valid is refused before anything is fetched for it.
        let (alg, _) = tokens::header_kid(token).map_err(Ok)?;
        if !tokens::outside_algorithm(alg) {
            return Err(Ok(TokenRejection::BadSignature));
        }
        let jwks_uri = match &settings.jwks_uri {
            Some(uri) => uri.clone(),
            None => self
                .issuer_metadata(&settings.issuer)
                .await
                .map_err(Err)?
                .get("jwks_uri")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    Err(AuthError::Upstream(format!(
                        "{}: metadata names no jwks_uri",
                        settings.issuer
                    )))
                })?,
        };
        self.check_outside_url(&jwks_uri)
            .map_err(|e| Err(AuthError::Upstream(format!("{jwks_uri}: {e}"))))?;
        let claims = self
            .jwks
            .verify(
                token,
                &jwks_uri,
                &settings.issuer,
                std::slice::from_ref(&settings.audience),
            )
            .await
            .map_err(Err)?
            .map_err(Ok)?;
        // Remembered no longer than the token lives, and at most 5 minutes (external keys may
        // be withdrawn at the issuer).
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
        let until = exp.min(tokens::now_secs() + 300);
        Ok((tokens::external_principal(&claims, settings), until))
    }

    /// Periodically deletes expired codes and refresh tokens, keys retired long enough that no
    /// token they signed is still valid, and clients anyone registered that were never used.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let this = self.clone();
        actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                let now = crate::store::now_millis();
                let keep = (this.config.access_token_ttl_secs as i64 + 300) * 1000;
                use crate::store::OAuthStore;
                let unused = (this.config.unused_client_ttl_secs as i64).saturating_mul(1000);
                match this
                    .store
                    .sweep_oauth(now, now - keep, now.saturating_sub(unused))
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(removed = n, "swept expired OAuth rows"),
                    Err(e) => tracing::warn!(error = %e, "OAuth sweep failed"),
                }
                use crate::store::RoundStore;
                match this.store.sweep_rounds(now).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::debug!(removed = n, "swept expired multi round-trip requests")
                    }
                    Err(e) => tracing::warn!(error = %e, "multi round-trip request sweep failed"),
                }
            }
        });
    }
}

/// What an `Authorization` header holds, as RFC 6750 §2.1 reads it.
#[derive(Debug, PartialEq)]
pub(crate) enum Credential<'a> {
    Bearer(&'a str),
    /// Another scheme (`Basic …`): no Bearer credentials at all.
    OtherScheme,
    /// `Bearer` with no token, or one that is not a `b64token`.
    Malformed,
}

/// Whether `b` is a character of a b64token before its padding (RFC 6750 §2.1), without a
/// branch: a token's bytes are tested in one pass the compiler unrolls.
fn is_b64token_char(b: u8) -> bool {
    // `| 0x20` maps the upper-case letters onto the lower-case ones and nothing else onto them.
    ((b | 0x20).wrapping_sub(b'a') < 26)
        | (b.wrapping_sub(b'0') < 10)
        | (b == b'-')
        | (b == b'.')
        | (b == b'_')
        | (b == b'~')
        | (b == b'+')
        | (b == b'/')
}

/// `Bearer <b64token>`: the scheme case-insensitive, one or more spaces before the token,
/// `b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`, nothing after it.
pub(crate) fn bearer_token(header: &[u8]) -> Credential<'_> {
    match bearer_bytes(header) {
        None => Credential::OtherScheme,
        Some(token) => b64token(token).map_or(Credential::Malformed, Credential::Bearer),
    }
}

/// What follows `Bearer` and one or more spaces (the scheme case-insensitive), trimmed and not
/// yet checked; `None`: another scheme.
fn bearer_bytes(header: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = match header.iter().position(|&b| b == b' ') {
        Some(i) => (&header[..i], &header[i..]),
        None => (header, &[][..]),
    };
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii())
}

/// `token` when it is a `b64token` (nothing else in it), else `None`.
fn b64token(token: &[u8]) -> Option<&str> {
    let body = token.len() - token.iter().rev().take_while(|&&b| b == b'=').count();
    // Tested without stopping early (a third of the instructions of `all` with a per-byte
    // `contains`).
    let b64 = token[..body]
        .iter()
        .fold(true, |ok, &b| ok & is_b64token_char(b));
    if body == 0 || !b64 {
        return None;
    }
    // ASCII, checked above.
    std::str::from_utf8(token).ok()
}

/// The credentials of an `Authorization: Bearer …` header holding an operator's token (the
/// admin and metrics tokens, which may be configured with any characters): the scheme
/// case-insensitive (RFC 7235), one or more spaces, the token trimmed. `None`: another scheme
/// or no token.
pub(crate) fn operator_token(header: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unavailable(e: AuthError) -> Challenge {
    tracing::warn!(error = %e, "token verification unavailable");
    Challenge {
        status: 503,
        description: "authorization is temporarily unavailable; retry shortly".into(),
        www_authenticate: None,
    }
}

/// The JSON the admin API shows for a tenant's auth settings (no secrets, no hashes).
pub fn public_view(auth: &TenantAuth) -> Value {
    match auth {
        TenantAuth::None => json!({ "mode": "none" }),
        TenantAuth::Oauth(o) => json!({
            "mode": "oauth",
            "registration": o.registration,
            "initial_access_token_set": o.initial_access_token_hash.is_some(),
            "login": o.login,
            "required_scopes": o.required_scopes,
            "oidc": o.oidc.as_ref().map(|u| json!({
                "issuer": u.issuer, "client_id": u.client_id,
                "client_secret_set": u.client_secret_sealed.is_some(),
                "scopes": u.scopes, "subject_claim": u.subject_claim, "name_claim": u.name_claim,
            })),
        }),
        TenantAuth::External(e) => json!({
            "mode": "external",
            "issuer": e.issuer, "audience": e.audience, "jwks_uri": e.jwks_uri,
            "required_scopes": e.required_scopes,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_credentials_are_read_as_rfc_6750_says() {
        assert_eq!(
            bearer_token(b"Bearer abc.DEF-_~+/=="),
            Credential::Bearer("abc.DEF-_~+/==")
        );
        assert_eq!(bearer_token(b"bearer  x "), Credential::Bearer("x"));
        assert_eq!(bearer_token(b"Basic YTpi"), Credential::OtherScheme);
        assert_eq!(bearer_token(b"Bearerx"), Credential::OtherScheme);
        assert_eq!(bearer_token(b"abc"), Credential::OtherScheme);
        for malformed in [
            &b"Bearer"[..],
            b"Bearer ",
            b"Bearer a b",
            b"Bearer ==",
            b"Bearer a=b",
            b"Bearer a,b",
            b"Bearer \xc3\xa9",
        ] {
            assert_eq!(
                bearer_token(malformed),
                Credential::Malformed,
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn every_byte_is_judged_by_the_b64token_grammar() {
        for b in 0..=255u8 {
            let allowed = b.is_ascii_alphanumeric() || b"-._~+/".contains(&b);
            let header = [&b"Bearer a"[..], &[b], b"z"].concat();
            let read = bearer_token(&header);
            if allowed {
                let token = format!("a{}z", b as char);
                assert_eq!(read, Credential::Bearer(&token), "byte {b}");
            } else {
                assert_eq!(read, Credential::Malformed, "byte {b}");
            }
        }
    }

    #[test]
    fn operator_tokens_are_read_with_any_scheme_case() {
        for header in [
            &b"Bearer s3cret!token"[..],
            b"bearer s3cret!token",
            b"BEARER   s3cret!token ",
        ] {
            assert_eq!(operator_token(header), Some("s3cret!token"));
        }
        for header in [
            &b"Basic YTpi"[..],
            b"Bearer",
            b"Bearer   ",
            b"Bearers3cret",
            b"",
        ] {
            assert_eq!(operator_token(header), None);
        }
    }

    #[test]
    fn the_quick_base_check_agrees_with_base_url() {
        use actix_web::test::TestRequest;
        let config = crate::config::Config::default().auth;
        let requests = [
            TestRequest::default().insert_header(("host", "mcp.example.com")),
            TestRequest::default().insert_header(("host", "127.0.0.1:8080")),
            TestRequest::default()
                .insert_header(("host", "inner:80"))
                .insert_header(("x-forwarded-proto", "https")),
            TestRequest::default()
                .insert_header(("host", "inner:80"))
                .insert_header(("x-forwarded-host", "outer.example")),
            TestRequest::default()
                .insert_header(("host", "inner:80"))
                .insert_header(("forwarded", "proto=https;host=outer.example")),
            TestRequest::default().uri("http://absolute.example/t/a/mcp"),
            TestRequest::default(),
        ];
        let bases = [
            "http://mcp.example.com",
            "https://mcp.example.com",
            "http://127.0.0.1:8080",
            "https://inner:80",
            "http://inner:80",
            "http://outer.example",
            "https://outer.example",
            "http://absolute.example",
            "http://localhost:8080",
            "http://",
        ];
        for (i, r) in requests.into_iter().enumerate() {
            let req = r.to_http_request();
            let actual = base_url(&req, &config);
            for base in bases.iter().copied().chain([actual.as_str()]) {
                assert_eq!(
                    is_base_of(base, &req, &config),
                    base == actual,
                    "request {i}: {base} vs {actual}"
                );
            }
        }
        let fixed = AuthConfig {
            public_url: "https://public.example/".into(),
            ..crate::config::Config::default().auth
        };
        let req = TestRequest::default()
            .insert_header(("host", "inner"))
            .to_http_request();
        assert!(is_base_of("https://public.example", &req, &fixed));
        assert!(!is_base_of("http://inner", &req, &fixed));
    }

    fn principal(issuer: &str, subject: &str, client_id: &str) -> Principal {
        Principal {
            issuer: issuer.into(),
            subject: subject.into(),
            client_id: client_id.into(),
            scopes: Vec::new(),
            name: None,
            token_expires_at: None,
        }
    }

    #[test]
    fn a_binding_compared_in_place_is_the_written_binding() {
        let parts = [
            "",
            "a",
            "b\nc",
            "\n",
            "https://h/t/x",
            "alice",
            "c1",
            "c1\n",
        ];
        let mut principals = Vec::new();
        for i in parts {
            for s in parts {
                for c in parts {
                    principals.push(principal(i, s, c));
                }
            }
        }
        for p in &principals {
            for q in &principals {
                assert_eq!(
                    p.has_binding(&q.binding()),
                    p.binding() == q.binding(),
                    "{:?} vs {:?}",
                    p.binding(),
                    q.binding()
                );
            }
            assert!(!p.has_binding(""));
        }
    }
}
