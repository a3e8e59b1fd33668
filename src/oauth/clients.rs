//! Clients: Dynamic Client Registration (RFC 7591) under the tenant's policy, its management
//! protocol (RFC 7592), Client ID Metadata Documents (an `https` client id whose JSON is fetched
//! through the egress guard, bounded and cached), redirect-URI rules (https or loopback; any port
//! on loopback as RFC 8252 says; exact otherwise) and client authentication at the token
//! endpoint.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{as_tenant, same, AsTenant, OAuthError};
use crate::auth::{hash_secret, random_token, AuthService};
use crate::store::{
    now_millis, OAuthClient, OAuthStore, RegistrationPolicy, StoreError, DCR_SOURCE,
};

/// Client metadata as a client or the admin API sends it (unknown fields are ignored, as RFC
/// 7591 asks).
#[derive(Deserialize, Default)]
pub struct ClientInput {
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    pub client_name: Option<String>,
    pub grant_types: Option<Vec<String>>,
    pub response_types: Option<Vec<String>>,
    pub token_endpoint_auth_method: Option<String>,
    pub scope: Option<String>,
    pub client_uri: Option<String>,
    pub logo_uri: Option<String>,
    pub software_id: Option<String>,
    pub software_version: Option<String>,
}

fn is_loopback_host(host: Option<url::Host<&str>>) -> bool {
    match host {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A redirect URI a client may register: https, or http to a loopback host; no fragment.
pub fn check_redirect_uri(uri: &str) -> Result<(), String> {
    if uri.chars().count() > MAX_URI_CHARS {
        return Err(format!(
            "a redirect URI is at most {MAX_URI_CHARS} characters"
        ));
    }
    let u = url::Url::parse(uri).map_err(|e| format!("{uri:?} is not a URL ({e})"))?;
    if u.fragment().is_some() {
        return Err(format!("{uri:?} must not have a fragment"));
    }
    match u.scheme() {
        "https" if u.host().is_some() => Ok(()),
        "http" if is_loopback_host(u.host()) => Ok(()),
        _ => Err(format!(
            "{uri:?} must be https://, or http:// to a loopback address"
        )),
    }
}

/// Whether `presented` matches the registered `registered`: exactly, except that a loopback
/// redirect URI matches on any port (RFC 8252 §7.3).
pub fn redirect_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    let (Ok(r), Ok(p)) = (url::Url::parse(registered), url::Url::parse(presented)) else {
        return false;
    };
    r.scheme() == "http"
        && p.scheme() == "http"
        && is_loopback_host(r.host())
        && r.host() == p.host()
        && r.path() == p.path()
        && r.query() == p.query()
        && p.fragment().is_none()
        && r.username().is_empty()
        && p.username().is_empty()
        && r.password().is_none()
        && p.password().is_none()
}

/// Validates metadata; returns what is stored, or (field, message).
pub fn validate_metadata(input: ClientInput) -> Result<Value, (String, String)> {
    let err = |f: &str, m: String| Err((f.to_string(), m));
    let grant_types = input
        .grant_types
        .unwrap_or_else(|| vec!["authorization_code".into(), "refresh_token".into()]);
    for g in &grant_types {
        if !matches!(
            g.as_str(),
            "authorization_code" | "refresh_token" | "client_credentials"
        ) {
            return err("grant_types", format!("unsupported grant type {g:?}"));
        }
    }
    let method = input
        .token_endpoint_auth_method
        .unwrap_or_else(|| "client_secret_basic".into());
    if !matches!(
        method.as_str(),
        "none" | "client_secret_basic" | "client_secret_post"
    ) {
        return err(
            "token_endpoint_auth_method",
            format!(
                "unsupported method {method:?} (none, client_secret_basic, client_secret_post)"
            ),
        );
    }
    if method == "none" && grant_types.iter().any(|g| g == "client_credentials") {
        return err(
            "grant_types",
            "client_credentials needs a confidential client (a secret)".into(),
        );
    }
    let response_types = input.response_types.unwrap_or_else(|| vec!["code".into()]);
    if response_types.iter().any(|r| r != "code") {
        return err("response_types", "only \"code\" is supported".into());
    }
    if grant_types.iter().any(|g| g == "authorization_code") && input.redirect_uris.is_empty() {
        return err(
            "redirect_uris",
            "at least one redirect URI is needed for the authorization code grant".into(),
        );
    }
    if input.redirect_uris.len() > 20 {
        return err("redirect_uris", "at most 20 redirect URIs".into());
    }
    for uri in &input.redirect_uris {
        if let Err(e) = check_redirect_uri(uri) {
            return err("redirect_uris", e);
        }
    }
    if let Some(name) = &input.client_name {
        if name.trim().is_empty() || name.chars().count() > 200 {
            return err("client_name", "must be 1 to 200 characters".into());
        }
    }
    for (field, value) in [
        ("client_uri", &input.client_uri),
        ("logo_uri", &input.logo_uri),
    ] {
        if let Some(v) = value {
            if !v.starts_with("https://") || v.chars().count() > MAX_URI_CHARS {
                return err(
                    field,
                    format!("must be an https:// URL of at most {MAX_URI_CHARS} characters"),
                );
            }
        }
    }
    // Kept with the client (and, for metadata documents, in every replica's cache): bounded.
    for (field, value, max) in [
        ("scope", &input.scope, 1000),
        ("software_id", &input.software_id, 200),
        ("software_version", &input.software_version, 200),
    ] {
        if value.as_ref().is_some_and(|v| v.chars().count() > max) {
            return err(field, format!("at most {max} characters"));
        }
    }
    let mut v = json!({
        "redirect_uris": input.redirect_uris,
        "grant_types": grant_types,
        "response_types": response_types,
        "token_endpoint_auth_method": method,
    });
    if let Some(o) = v.as_object_mut() {
        for (k, val) in [
            ("client_name", input.client_name),
            ("scope", input.scope),
            ("client_uri", input.client_uri),
            ("logo_uri", input.logo_uri),
            ("software_id", input.software_id),
            ("software_version", input.software_version),
        ] {
            if let Some(val) = val {
                o.insert(k.into(), json!(val));
            }
        }
    }
    Ok(v)
}

/// A client as the authorization server uses it.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub secret_hash: Option<String>,
    pub metadata: Value,
    /// Registered by Dynamic Client Registration (not the admin API, not a metadata document).
    pub self_registered: bool,
    /// Issued a token before, or vouched for when it registered (see `OAuthClient`).
    pub confirmed: bool,
}

