//! OAuth 2.1 per tenant, end to end over real HTTP: the resource server's challenges, discovery,
//! client registration (DCR policies, RFC 7592, client metadata documents, pre-registered
//! clients), the login/consent page, every grant and its failure modes, refresh rotation and
//! reuse detection, revocation, key rotation, external-issuer mode, sessions bound to their
//! principal, and the cross-tenant matrix.

use std::collections::HashMap;
use std::sync::Arc;

use crate::helpers::{initialize_body, spawn_app, spawn_app_with, TestApp};
use actix_web::{web, App, HttpResponse, HttpServer};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use parking_lot::Mutex;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::helpers::oauth::*;

#[actix_rt::test]
async fn a_protected_tenant_challenges_and_discovery_leads_to_its_issuer() {
    let app = oauth_app().await;
    let (status, _, challenge) = initialize(&app, "acme", None).await;
    assert_eq!(status, 401);
    let challenge = challenge.expect("WWW-Authenticate");
    let prm_url = format!(
        "{}/.well-known/oauth-protected-resource/t/acme/mcp",
        app.base
    );
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{prm_url}\"")),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp\""), "{challenge}");

    // Every request kind of the tenant is protected, the legacy transport too.
    let r = app
        .http
        .get(format!("{}/t/acme/mcp", app.base))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .delete(format!("{}/t/acme/mcp", app.base))
        .header("mcp-session-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .get(format!("{}/t/acme/sse", app.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("/.well-known/oauth-protected-resource/t/acme/sse"));
    // Garbage and tokens in the query string.
    let (status, _, challenge) = initialize(&app, "acme", Some("not-a-jwt")).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("error=\"invalid_token\""));
    let r = app
        .http
        .post(format!("{}/t/acme/mcp?access_token=abc", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize_body("2025-11-25", json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("invalid_request"));
    let r = app
        .post("acme", None, &initialize_body("2025-11-25", json!({})))
        .header("authorization", "Basic YTpi")
        .send()
        .await
        .unwrap();
    // Another scheme is no Bearer credentials at all (RFC 6750 §3): the bare challenge.
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("resource_metadata=") && !challenge.contains("error="));
    // A Bearer credential that is not `Bearer <b64token>` is malformed: 400 invalid_request.
    for malformed in ["Bearer", "Bearer a b", "Bearer {token}"] {
        let r = app
            .post("acme", None, &initialize_body("2025-11-25", json!({})))
            .header("authorization", malformed)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{malformed}");
        let challenge = r.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains("error=\"invalid_request\""),
            "{malformed}: {challenge}"
        );
    }

    // Protected Resource Metadata, and the variants clients compute.
    for url in [
        prm_url.clone(),
        format!("{prm_url}/"),
        format!(
            "{}/t/acme/.well-known/oauth-protected-resource/mcp",
            app.base
        ),
    ] {
        let prm: Value = app
            .http
            .get(&url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(prm["resource"], format!("{}/t/acme/mcp", app.base), "{url}");
        assert_eq!(prm["authorization_servers"], json!([issuer(&app, "acme")]));
        // The scopes the resource needs only: no openid, profile or offline_access.
        assert_eq!(prm["scopes_supported"], json!(["mcp"]), "{url}");
    }
    let prm: Value = app
        .http
        .get(format!(
            "{}/t/acme/.well-known/oauth-protected-resource",
            app.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["resource"], issuer(&app, "acme"));

    // Authorization server metadata: RFC 8414 path insertion, OpenID discovery, appended forms.
    for url in [
        format!("{}/.well-known/oauth-authorization-server/t/acme", app.base),
        format!(
            "{}/.well-known/oauth-authorization-server/t/acme/",
            app.base
        ),
        format!("{}/.well-known/openid-configuration/t/acme", app.base),
        format!("{}/t/acme/.well-known/openid-configuration", app.base),
        format!("{}/t/acme/.well-known/oauth-authorization-server", app.base),
    ] {
        let r = app.http.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        // Its URLs come from this request's Host (no auth.public_url): no shared cache may
        // hand it to another client.
        assert_eq!(r.headers()["cache-control"], "private, max-age=300");
        assert!(r.headers()["vary"]
            .to_str()
            .unwrap()
            .contains("X-Forwarded-Host"));
        let m: Value = r.json().await.unwrap();
        assert_eq!(m["issuer"], issuer(&app, "acme"), "{url}");
        assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(m["authorization_response_iss_parameter_supported"], true);
        assert!(m["registration_endpoint"]
            .as_str()
            .unwrap()
            .ends_with("/t/acme/oauth/register"));
    }
    let jwks: Value = app
        .http
        .get(format!("{}/oauth/jwks", issuer(&app, "acme")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "EC");
    assert_eq!(jwks["keys"][0]["alg"], "ES256");
    assert!(jwks["keys"][0].get("d").is_none(), "no private part");

    // An open tenant: no challenge, no metadata; unknown documents are 404.
    let (status, ..) = initialize(&app, "demo", None).await;
    assert_eq!(status, 200);
    for path in [
        "/.well-known/oauth-protected-resource/t/demo/mcp",
        "/.well-known/oauth-authorization-server/t/demo",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/t/acme/other",
        "/.well-known/oauth-authorization-server/t/nobody",
    ] {
        let r = app
            .http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}

/// A method an endpoint of the authorization server does not serve is 405 with its `Allow`
/// (RFC 9110 §15.5.6) and an OAuth error body; a path that is no endpoint stays 404, and a
/// browser's preflight is still answered.
#[actix_rt::test]
async fn wrong_methods_on_the_authorization_server_are_405_with_allow() {
    let app = oauth_app().await;
    let (no, get, post) = (None, Some("GET, OPTIONS"), Some("POST, OPTIONS"));
    for (method, path, allow) in [
        ("GET", "/t/acme/oauth/token", post),
        ("PUT", "/t/acme/oauth/revoke", post),
        ("GET", "/t/acme/oauth/register", post),
        (
            "DELETE",
            "/t/acme/oauth/authorize",
            Some("GET, POST, OPTIONS"),
        ),
        ("POST", "/t/acme/oauth/jwks", get),
        ("POST", "/t/acme/oauth/callback", get),
        (
            "POST",
            "/t/acme/oauth/register/some-client",
            Some("GET, PUT, DELETE, OPTIONS"),
        ),
        (
            "POST",
            "/.well-known/oauth-authorization-server/t/acme",
            get,
        ),
        (
            "DELETE",
            "/.well-known/oauth-protected-resource/t/acme/mcp",
            get,
        ),
        ("POST", "/t/acme/.well-known/openid-configuration", get),
        // No endpoint there: 404.
        ("GET", "/t/acme/oauth/nothing", no),
        ("POST", "/t/acme/oauth/register/a/b", no),
        ("POST", "/t/acme/oauth/register/", no),
        ("POST", "/.well-known/something-else", no),
        ("GET", "/t/acme/.well-known/something-else/x", no),
    ] {
        let r = send(&app, method, &format!("{}{path}", app.base)).await;
        let Some(allow) = allow else {
            assert_eq!(r.status(), 404, "{method} {path}");
            continue;
        };
        assert_eq!(r.status(), 405, "{method} {path}");
        assert_eq!(r.headers()["allow"], allow, "{method} {path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{method} {path}");
    }
    let r = app
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/t/acme/oauth/token", app.base),
        )
        .header("origin", "http://localhost:6274")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
}

#[actix_rt::test]
async fn the_code_flow_signs_a_user_in_and_the_token_opens_a_session() {
    let app = oauth_app().await;
    let client_id = public_client(&app, "acme").await;
    let p = pkce();
    let params = authorize_params(&client_id, &p, REDIRECT);

    // The page names the client, where the user goes back to, and the scopes.
    let (status, cookie, html) = login_page(&app, "acme", &params).await;
    assert_eq!(status, 200);
    assert!(cookie.is_some());
    assert!(
        html.contains("Test Host")
            && html.contains("127.0.0.1")
            && html.contains("<code>mcp</code>"),
        "{html}"
    );
    assert!(html.contains("<label for=\"username\">") && html.contains("<label for=\"password\">"));
    // Its redirect is to this machine: the page warns (authorization page: SHOULD).
    assert!(html.contains("runs on your own computer"), "{html}");

    // A wrong password stays on the page.
    let r = sign_in(&app, "acme", &params, "alice", "wrong password", "allow").await;
    assert_eq!(r.status(), 401);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("Wrong username or password"));
    // Deny goes back with access_denied.
    let r = sign_in(&app, "acme", &params, "alice", PASSWORD, "deny").await;
    assert_eq!(r.status(), 303);
    assert_eq!(location_query(&r)["error"], "access_denied");
    // Allow: a code, the state and the issuer (RFC 9207); a loopback redirect on another port.
    let other_port = authorize_params(&client_id, &p, "http://127.0.0.1:43210/callback");
    let r = sign_in(&app, "acme", &other_port, "alice", PASSWORD, "allow").await;
    assert_eq!(r.status(), 303);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("http://127.0.0.1:43210/callback?"),
        "{location}"
    );
    let q = location_query(&r);
    assert_eq!(q["state"], "st-123");
    assert_eq!(q["iss"], issuer(&app, "acme"));
    let (status, tokens) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "authorization_code"),
            ("code", &q["code"]),
            ("redirect_uri", "http://127.0.0.1:43210/callback"),
            ("client_id", &client_id),
            ("code_verifier", &p.verifier),
        ],
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert!(tokens["expires_in"].as_i64().unwrap() > 0);
    assert!(tokens["refresh_token"].is_string());
    // The access token is an ES256 JWT with a kid, bound to the tenant's MCP URL.
    let token = access(&tokens);
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    assert!(header["kid"].is_string());
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["aud"], app.mcp_url("acme"));
    assert_eq!(claims["iss"], issuer(&app, "acme"));
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["client_id"], client_id);

    let (status, session, _) = initialize(&app, "acme", Some(&token)).await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    let r = call_echo(&app, "acme", &token, &session).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["content"][0]["text"], "hi");
    // The session needs the token on every request.
    let r = app
        .post(
            "acme",
            Some(&session),
            &json!({ "jsonrpc": "2.0", "id": 8, "method": "ping" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[actix_rt::test]
async fn bad_authorization_requests_are_shown_or_sent_back_never_redirected_blindly() {
    let app = oauth_app().await;
    let client_id = public_client(&app, "acme").await;
    let p = pkce();
    let with = |k: &str, v: Option<&str>| {
        let mut params: Vec<(String, String)> = authorize_params(&client_id, &p, REDIRECT)
            .into_iter()
            .filter(|(key, _)| key != k)
            .collect();
        if let Some(v) = v {
            params.push((k.to_string(), v.to_string()));
        }
        params
    };
    // Unknown client, unregistered redirect URIs: a page, never a redirect.
    for (params, what) in [
        (with("client_id", Some("hc_nobody")), "Unknown client"),
        (
            with("redirect_uri", Some("https://evil.example/cb")),
            "Invalid redirect URI",
        ),
        (
            with("redirect_uri", Some("http://127.0.0.1:9/other")),
            "Invalid redirect URI",
        ),
        (
            with("redirect_uri", Some("http://localhost:9/callback")),
            "Invalid redirect URI",
        ),
    ] {
        let (status, _, html) = login_page(&app, "acme", &params).await;
        assert_eq!(status, 400, "{what}");
        assert!(html.contains(what), "{html}");
    }
    // Errors after the client and redirect URI are known go back to it.
    for (params, error) in [
        (with("code_challenge", None), "invalid_request"),
        (
            with("code_challenge_method", Some("plain")),
            "invalid_request",
        ),
        (
            with("response_type", Some("token")),
            "unsupported_response_type",
        ),
        (
            with("resource", Some("https://elsewhere.example/mcp")),
            "invalid_target",
        ),
        (with("scope", Some("mcp admin")), "invalid_scope"),
    ] {
        let r = browser()
            .get(format!("{}/oauth/authorize", issuer(&app, "acme")))
            .query(&params)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        let q = location_query(&r);
        assert_eq!(q["error"], error);
        assert_eq!(q["state"], "st-123");
        assert_eq!(q["iss"], issuer(&app, "acme"));
    }
    // A POST without the CSRF cookie is refused.
    let (_, _, html) = login_page(&app, "acme", &authorize_params(&client_id, &p, REDIRECT)).await;
    let mut form = hidden_inputs(&html);
    form.extend([
        ("username".into(), "alice".into()),
        ("password".into(), PASSWORD.into()),
        ("decision".into(), "allow".into()),
    ]);
    let r = browser()
        .post(format!("{}/oauth/authorize", issuer(&app, "acme")))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("location").is_none());
}

#[actix_rt::test]
async fn pkce_code_reuse_and_redirect_mismatch_fail_at_the_token_endpoint() {
    let app = oauth_app().await;
    let client_id = public_client(&app, "acme").await;
    let p = pkce();
    // Wrong verifier.
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let wrong = pkce();
    let (status, e) = exchange(&app, "acme", &client_id, &code, &wrong).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // A code is single-use even after a failed attempt.
    let (status, e) = exchange(&app, "acme", &client_id, &code, &p).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // No verifier at all.
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let (status, e) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // Another redirect URI than the authorized one.
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let (status, e) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", "http://127.0.0.1:9/elsewhere"),
            ("client_id", &client_id),
            ("code_verifier", &p.verifier),
        ],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // No redirect URI, while the authorization request named one (RFC 6749 §4.1.3).
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let (status, e) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("code_verifier", &p.verifier),
        ],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    assert!(
        e["error_description"]
            .as_str()
            .unwrap_or("")
            .contains("redirect_uri is required"),
        "{e}"
    );
    // Reuse of a redeemed code revokes what it issued.
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let (status, tokens) = exchange(&app, "acme", &client_id, &code, &p).await;
    assert_eq!(status, 200);
    let (status, e) = exchange(&app, "acme", &client_id, &code, &p).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let (status, e) = refresh(
        &app,
        "acme",
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "family revoked"
    );
    // Malformed requests.
    let (status, e) = token_request(
        &app,
        "acme",
        &[("grant_type", "password"), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unsupported_grant_type"))
    );
    let (status, e) = token_request(
        &app,
        "acme",
        &[("grant_type", "authorization_code"), ("code", "x")],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_client"))
    );
    let r = app
        .http
        .post(format!("{}/oauth/token", issuer(&app, "acme")))
        .json(&json!({"grant_type": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[actix_rt::test]
async fn refresh_tokens_rotate_keep_the_session_and_reuse_revokes_the_family() {
    let app = oauth_app().await;
    let (client_id, tokens) = tokens_for(&app, "acme", "alice").await;
    let (status, session, _) = initialize(&app, "acme", Some(&access(&tokens))).await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    let first_refresh = tokens["refresh_token"].as_str().unwrap().to_string();

    let (status, second) = refresh(&app, "acme", &client_id, &first_refresh).await;
    assert_eq!(status, 200, "{second}");
    let second_refresh = second["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(second_refresh, first_refresh, "rotated");
    // The refreshed token keeps the session.
    let r = call_echo(&app, "acme", &access(&second), &session).await;
    assert_eq!(r.status(), 200);
    // Presenting the old refresh token again revokes the whole family.
    let (status, e) = refresh(&app, "acme", &client_id, &first_refresh).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let (status, e) = refresh(&app, "acme", &client_id, &second_refresh).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // A refresh cannot widen the scope, and belongs to its client.
    let (other_client, tokens) = tokens_for(&app, "acme", "alice").await;
    let rt = tokens["refresh_token"].as_str().unwrap();
    let (status, e) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt),
            ("client_id", &other_client),
            ("scope", "mcp openid"),
        ],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_scope"))
    );
    // That refusal did not use the token up. A narrower scope narrows the access token only:
    // the new refresh token keeps the grant's scope (RFC 6749 §6).
    let (status, narrowed) = token_request(
        &app,
        "acme",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt),
            ("client_id", &other_client),
            ("scope", ""),
        ],
    )
    .await;
    assert_eq!(status, 200, "{narrowed}");
    assert_eq!(narrowed["scope"], "");
    let next = narrowed["refresh_token"].as_str().unwrap();
    let (status, whole) = refresh(&app, "acme", &other_client, next).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["scope"], "mcp");
    let next = whole["refresh_token"].as_str().unwrap();
    let (status, e) = refresh(&app, "acme", &client_id, next).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    assert!(
        e["error_description"]
            .as_str()
            .unwrap_or("")
            .contains("another client"),
        "{e}"
    );
}

