//! `/metrics` scraped and parsed: behind its token on the main port (401 without), on its own
//! listener, and never served when neither is configured; the MCP operation histogram records
//! methods, tenants and errors (an `isError` tool result as `tool_error`), sessions and SSE
//! streams are gauged, and so are open HTTP connections; HTTP requests counted by route group
//! and status.

use std::collections::HashMap;

use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use serde_json::json;

const TOKEN: &str = "metrics-token-0123456789";

/// Parses the text exposition into `name{labels}` → value (labels as written, sorted by the
/// exporter).
fn parse(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples named `name` whose labels include every `want` pair.
fn sample(m: &HashMap<String, f64>, name: &str, want: &[(&str, &str)]) -> f64 {
    m.iter()
        .filter(|(k, _)| {
            k.split('{').next() == Some(name)
                && want
                    .iter()
                    .all(|(l, v)| k.contains(&format!("{l}=\"{v}\"")))
        })
        .map(|(_, v)| v)
        .sum()
}

/// `/metrics` of `app` (on its main port, behind [`TOKEN`]), parsed.
async fn scrape(app: &TestApp) -> HashMap<String, f64> {
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // OpenMetrics text, said so: a scraper reading it as the 0.0.4 text format would misread
    // counters (their `_total` samples are typed under the family's name).
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text; version=1.0.0"));
    let text = r.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    parse(&text)
}

#[actix_rt::test]
async fn metrics_record_mcp_traffic_behind_their_token() {
    let app = spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from(TOKEN)).await;
    let scrape = || scrape(&app);
    let before = scrape().await;
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .bearer_auth("wrong-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The auth scheme is case-insensitive (RFC 7235).
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .header("authorization", format!("bearer  {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let mut c = app.open_session("other", "2025-11-25", json!({})).await;
    let echo = c
        .result(
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "x" } }),
        )
        .await;
    assert_eq!(echo["isError"], false);
    let (answer, _) = c
        .call(
            "tools/call",
            json!({ "name": "no_such_tool", "arguments": {} }),
        )
        .await;
    assert!(answer.get("error").is_some());
    let stream = c.get_stream(None).await;
    let after = scrape().await;

    // The replica's version, one series.
    assert_eq!(
        sample(
            &after,
            "mcp_harbor_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert_eq!(sample(&after, "mcp_harbor_build_info", &[]), 1.0);

    let ops = "mcp_server_operation_duration_seconds_count";
    let delta = |name: &str, want: &[(&str, &str)]| {
        sample(&after, name, want) - sample(&before, name, want)
    };
    assert_eq!(
        delta(
            ops,
            &[
                ("mcp_method_name", "initialize"),
                ("tenant", "other"),
                ("error_type", "")
            ]
        ),
        1.0
    );
    assert_eq!(
        delta(
            ops,
            &[
                ("mcp_method_name", "tools/call"),
                ("tenant", "other"),
                ("error_type", "")
            ]
        ),
        1.0
    );
    assert_eq!(
        delta(
            ops,
            &[
                ("mcp_method_name", "tools/call"),
                ("tenant", "other"),
                ("error_type", "-32602")
            ]
        ),
        1.0
    );
    assert!(sample(&after, "mcp_harbor_sessions_active", &[("tenant", "other")]) >= 1.0);
    assert!(
        sample(
            &after,
            "mcp_harbor_sse_streams_open",
            &[("tenant", "other")]
        ) >= 1.0
    );
    assert!(
        delta(
            "mcp_harbor_http_requests_total",
            &[("route", "mcp"), ("status", "200")]
        ) >= 3.0
    );
    assert!(
        delta(
            "mcp_harbor_http_requests_total",
            &[("route", "other"), ("status", "401")]
        ) >= 2.0
    );
    // The runtimes' tasks are counted (the open stream and the session hold some).
    assert!(sample(&after, "mcp_harbor_runtime_alive_tasks", &[]) >= 1.0);
    // No session ids or tokens in label values.
    let text = format!("{after:?}");
    assert!(!text.contains(&c.session) && !text.contains(TOKEN));

    // A session ended: the gauge goes down and its lifetime is recorded.
    drop(stream);
    let r = app
        .http
        .delete(app.mcp_url("other"))
        .header("mcp-session-id", &c.session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ended = scrape().await;
    assert_eq!(
        sample(
            &ended,
            "mcp_server_session_duration_seconds_count",
            &[("tenant", "other")]
        ) - sample(
            &after,
            "mcp_server_session_duration_seconds_count",
            &[("tenant", "other")]
        ),
        1.0
    );
}

#[actix_rt::test]
async fn a_tool_error_result_is_recorded_as_tool_error() {
    let app = spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from(TOKEN)).await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let r = c
        .result(
            "tools/call",
            json!({ "name": "test_error_handling", "arguments": {} }),
        )
        .await;
    assert_eq!(r["isError"], true);
    let text = app.metrics_text(TOKEN).await;
    let m = parse(&text);
    assert!(
        sample(
            &m,
            "mcp_server_operation_duration_seconds_count",
            &[
                ("mcp_method_name", "tools/call"),
                ("tenant", "demo"),
                ("error_type", "tool_error")
            ]
        ) >= 1.0,
        "{text}"
    );
}

#[actix_rt::test]
async fn metrics_are_not_served_unless_configured_and_can_have_their_own_listener() {
    let app = spawn_app().await;
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let app = spawn_app_with(|c| c.metrics.listen = format!("127.0.0.1:{port}")).await;
    app.open_session("demo", "2025-11-25", json!({})).await;
    let r = app
        .http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("# TYPE mcp_server_operation_duration_seconds histogram"),
        "{text}"
    );
    let r = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "not on the main port without a token");
}