impl Client {
    pub fn name(&self) -> String {
        self.metadata
            .get("client_name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| self.client_id.clone())
    }
    pub fn redirect_uris(&self) -> Vec<&str> {
        self.metadata
            .get("redirect_uris")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
    pub fn allows_grant(&self, grant: &str) -> bool {
        has_grant(&self.metadata, grant)
    }
    pub fn auth_method(&self) -> &str {
        self.metadata
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .unwrap_or("none")
    }
    /// The registered redirect URI `presented` matches (or the only one, when none is given).
    pub fn redirect_uri(&self, presented: Option<&str>) -> Option<String> {
        let registered = self.redirect_uris();
        match presented {
            Some(p) => registered
                .iter()
                .any(|r| redirect_matches(r, p))
                .then(|| p.to_string()),
            None if registered.len() == 1 => Some(registered[0].to_string()),
            None => None,
        }
    }
}

/// The longest redirect, client or logo URI a client may give (characters).
const MAX_URI_CHARS: usize = 2000;

/// Client ID Metadata Documents fetched recently, per (tenant, URL), with when each expires:
/// at most `CIMD_CACHE_ENTRIES` (anyone can name any number of document URLs).
#[derive(Default)]
pub struct MetadataDocuments {
    /// By tenant and URL: when it expires, when it was stored, the client.
    cache: Mutex<HashMap<String, (Instant, Instant, Client)>>,
}

const CIMD_CACHE_ENTRIES: usize = 1000;

impl MetadataDocuments {
    /// Keeps `client` under `key` for `ttl` (forgets it when `ttl` is zero). A full cache first
    /// drops its expired entries, then the one stored first: documents that ask to be kept long
    /// (anyone can serve one) still make way for newer ones.
    fn remember(&self, key: String, ttl: Duration, client: &Client) {
        let mut cache = self.cache.lock();
        if ttl.is_zero() {
            cache.remove(&key);
            return;
        }
        let now = Instant::now();
        if cache.len() >= CIMD_CACHE_ENTRIES && !cache.contains_key(&key) {
            cache.retain(|_, (expires, _, _)| *expires > now);
            if cache.len() >= CIMD_CACHE_ENTRIES {
                let oldest = cache
                    .iter()
                    .min_by_key(|(_, (_, stored, _))| *stored)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    cache.remove(&k);
                }
            }
        }
        cache.insert(key, (now + ttl, now, client.clone()));
    }
}

/// How long a metadata document is kept when its response says nothing (`Cache-Control`), and
/// at most whatever it says (client registration: SHOULD respect the HTTP cache headers).
const CIMD_TTL: Duration = Duration::from_secs(300);
const CIMD_MAX_TTL: Duration = Duration::from_secs(86_400);

/// Finds a client: registered with the tenant, or (an `https` client id) described by its
/// metadata document.
pub async fn find(
    auth: &AuthService,
    documents: &MetadataDocuments,
    tenant: &str,
    client_id: &str,
) -> Result<Option<Client>, OAuthError> {
    if client_id.starts_with("https://") || client_id.starts_with("http://") {
        return metadata_document(auth, documents, tenant, client_id).await;
    }
    Ok(auth
        .store
        .get_client(tenant, client_id)
        .await?
        .map(|c| Client {
            self_registered: c.source == DCR_SOURCE,
            confirmed: c.confirmed_at.is_some(),
            client_id: c.client_id,
            secret_hash: c.secret_hash,
            metadata: c.metadata,
        }))
}

async fn metadata_document(
    auth: &AuthService,
    documents: &MetadataDocuments,
    tenant: &str,
    url: &str,
) -> Result<Option<Client>, OAuthError> {
    let key = format!("{tenant} {url}");
    if let Some((expires, _, c)) = documents.cache.lock().get(&key) {
        if Instant::now() < *expires {
            return Ok(Some(c.clone()));
        }
    }
    let bad = |m: String| {
        OAuthError::bad(
            "invalid_client",
            format!("client metadata document {url}: {m}"),
        )
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let loopback_dev = auth.egress.allows_private()
        && parsed.scheme() == "http"
        && is_loopback_host(parsed.host());
    if !(parsed.scheme() == "https" || loopback_dev)
        || parsed.path().len() <= 1
        || parsed.fragment().is_some()
    {
        return Err(bad(
            "a client id URL must be https with a path and no fragment".into(),
        ));
    }
    auth.check_outside_url(url).map_err(bad)?;
    let (doc, lifetime) = crate::auth::tokens::fetch_json_cacheable(auth.jwks.http(), url)
        .await
        .map_err(|e| bad(e.to_string()))?;
    if doc.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(bad("its client_id must equal its URL".into()));
    }
    let input: ClientInput =
        serde_json::from_value(doc.clone()).map_err(|e| bad(format!("malformed ({e})")))?;
    // The fields a metadata document must hold (client_id is checked above; their values are
    // checked as a registration's are, below).
    if input.client_name.is_none() {
        return Err(bad("it must name the client (client_name)".into()));
    }
    if input.redirect_uris.is_empty() {
        return Err(bad("it must list its redirect_uris".into()));
    }
    let method = input
        .token_endpoint_auth_method
        .clone()
        .unwrap_or_else(|| "none".into());
    if method != "none" {
        return Err(bad(
            "only public clients (token_endpoint_auth_method none) may use a metadata document"
                .into(),
        ));
    }
    let input = ClientInput {
        token_endpoint_auth_method: Some(method),
        ..input
    };
    let metadata = validate_metadata(input).map_err(|(f, m)| bad(format!("{f}: {m}")))?;
    let client = Client {
        client_id: url.to_string(),
        secret_hash: None,
        metadata,
        self_registered: false,
        confirmed: true,
    };
    let ttl = lifetime.unwrap_or(CIMD_TTL).min(CIMD_MAX_TTL);
    documents.remember(key, ttl, &client);
    Ok(Some(client))
}

/// Authenticates the client of a token or revocation request (Basic, form secret, or none).
pub async fn authenticate(
    auth: &AuthService,
    documents: &MetadataDocuments,
    tenant: &str,
    req: &HttpRequest,
    form: &HashMap<String, String>,
) -> Result<Client, OAuthError> {
    let basic = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Basic ")
                .or_else(|| v.strip_prefix("basic "))
        })
        .map(|b64| -> Result<(String, String), OAuthError> {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|_| OAuthError::invalid_client("malformed Basic credentials", true))?;
            let text = String::from_utf8(raw)
                .map_err(|_| OAuthError::invalid_client("malformed Basic credentials", true))?;
            let (id, secret) = text
                .split_once(':')
                .ok_or_else(|| OAuthError::invalid_client("malformed Basic credentials", true))?;
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            Ok((decode(id), decode(secret)))
        })
        .transpose()?;
    let (client_id, secret, used_basic) = match basic {
        Some((id, secret)) => (id, Some(secret), true),
        None => (
            form.get("client_id").cloned().unwrap_or_default(),
            form.get("client_secret").cloned(),
            false,
        ),
    };
    if client_id.is_empty() {
        return Err(OAuthError::invalid_client(
            "client authentication is required (client_id)",
            false,
        ));
    }
    let client = find(auth, documents, tenant, &client_id)
        .await?
        .ok_or_else(|| OAuthError::invalid_client("unknown client", used_basic))?;
    match (&client.secret_hash, secret) {
        (None, None) => Ok(client),
        (None, Some(_)) => Err(OAuthError::invalid_client(
            "this client has no secret",
            used_basic,
        )),
        (Some(_), None) => Err(OAuthError::invalid_client(
            "this client must authenticate with its secret",
            true,
        )),
        (Some(hash), Some(secret)) if same(hash, &hash_secret(&secret)) => Ok(client),
        (Some(_), Some(_)) => Err(OAuthError::invalid_client(
            "client authentication failed",
            used_basic,
        )),
    }
}

