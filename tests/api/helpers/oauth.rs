//! An OAuth client for the tests, playing the host and the user's browser against a tenant's
//! authorization server: users, registration (DCR and pre-registered), PKCE, the login and
//! consent page, the code exchange, refresh, client credentials, and a session opened with the
//! token.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::Digest;

use super::{initialize_body, spawn_app, TestApp};

pub const PASSWORD: &str = "correct horse battery";

/// An HTTP client that does not follow redirects (the test plays the browser).
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub const INITIAL_ACCESS_TOKEN: &str = "initial-access-token-0123456789";

/// The tenant `gated`: OAuth, clients registered only with `INITIAL_ACCESS_TOKEN`.
pub async fn create_gated(app: &TestApp) {
    app.tenant("gated")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth", "registration": "token",
                "initial_access_token": INITIAL_ACCESS_TOKEN }))
        .create()
        .await;
}

pub async fn create_user(app: &TestApp, tenant: &str, username: &str) {
    let r = app
        .admin(Method::POST, &format!("/tenants/{tenant}/users"))
        .json(&json!({ "username": username, "password": PASSWORD, "display_name": username.to_uppercase() }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// `method` (a name such as "PUT") on `url`, without a body.
pub async fn send(app: &TestApp, method: &str, url: &str) -> reqwest::Response {
    app.http
        .request(method.parse().unwrap(), url)
        .send()
        .await
        .unwrap()
}

/// Tenants `acme` and `beta` (oauth) with users `alice` (acme), `bob` (acme) and `carol` (beta).
pub async fn oauth_app() -> TestApp {
    let app = spawn_app().await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    app.tenant("beta")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    create_user(&app, "acme", "bob").await;
    create_user(&app, "beta", "carol").await;
    app
}

pub fn issuer(app: &TestApp, tenant: &str) -> String {
    format!("{}/t/{tenant}", app.base)
}

/// A registration request (RFC 7591) of `body` at `tenant`, with its initial access `token`
/// when given.
pub fn registration(
    app: &TestApp,
    tenant: &str,
    token: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let r = app
        .http
        .post(format!("{}/oauth/register", issuer(app, tenant)))
        .json(body);
    match token {
        Some(t) => r.bearer_auth(t),
        None => r,
    }
}

pub async fn register(app: &TestApp, tenant: &str, body: Value) -> Value {
    let r = registration(app, tenant, None, &body).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

/// A client the admin API registers at `tenant` (its secret included, when it has one).
pub async fn admin_client(app: &TestApp, tenant: &str, body: Value) -> Value {
    let r = app
        .admin(Method::POST, &format!("/tenants/{tenant}/oauth-clients"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

/// A `client_credentials` token request of `client` (as registered: its id and secret, sent in
/// the form) at `tenant`.
pub async fn client_credentials(
    app: &TestApp,
    tenant: &str,
    client: &Value,
) -> (StatusCode, Value) {
    let form = [
        ("grant_type", "client_credentials"),
        ("client_id", client["client_id"].as_str().unwrap()),
        ("client_secret", client["client_secret"].as_str().unwrap()),
    ];
    token_request(app, tenant, &form).await
}

pub const REDIRECT: &str = "http://127.0.0.1:9/callback";

pub async fn public_client(app: &TestApp, tenant: &str) -> String {
    let c = register(
        app,
        tenant,
        json!({ "client_name": "Test Host", "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none" }),
    )
    .await;
    c["client_id"].as_str().unwrap().to_string()
}

pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

pub fn pkce() -> Pkce {
    let verifier = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 40]>());
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    Pkce {
        verifier,
        challenge,
    }
}

pub fn authorize_params(client_id: &str, p: &Pkce, redirect: &str) -> Vec<(String, String)> {
    [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect),
        ("state", "st-123"),
        ("code_challenge", &p.challenge),
        ("code_challenge_method", "S256"),
        ("scope", "mcp"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The login page for `params`: (status, CSRF cookie, HTML).
pub async fn login_page(
    app: &TestApp,
    tenant: &str,
    params: &[(String, String)],
) -> (StatusCode, Option<String>, String) {
    let r = browser()
        .get(format!("{}/oauth/authorize", issuer(app, tenant)))
        .query(params)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("harbor_csrf="))
        .map(|c| c.split(';').next().unwrap().to_string());
    (status, cookie, r.text().await.unwrap())
}

pub fn hidden_inputs(html: &str) -> Vec<(String, String)> {
    let unescape = |s: &str| {
        s.replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    };
    html.split("<input type=\"hidden\" ")
        .skip(1)
        .filter_map(|rest| {
            let name = rest.split("name=\"").nth(1)?.split('"').next()?;
            let value = rest.split("value=\"").nth(1)?.split('"').next()?;
            Some((unescape(name), unescape(value)))
        })
        .collect()
}

/// Signs in on the page and returns the redirect response.
pub async fn sign_in(
    app: &TestApp,
    tenant: &str,
    params: &[(String, String)],
    username: &str,
    password: &str,
    decision: &str,
) -> reqwest::Response {
    let (status, cookie, html) = login_page(app, tenant, params).await;
    assert_eq!(status, 200, "{html}");
    let mut form = hidden_inputs(&html);
    form.push(("username".into(), username.into()));
    form.push(("password".into(), password.into()));
    form.push(("decision".into(), decision.into()));
    browser()
        .post(format!("{}/oauth/authorize", issuer(app, tenant)))
        .header("cookie", cookie.expect("CSRF cookie"))
        .form(&form)
        .send()
        .await
        .unwrap()
}

pub fn location_query(r: &reqwest::Response) -> HashMap<String, String> {
    let location = r
        .headers()
        .get("location")
        .expect("a redirect")
        .to_str()
        .unwrap();
    url::Url::parse(location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

pub async fn code_for(
    app: &TestApp,
    tenant: &str,
    client_id: &str,
    p: &Pkce,
    user: &str,
) -> String {
    let r = sign_in(
        app,
        tenant,
        &authorize_params(client_id, p, REDIRECT),
        user,
        PASSWORD,
        "allow",
    )
    .await;
    assert_eq!(r.status(), 303);
    location_query(&r)["code"].clone()
}

pub async fn token_request(
    app: &TestApp,
    tenant: &str,
    form: &[(&str, &str)],
) -> (StatusCode, Value) {
    let r = app
        .http
        .post(format!("{}/oauth/token", issuer(app, tenant)))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub async fn exchange(
    app: &TestApp,
    tenant: &str,
    client_id: &str,
    code: &str,
    p: &Pkce,
) -> (StatusCode, Value) {
    token_request(
        app,
        tenant,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", client_id),
            ("code_verifier", &p.verifier),
        ],
    )
    .await
}

/// A user's tokens for `tenant` through the whole code flow.
pub async fn tokens_for(app: &TestApp, tenant: &str, user: &str) -> (String, Value) {
    let client_id = public_client(app, tenant).await;
    let p = pkce();
    let code = code_for(app, tenant, &client_id, &p, user).await;
    let (status, tokens) = exchange(app, tenant, &client_id, &code, &p).await;
    assert_eq!(status, 200, "{tokens}");
    (client_id, tokens)
}

pub async fn refresh(
    app: &TestApp,
    tenant: &str,
    client_id: &str,
    token: &str,
) -> (StatusCode, Value) {
    token_request(
        app,
        tenant,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client_id),
        ],
    )
    .await
}

/// An MCP initialize with a bearer token: (status, session id, WWW-Authenticate).
pub async fn initialize(
    app: &TestApp,
    tenant: &str,
    token: Option<&str>,
) -> (StatusCode, Option<String>, Option<String>) {
    let mut r = app.post(tenant, None, &initialize_body("2025-11-25", json!({})));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let r = r.send().await.unwrap();
    let header = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_string());
    (
        r.status(),
        header("mcp-session-id"),
        header("www-authenticate"),
    )
}

pub async fn call_echo(
    app: &TestApp,
    tenant: &str,
    token: &str,
    session: &str,
) -> reqwest::Response {
    app.post(
        tenant,
        Some(session),
        &json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                 "params": { "name": "echo", "arguments": { "text": "hi" } } }),
    )
    .bearer_auth(token)
    .header("mcp-protocol-version", "2025-11-25")
    .send()
    .await
    .unwrap()
}

pub fn access(tokens: &Value) -> String {
    tokens["access_token"].as_str().unwrap().to_string()
}
