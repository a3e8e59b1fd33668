//! Tenant quotas across replicas, over real HTTP: three replicas sharing Redis count one request
//! rate and one set of live sessions per tenant (not one each), refuse what is over with 429, a
//! `Retry-After` and a JSON-RPC error on every transport; a protected tenant's principals each
//! have their own; and a Redis outage lets requests in rather than refusing them.

use std::time::{Duration, Instant};

use crate::helpers::{initialize_body, shared_replicas, spawn_app_with, test_redis_url, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const STATELESS: &str = "2026-07-28";

/// A stateless (2026-07-28) `tools/list`: no session, nothing forwarded between replicas.
fn stateless_list(app: &TestApp, tenant: &str, id: i64) -> reqwest::RequestBuilder {
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "quota-test", "version": "1.0.0" } } } });
    app.post(tenant, None, &body)
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", "tools/list")
}

fn initialize(app: &TestApp, tenant: &str) -> reqwest::RequestBuilder {
    app.post(tenant, None, &initialize_body("2025-11-25", json!({})))
}

/// A 429 as the spec's clients expect it: `Retry-After` in whole seconds (at most `max`), and a
/// JSON-RPC error body.
async fn assert_too_many(resp: reqwest::Response, max: u64) -> u64 {
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=max).contains(&retry), "Retry-After {retry}");
    let body: Value = resp.json().await.expect("a JSON body");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Too Many Requests")),
        "{body}"
    );
    retry
}