fn registration_json(
    c: &OAuthClient,
    base_issuer: &str,
    extra: Option<(&str, Option<&str>)>,
) -> Value {
    let mut v = c.metadata.clone();
    if let Some(o) = v.as_object_mut() {
        o.insert("client_id".into(), json!(c.client_id));
        o.insert("client_id_issued_at".into(), json!(c.created_at / 1000));
        if c.secret_hash.is_some() {
            o.insert("client_secret_expires_at".into(), json!(0));
        }
        o.insert(
            "registration_client_uri".into(),
            json!(format!("{base_issuer}/oauth/register/{}", c.client_id)),
        );
        if let Some((token, secret)) = extra {
            o.insert("registration_access_token".into(), json!(token));
            if let Some(secret) = secret {
                o.insert("client_secret".into(), json!(secret));
            }
        }
    }
    v
}

/// The Bearer token a request sent, read as the resource server reads it
/// (`auth::bearer_token`); a malformed one is sent but matches no token (`""`).
fn bearer(req: &HttpRequest) -> Option<String> {
    match crate::auth::bearer_token(req.headers().get(header::AUTHORIZATION)?.as_bytes()) {
        crate::auth::Credential::Bearer(token) => Some(token.to_string()),
        crate::auth::Credential::Malformed => Some(String::new()),
        crate::auth::Credential::OtherScheme => None,
    }
}

