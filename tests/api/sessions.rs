//! Session lifecycle and supervision: the legacy transport, the per-tenant session cap, idle
//! expiry, crash restarts, and tenant isolation.

use std::time::Duration;

use crate::helpers::{initialize_body, spawn_app, spawn_app_with, SseReader};
use serde_json::{json, Value};

/// A legacy (2024-11-05) session on tenant `demo`: its SSE stream (past the `endpoint`
/// event), its session id and its messages URL.
async fn open_legacy(app: &crate::helpers::TestApp) -> (SseReader, String, String) {
    let resp = app
        .http
        .get(format!("{}/t/demo/sse", app.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let endpoint = sse.next_event(Duration::from_secs(5)).await.unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    assert!(endpoint.data.starts_with("/t/demo/messages?sessionId="));
    let session = endpoint
        .data
        .split("sessionId=")
        .nth(1)
        .unwrap()
        .to_string();
    (sse, session, format!("{}{}", app.base, endpoint.data))
}

/// POSTs `body` to a legacy session's messages URL.
async fn post_legacy(
    app: &crate::helpers::TestApp,
    url: &str,
    body: Value,
) -> reqwest::Result<reqwest::Response> {
    app.http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
}

/// Sends a 2024-11-05 initialize to a legacy session (202) and reads its answer off the stream.
async fn initialize_legacy(app: &crate::helpers::TestApp, sse: &mut SseReader, url: &str) -> Value {
    let resp = post_legacy(app, url, initialize_body("2024-11-05", json!({})))
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    sse.next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap()
}

/// Whether a legacy session's messages URL answers 404 (the session ended) within 2.5 s.
async fn legacy_session_ends(app: &crate::helpers::TestApp, url: &str) -> bool {
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let ping = json!({ "jsonrpc": "2.0", "id": 4, "method": "ping" });
        if post_legacy(app, url, ping).await.unwrap().status() == 404 {
            return true;
        }
    }
    false
}

#[actix_rt::test]
async fn legacy_http_sse_transport_serves_a_session() {
    let app = spawn_app().await;
    let (mut sse, _, post_url) = open_legacy(&app).await;
    let post = |body: Value| post_legacy(&app, &post_url, body);

    // Before initialize only ping is served.
    assert_eq!(
        post(json!({ "jsonrpc": "2.0", "id": 0, "method": "tools/list" }))
            .await
            .unwrap()
            .status(),
        202
    );
    let early = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(early["error"]["code"], -32600);

    let init = initialize_legacy(&app, &mut sse, &post_url).await;
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(
        post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await
            .unwrap()
            .status(),
        202
    );
    post(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "old school" } } })).await.unwrap();
    let call = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(call["id"], 2);
    assert_eq!(call["result"]["content"][0]["text"], "old school");

    // Progress and logs share the one stream, before the result.
    post(json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": "t" } } })).await.unwrap();
    let mut methods = Vec::new();
    loop {
        let m = sse
            .next_event(Duration::from_secs(5))
            .await
            .unwrap()
            .json()
            .unwrap();
        if m["id"] == 3 {
            break;
        }
        methods.push(m["method"].as_str().unwrap().to_string());
    }
    assert_eq!(methods, vec!["notifications/progress"; 3]);

    // Bad input is refused on the POST itself.
    let resp = app
        .http
        .post(&post_url)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = app
        .http
        .post(format!("{}/t/demo/messages", app.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400, "sessionId is required");
    let resp = app
        .http
        .post(format!("{}/t/demo/messages?sessionId=nope", app.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    // Closing the stream ends the session.
    drop(sse);
    assert!(
        legacy_session_ends(&app, &post_url).await,
        "the legacy session ends with its stream"
    );
}

#[actix_rt::test]
async fn legacy_sessions_are_not_reachable_over_streamable_http() {
    let app = spawn_app().await;
    let (_sse, session, _) = open_legacy(&app).await;
    let resp = app
        .post(
            "demo",
            Some(&session),
            &json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[actix_rt::test]
async fn the_session_cap_is_enforced_per_tenant() {
    let app = spawn_app_with(|c| c.sessions.max_per_tenant = 2).await;
    let first = app.open_session("demo", "2025-11-25", json!({})).await;
    let _second = app.open_session("demo", "2025-11-25", json!({})).await;
    let resp = app
        .post("demo", None, &initialize_body("2025-11-25", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().get("retry-after").is_some());
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("limit"));
    // Another tenant has its own budget.
    let _other = app.open_session("other", "2025-11-25", json!({})).await;
    // Ending a session frees a place.
    let resp = app
        .http
        .delete(app.mcp_url("demo"))
        .header("mcp-session-id", &first.session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut freed = false;
    for _ in 0..20 {
        let resp = app
            .post("demo", None, &initialize_body("2025-11-25", json!({})))
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(freed);
}

#[actix_rt::test]
async fn a_refused_initialize_leaves_no_session_behind() {
    let app = spawn_app_with(|c| c.sessions.max_per_tenant = 1).await;
    for _ in 0..3 {
        let resp = app
            .post(
                "demo",
                None,
                &json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers().get("mcp-session-id").is_none());
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32602, "{body}");
        assert_eq!(body["id"], 1);
    }
    // Nor does an initialize in a batch (it must be sent alone).
    let resp = app
        .post(
            "demo",
            None,
            &json!([initialize_body("2025-03-26", json!({}))]),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("cannot be batched")));
    // None of them took the tenant's one place: the next initialize opens a session at once.
    let session = app.open_session("demo", "2025-11-25", json!({})).await;
    let resp = app.initialize("demo", "2025-11-25", json!({})).await;
    assert_eq!(
        resp.status(),
        429,
        "the place is taken by {}",
        session.session
    );
}

#[actix_rt::test]
async fn idle_sessions_expire_but_active_ones_stay() {
    let app = spawn_app_with(|c| c.sessions.idle_timeout_secs = 0.4).await;
    let idle = app.open_session("demo", "2025-11-25", json!({})).await;
    let mut busy = app.open_session("demo", "2025-11-25", json!({})).await;
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        busy.result("ping", json!({})).await;
    }
    let resp = idle
        .send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
        .await;
    assert_eq!(resp.status(), 404, "the idle session expired");
    busy.result("ping", json!({})).await;
}

/// Whether `stream` carries `notifications/resources/updated` within 2 s of each event.
async fn hears_resource_updated(stream: &mut SseReader) -> bool {
    while let Some(e) = stream.next_event(Duration::from_secs(2)).await {
        if e.json()
            .is_some_and(|m| m["method"] == "notifications/resources/updated")
        {
            return true;
        }
    }
    false
}

#[actix_rt::test]
async fn a_connected_stream_keeps_a_session_alive() {
    // Shared state (snapshot, lease) of an untouched session lives for twice this timeout.
    let app = spawn_app_with(|c| c.sessions.idle_timeout_secs = 0.3).await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    c.result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    // Long past the lease's lifetime with no request: only the listening stream keeps it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut writer = app.open_session("demo", "2025-11-25", json!({})).await;
    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "while listening" } }),
        )
        .await;
    // The event reaches the stream (an expired lease fences the append off: the session is
    // stopped as moved elsewhere and the stream ends without it).
    let saw_update = hears_resource_updated(&mut stream).await;
    assert!(saw_update, "the listening session kept its lease");
    c.result("ping", json!({})).await;
}

