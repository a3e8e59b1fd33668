//! `/t/{tenant}/oauth/authorize`: validates the authorization request (client, redirect URI —
//! shown, never redirected to, when wrong — PKCE S256, `resource`, scopes), shows the
//! login/consent page (CSRF token in a SameSite cookie and the form), checks the tenant user's
//! password (failed attempts limited per user and per client address) and redirects back with a
//! single-use code, `state` and `iss` (RFC 9207).

use std::collections::HashMap;
use std::time::Duration;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use super::attempts::AttemptLimiter;
use super::clients::{find, Client};
use super::discovery::supported_scopes;
use super::page::{self, Consent};
use super::{as_tenant, same, AsTenant, OAuthState, INVALID_TARGET};
use crate::auth::password::verify_password;
use crate::auth::{hash_secret, random_token, AuthService};
use crate::store::{now_millis, GrantRecord, LoginMethod, OAuthStore, UserRecord};

const CSRF_COOKIE: &str = "harbor_csrf";
const CARRIED: [&str; 9] = [
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
    "resource",
    "nonce",
];

/// The window sign-in attempts are counted in.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(60);

/// Password checks running at once on this replica: each takes argon2's memory (19 MiB by
/// default) on the blocking pool, and sign-in forms are open to anyone.
const CONCURRENT_PASSWORD_CHECKS: usize = 4;
static PASSWORD_CHECKS: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(CONCURRENT_PASSWORD_CHECKS);
/// How long a sign-in waits for a turn before it is answered "try again in a moment".
const PASSWORD_CHECK_WAIT: Duration = Duration::from_secs(5);

/// A validated authorization request.
struct Request {
    client: Client,
    redirect_uri: String,
    /// The request named `redirect_uri` (else the client's only one is used): the token
    /// request must then name it too (RFC 6749 §4.1.3).
    redirect_uri_sent: bool,
    state: Option<String>,
    challenge: String,
    scopes: Vec<String>,
    resource: String,
    nonce: Option<String>,
    carried: Vec<(String, String)>,
}

/// Why a request cannot go on: shown on a page, or sent back to the (validated) redirect URI.
enum Refused {
    Page(HttpResponse),
    Redirect(HttpResponse),
}

impl Refused {
    fn into_response(self) -> HttpResponse {
        match self {
            Refused::Page(r) | Refused::Redirect(r) => r,
        }
    }
}

fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> HttpResponse {
    let mut url = match url::Url::parse(redirect_uri) {
        Ok(u) => u,
        Err(_) => {
            return page::error(
                StatusCode::BAD_REQUEST,
                "Invalid redirect URI",
                "The redirect URI is not a URL.",
            )
        }
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

async fn validate(
    t: &AsTenant,
    auth: &AuthService,
    state: &OAuthState,
    params: &HashMap<String, String>,
) -> Result<Request, Refused> {
    let show = |status: StatusCode, title: &str, message: &str| {
        Refused::Page(page::error(status, title, message))
    };
    let client_id = params.get("client_id").map(String::as_str).unwrap_or("");
    if client_id.is_empty() {
        return Err(show(
            StatusCode::BAD_REQUEST,
            "Missing client",
            "The request names no client (client_id).",
        ));
    }
    let client = match find(auth, &state.documents, &t.handle.slug, client_id).await {
        Ok(Some(c)) => c,
        Ok(None) => return Err(Refused::Page(unknown_client())),
        Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => {
            return Err(Refused::Page(page::unavailable()))
        }
        Err(e) => {
            return Err(show(
                StatusCode::BAD_REQUEST,
                "Invalid client",
                &e.description,
            ))
        }
    };
    let Some(redirect_uri) = client.redirect_uri(params.get("redirect_uri").map(String::as_str))
    else {
        return Err(show(
            StatusCode::BAD_REQUEST,
            "Invalid redirect URI",
            "The redirect URI does not match one registered for this application.",
        ));
    };
    let state_param = params.get("state").cloned();
    let back = |error: &str, description: &str| {
        let mut p = vec![
            ("error", error),
            ("error_description", description),
            ("iss", t.issuer.as_str()),
        ];
        if let Some(s) = state_param.as_deref() {
            p.push(("state", s));
        }
        Refused::Redirect(redirect_with(&redirect_uri, &p))
    };
    if params.get("response_type").map(String::as_str) != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "response_type must be code",
        ));
    }
    if !client.allows_grant("authorization_code") {
        return Err(back(
            "unauthorized_client",
            "this client may not use the authorization code grant",
        ));
    }
    let challenge = params.get("code_challenge").cloned().unwrap_or_default();
    if challenge.is_empty() {
        return Err(back(
            "invalid_request",
            "PKCE is required: send code_challenge with code_challenge_method S256",
        ));
    }
    if params.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return Err(back(
            "invalid_request",
            "code_challenge_method must be S256",
        ));
    }
    if challenge.len() != 43
        || !challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(back(
            "invalid_request",
            "code_challenge must be a base64url SHA-256 (43 characters)",
        ));
    }
    let Some(resource) = t.resource(params.get("resource")) else {
        return Err(back("invalid_target", INVALID_TARGET));
    };
    let supported = supported_scopes(&t.settings.required_scopes);
    let scopes: Vec<String> = match params
        .get("scope")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        Some(s) => s.split_whitespace().map(str::to_string).collect(),
        None => client
            .metadata
            .get("scope")
            .and_then(|v| v.as_str())
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_else(|| t.settings.required_scopes.clone()),
    };
    if let Some(bad) = scopes.iter().find(|s| !supported.contains(s)) {
        return Err(back("invalid_scope", &format!("unknown scope {bad}")));
    }
    let carried = CARRIED
        .iter()
        .filter_map(|k| params.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    Ok(Request {
        client,
        redirect_uri,
        redirect_uri_sent: params.contains_key("redirect_uri"),
        state: state_param.clone(),
        challenge,
        scopes,
        resource,
        nonce: params.get("nonce").cloned(),
        carried,
    })
}