fn invalid_token(description: &str) -> OAuthError {
    OAuthError {
        challenge: Some(format!(
            "Bearer error=\"invalid_token\", error_description=\"{description}\""
        )),
        ..OAuthError::new(StatusCode::UNAUTHORIZED, "invalid_token", description)
    }
}

/// 401 for a request that sent no Bearer token: the bare challenge, no error code (RFC 6750
/// §3: a request that lacks authentication information gets none).
fn token_required(description: &str) -> OAuthError {
    OAuthError {
        challenge: Some("Bearer".into()),
        ..OAuthError::new(StatusCode::UNAUTHORIZED, "invalid_token", description)
    }
}

/// 401: a Bearer token was sent and is not the one, or none was (`token_required`).
fn token_refused(sent: bool, description: &str) -> OAuthError {
    if sent {
        invalid_token(description)
    } else {
        token_required(description)
    }
}

fn parse_metadata(body: &[u8]) -> Result<Value, OAuthError> {
    let input: ClientInput = serde_json::from_slice(body).map_err(|e| {
        OAuthError::bad(
            "invalid_client_metadata",
            format!("unreadable client metadata: {e}"),
        )
    })?;
    validate_metadata(input).map_err(|(field, message)| {
        let error = if field == "redirect_uris" {
            "invalid_redirect_uri"
        } else {
            "invalid_client_metadata"
        };
        OAuthError::bad(error, format!("{field}: {message}"))
    })
}