#[actix_rt::test]
async fn a_crashed_session_actor_is_restarted_without_losing_the_session() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    c.result("logging/setLevel", json!({ "level": "error" }))
        .await;
    c.result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let tenant = app.tenants.get("demo").unwrap();
    let before = tenant.sessions.inject_panic(&c.session).unwrap();
    let mut restarted = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if tenant
            .sessions
            .actor_start(&c.session)
            .is_some_and(|start| start != before)
        {
            restarted = true;
            break;
        }
    }
    assert!(restarted, "the supervisor restarted the session actor");
    // Same session id, same negotiated state.
    c.result("ping", json!({})).await;
    let (_, others) = c
        .call(
            "tools/call",
            json!({ "name": "test_tool_with_logging", "arguments": {} }),
        )
        .await;
    assert!(others.is_empty(), "the log level survived the restart");
    let mut stream = SseReader::new(c.get_stream(None).await);
    let mut writer = app.open_session("demo", "2025-11-25", json!({})).await;
    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "after crash" } }),
        )
        .await;
    let saw_update = hears_resource_updated(&mut stream).await;
    assert!(saw_update, "the subscription survived the restart");
}

#[actix_rt::test]
async fn a_legacy_session_ends_with_its_crashed_actor() {
    // A legacy session is its one SSE stream: when its actor crashes the stream ends, and the
    // session with it (a restarted one would answer where nobody listens).
    let app = spawn_app().await;
    let (mut sse, session, post_url) = open_legacy(&app).await;
    initialize_legacy(&app, &mut sse, &post_url).await;
    let tenant = app.tenants.get("demo").unwrap();
    tenant.sessions.inject_panic(&session).unwrap();
    assert!(
        legacy_session_ends(&app, &post_url).await,
        "the crashed legacy session is not found any more"
    );
    assert!(tenant.sessions.actor_start(&session).is_none());
    assert!(
        sse.next_event(Duration::from_secs(5)).await.is_none(),
        "the stream ended"
    );
}