fn render(
    t: &AsTenant,
    r: &Request,
    csrf: &str,
    status: StatusCode,
    error: Option<&str>,
    username: &str,
) -> HttpResponse {
    let host = url::Url::parse(&r.redirect_uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let provider = match (&t.settings.login, &t.settings.oidc) {
        (LoginMethod::Oidc, Some(u)) => url::Url::parse(&u.issuer)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string)),
        _ => None,
    };
    let origin = url::Url::parse(&r.redirect_uri)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default();
    let mut response = page::consent(
        status,
        &Consent {
            redirect_origin: &origin,
            provider: provider.as_deref(),
            tenant: &t.handle.slug,
            client_name: &r.client.name(),
            redirect_host: &host,
            scopes: &r.scopes,
            hidden: &r.carried,
            csrf,
            error,
            username,
        },
    );
    let cookie = Cookie::build(CSRF_COOKIE, csrf.to_string())
        // Root path: the 2025-03-26 fallback serves the page at /authorize too.
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(t.base.starts_with("https://"))
        .finish();
    let _ = response.add_cookie(&cookie);
    response
}

pub async fn show(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    query: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let t = match as_tenant(&req, &slug, &auth).await {
        Ok(t) => t,
        Err(e) => return page::error(e.status, "Not available", &e.description),
    };
    let r = match validate(&t, &auth, &state, &query).await {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    let csrf = req
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .filter(|v| v.len() >= 32)
        .unwrap_or_else(random_token);
    render(&t, &r, &csrf, StatusCode::OK, None, "")
}

pub async fn submit(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    form: web::Form<HashMap<String, String>>,
) -> HttpResponse {
    let t = match as_tenant(&req, &slug, &auth).await {
        Ok(t) => t,
        Err(e) => return page::error(e.status, "Not available", &e.description),
    };
    let form = form.into_inner();
    let r = match validate(&t, &auth, &state, &form).await {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    let sent = form.get("csrf").map(String::as_str).unwrap_or("");
    let cookie = req
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    if sent.is_empty() || !same(sent, &cookie) {
        return page::error(
            StatusCode::FORBIDDEN,
            "Request expired",
            "This sign-in form is not valid any more (cookies disabled, or it came from another site). Start again from the application.",
        );
    }
    if form.get("decision").map(String::as_str) != Some("allow") {
        let mut pairs = vec![
            ("error", "access_denied"),
            ("error_description", "the user denied the request"),
            ("iss", t.issuer.as_str()),
        ];
        if let Some(s) = &r.state {
            pairs.push(("state", s));
        }
        return redirect_with(&r.redirect_uri, &pairs);
    }
    if t.settings.login == LoginMethod::Oidc {
        return federate(&t, &auth, &r, &cookie).await;
    }
    let username = form
        .get("username")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let password = form.get("password").cloned().unwrap_or_default();
    let user = match sign_in(
        &req,
        &auth,
        &state.limiter,
        &t.handle.slug,
        &username,
        password,
    )
    .await
    {
        Ok(user) => user,
        Err(SignInRefused::Unavailable) => return page::unavailable(),
        Err(refused) => {
            return render(
                &t,
                &r,
                &cookie,
                refused.status(),
                Some(refused.message()),
                &username,
            )
        }
    };
    let signed_in = SignedIn {
        subject: &user.username,
        name: &user.display_name,
        credential: Some(super::token::credential_stamp(&user.password_hash)),
    };
    grant_code(&t, &auth, &r, signed_in).await
}

/// Who the user signed in as: a tenant user (with the stamp of the password they used, which
/// the grant keeps: deleting the user or changing the password ends it) or the tenant's
/// identity provider's subject.
struct SignedIn<'a> {
    subject: &'a str,
    name: &'a str,
    credential: Option<String>,
}

/// Why a tenant user's sign-in failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInRefused {
    /// Too many failures for this user or client address in the last minute.
    RateLimited,
    WrongPassword,
    /// The user store cannot be reached.
    Unavailable,
}