/// The window client registrations are counted in.
pub const REGISTRATION_WINDOW: Duration = Duration::from_secs(3600);
/// The counter of a tenant's registrations from every address.
const REGISTRATIONS_KEY: &str = "register/all";

/// Why a client that anyone could have registered may not use `client_credentials`: that grant
/// needs no user, so on a tenant with open registration it would hand an access token to anyone
/// who asks.
pub const MACHINE_CLIENTS: &str = "client_credentials is not for clients anyone may register (this tenant's registration is open); register a machine client through the admin API or with the tenant's initial access token";

/// Whether client metadata asks for the `client_credentials` grant.
fn grants_machine_access(metadata: &Value) -> bool {
    has_grant(metadata, "client_credentials")
}

/// Whether client metadata lists `grant` among its `grant_types`.
fn has_grant(metadata: &Value, grant: &str) -> bool {
    metadata
        .get("grant_types")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|g| g.as_str() == Some(grant)))
}

/// `POST /t/{tenant}/oauth/register` (RFC 7591).
pub async fn register(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<super::OAuthState>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    // A tenant that is not served here counts nowhere (its name comes from the path).
    let t = as_tenant(&req, &slug, &auth).await?;
    let outcome = registration(&req, &t, &auth, &state, &body).await;
    let counted = match &outcome {
        Ok(_) => "registered",
        Err(e) if e.status == StatusCode::TOO_MANY_REQUESTS => "rate_limited",
        Err(e) => e.error,
    };
    crate::observe::metrics::global().oauth_registration(&t.handle.slug, counted);
    outcome
}