#[actix_rt::test]
async fn three_replicas_share_one_request_rate_per_tenant() {
    let Some((apps, _db)) = shared_replicas(&["a", "b", "c"], |_| {}).await else {
        return;
    };
    // 12 a minute: a burst of 12, then one every 5 s.
    apps[0]
        .tenant("rated")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute": 12 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    let started = Instant::now();
    let mut admitted = 0;
    let mut refused = 0;
    for i in 0..36 {
        let app = &apps[i % apps.len()];
        let resp = stateless_list(app, "rated", i as i64).send().await.unwrap();
        if resp.status() == 200 {
            admitted += 1;
            let body: Value = resp.json().await.unwrap();
            assert!(body["result"]["tools"].is_array(), "{body}");
        } else {
            assert_too_many(resp, 5).await;
            refused += 1;
        }
    }
    // One more may be earned while the 36 requests run (one every 5 s).
    let earned = started.elapsed().as_secs() / 5;
    assert!(
        admitted >= 12 && admitted <= 12 + earned as usize + 1,
        "admitted {admitted} in {:?} (the tenant's rate is shared, not 12 per replica)",
        started.elapsed()
    );
    assert_eq!(admitted + refused, 36);
    // Every transport of every replica refuses the exhausted tenant alike.
    assert_too_many(initialize(&apps[1], "rated").send().await.unwrap(), 5).await;
    let sse = apps[2]
        .http
        .get(format!("{}/t/rated/sse", apps[2].base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_too_many(sse, 5).await;
    // Other tenants are not affected.
    let resp = stateless_list(&apps[0], "demo", 99).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[actix_rt::test]
async fn a_request_forwarded_to_its_sessions_owner_is_counted_once() {
    let Some((apps, _db)) = shared_replicas(&["a", "b"], |_| {}).await else {
        return;
    };
    // 10 a minute: a burst of 10, then one every 6 s.
    apps[0]
        .tenant("rated")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute": 10 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    let started = Instant::now();
    // Held by replica a: initialize and notifications/initialized count 2 of the 10.
    let client = apps[0].open_session("rated", "2025-11-25", json!({})).await;
    let ping = |app: &TestApp, id: i64| {
        app.post(
            "rated",
            Some(&client.session),
            &json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }),
        )
        .header("mcp-protocol-version", "2025-11-25")
    };
    // Sent to replica b, which forwards each one to a: each counts once, not once per replica.
    let mut admitted = 0;
    for id in 0..16 {
        let resp = ping(&apps[1], id).send().await.unwrap();
        if resp.status() == 200 {
            let replica = resp.headers().get("x-harbor-replica").cloned();
            assert!(
                replica.is_some_and(|r| r.as_bytes().starts_with(b"a-")),
                "answered by the owner, a, through b"
            );
            admitted += 1;
        } else {
            assert_too_many(resp, 6).await;
        }
    }
    let earned = (started.elapsed().as_secs() / 6) as usize;
    assert!(
        admitted >= 8 && admitted <= 8 + earned + 1,
        "admitted {admitted} forwarded pings of the 8 left (half of them: counted twice)"
    );
    // A client's own proof is no proof: sent straight to the owner, it is still counted.
    let resp = ping(&apps[0], 99)
        .header("x-harbor-counted", "v1.k.AAAA")
        .header("x-harbor-forwarded", "b")
        .send()
        .await
        .unwrap();
    assert_too_many(resp, 6).await;
}

#[actix_rt::test]
async fn three_replicas_share_one_session_cap_per_tenant() {
    let Some((apps, _db)) = shared_replicas(&["a", "b", "c"], |_| {}).await else {
        return;
    };
    apps[0]
        .tenant("capped")
        .catalogs(json!(["demo"]))
        .limits(json!({ "max_sessions": 3 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    let mut sessions = Vec::new();
    for app in &apps {
        let c = app.open_session("capped", "2025-11-25", json!({})).await;
        sessions.push(c.session.clone());
    }
    // The fourth, at any replica (each holds only one), is over the tenant's cap.
    for app in &apps {
        assert_too_many(initialize(app, "capped").send().await.unwrap(), 5).await;
    }
    // Legacy (HTTP+SSE) sessions count too.
    let sse = apps[0]
        .http
        .get(format!("{}/t/capped/sse", apps[0].base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_too_many(sse, 5).await;
    // Ending one (DELETE through another replica) frees its place at once.
    let resp = apps[2]
        .http
        .delete(apps[2].mcp_url("capped"))
        .header("mcp-session-id", &sessions[0])
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = initialize(&apps[1], "capped").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_too_many(initialize(&apps[0], "capped").send().await.unwrap(), 5).await;
    // The open sessions keep working, and the cap is the tenant's alone.
    let resp = apps[0]
        .post(
            "capped",
            Some(&sessions[1]),
            &json!({ "jsonrpc": "2.0", "id": 5, "method": "ping" }),
        )
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = initialize(&apps[0], "demo").send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

/// An access token of a new client-credentials client of `tenant` (a principal of its own).
async fn principal_token(app: &TestApp, tenant: &str, name: &str) -> String {
    let r = app
        .admin(Method::POST, &format!("/tenants/{tenant}/oauth-clients"))
        .json(
            &json!({ "client_name": name, "grant_types": ["client_credentials"],
                       "token_endpoint_auth_method": "client_secret_basic" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let client: Value = r.json().await.unwrap();
    let tokens: Value = app
        .http
        .post(format!("{}/t/{tenant}/oauth/token", app.base))
        .basic_auth(
            client["client_id"].as_str().unwrap(),
            client["client_secret"].as_str(),
        )
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tokens["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

#[actix_rt::test]
async fn each_principal_of_a_protected_tenant_has_its_own_rate_and_session_cap() {
    let Some(redis) = test_redis_url().await else {
        return;
    };
    let app = spawn_app_with(move |c| {
        c.redis.url = redis;
        c.redis.key_prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    })
    .await;
    app.tenant("acme")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute_per_principal": 4, "max_sessions_per_principal": 1 }))
        .auth(json!({ "mode": "oauth" }))
        .create()
        .await;
    let alice = principal_token(&app, "acme", "alice").await;
    let bob = principal_token(&app, "acme", "bob").await;

    // One session each: alice's second is refused, bob's first is not.
    let resp = initialize(&app, "acme")
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_too_many(
        initialize(&app, "acme")
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap(),
        5,
    )
    .await;
    // Alice has spent her 4 requests a minute (two initializes and two more).
    for id in 0..2 {
        let resp = stateless_list(&app, "acme", id)
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    let retry = assert_too_many(
        stateless_list(&app, "acme", 3)
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap(),
        15,
    )
    .await;
    assert!(retry >= 14, "one request every 15 s: {retry}");
    // Bob is still served.
    let resp = initialize(&app, "acme")
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = stateless_list(&app, "acme", 4)
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

const METRICS_TOKEN: &str = "quota-test-metrics-token";

/// `mcp_harbor_quota_unchecked_total` of `tenant`, read from `/metrics`.
async fn unchecked(app: &TestApp, tenant: &str) -> f64 {
    let text = app.metrics_text(METRICS_TOKEN).await;
    let series = format!("mcp_harbor_quota_unchecked_total{{tenant=\"{tenant}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A JSON-RPC batch (2025-03-26) counts as its messages against the tenant's rate (at most the
/// whole rate), so a batch cannot carry a hundred requests past a rate that allows one; a batch
/// over what is left is refused whole (429, nothing answered), and only its first message
/// counted.
#[actix_rt::test]
async fn a_batch_counts_as_its_messages() {
    let app = crate::helpers::spawn_app().await;
    app.tenant("rated")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute": 10 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    // initialize + notifications/initialized: 2 of the 10.
    let c = app.open_session("rated", "2025-03-26", json!({})).await;
    let batch = |n: i64| {
        let items: Vec<Value> = (0..n)
            .map(|id| json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }))
            .collect();
        Value::Array(items)
    };
    assert_too_many(c.send(&batch(9)).await, 60).await;
    let resp = c.send(&batch(7)).await;
    assert_eq!(resp.status(), 200);
    let answers: Value = resp.json().await.unwrap();
    assert_eq!(answers.as_array().map(Vec::len), Some(7), "{answers}");
    assert_too_many(c.send(&batch(1)).await, 60).await;

    // A batch longer than the rate counts as the whole rate: let in on a full bucket (a minute's
    // worth), not refused for ever.
    app.tenant("wide")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute": 60 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    let c = app.open_session("wide", "2025-03-26", json!({})).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let resp = c.send(&batch(100)).await;
    assert_eq!(resp.status(), 200);
    let answers: Value = resp.json().await.unwrap();
    assert_eq!(answers.as_array().map(Vec::len), Some(100));
    assert_too_many(c.send(&batch(1)).await, 2).await;
}

#[actix_rt::test]
async fn a_redis_outage_lets_requests_in_on_this_replicas_own_rate() {
    use crate::helpers::redis_proxy::Mode;
    let Some((app, proxy)) = crate::helpers::app_behind_redis_proxy(|c| {
        c.metrics.token = secrecy::SecretString::from(METRICS_TOKEN.to_string());
    })
    .await
    else {
        return;
    };
    app.tenant("rated")
        .catalogs(json!(["demo"]))
        .limits(json!({ "requests_per_minute": 3 }))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    for id in 0..3 {
        let resp = stateless_list(&app, "rated", id).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_too_many(stateless_list(&app, "rated", 3).send().await.unwrap(), 20).await;

    // Redis is down: the shared count cannot be read, so this replica's own bucket of 3 a
    // minute decides (not a 5xx, and not waiting for Redis on every request).
    proxy.set(Mode::Refuse);
    let started = Instant::now();
    let mut statuses = Vec::new();
    for id in 10..15 {
        statuses.push(
            stateless_list(&app, "rated", id)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(unchecked(&app, "rated").await, 5.0, "operators see it");

    // Redis is back: the shared rate decides again, and it is still spent.
    proxy.set(Mode::Up);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_too_many(stateless_list(&app, "rated", 20).send().await.unwrap(), 20).await;
}

/// An open tenant's requests are admitted without awaiting anything (no token, no rate to
/// count); a rate or an authorization mode set on the live tenant applies from its next
/// request, and lifting them opens it again.
#[actix_rt::test]
async fn a_live_open_tenant_takes_a_new_rate_or_auth_mode_at_once() {
    let app = crate::helpers::spawn_app().await;
    app.tenant("live")
        .catalogs(json!(["demo"]))
        .limits(json!({}))
        .auth(json!({ "mode": "none" }))
        .create()
        .await;
    for id in 0..5 {
        let resp = stateless_list(&app, "live", id).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let patch = |body: Value| {
        let app = &app;
        async move {
            let r = app
                .admin(Method::PATCH, "/tenants/live")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        }
    };
    // 2 a minute: a burst of 2, then 429.
    patch(json!({ "limits": { "requests_per_minute": 2 } })).await;
    for id in 10..12 {
        let resp = stateless_list(&app, "live", id).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_too_many(stateless_list(&app, "live", 12).send().await.unwrap(), 30).await;
    patch(json!({ "limits": { "requests_per_minute": null } })).await;
    for id in 20..25 {
        let resp = stateless_list(&app, "live", id).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    // Its own authorization server: a request without a token is challenged.
    patch(json!({ "auth": { "mode": "oauth" } })).await;
    let resp = stateless_list(&app, "live", 30).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer resource_metadata=")));
    patch(json!({ "auth": { "mode": "none" } })).await;
    let resp = stateless_list(&app, "live", 31).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}