impl SignInRefused {
    pub fn status(self) -> StatusCode {
        match self {
            SignInRefused::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            SignInRefused::WrongPassword => StatusCode::UNAUTHORIZED,
            SignInRefused::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
    /// What the page tells the user.
    pub fn message(self) -> &'static str {
        match self {
            SignInRefused::RateLimited => {
                "Too many failed sign-in attempts. Wait a minute and try again."
            }
            SignInRefused::WrongPassword => "Wrong username or password.",
            SignInRefused::Unavailable => "Try again in a moment.",
        }
    }
}

/// Checks a tenant user's password, failed attempts limited per user and per client address
/// (the sign-in page and the elicitation page share this).
pub async fn sign_in(
    req: &HttpRequest,
    auth: &AuthService,
    limiter: &AttemptLimiter,
    tenant: &str,
    username: &str,
    password: String,
) -> Result<UserRecord, SignInRefused> {
    let peer = auth.client_address(req);
    // Opaque and short (a username can be long): what the shared counters are named by.
    let user_key = crate::auth::quota_id(&format!("user/{}", username.to_lowercase()));
    let ip_key = crate::auth::quota_id(&format!("ip/{peer}"));
    let limit = auth.config.login_attempts_per_minute.max(1);
    if limiter
        .attempt(tenant, &[(&user_key, limit), (&ip_key, limit)])
        .await
        .is_err()
    {
        tracing::warn!(tenant, "sign-in rate limited");
        return Err(SignInRefused::RateLimited);
    }
    // Not the user's failure (the password was never checked): the attempt does not count.
    let unchecked = || async {
        limiter.forgive(tenant, &user_key, false).await;
        limiter.forgive(tenant, &ip_key, false).await;
        SignInRefused::Unavailable
    };
    let user = match auth.store.get_user(tenant, username).await {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(error = %e, "user lookup failed");
            return Err(unchecked().await);
        }
    };
    let Ok(Ok(turn)) = tokio::time::timeout(PASSWORD_CHECK_WAIT, PASSWORD_CHECKS.acquire()).await
    else {
        tracing::warn!(tenant, "sign-in refused: too many password checks running");
        return Err(unchecked().await);
    };
    let password_ok = {
        let hash = user.as_ref().map(|u| u.password_hash.clone());
        actix_web::rt::task::spawn_blocking(move || verify_password(&password, hash.as_deref()))
            .await
            .unwrap_or(false)
    };
    drop(turn);
    let Some(user) = user.filter(|_| password_ok) else {
        // Counted already.
        tracing::info!(tenant, "failed sign-in");
        return Err(SignInRefused::WrongPassword);
    };
    limiter.forgive(tenant, &user_key, true).await;
    limiter.forgive(tenant, &ip_key, false).await;
    Ok(user)
}

/// 400: the request names no client registered here.
fn unknown_client() -> HttpResponse {
    page::error(
        StatusCode::BAD_REQUEST,
        "Unknown client",
        "This application is not registered with this server.",
    )
}