async fn registration(
    req: &HttpRequest,
    t: &AsTenant,
    auth: &AuthService,
    state: &super::OAuthState,
    body: &[u8],
) -> Result<HttpResponse, OAuthError> {
    match t.settings.registration {
        RegistrationPolicy::Open => {}
        RegistrationPolicy::Disabled => {
            return Err(OAuthError::new(
                StatusCode::FORBIDDEN,
                "access_denied",
                "dynamic client registration is disabled for this tenant; use a pre-registered client or a client metadata document",
            ))
        }
        RegistrationPolicy::Token => {
            let sent = bearer(req);
            let ok = match (&sent, &t.settings.initial_access_token_hash) {
                (Some(token), Some(hash)) => same(hash, &hash_secret(token)),
                _ => false,
            };
            if !ok {
                return Err(token_refused(
                    sent.is_some(),
                    "registration requires this tenant's initial access token",
                ));
            }
        }
    }
    let metadata = parse_metadata(body)?;
    if t.settings.registration == RegistrationPolicy::Open && grants_machine_access(&metadata) {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            format!("grant_types: {MACHINE_CLIENTS}"),
        ));
    }
    if t.settings.registration == RegistrationPolicy::Open {
        // Anyone may send this; each client is a row kept until it is deleted or goes unused:
        // bounded per client address and per tenant.
        let limits = &auth.config;
        let address = crate::auth::quota_id(&format!("register/ip/{}", auth.client_address(req)));
        let keys = [
            (address.as_str(), limits.registrations_per_hour_per_address),
            (REGISTRATIONS_KEY, limits.registrations_per_hour),
        ];
        if let Err(wait) = state.registrations.attempt(&t.handle.slug, &keys).await {
            tracing::warn!(tenant = %t.handle.slug, "client registration rate limited");
            return Err(OAuthError::too_many(
                "too many clients registered from this address or at this tenant in the last hour; retry later",
                wait,
            ));
        }
    }
    let confidential = metadata
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        != Some("none");
    let secret = confidential.then(random_token);
    let registration_token = random_token();
    let client = OAuthClient {
        tenant: t.handle.slug.to_string(),
        client_id: format!("hc_{}", uuid::Uuid::new_v4().simple()),
        secret_hash: secret.as_deref().map(hash_secret),
        registration_token_hash: Some(hash_secret(&registration_token)),
        source: DCR_SOURCE.into(),
        metadata,
        created_at: now_millis(),
        // Vouched for by the initial access token; otherwise kept once it is used.
        confirmed_at: (t.settings.registration == RegistrationPolicy::Token).then(now_millis),
    };
    auth.store.insert_client(&client).await?;
    tracing::info!(tenant = %client.tenant, client_id = %client.client_id, "client registered");
    Ok(HttpResponse::Created()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(registration_json(
            &client,
            &t.issuer,
            Some((&registration_token, secret.as_deref())),
        )))
}

/// The client an RFC 7592 request names, checked against its registration access token.
async fn managed(
    req: &HttpRequest,
    auth: &AuthService,
    slug: &str,
    client_id: &str,
) -> Result<(OAuthClient, String), OAuthError> {
    let t = as_tenant(req, slug, auth).await?;
    let token =
        bearer(req).ok_or_else(|| token_required("the registration access token is required"))?;
    let client = auth.store.get_client(slug, client_id).await?;
    match client {
        Some(c)
            if c.registration_token_hash
                .as_deref()
                .is_some_and(|h| same(h, &hash_secret(&token))) =>
        {
            Ok((c, t.issuer))
        }
        // Unknown client or wrong token: the same answer (RFC 7592 §2).
        _ => Err(invalid_token("invalid registration access token")),
    }
}

pub async fn read(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let (slug, id) = path.into_inner();
    let (client, issuer) = managed(&req, &auth, &slug, &id).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(registration_json(&client, &issuer, None)))
}