#[actix_rt::test]
async fn sessions_and_catalogs_do_not_cross_tenants() {
    let app = spawn_app().await;
    let mut demo = app.open_session("demo", "2025-11-25", json!({})).await;
    let mut other = app.open_session("other", "2025-11-25", json!({})).await;
    // A demo session id means nothing at tenant `other`, on every method.
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" });
    assert_eq!(
        app.post("other", Some(&demo.session), &body)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let resp = app
        .http
        .get(app.mcp_url("other"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &demo.session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = app
        .http
        .delete(app.mcp_url("other"))
        .header("mcp-session-id", &demo.session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    demo.result("ping", json!({})).await;
    // `other` enables only the demo catalog.
    let (r, _) = other
        .call(
            "tools/call",
            json!({ "name": "test_simple_text", "arguments": {} }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602);
    // Each tenant has its own note.
    demo.result(
        "tools/call",
        json!({ "name": "set_note", "arguments": { "text": "demo's secret" } }),
    )
    .await;
    let r = other
        .result("resources/read", json!({ "uri": "demo://note" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "");
}

/// What a client can make a session keep for as long as it likes is bounded: at most 256
/// resources subscribed at once, each URI at most 4096 bytes (Invalid Params past either);
/// subscribing again to one it follows, or to another after unsubscribing, works.
#[actix_rt::test]
async fn a_session_follows_a_bounded_number_of_resources() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    for i in 0..256 {
        c.result(
            "resources/subscribe",
            json!({ "uri": format!("demo://r/{i}") }),
        )
        .await;
    }
    let (refused, _) = c
        .call("resources/subscribe", json!({ "uri": "demo://r/256" }))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 256 resources"), "{message}");
    c.result("resources/subscribe", json!({ "uri": "demo://r/0" }))
        .await;
    c.result("resources/unsubscribe", json!({ "uri": "demo://r/0" }))
        .await;
    c.result("resources/subscribe", json!({ "uri": "demo://r/256" }))
        .await;
    c.result("resources/unsubscribe", json!({ "uri": "demo://r/1" }))
        .await;
    let long = format!("demo://{}", "x".repeat(4096));
    let (refused, _) = c.call("resources/subscribe", json!({ "uri": long })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Still a working session that hears of the resources it follows.
    c.result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    let mut writer = app.open_session("demo", "2025-11-25", json!({})).await;
    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "bounded" } }),
        )
        .await;
    assert!(hears_resource_updated(&mut stream).await);
}

/// A session runs at most 256 requests at once (each holds its arguments, and goes on without
/// its POST's stream): the next is refused (-32000) until one of them ends.
#[actix_rt::test]
async fn a_session_runs_a_bounded_number_of_requests_at_once() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let slow = |id: u64| {
        json!({ "jsonrpc": "2.0", "id": format!("slow-{id}"), "method": "tools/call", "params": {
            "name": "slow_count", "arguments": { "steps": 1, "interval_ms": 10000 } } })
    };
    for id in 0..256 {
        // Its stream is dropped: the call runs on.
        assert_eq!(c.send(&slow(id)).await.status(), 200);
    }
    let quick = json!({ "name": "slow_count", "arguments": { "steps": 1, "interval_ms": 0 } });
    let (refused, _) = c.call("tools/call", quick.clone()).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(refused["error"]["data"]["maxInFlight"], 256, "{refused}");
    // One ended (cancelled here): room for one more.
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": "slow-0" } });
    assert_eq!(c.send(&cancel).await.status(), 202);
    let done = c.result("tools/call", quick).await;
    assert_eq!(done["content"][0]["text"], "counted 1", "{done}");
}

/// A session keeps its client's `capabilities` and `clientInfo` for its life: together they may
/// take at most 64 KiB; past that, `initialize` is Invalid Params and no session is left.
#[actix_rt::test]
async fn initialize_keeps_a_bounded_client_description() {
    let app = spawn_app().await;
    let initialize = |capabilities: Value, icon: &str| {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": { "name": "host", "version": "1", "icons": [{ "src": icon }] } } })
    };
    let bulky = json!({ "experimental": { "blob": "x".repeat(64 * 1024) } });
    let resp = app
        .post(
            "demo",
            None,
            &initialize(bulky, "https://host.example/icon.png"),
        )
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("mcp-session-id").is_none());
    let (answer, _) = crate::helpers::read_answer(resp, 1).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 64 KiB"), "{message}");
    assert_eq!(app.tenants.get("demo").unwrap().sessions.len(), 0);
    // A host's icon given as a data: URI fits.
    let icon = format!("data:image/png;base64,{}", "A".repeat(32 * 1024));
    let resp = app
        .post("demo", None, &initialize(json!({ "sampling": {} }), &icon))
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("mcp-session-id").is_some());
    let (answer, _) = crate::helpers::read_answer(resp, 1).await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
}