/// Issues a single-use code for `subject` and sends the user back to the client.
async fn grant_code(
    t: &AsTenant,
    auth: &AuthService,
    r: &Request,
    who: SignedIn<'_>,
) -> HttpResponse {
    let now = now_millis();
    // A user granting it access vouches for a client anyone registered: it is kept from now on
    // rather than swept as unused while the client is still on its way to the token endpoint.
    if r.client.self_registered && !r.client.confirmed {
        match auth
            .store
            .confirm_client(&t.handle.slug, &r.client.client_id, now)
            .await
        {
            Ok(true) => {}
            Ok(false) => return unknown_client(),
            Err(e) => {
                tracing::warn!(error = %e, "could not record a client as confirmed");
                return page::unavailable();
            }
        }
    }
    let code = random_token();
    let record = GrantRecord {
        token_hash: hash_secret(&code),
        family: String::new(),
        client_id: r.client.client_id.clone(),
        grant: json!({
            "redirect_uri": r.redirect_uri,
            "redirect_uri_sent": r.redirect_uri_sent,
            "code_challenge": r.challenge,
            "scope": r.scopes.join(" "),
            "resource": r.resource,
            "nonce": r.nonce,
            "subject": who.subject,
            "name": who.name,
            "credential": who.credential,
            "family": uuid::Uuid::new_v4().to_string(),
        }),
        expires_at: now + auth.config.code_ttl_secs as i64 * 1000,
        used_at: None,
        revoked_at: None,
    };
    if let Err(e) = auth.store.insert_code(&t.handle.slug, &record).await {
        tracing::warn!(error = %e, "could not store an authorization code");
        return page::unavailable();
    }
    tracing::info!(tenant = %t.handle.slug, client_id = %r.client.client_id, "authorization granted");
    let mut pairs = vec![("code", code.as_str()), ("iss", t.issuer.as_str())];
    if let Some(s) = &r.state {
        pairs.push(("state", s));
    }
    redirect_with(&r.redirect_uri, &pairs)
}

/// What the platform remembers across the trip to the tenant's OpenID provider: sealed into
/// the `state` it sends (bound to this tenant and to the browser's CSRF cookie).
#[derive(serde::Serialize, serde::Deserialize)]
struct FederatedState {
    params: Vec<(String, String)>,
    nonce: String,
    verifier: String,
    csrf_hash: String,
    expires_at: i64,
}

fn state_purpose(tenant: &str) -> String {
    format!("oidc-state:{tenant}")
}

/// Sends the user to the tenant's OpenID provider (authorization code + PKCE + nonce).
async fn federate(t: &AsTenant, auth: &AuthService, r: &Request, csrf: &str) -> HttpResponse {
    let Some(upstream) = &t.settings.oidc else {
        return page::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Sign-in unavailable",
            "This tenant's OpenID provider is not configured.",
        );
    };
    let metadata = match auth.issuer_metadata(&upstream.issuer).await {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "OpenID provider metadata unavailable");
            return page::error(
                StatusCode::BAD_GATEWAY,
                "Sign-in unavailable",
                "The identity provider cannot be reached. Try again later.",
            );
        }
    };
    let Some(endpoint) = metadata
        .get("authorization_endpoint")
        .and_then(|v| v.as_str())
    else {
        return page::error(
            StatusCode::BAD_GATEWAY,
            "Sign-in unavailable",
            "The identity provider publishes no authorization endpoint.",
        );
    };
    let verifier = random_token();
    let nonce = random_token();
    let sealed = auth.sealer.seal(
        &state_purpose(&t.handle.slug),
        &serde_json::to_vec(&FederatedState {
            params: r.carried.clone(),
            nonce: nonce.clone(),
            verifier: verifier.clone(),
            csrf_hash: hash_secret(csrf),
            expires_at: now_millis() + 600_000,
        })
        .unwrap_or_default(),
    );
    use base64::Engine;
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(<sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes()));
    let callback = format!("{}/oauth/callback", t.issuer);
    let scope = upstream.scopes.join(" ");
    redirect_with(
        endpoint,
        &[
            ("response_type", "code"),
            ("client_id", &upstream.client_id),
            ("redirect_uri", &callback),
            ("scope", &scope),
            ("state", &sealed),
            ("nonce", &nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ],
    )
}