#[actix_rt::test]
async fn revocation_ends_a_refresh_family() {
    let app = oauth_app().await;
    let (client_id, tokens) = tokens_for(&app, "acme", "alice").await;
    let rt = tokens["refresh_token"].as_str().unwrap();
    let r = app
        .http
        .post(format!("{}/oauth/revoke", issuer(&app, "acme")))
        .form(&[
            ("token", rt),
            ("client_id", client_id.as_str()),
            ("token_type_hint", "refresh_token"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, e) = refresh(&app, "acme", &client_id, rt).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // Unknown tokens are answered 200 too (RFC 7009).
    let r = app
        .http
        .post(format!("{}/oauth/revoke", issuer(&app, "acme")))
        .form(&[("token", "nothing"), ("client_id", client_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[actix_rt::test]
async fn removing_a_user_or_resetting_the_password_ends_their_grants() {
    let app = oauth_app().await;
    let invalid = |(status, e): (StatusCode, Value)| {
        assert_eq!(
            (status, e["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_grant")),
            "{e}"
        );
        e["error_description"].as_str().unwrap_or("").to_string()
    };
    let server = &app;
    let patch_alice = |body: Value| async move {
        let r = server
            .admin(Method::PATCH, "/tenants/acme/users/alice")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    };
    // A display-name change keeps the grant; a password reset ends it.
    let (client_id, tokens) = tokens_for(&app, "acme", "alice").await;
    patch_alice(json!({ "display_name": "Alice B." })).await;
    let (status, renewed) = refresh(
        &app,
        "acme",
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{renewed}");
    patch_alice(json!({ "password": "another long password" })).await;
    let rt = renewed["refresh_token"].as_str().unwrap();
    let why = invalid(refresh(&app, "acme", &client_id, rt).await);
    assert!(why.contains("password"), "{why}");
    // A removed user's refresh token and unredeemed code end with them, and a user created
    // again under the same name inherits neither.
    let (client_id, tokens) = tokens_for(&app, "acme", "bob").await;
    let p = pkce();
    let code = code_for(&app, "acme", &client_id, &p, "bob").await;
    let removed = app
        .admin(Method::DELETE, "/tenants/acme/users/bob")
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 204);
    create_user(&app, "acme", "bob").await;
    let rt = tokens["refresh_token"].as_str().unwrap();
    invalid(refresh(&app, "acme", &client_id, rt).await);
    invalid(exchange(&app, "acme", &client_id, &code, &p).await);
    // The new bob signs in afresh.
    let (_, fresh) = tokens_for(&app, "acme", "bob").await;
    assert!(fresh["access_token"].is_string());
}

#[actix_rt::test]
async fn a_tenant_created_again_under_its_slug_trusts_nothing_of_the_first() {
    let app = oauth_app().await;
    let (_, tokens) = tokens_for(&app, "acme", "alice").await;
    let old = access(&tokens);
    let (status, _, _) = initialize(&app, "acme", Some(&old)).await;
    assert_eq!(status, 200, "the token works while its tenant lives");
    let deleted = app
        .admin(Method::DELETE, "/tenants/acme")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    // Same issuer, same audience, same subject: only the keys differ, and the first tenant's
    // went with it (this replica cached them).
    let (status, _, challenge) = initialize(&app, "acme", Some(&old)).await;
    assert_eq!(status, 401, "{challenge:?}");
    // The new tenant signs with its own keys, which it goes on accepting.
    let (_, tokens) = tokens_for(&app, "acme", "alice").await;
    let jwks: Value = app
        .http
        .get(format!("{}/t/acme/oauth/jwks", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kid = |token: &str| {
        let header = token.split('.').next().unwrap();
        let header =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header)
                .unwrap();
        serde_json::from_slice::<Value>(&header).unwrap()["kid"].clone()
    };
    assert_ne!(kid(&access(&tokens)), kid(&old));
    assert!(
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["kid"] != kid(&old)),
        "{jwks}"
    );
    let (status, _, _) = initialize(&app, "acme", Some(&access(&tokens))).await;
    assert_eq!(status, 200);
}

#[actix_rt::test]
async fn sessions_belong_to_the_principal_that_opened_them() {
    let app = oauth_app().await;
    let (_, alice) = tokens_for(&app, "acme", "alice").await;
    let (_, bob) = tokens_for(&app, "acme", "bob").await;
    let (_, session, _) = initialize(&app, "acme", Some(&access(&alice))).await;
    let session = session.unwrap();
    // Bob is told the session does not exist; Alice goes on using it.
    let r = call_echo(&app, "acme", &access(&bob), &session).await;
    assert_eq!(r.status(), 404);
    let r = app
        .http
        .delete(app.mcp_url("acme"))
        .bearer_auth(access(&bob))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = call_echo(&app, "acme", &access(&alice), &session).await;
    assert_eq!(r.status(), 200);

    // A legacy session too: Bob's messages to Alice's are refused as to no session at all.
    let r = app
        .http
        .get(format!("{}/t/acme/sse", app.base))
        .bearer_auth(access(&alice))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = crate::helpers::SseReader::new(r);
    let endpoint = sse
        .next_event(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let messages = format!("{}{}", app.base, endpoint.data);
    let post = |token: String| {
        app.http
            .post(&messages)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(initialize_body("2024-11-05", json!({})).to_string())
            .send()
    };
    assert_eq!(post(access(&bob)).await.unwrap().status(), 404);
    assert_eq!(post(access(&alice)).await.unwrap().status(), 202);
    let answer = sse
        .next_event(std::time::Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
}

#[actix_rt::test]
async fn client_credentials_scopes_and_audience() {
    let app = oauth_app().await;
    let client = admin_client(
        &app,
        "acme",
        json!({ "client_name": "Batch job", "grant_types": ["client_credentials"],
                "token_endpoint_auth_method": "client_secret_basic" }),
    )
    .await;
    let id = client["client_id"].as_str().unwrap().to_string();
    let secret = client["client_secret"].as_str().unwrap().to_string();
    let cc = |scope: Option<&'static str>, secret: String| {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(s) = scope {
            form.push(("scope", s));
        }
        app.http
            .post(format!("{}/oauth/token", issuer(&app, "acme")))
            .basic_auth(&id, Some(secret))
            .form(&form)
            .send()
    };
    let r = cc(None, "wrong".into()).await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic"));
    let tokens: Value = cc(None, secret.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(tokens.get("refresh_token").is_none());
    let (status, ..) = initialize(&app, "acme", Some(&access(&tokens))).await;
    assert_eq!(status, 200);
    // Without the `mcp` scope: 403 insufficient_scope.
    let narrow: Value = cc(Some("profile"), secret.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (status, _, challenge) = initialize(&app, "acme", Some(&access(&narrow))).await;
    assert_eq!(status, 403);
    let challenge = challenge.unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp\""),
        "{challenge}"
    );
    // A public client may not use client_credentials.
    let public = public_client(&app, "acme").await;
    let (status, e) = token_request(
        &app,
        "acme",
        &[("grant_type", "client_credentials"), ("client_id", &public)],
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unauthorized_client"))
    );
    // Another tenant's resource cannot be asked for, nor used.
    let r = app
        .http
        .post(format!("{}/oauth/token", issuer(&app, "acme")))
        .basic_auth(&id, Some(&secret))
        .form(&[
            ("grant_type", "client_credentials"),
            ("resource", &app.mcp_url("beta")),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_target");
    let (status, _, challenge) = initialize(&app, "beta", Some(&access(&tokens))).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("invalid_token"));
}

#[actix_rt::test]
async fn expired_access_tokens_are_refused() {
    let app = spawn_app_with(|c| c.auth.access_token_ttl_secs = 1).await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    let (_, tokens) = tokens_for(&app, "acme", "alice").await;
    assert_eq!(
        initialize(&app, "acme", Some(&access(&tokens))).await.0,
        200
    );
    // 1 s lifetime + 5 s allowed clock skew.
    tokio::time::sleep(std::time::Duration::from_millis(7_000)).await;
    let (status, _, challenge) = initialize(&app, "acme", Some(&access(&tokens))).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("expired"));
}

#[actix_rt::test]
async fn registration_policies_and_client_management() {
    let app = spawn_app().await;
    app.tenant("open")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    app.tenant("closed")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth", "registration": "disabled" }))
        .create()
        .await;
    create_gated(&app).await;
    let meta = json!({ "client_name": "Host", "redirect_uris": ["https://host.example/cb"], "token_endpoint_auth_method": "none" });
    let post = |tenant: &str, token: Option<&str>, body: &Value| {
        registration(&app, tenant, token, body).send()
    };
    assert_eq!(post("closed", None, &meta).await.unwrap().status(), 403);
    // No token: the bare challenge (RFC 6750 §3); a wrong one: invalid_token.
    let challenge = |r: reqwest::Response| {
        assert_eq!(r.status(), 401);
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        challenge(post("gated", None, &meta).await.unwrap()),
        "Bearer"
    );
    let wrong = challenge(
        post("gated", Some("wrong-token-0123456789"), &meta)
            .await
            .unwrap(),
    );
    assert!(wrong.contains("error=\"invalid_token\""), "{wrong}");
    assert_eq!(
        post("gated", Some(INITIAL_ACCESS_TOKEN), &meta)
            .await
            .unwrap()
            .status(),
        201
    );
    // Redirect URIs: https or loopback only.
    for bad in [
        "http://host.example/cb",
        "https://host.example/cb#frag",
        "javascript:alert(1)",
    ] {
        let r = post(
            "open",
            None,
            &json!({ "redirect_uris": [bad], "token_endpoint_auth_method": "none" }),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"],
            "invalid_redirect_uri"
        );
    }
    let r = post(
        "open",
        None,
        &json!({ "redirect_uris": ["https://h.example/cb"], "grant_types": ["implicit"] }),
    )
    .await
    .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "invalid_client_metadata"
    );

    // A confidential client gets a secret; RFC 7592 read/update/delete with its token.
    let r = post(
        "open",
        None,
        &json!({ "client_name": "Conf", "redirect_uris": ["https://h.example/cb"] }),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    let c: Value = r.json().await.unwrap();
    assert!(c["client_secret"].is_string());
    let uri = c["registration_client_uri"].as_str().unwrap().to_string();
    let rat = c["registration_access_token"].as_str().unwrap().to_string();
    assert_eq!(app.http.get(&uri).send().await.unwrap().status(), 401);
    assert_eq!(
        app.http
            .get(&uri)
            .bearer_auth("nope")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let read: Value = app
        .http
        .get(&uri)
        .bearer_auth(&rat)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["client_name"], "Conf");
    assert!(
        read.get("client_secret").is_none(),
        "the secret is shown once"
    );
    let mut updated = read.clone();
    updated["client_name"] = json!("Renamed");
    let r = app
        .http
        .put(&uri)
        .bearer_auth(&rat)
        .json(&updated)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["client_name"], "Renamed");
    assert_eq!(
        app.http
            .delete(&uri)
            .bearer_auth(&rat)
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        app.http
            .get(&uri)
            .bearer_auth(&rat)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}

/// `client_credentials` needs no user: a client anyone could register must not get it, or a
/// tenant with open registration (the default) would hand an access token to whoever asks.
#[actix_rt::test]
async fn a_client_anyone_may_register_gets_no_machine_access() {
    let app = spawn_app().await;
    app.tenant("open")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_gated(&app).await;
    let post = |tenant: &str, token: Option<&str>, body: Value| {
        registration(&app, tenant, token, &body).send()
    };
    let machine = json!({ "client_name": "Batch", "grant_types": ["client_credentials"],
                          "token_endpoint_auth_method": "client_secret_post" });
    let both = json!({ "client_name": "Both", "redirect_uris": ["https://h.example/cb"],
                       "grant_types": ["authorization_code", "client_credentials"] });
    for body in [&machine, &both] {
        let r = post("open", None, body.clone()).await.unwrap();
        assert_eq!(r.status(), 400);
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"], "invalid_client_metadata");
        let why = e["error_description"].as_str().unwrap();
        assert!(
            why.contains("client_credentials") && why.contains("admin API"),
            "{why}"
        );
    }
    // Nor can a client registered for users add it through RFC 7592.
    let r = post(
        "open",
        None,
        json!({ "client_name": "Host", "redirect_uris": ["https://h.example/cb"] }),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    let host: Value = r.json().await.unwrap();
    let mut wider = host.clone();
    wider["grant_types"] = json!(["authorization_code", "client_credentials"]);
    let r = app
        .http
        .put(host["registration_client_uri"].as_str().unwrap())
        .bearer_auth(host["registration_access_token"].as_str().unwrap())
        .json(&wider)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "invalid_client_metadata"
    );
    let read: Value = app
        .http
        .get(host["registration_client_uri"].as_str().unwrap())
        .bearer_auth(host["registration_access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        read["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );

    // Holders of the initial access token are trusted with it.
    let r = post("gated", Some(INITIAL_ACCESS_TOKEN), machine)
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let batch: Value = r.json().await.unwrap();
    let cc = || client_credentials(&app, "gated", &batch);
    let (status, tokens) = cc().await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(
        initialize(&app, "gated", Some(&access(&tokens))).await.0,
        200
    );
    // Registered while registration was gated, asking once it is open (as a client registered
    // by anyone before this rule would): refused, while the admin API's clients keep it.
    let r = app
        .admin(Method::PATCH, "/tenants/gated")
        .json(&json!({ "auth": { "mode": "oauth", "registration": "open" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let (status, e) = cc().await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unauthorized_client")),
        "{e}"
    );
    let machine = admin_client(
        &app,
        "gated",
        json!({ "grant_types": ["client_credentials"],
                "token_endpoint_auth_method": "client_secret_post" }),
    )
    .await;
    let (status, tokens) = client_credentials(&app, "gated", &machine).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
}

/// Anyone may register a client, and each is a stored row: registrations are counted per client
/// address and per tenant in an hour. The address is the connection's unless it comes through a
/// trusted proxy; then the last address that proxy's `X-Forwarded-For` names.
#[actix_rt::test]
async fn registrations_are_limited_per_address_and_per_tenant() {
    let limits = |c: &mut mcp_harbor::config::Config| {
        c.auth.registrations_per_hour_per_address = 2;
        c.auth.registrations_per_hour = 3;
    };
    let public = json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" });
    let register_from = |app: &TestApp, tenant: &str, forwarded: &str| {
        registration(app, tenant, None, &public)
            .header("x-forwarded-for", forwarded)
            .send()
    };
    let refused = |r: reqwest::Response| async move {
        assert_eq!(r.status(), 429);
        let wait: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((3590..=3600).contains(&wait), "{wait}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"], "temporarily_unavailable");
    };

    // Directly connected: a header anyone can write changes nothing.
    let app = spawn_app_with(limits).await;
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
    for spoofed in ["198.51.100.1", "198.51.100.2"] {
        let r = register_from(&app, "acme", spoofed).await.unwrap();
        assert_eq!(r.status(), 201);
    }
    refused(register_from(&app, "acme", "198.51.100.3").await.unwrap()).await;
    // Counted per tenant.
    let r = register_from(&app, "beta", "198.51.100.1").await.unwrap();
    assert_eq!(r.status(), 201);
    // Holders of an initial access token are not counted.
    create_gated(&app).await;
    for _ in 0..4 {
        let r = registration(&app, "gated", Some(INITIAL_ACCESS_TOKEN), &public)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }

    // Behind a trusted proxy (loopback here): the address it appended counts, what the client
    // wrote left of it does not; and the tenant as a whole takes 3.
    let app = spawn_app_with(|c| {
        limits(c);
        c.server.trusted_proxies = vec!["127.0.0.0/8".into()];
    })
    .await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    for forwarded in ["203.0.113.1", "198.51.100.7, 203.0.113.1"] {
        let r = register_from(&app, "acme", forwarded).await.unwrap();
        assert_eq!(r.status(), 201);
    }
    refused(
        register_from(&app, "acme", "198.51.100.8, 203.0.113.1")
            .await
            .unwrap(),
    )
    .await;
    let r = register_from(&app, "acme", "203.0.113.2").await.unwrap();
    assert_eq!(r.status(), 201);
    refused(register_from(&app, "acme", "203.0.113.3").await.unwrap()).await;
    // An IPv6 host counts as its /64 (it is commonly given the whole of it).
    app.tenant("beta")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    for forwarded in ["2001:db8::1", "2001:db8::ffff:2"] {
        let r = register_from(&app, "beta", forwarded).await.unwrap();
        assert_eq!(r.status(), 201);
    }
    refused(register_from(&app, "beta", "2001:db8::3").await.unwrap()).await;
    let r = register_from(&app, "beta", "2001:db8:0:1::1")
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// A client anyone registered and nobody used is deleted after `auth.unused_client_ttl_secs`
/// (the sweep is run here with a cutoff in the future); one that was issued a token, one
/// registered with the initial access token, and one the admin API registered are kept.
#[actix_rt::test]
async fn clients_anyone_registered_and_nobody_used_are_swept() {
    use mcp_harbor::store::{OAuthStore, SqlStore};
    let app = oauth_app().await;
    create_gated(&app).await;
    let unused = public_client(&app, "acme").await;
    let (used, tokens) = tokens_for(&app, "acme", "alice").await;
    let public = json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" });
    let id = |client: Value| client["client_id"].as_str().unwrap().to_string();
    let r = registration(&app, "gated", Some(INITIAL_ACCESS_TOKEN), &public)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let vouched = id(r.json().await.unwrap());
    let admin = id(admin_client(&app, "acme", public).await);
    // A user granted this one access; its code is not exchanged yet when the sweep runs.
    let authorized = public_client(&app, "acme").await;
    let p = pkce();
    let code = code_for(&app, "acme", &authorized, &p, "alice").await;

    let dir = app.data_dir.as_ref().unwrap().path();
    let store = SqlStore::connect(&format!("sqlite://{}/mcp-harbor.db", dir.display()), 1)
        .await
        .unwrap();
    let later = mcp_harbor::store::now_millis() + 1000;
    assert_eq!(store.sweep_oauth(0, 0, later).await.unwrap(), 1);
    assert_eq!(store.get_client("acme", &unused).await.unwrap(), None);
    let kept = [
        ("acme", &used),
        ("gated", &vouched),
        ("acme", &admin),
        ("acme", &authorized),
    ];
    for (tenant, id) in kept {
        assert!(
            store.get_client(tenant, id).await.unwrap().is_some(),
            "{id}"
        );
    }
    // Over HTTP: the swept client is unknown, the used one goes on refreshing.
    let (status, _, html) =
        login_page(&app, "acme", &authorize_params(&unused, &pkce(), REDIRECT)).await;
    assert_eq!(status, 400);
    assert!(html.contains("Unknown client"));
    let (status, e) = refresh(
        &app,
        "acme",
        &used,
        tokens["refresh_token"].as_str().unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{e}");
    let (status, tokens) = exchange(&app, "acme", &authorized, &code, &p).await;
    assert_eq!(status, 200, "{tokens}");
}

#[actix_rt::test]
async fn key_rotation_keeps_unexpired_tokens_valid() {
    let app = oauth_app().await;
    let (_, before) = tokens_for(&app, "acme", "alice").await;
    let r = app
        .admin(Method::POST, "/tenants/acme/signing-keys")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let new_kid = r.json::<Value>().await.unwrap()["kid"]
        .as_str()
        .unwrap()
        .to_string();
    let keys: Value = app
        .admin(Method::GET, "/tenants/acme/signing-keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys["items"].as_array().unwrap().len(), 2);
    let jwks: Value = app
        .http
        .get(format!("{}/oauth/jwks", issuer(&app, "acme")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        jwks["keys"].as_array().unwrap().len(),
        2,
        "the retired key is still published"
    );
    // The old token still works; new tokens carry the new kid.
    assert_eq!(
        initialize(&app, "acme", Some(&access(&before))).await.0,
        200
    );
    let (_, after) = tokens_for(&app, "acme", "alice").await;
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access(&after).split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["kid"], new_kid);
    assert_eq!(initialize(&app, "acme", Some(&access(&after))).await.0, 200);
}

/// A local HTTP server answering fixed JSON documents by path.
async fn document_server(docs: Arc<Mutex<HashMap<String, Value>>>) -> String {
    logged_document_server(docs).await.0
}

/// [`document_server`], and the paths it was asked for.
async fn logged_document_server(
    docs: Arc<Mutex<HashMap<String, Value>>>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let server = HttpServer::new(move || {
        let docs = docs.clone();
        let log = log.clone();
        App::new().default_service(web::to(move |req: actix_web::HttpRequest| {
            log.lock().push(req.path().to_string());
            let doc = docs.lock().get(req.path()).cloned();
            async move {
                match doc {
                    // A document whose name says so is served with `Cache-Control: no-store`.
                    Some(d) if req.path().contains("no-store") => HttpResponse::Ok()
                        .insert_header(("cache-control", "no-store"))
                        .json(d),
                    Some(d) => HttpResponse::Ok().json(d),
                    None => HttpResponse::NotFound().finish(),
                }
            }
        }))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    (format!("http://127.0.0.1:{port}"), asked)
}

#[actix_rt::test]
async fn client_id_metadata_documents_are_fetched_and_checked() {
    let app = oauth_app().await;
    let docs = Arc::new(Mutex::new(HashMap::new()));
    let base = document_server(docs.clone()).await;
    let client_id = format!("{base}/client.json");
    docs.lock().insert(
        "/client.json".into(),
        json!({ "client_id": client_id, "client_name": "Metadata Host",
        "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" }),
    );
    docs.lock().insert(
        "/liar.json".into(),
        json!({ "client_id": "https://someone.else/client.json",
        "redirect_uris": [REDIRECT] }),
    );
    let p = pkce();
    let (status, _, html) =
        login_page(&app, "acme", &authorize_params(&client_id, &p, REDIRECT)).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Metadata Host"));
    let code = code_for(&app, "acme", &client_id, &p, "alice").await;
    let (status, tokens) = exchange(&app, "acme", &client_id, &code, &p).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(
        initialize(&app, "acme", Some(&access(&tokens))).await.0,
        200
    );
    let nameless = format!("{base}/nameless.json");
    docs.lock().insert(
        "/nameless.json".into(),
        json!({ "client_id": nameless, "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none" }),
    );
    // A document whose client_id is not its URL, that lacks a required field (client_name), or
    // that does not exist, is refused on the page.
    for bad in [
        format!("{base}/liar.json"),
        nameless,
        format!("{base}/missing.json"),
    ] {
        let (status, _, html) =
            login_page(&app, "acme", &authorize_params(&bad, &p, REDIRECT)).await;
        assert_eq!(status, 400, "{bad}: {html}");
    }
    // Documents are cached as their responses allow: one served no-store is read again.
    for (path, cached) in [("/no-store.json", false), ("/cacheable.json", true)] {
        let id = format!("{base}{path}");
        let doc = |name: &str| {
            json!({ "client_id": id, "client_name": name, "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none" })
        };
        docs.lock().insert(path.into(), doc("First Name"));
        let (_, _, html) = login_page(&app, "acme", &authorize_params(&id, &p, REDIRECT)).await;
        assert!(html.contains("First Name"), "{html}");
        docs.lock().insert(path.into(), doc("Second Name"));
        let (_, _, html) = login_page(&app, "acme", &authorize_params(&id, &p, REDIRECT)).await;
        let shown = if cached { "First Name" } else { "Second Name" };
        assert!(html.contains(shown), "{path}: {html}");
    }
    // A redirect URI the document does not list is refused too.
    let elsewhere = "https://elsewhere.example/cb";
    let (status, _, html) =
        login_page(&app, "acme", &authorize_params(&client_id, &p, elsewhere)).await;
    assert_eq!(status, 400, "{html}");
    assert!(
        !html.contains("Metadata Host"),
        "no consent for a foreign redirect"
    );
}

/// An ES256 key of a test issuer: (JWK, encoding key).
fn issuer_key(kid: &str) -> (Value, jsonwebtoken::EncodingKey) {
    use p256::pkcs8::EncodePrivateKey;
    let key = p256::ecdsa::SigningKey::from_slice(&rand::random::<[u8; 32]>()).unwrap();
    let point = key.verifying_key().to_encoded_point(false);
    let jwk = json!({ "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()), "y": URL_SAFE_NO_PAD.encode(point.y().unwrap()) });
    let der = key.to_pkcs8_der().unwrap();
    (jwk, jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes()))
}

fn external_token(key: &jsonwebtoken::EncodingKey, kid: &str, claims: Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

/// A 2026-07-28 request on `tenant` with a bearer token: `_meta` (form and URL elicitation)
/// and the headers the revision requires (`Mcp-Name` from `params.name`).
async fn modern_post(
    app: &TestApp,
    tenant: &str,
    token: &str,
    id: i64,
    method: &str,
    mut params: Value,
) -> reqwest::Response {
    params["_meta"] = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {}, "url": {} } } });
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let mut r = app
        .http
        .post(app.mcp_url(tenant))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = body["params"]["name"].as_str() {
        r = r.header("mcp-name", name);
    }
    r.body(body.to_string()).send().await.unwrap()
}

/// A 2026-07-28 tools/call on `tenant` with a bearer token: (status, answer).
async fn modern_call(
    app: &TestApp,
    tenant: &str,
    token: &str,
    id: i64,
    params: Value,
) -> (u16, Value) {
    let resp = modern_post(app, tenant, token, id, "tools/call", params).await;
    let status = resp.status().as_u16();
    (status, crate::helpers::read_answer(resp, id).await.0)
}

/// A multi round-trip request belongs to whoever it was issued to: another user of the tenant
/// presenting its requestState (and a right answer) is refused, and leaves the round to its
/// own user, whose retry completes.
#[actix_rt::test]
async fn a_request_state_is_bound_to_its_principal() {
    let app = oauth_app().await;
    let (_, alice) = tokens_for(&app, "acme", "alice").await;
    let (_, bob) = tokens_for(&app, "acme", "bob").await;
    let args = json!({ "name": "test_elicitation", "arguments": { "message": "Who are you?" } });
    let (status, first) = modern_call(&app, "acme", &access(&alice), 1, args.clone()).await;
    assert_eq!(status, 200, "{first}");
    let first = &first["result"];
    assert_eq!(first["resultType"], "input_required", "{first}");
    let key = crate::helpers::first_input_key(first);
    let mut retry = args.clone();
    retry["requestState"] = first["requestState"].clone();
    retry["inputResponses"] = json!({ key.clone(): { "action": "accept",
        "content": { "username": "ada", "email": "ada@example.com" } } });
    let (status, refused) = modern_call(&app, "acme", &access(&bob), 2, retry.clone()).await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another client or user"),
        "{refused}"
    );
    let (status, done) = modern_call(&app, "acme", &access(&alice), 3, retry).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
}

/// A `subscriptions/listen` stream carries its access token's authority: it ends (cancelled,
/// then its closing result) when the token expires, not on keep-alives forever.
#[actix_rt::test]
async fn a_listen_stream_ends_when_its_token_expires() {
    let app = spawn_app_with(|c| c.auth.access_token_ttl_secs = 2).await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    let (_, tokens) = tokens_for(&app, "acme", "alice").await;
    let listen = json!({ "notifications": { "toolsListChanged": true } });
    let r = modern_post(
        &app,
        "acme",
        &access(&tokens),
        9,
        "subscriptions/listen",
        listen,
    )
    .await;
    assert_eq!(r.status(), 200);
    let mut sse = crate::helpers::SseReader::new(r);
    let within = std::time::Duration::from_secs(6);
    let ack = sse.next_event(within).await.unwrap().json().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    // Keep-alives are comments; the next message is the end.
    let cancelled = sse.next_event(within).await.expect("the stream ends");
    let cancelled = cancelled.json().unwrap();
    assert_eq!(
        cancelled["method"], "notifications/cancelled",
        "{cancelled}"
    );
    assert_eq!(cancelled["params"]["requestId"], 9);
    assert!(cancelled["params"]["reason"]
        .as_str()
        .unwrap()
        .contains("token expired"));
    let end = sse.next_event(within).await.unwrap().json().unwrap();
    assert_eq!(end["id"], 9);
    assert_eq!(end["result"]["resultType"], "complete");
}

/// An external issuer is asked nothing for a token no key could make valid, and one that just
/// failed is not asked again by the next request (each would wait on a provider that is down).
#[actix_rt::test]
async fn external_issuer_fetches_are_spared() {
    let app = spawn_app().await;
    let docs = Arc::new(Mutex::new(HashMap::new()));
    let (base, asked) = logged_document_server(docs.clone()).await;
    // The issuer publishes no metadata (every well-known location answers 404).
    let iss = format!("{base}/realms/down");
    app.tenant("ext")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "external", "issuer": iss, "audience": "mcp-ext" }))
        .create()
        .await;
    asked.lock().clear();
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({ "iss": iss, "aud": "mcp-ext", "sub": "u-1", "exp": 4_000_000_000u64 }),
        &jsonwebtoken::EncodingKey::from_secret(b"k"),
    )
    .unwrap();
    for token in ["not-a-jwt", "e30.e30.", hs.as_str()] {
        assert_eq!(initialize(&app, "ext", Some(token)).await.0, 401, "{token}");
    }
    assert!(asked.lock().is_empty(), "asked {:?}", asked.lock());
    let (_, key) = issuer_key("k1");
    let token = external_token(
        &key,
        "k1",
        json!({ "iss": iss, "aud": "mcp-ext", "sub": "u-1", "exp": 4_000_000_000u64 }),
    );
    let first = initialize(&app, "ext", Some(&token)).await.0;
    assert_ne!(first, 200);
    let asked_once = asked.lock().len();
    assert!(asked_once >= 1, "the issuer's metadata was looked for");
    assert_eq!(initialize(&app, "ext", Some(&token)).await.0, first);
    assert_eq!(asked.lock().len(), asked_once, "not asked again at once");
}

#[actix_rt::test]
async fn external_mode_accepts_the_tenants_own_issuer_tokens() {
    let app = spawn_app().await;
    let docs = Arc::new(Mutex::new(HashMap::new()));
    let base = document_server(docs.clone()).await;
    let iss = format!("{base}/realms/acme");
    let (jwk, key) = issuer_key("k1");
    docs.lock().insert(
        "/realms/acme/.well-known/openid-configuration".into(),
        json!({ "issuer": iss, "jwks_uri": format!("{base}/realms/acme/certs") }),
    );
    docs.lock()
        .insert("/realms/acme/certs".into(), json!({ "keys": [jwk] }));
    app.tenant("ext")
        .catalogs(json!(["reference", "demo"]))
        .auth(
            json!({ "mode": "external", "issuer": iss, "audience": "mcp-ext",
        "required_scopes": ["tools"] }),
        )
        .create()
        .await;
    let prm: Value = app
        .http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/t/ext/mcp",
            app.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["authorization_servers"], json!([iss]));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = |aud: &str, iss: &str, scope: &str, exp: i64| {
        json!({ "iss": iss, "aud": aud, "sub": "u-1",
        "azp": "ext-client", "scope": scope, "exp": exp, "iat": now })
    };
    let good = external_token(
        &key,
        "k1",
        claims("mcp-ext", &iss, "tools profile", now + 300),
    );
    assert_eq!(initialize(&app, "ext", Some(&good)).await.0, 200);
    for (token, status) in [
        (
            external_token(&key, "k1", claims("other-aud", &iss, "tools", now + 300)),
            401,
        ),
        (
            external_token(
                &key,
                "k1",
                claims("mcp-ext", "https://evil.example", "tools", now + 300),
            ),
            401,
        ),
        (
            external_token(&key, "k1", claims("mcp-ext", &iss, "tools", now - 120)),
            401,
        ),
        (
            external_token(&key, "k9", claims("mcp-ext", &iss, "tools", now + 300)),
            401,
        ),
        (
            external_token(
                &issuer_key("k1").1,
                "k1",
                claims("mcp-ext", &iss, "tools", now + 300),
            ),
            401,
        ),
        (
            external_token(&key, "k1", claims("mcp-ext", &iss, "profile", now + 300)),
            403,
        ),
    ] {
        assert_eq!(initialize(&app, "ext", Some(&token)).await.0, status);
    }
    // An HS256 token "signed" with the public key is refused (no algorithm confusion).
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims("mcp-ext", &iss, "tools", now + 300),
        &jsonwebtoken::EncodingKey::from_secret(b"k"),
    )
    .unwrap();
    assert_eq!(initialize(&app, "ext", Some(&hs)).await.0, 401);
    // A token not valid yet (`nbf` ten minutes ahead, beyond the allowed clock skew) is
    // refused, and says why; the same token without `nbf` is taken.
    let mut early = claims("mcp-ext", &iss, "tools", now + 900);
    early["nbf"] = json!(now + 600);
    let (status, _, challenge) =
        initialize(&app, "ext", Some(&external_token(&key, "k1", early))).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap_or_default().contains("not valid yet"));
    let mut skewed = claims("mcp-ext", &iss, "tools", now + 900);
    skewed["nbf"] = json!(now + 2);
    assert_eq!(
        initialize(&app, "ext", Some(&external_token(&key, "k1", skewed)))
            .await
            .0,
        200
    );
    // The platform's own authorization server is not offered for an external tenant.
    let r = app
        .http
        .get(format!(
            "{}/.well-known/oauth-authorization-server/t/ext",
            app.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[actix_rt::test]
async fn nothing_of_one_tenant_works_at_another() {
    let app = oauth_app().await;
    let (acme_client, acme_tokens) = tokens_for(&app, "acme", "alice").await;
    let p = pkce();
    // A client of acme is unknown at beta (page and token endpoint).
    let (status, _, html) =
        login_page(&app, "beta", &authorize_params(&acme_client, &p, REDIRECT)).await;
    assert_eq!(status, 400);
    assert!(html.contains("Unknown client"));
    // acme's code and refresh token mean nothing at beta, even with a beta client.
    let acme_code = code_for(&app, "acme", &acme_client, &p, "alice").await;
    let beta_client = public_client(&app, "beta").await;
    let (status, e) = exchange(&app, "beta", &beta_client, &acme_code, &p).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let (status, _) = exchange(&app, "beta", &acme_client, &acme_code, &p).await;
    assert_eq!(status, 401, "unknown client at beta");
    let (status, e) = refresh(
        &app,
        "beta",
        &beta_client,
        acme_tokens["refresh_token"].as_str().unwrap(),
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // acme's user cannot sign in at beta.
    let r = sign_in(
        &app,
        "beta",
        &authorize_params(&beta_client, &p, REDIRECT),
        "alice",
        PASSWORD,
        "allow",
    )
    .await;
    assert_eq!(r.status(), 401);
    // acme's token is refused at beta; acme's session is unknown at beta.
    let (status, session, _) = initialize(&app, "acme", Some(&access(&acme_tokens))).await;
    assert_eq!(status, 200);
    assert_eq!(
        initialize(&app, "beta", Some(&access(&acme_tokens)))
            .await
            .0,
        401
    );
    let (_, beta_tokens) = tokens_for(&app, "beta", "carol").await;
    let r = call_echo(&app, "beta", &access(&beta_tokens), &session.unwrap()).await;
    assert_eq!(r.status(), 404);
    // Keys are per tenant.
    let kid = |t: &Value| -> Value {
        serde_json::from_slice::<Value>(
            &URL_SAFE_NO_PAD
                .decode(access(t).split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap()["kid"]
            .clone()
    };
    assert_ne!(kid(&acme_tokens), kid(&beta_tokens));
    // The admin API keeps users and clients per tenant.
    let r = app
        .admin(Method::GET, "/tenants/beta/users/alice")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = app
        .admin(
            Method::GET,
            &format!("/tenants/beta/oauth-clients/{acme_client}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[actix_rt::test]
async fn failed_sign_ins_are_rate_limited() {
    let app = spawn_app_with(|c| c.auth.login_attempts_per_minute = 3).await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    let client_id = public_client(&app, "acme").await;
    let p = pkce();
    let params = authorize_params(&client_id, &p, REDIRECT);
    for _ in 0..3 {
        assert_eq!(
            sign_in(&app, "acme", &params, "alice", "nope nope", "allow")
                .await
                .status(),
            401
        );
    }
    // Even the right password waits now.
    assert_eq!(
        sign_in(&app, "acme", &params, "alice", PASSWORD, "allow")
            .await
            .status(),
        429
    );
}

/// Replicas share one count of failed sign-ins (the cluster's quotas): guesses spread over
/// two replicas get no more tries than against one.
#[actix_rt::test]
async fn failed_sign_ins_are_counted_across_replicas() {
    let Some((apps, _db)) =
        crate::helpers::shared_replicas(&["a", "b"], |c| c.auth.login_attempts_per_minute = 3)
            .await
    else {
        return;
    };
    let (a, b) = (&apps[0], &apps[1]);
    a.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(a, "acme", "alice").await;
    let client_id = public_client(a, "acme").await;
    let params = authorize_params(&client_id, &pkce(), REDIRECT);
    for app in [a, b, a] {
        let r = sign_in(app, "acme", &params, "alice", "nope nope", "allow").await;
        assert_eq!(r.status(), 401);
    }
    for app in [b, a] {
        let r = sign_in(app, "acme", &params, "alice", PASSWORD, "allow").await;
        assert_eq!(r.status(), 429, "the limit holds on every replica");
    }
}

/// While the shared counters are unreachable (Redis hangs), a replica counts failed sign-ins on
/// its own: still limited, not an error, and not waiting for Redis (3 s each) on every attempt:
/// after one failure it is left alone for a while.
#[actix_rt::test]
async fn failed_sign_ins_are_limited_on_the_replica_while_redis_is_down() {
    use crate::helpers::redis_proxy::Mode;
    let Some((app, proxy)) =
        crate::helpers::app_behind_redis_proxy(|c| c.auth.login_attempts_per_minute = 3).await
    else {
        return;
    };
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    let client_id = public_client(&app, "acme").await;
    let params = authorize_params(&client_id, &pkce(), REDIRECT);
    proxy.set(Mode::Hang);
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let r = sign_in(&app, "acme", &params, "alice", "nope nope", "allow").await;
        assert_eq!(r.status(), 401);
    }
    let r = sign_in(&app, "acme", &params, "alice", PASSWORD, "allow").await;
    assert_eq!(r.status(), 429);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
}

#[actix_rt::test]
async fn sign_in_attempts_are_counted_before_the_password_is_checked() {
    let app = spawn_app_with(|c| c.auth.login_attempts_per_minute = 3).await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    let client_id = public_client(&app, "acme").await;
    let params = authorize_params(&client_id, &pkce(), REDIRECT);
    // Sign-ins that succeed do not count against their address (more than the limit here).
    for user in ["carl", "dana", "erin", "fay"] {
        create_user(&app, "acme", user).await;
        let r = sign_in(&app, "acme", &params, user, PASSWORD, "allow").await;
        assert_eq!(r.status(), 303, "{user}");
    }
    // Guesses sent at once are counted before any is checked: no more than the limit is tried.
    create_user(&app, "acme", "bob").await;
    let guesses = (0..8).map(|_| sign_in(&app, "acme", &params, "bob", "nope nope", "allow"));
    let statuses: Vec<u16> = futures_util::future::join_all(guesses)
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        3,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
}

#[actix_rt::test]
async fn tenants_default_to_oauth_and_the_admin_api_manages_users() {
    let app = spawn_app_with(|c| c.auth.default_mode = "oauth".into()).await;
    let r = app
        .admin(Method::POST, "/tenants")
        .json(&json!({ "slug": "fresh" }))
        .send()
        .await
        .unwrap();
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["auth"]["mode"], "oauth");
    assert_eq!(initialize(&app, "fresh", None).await.0, 401);
    // Users: created (password never shown), conflicts, validation, update, delete.
    let r = app
        .admin(Method::POST, "/tenants/fresh/users")
        .json(&json!({ "username": "dana", "password": PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body = r.text().await.unwrap();
    assert!(
        !body.contains(PASSWORD) && !body.contains("argon2"),
        "{body}"
    );
    let r = app
        .admin(Method::POST, "/tenants/fresh/users")
        .json(&json!({ "username": "dana", "password": PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = app
        .admin(Method::POST, "/tenants/fresh/users")
        .json(&json!({ "username": "eve", "password": "short" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["field"],
        "password"
    );
    let r = app
        .admin(Method::PATCH, "/tenants/fresh/users/dana")
        .json(&json!({ "display_name": "Dana S" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let list: Value = app
        .admin(Method::GET, "/tenants/fresh/users")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"][0]["display_name"], "Dana S");
    assert_eq!(
        app.admin(Method::DELETE, "/tenants/fresh/users/dana")
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        app.admin(Method::DELETE, "/tenants/fresh/users/dana")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // Switching the tenant to open takes effect at once; token registration needs its token.
    let r = app
        .admin(Method::PATCH, "/tenants/fresh")
        .json(&json!({ "auth": { "mode": "none" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(initialize(&app, "fresh", None).await.0, 200);
    let r = app
        .admin(Method::PATCH, "/tenants/fresh")
        .json(&json!({ "auth": { "mode": "oauth", "registration": "token" } }))
        .send()
        .await
        .unwrap();
    // A valid request that this tenant's state (no token to keep) cannot take: 409.
    assert_eq!(r.status(), 409);
    let error = r.json::<Value>().await.unwrap()["error"].clone();
    assert_eq!(error["code"], "conflict");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .starts_with("auth.initial_access_token is required"));
}

/// Follows a login page at `url` (a full authorize URL) as a browser: (cookie, hidden inputs).
async fn open_page(url: &str) -> (String, Vec<(String, String)>, String) {
    let r = browser().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("harbor_csrf="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .expect("CSRF cookie");
    let html = r.text().await.unwrap();
    (cookie, hidden_inputs(&html), html)
}

fn form_action(url: &str) -> String {
    url.split('?').next().unwrap().to_string()
}

#[actix_rt::test]
async fn federated_sign_in_through_the_tenants_openid_provider() {
    // Tenant `idp` plays the tenant's own OpenID provider; `fed` signs its users in through it.
    let app = spawn_app().await;
    app.tenant("idp")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "idp", "uma").await;
    let callback = format!("{}/t/fed/oauth/callback", app.base);
    let upstream = admin_client(
        &app,
        "idp",
        json!({ "client_name": "Harbor (fed)", "redirect_uris": [callback],
                "token_endpoint_auth_method": "client_secret_post" }),
    )
    .await;
    app.tenant("fed")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth", "login": "oidc", "oidc": {
        "issuer": issuer(&app, "idp"), "client_id": upstream["client_id"],
        "client_secret": upstream["client_secret"] } }))
        .create()
        .await;
    let t: Value = app
        .admin(Method::GET, "/tenants/fed")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["auth"]["oidc"]["client_secret_set"], true);
    assert!(
        !t.to_string()
            .contains(upstream["client_secret"].as_str().unwrap()),
        "secret never shown"
    );

    let client_id = public_client(&app, "fed").await;
    let p = pkce();
    let params = authorize_params(&client_id, &p, REDIRECT);
    let (status, fed_cookie, html) = login_page(&app, "fed", &params).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("sign in with 127.0.0.1") && !html.contains("type=\"password\""),
        "{html}"
    );
    let fed_cookie = fed_cookie.unwrap();
    let mut form = hidden_inputs(&html);
    form.push(("decision".into(), "allow".into()));
    let r = browser()
        .post(format!("{}/oauth/authorize", issuer(&app, "fed")))
        .header("cookie", &fed_cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let to_provider = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        to_provider.starts_with(&format!("{}/oauth/authorize?", issuer(&app, "idp"))),
        "{to_provider}"
    );
    let upstream_q: HashMap<String, String> = url::Url::parse(&to_provider)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(upstream_q["code_challenge_method"], "S256");
    assert!(upstream_q["nonce"].len() > 20 && upstream_q["scope"].contains("openid"));

    // At the provider: uma signs in and is sent back to fed's callback.
    let (idp_cookie, mut idp_form, _) = open_page(&to_provider).await;
    idp_form.extend([
        ("username".into(), "uma".into()),
        ("password".into(), PASSWORD.into()),
        ("decision".into(), "allow".into()),
    ]);
    let r = browser()
        .post(form_action(&to_provider))
        .header("cookie", idp_cookie)
        .form(&idp_form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let back = r.headers()["location"].to_str().unwrap().to_string();
    assert!(back.starts_with(&callback), "{back}");

    // The callback is bound to the browser that started, and to its sealed state.
    let r = browser().get(&back).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let tampered = back.replace("state=v1.", "state=v1.x");
    let r = browser()
        .get(&tampered)
        .header("cookie", &fed_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = browser()
        .get(&back)
        .header("cookie", &fed_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let q = location_query(&r);
    assert_eq!(q["state"], "st-123");
    assert_eq!(q["iss"], issuer(&app, "fed"));
    let (status, tokens) = exchange(&app, "fed", &client_id, &q["code"], &p).await;
    assert_eq!(status, 200, "{tokens}");
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access(&tokens).split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "uma");
    assert_eq!(claims["name"], "UMA");
    assert_eq!(claims["iss"], issuer(&app, "fed"));
    assert_eq!(initialize(&app, "fed", Some(&access(&tokens))).await.0, 200);
    // The provider's code was single use: replaying the callback fails.
    let r = browser()
        .get(&back)
        .header("cookie", &fed_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
}

/// A webhook endpoint on loopback answering each call (its JSON body) with `answer`'s value.
fn hook_server(answer: impl Fn(&Value) -> Value + Clone + Send + 'static) -> String {
    let server = HttpServer::new(move || {
        let answer = answer.clone();
        App::new().default_service(web::to(move |body: web::Bytes| {
            let reply = answer(&serde_json::from_slice(&body).unwrap_or(Value::Null));
            async move { HttpResponse::Ok().json(reply) }
        }))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let hook = format!("http://127.0.0.1:{}/hook", server.addrs()[0].port());
    actix_rt::spawn(server.run());
    hook
}

/// Publishes the webhook tool `name` calling `hook` on `tenant`.
async fn publish_hook(app: &TestApp, tenant: &str, name: &str, hook: &str) {
    let r = app
        .admin(Method::POST, &format!("/tenants/{tenant}/tools"))
        .json(&json!({ "name": name, "description": "a webhook tool",
            "input_schema": { "type": "object" },
            "webhook": { "url": hook, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "timeout_ms": 3000 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// On a tenant whose users sign in with a password, the secret page of a URL-mode elicitation
/// asks for the user's password and takes only the user it was made for: another user of the
/// tenant is refused (403), the right one's secret reaches the tool.
#[actix_rt::test]
async fn the_secret_page_takes_only_the_user_it_was_made_for() {
    let app = oauth_app().await;
    let hook = hook_server(|call| {
        if call["round"] == 1 {
            json!({ "input_request": { "type": "secret", "name": "api_key",
                "message": "Paste your API key." }, "state": {} })
        } else {
            let secret = call["input"]["secret"].as_str().unwrap_or_default();
            json!({ "content": [{ "type": "text", "text": format!("got {} characters", secret.len()) }] })
        }
    });
    publish_hook(&app, "acme", "connect", &hook).await;
    let (_, alice) = tokens_for(&app, "acme", "alice").await;
    let args = json!({ "name": "connect", "arguments": {} });
    let (status, first) = modern_call(&app, "acme", &access(&alice), 1, args.clone()).await;
    assert_eq!(status, 200, "{first}");
    let first = &first["result"];
    assert_eq!(first["resultType"], "input_required", "{first}");
    let (key, asked) = first["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let url = asked["params"]["url"].as_str().unwrap();
    let (csrf, cookie, html) = crate::helpers::open_elicitation_page(&app, url).await;
    assert!(
        html.contains("id=\"username\"") && html.contains("Paste your API key."),
        "{html}"
    );
    let submit = |user: &'static str, password: &'static str| {
        let fields = [
            ("csrf", csrf.as_str()),
            ("username", user),
            ("password", password),
            ("secret", "sk-live-0123456789"),
            ("decision", "submit"),
        ];
        let (app, url, cookie) = (&app, url, cookie.as_str());
        async move { crate::helpers::post_form(app, url, cookie, &fields).await }
    };
    let wrong_password = submit("alice", "not her password").await;
    assert_eq!(wrong_password.status(), 401);
    let bob = submit("bob", PASSWORD).await;
    assert_eq!(bob.status(), 403);
    assert!(bob.text().await.unwrap().contains("made for another user"));
    let alice_page = submit("alice", PASSWORD).await;
    assert_eq!(alice_page.status(), 200);
    assert!(alice_page
        .text()
        .await
        .unwrap()
        .contains("The secret was saved"));
    let mut retry = args;
    retry["requestState"] = first["requestState"].clone();
    retry["inputResponses"] = json!({ key.clone(): { "action": "accept" } });
    let (status, done) = modern_call(&app, "acme", &access(&alice), 2, retry).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "got 18 characters",
        "{done}"
    );
}

#[actix_rt::test]
async fn webhook_tools_receive_the_principal() {
    let app = oauth_app().await;
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = seen.clone();
    let hook = hook_server(move |call| {
        record.lock().push(call.clone());
        json!({ "content": [{ "type": "text", "text": "ok" }] })
    });
    publish_hook(&app, "acme", "whoami", &hook).await;
    let (client_id, tokens) = tokens_for(&app, "acme", "alice").await;
    let (_, session, _) = initialize(&app, "acme", Some(&access(&tokens))).await;
    let r = app
        .post(
            "acme",
            session.as_deref(),
            &json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": { "name": "whoami", "arguments": {} } }),
        )
        .bearer_auth(access(&tokens))
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer = r.text().await.unwrap();
    assert!(answer.contains("\"ok\""), "{answer}");
    let call = seen.lock().last().cloned().expect("the webhook was called");
    assert_eq!(call["principal"]["subject"], "alice");
    assert_eq!(call["principal"]["client_id"], client_id);
    assert_eq!(call["principal"]["issuer"], issuer(&app, "acme"));
    assert_eq!(call["principal"]["scopes"], json!(["mcp"]));
    assert!(
        !call.to_string().contains(&access(&tokens)),
        "the token itself is not passed on"
    );
}

#[actix_rt::test]
async fn the_2025_03_26_root_endpoints_serve_a_host_dedicated_to_a_tenant() {
    let app = spawn_app_with(|c| {
        c.auth
            .tenant_hosts
            .insert("localhost".into(), "acme".into());
    })
    .await;
    app.tenant("acme")
        .catalogs(json!(["reference", "demo"]))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    create_user(&app, "acme", "alice").await;
    let dedicated = format!("http://localhost:{}", app.port);
    // On the shared host the root names no tenant.
    let r = app
        .http
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            app.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Nor do its default paths, whatever the method.
    for (method, path) in [("GET", "/token"), ("POST", "/token"), ("PUT", "/register")] {
        let r = send(&app, method, &format!("{}{path}", app.base)).await;
        assert_eq!(r.status(), 404, "{method} {path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "not_found", "{method} {path}");
    }
    // On the dedicated host they are endpoints: a wrong method is 405 with `Allow`, and a
    // browser's preflight is granted.
    for (method, path, allow) in [
        ("GET", "/token", "POST, OPTIONS"),
        ("GET", "/register", "POST, OPTIONS"),
        ("DELETE", "/authorize", "GET, POST, OPTIONS"),
    ] {
        let r = send(&app, method, &format!("{dedicated}{path}")).await;
        assert_eq!(r.status(), 405, "{method} {path}");
        assert_eq!(r.headers()["allow"], allow, "{method} {path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{method} {path}");
    }
    for path in ["/token", "/register"] {
        let r = app
            .http
            .request(reqwest::Method::OPTIONS, format!("{dedicated}{path}"))
            .header("origin", "http://localhost:6274")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "{path}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
        assert!(r.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST"));
    }
    let r = app
        .http
        .get(format!(
            "{dedicated}/.well-known/oauth-authorization-server"
        ))
        .header("mcp-protocol-version", "2025-03-26")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m: Value = r.json().await.unwrap();
    assert!(m["token_endpoint"]
        .as_str()
        .unwrap()
        .ends_with("/t/acme/oauth/token"));
    // The default paths: register, authorize (page and sign-in), token.
    let r = app
        .http
        .post(format!("{dedicated}/register"))
        .header("origin", "http://localhost:6274")
        .json(&json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    let client_id = r.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_string();
    let p = pkce();
    let mut url = url::Url::parse(&format!("{dedicated}/authorize")).unwrap();
    url.query_pairs_mut()
        .extend_pairs(authorize_params(&client_id, &p, REDIRECT));
    let (cookie, mut form, _) = open_page(url.as_str()).await;
    form.extend([
        ("username".into(), "alice".into()),
        ("password".into(), PASSWORD.into()),
        ("decision".into(), "allow".into()),
    ]);
    let r = browser()
        .post(format!("{dedicated}/authorize"))
        .header("cookie", cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let code = location_query(&r)["code"].clone();
    let r = app
        .http
        .post(format!("{dedicated}/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("client_id", &client_id),
            ("code_verifier", &p.verifier),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let tokens: Value = r.json().await.unwrap();
    let r = app
        .http
        .post(format!("{dedicated}/t/acme/mcp"))
        .bearer_auth(access(&tokens))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize_body("2025-03-26", json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[actix_rt::test]
async fn a_verified_token_is_checked_again_when_the_tenants_auth_changes() {
    let app = oauth_app().await;
    let (_, tokens) = tokens_for(&app, "acme", "alice").await;
    assert_eq!(
        initialize(&app, "acme", Some(&access(&tokens))).await.0,
        200
    );
    assert_eq!(
        initialize(&app, "acme", Some(&access(&tokens))).await.0,
        200
    );
    // The tenant now trusts another issuer only: the platform's own token is refused at once.
    let docs = Arc::new(Mutex::new(HashMap::new()));
    let base = document_server(docs.clone()).await;
    docs.lock()
        .insert("/certs".into(), json!({ "keys": [issuer_key("other").0] }));
    let r = app
        .admin(Method::PATCH, "/tenants/acme")
        .json(
            &json!({ "auth": { "mode": "external", "issuer": format!("{base}/"), "audience": "x",
                                 "jwks_uri": format!("{base}/certs") } }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        initialize(&app, "acme", Some(&access(&tokens))).await.0,
        401
    );
}

/// A password reset and a rename of the same user sent at the same moment both land: the rename
/// never writes the old password back. A write made from a revision read before another one,
/// with `If-Match`, is refused (412).
#[actix_rt::test]
async fn a_rename_never_undoes_a_password_reset() {
    let app = oauth_app().await;
    let client_id = public_client(&app, "acme").await;
    let path = "/tenants/acme/users/alice";
    let mut old_password = PASSWORD.to_string();
    for round in 0..3 {
        let new_password = format!("a brand-new password {round}");
        let reset = app
            .admin(Method::PATCH, path)
            .json(&json!({ "password": new_password }))
            .send();
        let rename = app
            .admin(Method::PATCH, path)
            .json(&json!({ "display_name": format!("Alice {round}") }))
            .send();
        let (reset, rename) = futures_util::join!(reset, rename);
        assert_eq!(
            (reset.unwrap().status(), rename.unwrap().status()),
            (StatusCode::OK, StatusCode::OK)
        );
        let user: Value = app
            .admin(Method::GET, path)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(user["display_name"], format!("Alice {round}"));
        let params = authorize_params(&client_id, &pkce(), REDIRECT);
        let r = sign_in(&app, "acme", &params, "alice", &new_password, "allow").await;
        assert_eq!(r.status(), 303, "round {round}: the new password signs in");
        let r = sign_in(&app, "acme", &params, "alice", &old_password, "allow").await;
        assert_eq!(r.status(), 401, "round {round}: the old one does not");
        old_password = new_password;
    }
    let read = app.admin(Method::GET, path).send().await.unwrap();
    let tag = read.headers()["etag"].to_str().unwrap().to_string();
    let patch_from_read = |body: Value| {
        app.admin(Method::PATCH, path)
            .header("if-match", &tag)
            .json(&body)
            .send()
    };
    let renamed = patch_from_read(json!({ "display_name": "Alice A" }));
    assert_eq!(renamed.await.unwrap().status(), StatusCode::OK);
    let stale = patch_from_read(json!({ "password": "written from a stale read" }));
    assert_eq!(
        stale.await.unwrap().status(),
        StatusCode::PRECONDITION_FAILED
    );
    // A delete decided on that stale read is refused too, and the user can still sign in.
    let delete_at = |tag: String| {
        let sent = app
            .admin(Method::DELETE, path)
            .header("if-match", tag)
            .send();
        async move { sent.await.unwrap().status() }
    };
    assert_eq!(
        delete_at(tag.clone()).await,
        StatusCode::PRECONDITION_FAILED
    );
    let params = authorize_params(&client_id, &pkce(), REDIRECT);
    let r = sign_in(&app, "acme", &params, "alice", &old_password, "allow").await;
    assert_eq!(r.status(), 303, "the user was not deleted");
    let read = app.admin(Method::GET, path).send().await.unwrap();
    let current = read.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(delete_at(current).await, StatusCode::NO_CONTENT);
    let r = sign_in(&app, "acme", &params, "alice", &old_password, "allow").await;
    assert_eq!(r.status(), 401, "a deleted user signs in no more");
}