pub async fn update(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    auth: web::Data<AuthService>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    let (slug, id) = path.into_inner();
    let (mut client, issuer) = managed(&req, &auth, &slug, &id).await?;
    let sent: Value = serde_json::from_slice(&body).map_err(|e| {
        OAuthError::bad(
            "invalid_client_metadata",
            format!("unreadable client metadata: {e}"),
        )
    })?;
    if sent.get("client_id").and_then(Value::as_str) != Some(id.as_str()) {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            "client_id must be the client's own",
        ));
    }
    let metadata = parse_metadata(&body)?;
    let was_confidential = client.secret_hash.is_some();
    let confidential = metadata
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        != Some("none");
    if was_confidential != confidential {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            "token_endpoint_auth_method cannot switch between public and confidential",
        ));
    }
    // The registration access token manages what the client is; it does not grant more.
    if grants_machine_access(&metadata) && !grants_machine_access(&client.metadata) {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            "grant_types: client_credentials cannot be added to a registered client; register a machine client through the admin API or with the tenant's initial access token",
        ));
    }
    client.metadata = metadata;
    match auth.store.update_client(&client).await {
        Err(StoreError::NotFound) => {
            return Err(invalid_token("invalid registration access token"))
        }
        other => other?,
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(registration_json(&client, &issuer, None)))
}

pub async fn delete(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let (slug, id) = path.into_inner();
    managed(&req, &auth, &slug, &id).await?;
    auth.store.delete_client(&slug, &id).await?;
    tracing::info!(tenant = %slug, client_id = %id, "client deleted itself");
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> ClientInput {
        serde_json::from_value(json!({ "redirect_uris": ["https://app.example/cb"] })).unwrap()
    }

    #[test]
    fn metadata_fields_kept_with_a_client_are_bounded() {
        assert!(validate_metadata(input()).is_ok());
        let long = |n: usize| Some("x".repeat(n));
        for (field, mutate) in [
            (
                "scope",
                Box::new(|i: &mut ClientInput| i.scope = long(1001))
                    as Box<dyn Fn(&mut ClientInput)>,
            ),
            (
                "software_id",
                Box::new(|i: &mut ClientInput| i.software_id = long(201)),
            ),
            (
                "software_version",
                Box::new(|i: &mut ClientInput| i.software_version = long(201)),
            ),
            (
                "redirect_uris",
                Box::new(|i: &mut ClientInput| {
                    i.redirect_uris = vec![format!("https://app.example/{}", "x".repeat(2000))]
                }),
            ),
            (
                "logo_uri",
                Box::new(|i: &mut ClientInput| {
                    i.logo_uri = Some(format!("https://app.example/{}", "x".repeat(2000)))
                }),
            ),
        ] {
            let mut i = input();
            mutate(&mut i);
            let refused = validate_metadata(i).unwrap_err();
            assert_eq!(refused.0, field, "{refused:?}");
        }
        let mut at_limits = input();
        at_limits.scope = long(1000);
        at_limits.software_id = long(200);
        at_limits.software_version = long(200);
        assert!(validate_metadata(at_limits).is_ok());
    }

    #[test]
    fn the_metadata_document_cache_is_bounded() {
        let documents = MetadataDocuments::default();
        let client = Client {
            client_id: "https://app.example/client".into(),
            secret_hash: None,
            metadata: json!({}),
            self_registered: false,
            confirmed: true,
        };
        // The first entry asks to be kept longest, and is still the first a full cache drops;
        // then the next stored.
        documents.remember("t first".into(), Duration::from_secs(86_400), &client);
        for i in 1..CIMD_CACHE_ENTRIES + 5 {
            std::thread::sleep(Duration::from_micros(1));
            documents.remember(format!("t {i}"), Duration::from_secs(300), &client);
        }
        let cache = documents.cache.lock();
        assert_eq!(cache.len(), CIMD_CACHE_ENTRIES);
        assert!(!cache.contains_key("t first"));
        assert!(!cache.contains_key("t 1") && cache.contains_key("t 5"));
        assert!(cache.contains_key(&format!("t {}", CIMD_CACHE_ENTRIES + 4)));
        drop(cache);
        // A zero lifetime (no-store) forgets the document.
        let last = format!("t {}", CIMD_CACHE_ENTRIES + 4);
        documents.remember(last.clone(), Duration::ZERO, &client);
        assert!(!documents.cache.lock().contains_key(&last));
    }
}