/// `/t/{tenant}/oauth/callback`: the provider sends the user back; the platform redeems the
/// provider's code, validates the ID token (signature by the provider's JWKS, issuer, audience,
/// expiry, nonce) and maps its claims to the principal.
pub async fn callback(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    query: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let t = match as_tenant(&req, &slug, &auth).await {
        Ok(t) => t,
        Err(e) => return page::error(e.status, "Not available", &e.description),
    };
    let (Some(upstream), LoginMethod::Oidc) = (&t.settings.oidc, t.settings.login) else {
        return page::error(
            StatusCode::NOT_FOUND,
            "Not available",
            "This tenant does not sign in through an OpenID provider.",
        );
    };
    let bad = |m: &str| page::error(StatusCode::BAD_REQUEST, "Sign-in failed", m);
    let Some(sealed) = query.get("state") else {
        return bad("The identity provider's answer has no state.");
    };
    let saved: FederatedState = match auth
        .sealer
        .open(&state_purpose(&t.handle.slug), sealed)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
    {
        Some(s) => s,
        None => return bad("The identity provider's answer is not one this server asked for."),
    };
    if saved.expires_at < now_millis() {
        return bad("The sign-in took too long. Start again from the application.");
    }
    let cookie = req
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    if cookie.is_empty() || !same(&saved.csrf_hash, &hash_secret(&cookie)) {
        return page::error(
            StatusCode::FORBIDDEN,
            "Request expired",
            "This sign-in was started in another browser. Start again from the application.",
        );
    }
    let params: HashMap<String, String> = saved.params.iter().cloned().collect();
    let r = match validate(&t, &auth, &state, &params).await {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    if query.get("error").is_some() {
        let mut p = vec![
            ("error", "access_denied"),
            (
                "error_description",
                "the identity provider did not sign the user in",
            ),
            ("iss", t.issuer.as_str()),
        ];
        if let Some(s) = r.state.as_deref() {
            p.push(("state", s));
        }
        return redirect_with(&r.redirect_uri, &p);
    }
    let Some(code) = query.get("code") else {
        return bad("The identity provider's answer has no code.");
    };
    match redeem_upstream(&t, &auth, upstream, code, &saved).await {
        Ok((subject, name)) => {
            let who = SignedIn {
                subject: &subject,
                name: &name,
                credential: None,
            };
            grant_code(&t, &auth, &r, who).await
        }
        Err(e) => {
            tracing::warn!(tenant = %t.handle.slug, error = %e, "federated sign-in failed");
            page::error(
                StatusCode::BAD_GATEWAY,
                "Sign-in failed",
                "The identity provider's answer could not be verified. Try again.",
            )
        }
    }
}

/// Redeems the provider's code and validates its ID token: (subject, name).
async fn redeem_upstream(
    t: &AsTenant,
    auth: &AuthService,
    upstream: &crate::store::UpstreamOidc,
    code: &str,
    saved: &FederatedState,
) -> Result<(String, String), String> {
    let metadata = auth
        .issuer_metadata(&upstream.issuer)
        .await
        .map_err(|e| e.to_string())?;
    let field = |k: &str| metadata.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let token_endpoint = field("token_endpoint").ok_or("no token_endpoint")?;
    let jwks_uri = field("jwks_uri").ok_or("no jwks_uri")?;
    auth.check_outside_url(&token_endpoint)?;
    auth.check_outside_url(&jwks_uri)?;
    let callback = format!("{}/oauth/callback", t.issuer);
    let mut form = vec![
        ("grant_type", "authorization_code".to_string()),
        ("code", code.to_string()),
        ("redirect_uri", callback),
        ("code_verifier", saved.verifier.clone()),
        ("client_id", upstream.client_id.clone()),
    ];
    if let Some(sealed) = &upstream.client_secret_sealed {
        let secret = auth
            .sealer
            .open(
                &crate::auth::seal::purpose::oidc_client_secret(&t.handle.slug),
                sealed,
            )
            .map(secrecy::zeroize::Zeroizing::new)
            .map_err(|e| e.to_string())?;
        form.push((
            "client_secret",
            String::from_utf8_lossy(&secret).into_owned(),
        ));
    }
    let response = auth
        .jwks
        .http()
        .post(&token_endpoint)
        .form(&form)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| format!("token endpoint: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("token endpoint answered {}", response.status()));
    }
    let tokens = crate::auth::tokens::read_json_limited(response)
        .await
        .map_err(|e| format!("token response: {e}"))?;
    let id_token = tokens
        .get("id_token")
        .and_then(|v| v.as_str())
        .ok_or("no id_token")?;
    let claims = auth
        .jwks
        .verify(
            id_token,
            &jwks_uri,
            &upstream.issuer,
            std::slice::from_ref(&upstream.client_id),
        )
        .await
        .map_err(|e| e.to_string())?
        .map_err(|r| r.description())?;
    if claims.get("nonce").and_then(|v| v.as_str()) != Some(saved.nonce.as_str()) {
        return Err("ID token nonce does not match".into());
    }
    let subject = claims
        .get(&upstream.subject_claim)
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or("ID token has no subject claim")?
        .to_string();
    let name = claims
        .get(&upstream.name_claim)
        .and_then(|v| v.as_str())
        .unwrap_or(&subject)
        .to_string();
    Ok((subject, name))
}
