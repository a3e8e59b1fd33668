//! Access and ID tokens: short-lived ES256 JWTs with a `kid`, audience-bound to the tenant's MCP
//! resource (RFC 8707). Verification of our own tokens (the tenant's keys) and of an external
//! issuer's (its JWKS, fetched and cached; asymmetric algorithms only).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::keys::TenantKeys;
use super::{AuthError, Principal};
use crate::store::ExternalIssuer;

/// The claims of an access token this platform issues.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    pub client_id: String,
    #[serde(default)]
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

pub fn now_secs() -> i64 {
    crate::store::now_millis() / 1000
}

/// Signs `claims` with the tenant's active key.
pub fn sign(keys: &TenantKeys, claims: &impl Serialize) -> Result<String, AuthError> {
    let active = keys
        .active
        .as_ref()
        .ok_or_else(|| AuthError::Internal("no active signing key".into()))?;
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(active.kid.clone());
    header.typ = Some("JWT".into());
    jsonwebtoken::encode(&header, claims, &active.encoding)
        .map_err(|e| AuthError::Internal(format!("signing: {e}")))
}

/// Why a bearer token was not accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenRejection {
    Malformed,
    UnknownKey,
    BadSignature,
    Expired,
    NotYetValid,
    WrongIssuer,
    WrongAudience,
    Other(String),
}

impl TokenRejection {
    pub fn description(&self) -> String {
        match self {
            TokenRejection::Malformed => "the access token is malformed".into(),
            TokenRejection::UnknownKey => "the access token is signed by an unknown key".into(),
            TokenRejection::BadSignature => "the access token signature is invalid".into(),
            TokenRejection::Expired => "the access token expired".into(),
            TokenRejection::NotYetValid => "the access token is not valid yet (nbf)".into(),
            TokenRejection::WrongIssuer => "the access token is from another issuer".into(),
            TokenRejection::WrongAudience => {
                "the access token is not meant for this resource (audience)".into()
            }
            TokenRejection::Other(m) => m.clone(),
        }
    }
}

fn rejection(e: jsonwebtoken::errors::Error) -> TokenRejection {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => TokenRejection::Expired,
        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
        ErrorKind::InvalidIssuer => TokenRejection::WrongIssuer,
        ErrorKind::InvalidAudience => TokenRejection::WrongAudience,
        ErrorKind::InvalidSignature => TokenRejection::BadSignature,
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => TokenRejection::Malformed,
        other => TokenRejection::Other(format!("the access token was refused ({other:?})")),
    }
}

fn validation(alg: Algorithm, issuer: &str, audiences: &[String], leeway: u64) -> Validation {
    let mut v = Validation::new(alg);
    v.leeway = leeway;
    // Not yet valid (`nbf` in the future, beyond the leeway) is refused too: jsonwebtoken
    // checks `nbf` only when asked.
    v.validate_nbf = true;
    v.set_issuer(&[issuer]);
    v.set_audience(audiences);
    v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    v
}

/// The `kid` of a token's header (which key ring to consult).
pub fn header_kid(token: &str) -> Result<(Algorithm, Option<String>), TokenRejection> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| TokenRejection::Malformed)?;
    Ok((header.alg, header.kid))
}

/// Verifies a token the tenant issued. `Err(UnknownKey)` asks the caller to reload the keys.
pub fn verify_own(
    token: &str,
    keys: &TenantKeys,
    issuer: &str,
    audiences: &[String],
) -> Result<AccessClaims, TokenRejection> {
    let (alg, kid) = header_kid(token)?;
    if alg != Algorithm::ES256 {
        return Err(TokenRejection::BadSignature);
    }
    let key = kid
        .and_then(|k| keys.verifying.get(&k))
        .ok_or(TokenRejection::UnknownKey)?;
    // Our own clocks: little skew to allow for.
    jsonwebtoken::decode::<AccessClaims>(token, key, &validation(alg, issuer, audiences, 5))
        .map(|d| d.claims)
        .map_err(rejection)
}