#[actix_rt::test]
async fn oauth_grants_and_rate_limit_refusals_are_counted() {
    let app = spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from(TOKEN)).await;
    let r = app
        .admin(reqwest::Method::POST, "/tenants")
        .json(&json!({ "slug": "acme", "auth": { "mode": "oauth" },
                       "limits": { "requests_per_minute": 1 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let client: serde_json::Value = app
        .admin(reqwest::Method::POST, "/tenants/acme/oauth-clients")
        .json(&json!({ "grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_post" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = |secret: String| {
        app.http
            .post(format!("{}/t/acme/oauth/token", app.base))
            .form(&[
                ("grant_type", "client_credentials".to_string()),
                (
                    "client_id",
                    client["client_id"].as_str().unwrap().to_string(),
                ),
                ("client_secret", secret),
            ])
            .send()
    };
    assert_eq!(
        token(client["client_secret"].as_str().unwrap().into())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(token("wrong".into()).await.unwrap().status(), 401);
    // A token request at a tenant that does not exist counts under no tenant: anyone could
    // make up names, one series each.
    for made_up in ["nobody-1", "nobody-2"] {
        let r = app
            .http
            .post(format!("{}/t/{made_up}/oauth/token", app.base))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
    // The tenant allows one MCP request a minute: the second is refused with 429.
    for _ in 0..2 {
        app.post(
            "acme",
            None,
            &crate::helpers::initialize_body("2025-11-25", json!({})),
        )
        .send()
        .await
        .unwrap();
    }
    let m = parse(
        &app.http
            .get(format!("{}/metrics", app.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    let grants = "mcp_harbor_oauth_grants_total";
    let cc = ("grant_type", "client_credentials");
    assert_eq!(
        sample(&m, grants, &[("tenant", "acme"), cc, ("outcome", "issued")]),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            grants,
            &[("tenant", "acme"), cc, ("outcome", "invalid_client")]
        ),
        1.0
    );
    assert_eq!(
        sample(&m, "mcp_harbor_rate_limited_total", &[("tenant", "acme")]),
        1.0
    );
    assert_eq!(sample(&m, grants, &[]), 2.0, "only acme's grants: {m:?}");
}

/// Dynamic Client Registration requests are counted by outcome, so an operator sees anonymous
/// registrations refused by their rate limit.
#[actix_rt::test]
async fn registrations_are_counted_by_outcome() {
    let app = spawn_app_with(|c| {
        c.metrics.token = secrecy::SecretString::from(TOKEN);
        c.auth.registrations_per_hour_per_address = 1;
    })
    .await;
    app.create_tenant(json!({ "slug": "acme", "auth": { "mode": "oauth" } }))
        .await;
    let register = |redirect: &str| {
        app.http
            .post(format!("{}/t/acme/oauth/register", app.base))
            .json(&json!({ "redirect_uris": [redirect], "token_endpoint_auth_method": "none" }))
            .send()
    };
    let cb = "http://127.0.0.1:9/cb";
    assert_eq!(register(cb).await.unwrap().status(), 201);
    assert_eq!(register(cb).await.unwrap().status(), 429);
    let bad = "http://host.example/cb";
    assert_eq!(register(bad).await.unwrap().status(), 400);
    let m = scrape(&app).await;
    let counted = |outcome: &str| {
        sample(
            &m,
            "mcp_harbor_oauth_registrations_total",
            &[("tenant", "acme"), ("outcome", outcome)],
        )
    };
    assert_eq!(counted("registered"), 1.0);
    assert_eq!(counted("rate_limited"), 1.0);
    assert_eq!(counted("invalid_redirect_uri"), 1.0);
}

/// Every HTTP connection on the main port is gauged while it is open, idle keep-alive ones too,
/// and no longer once its client has closed it.
#[actix_rt::test]
async fn open_http_connections_are_gauged() {
    let app = spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from(TOKEN)).await;
    let connections =
        || async { sample(&scrape(&app).await, "mcp_harbor_http_connections_open", &[]) };
    let before = connections().await;
    assert!(
        before >= 1.0,
        "the scrape's own connection is open: {before}"
    );
    let addr = format!("127.0.0.1:{}", app.port);
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // (Accepted connections reach the worker a moment after connect returns.)
    let mut seen = before;
    for _ in 0..100 {
        seen = connections().await;
        if seen >= before + 3.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(seen, before + 3.0, "three idle connections more");
    drop(idle);
    for _ in 0..100 {
        seen = connections().await;
        if seen <= before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(seen, before, "closed connections are no longer counted");
}