const ASYMMETRIC: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Whether a token from an outside issuer may use `alg` (asymmetric only: no HS256 signed with
/// a public key).
pub fn outside_algorithm(alg: Algorithm) -> bool {
    ASYMMETRIC.contains(&alg) || alg == Algorithm::EdDSA
}

/// Outside fetches that failed recently, per key (a JWKS URL, an issuer): while one is recent,
/// the same error answers without asking again (a provider that is down is not asked once per
/// request).
#[derive(Default)]
pub struct RecentFailures {
    failed: Mutex<HashMap<String, (Instant, String)>>,
}

impl RecentFailures {
    const HOLD: Duration = Duration::from_secs(5);

    /// The error of a fetch for `key` that failed within the last few seconds.
    pub fn recent(&self, key: &str) -> Option<AuthError> {
        match self.failed.lock().get(key) {
            Some((at, message)) if at.elapsed() < Self::HOLD => {
                Some(AuthError::Upstream(message.clone()))
            }
            _ => None,
        }
    }

    /// Passes a fetch's outcome through, remembering a failure (and forgetting a success).
    pub fn note<T>(&self, key: &str, outcome: Result<T, AuthError>) -> Result<T, AuthError> {
        let mut failed = self.failed.lock();
        match &outcome {
            Ok(_) => {
                failed.remove(key);
            }
            Err(e) => {
                failed.retain(|_, (at, _)| at.elapsed() < Self::HOLD);
                failed.insert(key.to_string(), (Instant::now(), e.to_string()));
            }
        }
        outcome
    }
}

/// JWKS of outside issuers (external-mode tenants, upstream OpenID providers), cached per URL.
pub struct JwksCache {
    http: reqwest::Client,
    sets: Mutex<HashMap<String, (Instant, JwkSet)>>,
    failures: RecentFailures,
    ttl: Duration,
    /// An unknown `kid` refetches at most this often per URL.
    refetch_every: Duration,
}

impl JwksCache {
    pub fn new(http: reqwest::Client) -> Self {
        JwksCache {
            http,
            sets: Mutex::new(HashMap::new()),
            failures: RecentFailures::default(),
            ttl: Duration::from_secs(600),
            refetch_every: Duration::from_secs(10),
        }
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    async fn fetch(&self, url: &str) -> Result<JwkSet, AuthError> {
        if let Some(e) = self.failures.recent(url) {
            return Err(e);
        }
        let set = self.failures.note(
            url,
            fetch_json(&self.http, url).await.and_then(|value| {
                serde_json::from_value::<JwkSet>(value)
                    .map_err(|e| AuthError::Upstream(format!("{url}: not a JWKS ({e})")))
            }),
        )?;
        self.sets
            .lock()
            .insert(url.to_string(), (Instant::now(), set.clone()));
        Ok(set)
    }

    /// The key `kid` from the JWKS at `url` (refetched when stale or when `kid` is new).
    pub async fn key(
        &self,
        url: &str,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Option<DecodingKey>, AuthError> {
        let cached = self.sets.lock().get(url).cloned();
        let pick = |set: &JwkSet| -> Option<DecodingKey> {
            let jwk = match kid {
                Some(kid) => set.find(kid),
                None if set.keys.len() == 1 => set.keys.first(),
                None => None,
            }?;
            if let Some(key_alg) = jwk.common.key_algorithm {
                if format!("{key_alg:?}") != format!("{alg:?}") {
                    return None;
                }
            }
            DecodingKey::from_jwk(jwk).ok()
        };
        match cached {
            Some((at, set)) if at.elapsed() < self.ttl => {
                if let Some(key) = pick(&set) {
                    return Ok(Some(key));
                }
                if at.elapsed() < self.refetch_every {
                    return Ok(None);
                }
            }
            _ => {}
        }
        let set = self.fetch(url).await?;
        Ok(pick(&set))
    }

    /// Verifies a JWT from an outside issuer against its JWKS; returns the claims.
    pub async fn verify(
        &self,
        token: &str,
        jwks_uri: &str,
        issuer: &str,
        audiences: &[String],
    ) -> Result<Result<Value, TokenRejection>, AuthError> {
        let (alg, kid) = match header_kid(token) {
            Ok(h) => h,
            Err(r) => return Ok(Err(r)),
        };
        if !outside_algorithm(alg) {
            return Ok(Err(TokenRejection::BadSignature));
        }
        let Some(key) = self.key(jwks_uri, kid.as_deref(), alg).await? else {
            return Ok(Err(TokenRejection::UnknownKey));
        };
        Ok(
            jsonwebtoken::decode::<Value>(token, &key, &validation(alg, issuer, audiences, 30))
                .map(|d| d.claims)
                .map_err(rejection),
        )
    }
}

/// GETs a JSON document (metadata, JWKS, client metadata) with a time and size bound.
pub async fn fetch_json(http: &reqwest::Client, url: &str) -> Result<Value, AuthError> {
    fetch_json_cacheable(http, url)
        .await
        .map(|(value, _)| value)
}

/// What a response's `Cache-Control` allows: `Some(0)` for `no-store` / `no-cache`, its
/// `max-age`, or `None` when it says neither.
pub fn cache_lifetime(cache_control: &str) -> Option<Duration> {
    let mut max_age = None;
    for directive in cache_control.split(',').map(str::trim) {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        match name.to_ascii_lowercase().as_str() {
            "no-store" | "no-cache" => return Some(Duration::ZERO),
            "max-age" => {
                max_age = value
                    .trim_matches('"')
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_secs)
            }
            _ => {}
        }
    }
    max_age
}

/// [`fetch_json`], with how long the server lets the document be cached (`cache_lifetime` of
/// its `Cache-Control`).
pub async fn fetch_json_cacheable(
    http: &reqwest::Client,
    url: &str,
) -> Result<(Value, Option<Duration>), AuthError> {
    let upstream = |m: String| AuthError::Upstream(format!("{url}: {m}"));
    let response = http
        .get(url)
        .header("accept", "application/json")
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_err(|e| upstream(e.to_string()))?;
    if !response.status().is_success() {
        return Err(upstream(format!("answered {}", response.status())));
    }
    let lifetime = response
        .headers()
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .and_then(cache_lifetime);
    let value = read_json_limited(response).await.map_err(upstream)?;
    Ok((value, lifetime))
}

/// The JSON body of an outside server's response, read up to 256 KiB (a larger one is refused
/// rather than buffered).
pub async fn read_json_limited(mut response: reqwest::Response) -> Result<Value, String> {
    const LIMIT: usize = 256 * 1024;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > LIMIT {
            return Err(format!("document larger than {LIMIT} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("not JSON ({e})"))
}

/// The principal an external issuer's claims name.
pub fn external_principal(claims: &Value, settings: &ExternalIssuer) -> Principal {
    let text = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_string);
    let scopes = match claims.get("scope").or_else(|| claims.get("scp")) {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    Principal {
        issuer: settings.issuer.clone(),
        subject: text("sub").unwrap_or_default(),
        client_id: text("client_id")
            .or_else(|| text("azp"))
            .unwrap_or_default(),
        scopes,
        name: text("name").or_else(|| text("preferred_username")),
        token_expires_at: claims.get("exp").and_then(Value::as_i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_gives_a_lifetime() {
        assert_eq!(cache_lifetime("max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(
            cache_lifetime("public, Max-Age=\"120\""),
            Some(Duration::from_secs(120))
        );
        assert_eq!(cache_lifetime("max-age=60, no-store"), Some(Duration::ZERO));
        assert_eq!(cache_lifetime("no-cache"), Some(Duration::ZERO));
        assert_eq!(cache_lifetime("public"), None);
        assert_eq!(cache_lifetime("max-age=soon"), None);
    }

    /// An outside server's JSON is read up to 256 KiB: a larger body is refused.
    #[tokio::test]
    async fn outside_json_is_read_up_to_a_limit() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            for size in [100, 300 * 1024] {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut request = [0u8; 1024];
                let _ = conn.read(&mut request).await;
                let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(size));
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
            }
        });
        let http = reqwest::Client::new();
        let small = read_json_limited(http.get(&url).send().await.unwrap()).await;
        assert_eq!(small.unwrap()["pad"].as_str().map(str::len), Some(100));
        let large = read_json_limited(http.get(&url).send().await.unwrap()).await;
        assert!(large.unwrap_err().contains("larger than"));
    }
}
