//! Webhook tools end to end: published through the admin API, called by an MCP client, served by
//! a real local HTTP endpoint in this test that verifies every Standard Webhooks signature itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{spawn_app, SseReader};
use actix_web::{web, HttpRequest, HttpResponse};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::webhook::SECRET;

#[derive(Default)]
struct Endpoint {
    calls: AtomicUsize,
    bad_signatures: AtomicUsize,
    finished: AtomicUsize,
}

async fn hook(req: HttpRequest, body: web::Bytes, state: web::Data<Arc<Endpoint>>) -> HttpResponse {
    state.calls.fetch_add(1, Ordering::SeqCst);
    if crate::helpers::webhook::verify(SECRET, &req, &body).is_err() {
        state.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return HttpResponse::Unauthorized().finish();
    }
    let call: Value = serde_json::from_slice(&body).unwrap();
    let reply = match req.path() {
        "/echo" => {
            json!({ "content": [{ "type": "text", "text": format!("{} says {}", call["tenant"].as_str().unwrap(), call["arguments"]["text"].as_str().unwrap_or("")) }] })
        }
        "/ask" if call["round"] == 1 => json!({
            "input_request": { "type": "elicitation", "message": "Which project?", "requested_schema": { "type": "object", "properties": { "project": { "type": "string" } }, "required": ["project"] } },
            "state": { "step": "asked" } }),
        // The question went unanswered: the input is the error saying why.
        "/ask" if call["input"]["error"].is_object() => {
            json!({ "content": [{ "type": "text", "text": format!("no answer: {}", call["input"]["error"]["message"]) }], "isError": true })
        }
        "/ask" => {
            json!({ "content": [{ "type": "text", "text": format!("state={} project={}", call["state"]["step"], call["input"]["content"]["project"]) }] })
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json!({ "content": [{ "type": "text", "text": "late" }] })
        }
        "/link" => {
            json!({ "content": [{ "type": "resource_link", "uri": "file:///report.pdf", "name": "report.pdf" }] })
        }
        "/video" => json!({ "content": [{ "type": "video", "data": "AA==" }] }),
        "/partial" => {
            json!({ "content": [{ "type": "text", "text": "ok" }, { "type": "image", "data": 5 }] })
        }
        "/broken" => return HttpResponse::InternalServerError().body("database down"),
        "/garbage" => {
            return HttpResponse::Ok()
                .content_type("application/json")
                .body("{not json")
        }
        _ => return HttpResponse::NotFound().finish(),
    };
    HttpResponse::Ok().json(reply)
}

async fn start_endpoint() -> (String, Arc<Endpoint>) {
    let state = Arc::new(Endpoint::default());
    (
        crate::helpers::webhook::serve(state.clone(), hook).await,
        state,
    )
}

async fn publish(
    app: &crate::helpers::TestApp,
    tenant: &str,
    name: &str,
    url: String,
    timeout_ms: u64,
) {
    let tool = json!({ "name": name, "description": format!("webhook tool {name}"),
        "input_schema": { "type": "object", "properties": { "text": { "type": "string" } } },
        "webhook": { "url": url, "secret": SECRET, "timeout_ms": timeout_ms } });
    let resp = app
        .admin(Method::POST, &format!("/tenants/{tenant}/tools"))
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
}

#[actix_rt::test]
async fn webhook_tools_answer_over_mcp() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    app.tenant("acme").create().await;
    let mut c = app
        .open_session("acme", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    let _priming = stream.next_event(Duration::from_secs(2)).await;

    publish(&app, "acme", "echo_hook", format!("{base}/echo"), 2000).await;
    let listed = stream
        .next_event(Duration::from_secs(3))
        .await
        .expect("list_changed arrives")
        .json()
        .unwrap();
    assert_eq!(listed["method"], "notifications/tools/list_changed");
    let tools = c.result("tools/list", json!({})).await;
    assert_eq!(tools["tools"][0]["name"], "echo_hook");

    let r = c
        .result(
            "tools/call",
            json!({ "name": "echo_hook", "arguments": { "text": "hi" } }),
        )
        .await;
    assert_eq!(r["content"][0]["text"], "acme says hi");
    assert_eq!(
        endpoint.bad_signatures.load(Ordering::SeqCst),
        0,
        "every request was signed correctly"
    );

    // Arguments that do not match the tool's inputSchema are a tool execution error saying
    // where, and never reach the endpoint.
    let calls = endpoint.calls.load(Ordering::SeqCst);
    let r = c
        .result(
            "tools/call",
            json!({ "name": "echo_hook", "arguments": { "text": 5 } }),
        )
        .await;
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Invalid arguments") && text.contains("/text"),
        "{text}"
    );
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), calls, "not sent");
    // Before 2025-11-25 invalid arguments are a protocol error (Invalid Params), as for the
    // built-in tools.
    let mut older = app.open_session("acme", "2025-06-18", json!({})).await;
    let (answer, _) = older
        .call(
            "tools/call",
            json!({ "name": "echo_hook", "arguments": { "text": 5 } }),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/text"));
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), calls, "not sent");

    for (name, path, expect) in [
        ("broken", "/broken", "500"),
        ("garbage", "/garbage", "JSON"),
        ("slow", "/slow", "timed out"),
        ("video", "/video", "a `type` MCP defines"),
        (
            "partial",
            "/partial",
            "(index 1) without string `data` and `mimeType`",
        ),
    ] {
        publish(&app, "acme", name, format!("{base}{path}"), 300).await;
        let r = c
            .result("tools/call", json!({ "name": name, "arguments": {} }))
            .await;
        assert_eq!(r["isError"], true, "{name}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(expect), "{name}: {text}");
    }
    // A tool declaring an outputSchema: its results must carry conforming structuredContent.
    let typed = json!({ "name": "typed", "description": "d",
        "output_schema": { "type": "object", "properties": { "n": { "type": "integer" } } },
        "webhook": { "url": format!("{base}/echo"), "secret": SECRET, "timeout_ms": 2000 } });
    let resp = app
        .admin(Method::POST, "/tenants/acme/tools")
        .json(&typed)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let r = c
        .result(
            "tools/call",
            json!({ "name": "typed", "arguments": { "text": "hi" } }),
        )
        .await;
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no `structuredContent`"), "{text}");
    publish(&app, "acme", "down", "http://127.0.0.1:9/hook".into(), 1000).await;
    let r = c
        .result("tools/call", json!({ "name": "down", "arguments": {} }))
        .await;
    assert_eq!(r["isError"], true);
}

/// A tool's secret replaced with `rotation_overlap_secs`: calls are signed with both secrets for
/// that long, so the endpoint (still on the old one here) keeps accepting them; replaced
/// without an overlap, the old secret stops at once, and a rotation that has ended is forgotten
/// at the next replace. An overlap past a week is refused; one with no secret to replace means
/// nothing.
#[actix_rt::test]
async fn a_webhook_secret_rotates_with_an_overlap() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    app.tenant("acme").create().await;
    publish(&app, "acme", "echo_hook", format!("{base}/echo"), 2000).await;
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;
    let echo = json!({ "name": "echo_hook", "arguments": { "text": "hi" } });
    let replace = |secret: Option<&str>, overlap: Option<u64>| {
        let mut webhook = json!({ "url": format!("{base}/echo") });
        if let Some(secret) = secret {
            webhook["secret"] = json!(secret);
        }
        if let Some(overlap) = overlap {
            webhook["rotation_overlap_secs"] = json!(overlap);
        }
        app.admin(Method::PUT, "/tenants/acme/tools/echo_hook")
            .json(&json!({ "name": "echo_hook", "description": "rotated", "webhook": webhook }))
            .send()
    };
    let new = mcp_harbor::tools::webhook::new_secret();
    let new = secrecy::ExposeSecret::expose_secret(&new).to_string();

    let r = replace(Some(&new), Some(604_801)).await.unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["field"], "webhook.rotation_overlap_secs",
        "{body}"
    );
    let r = replace(None, Some(60)).await.unwrap();
    assert_eq!(r.status(), 200, "the secret is kept");
    let tool: Value = r.json().await.unwrap();
    assert!(
        tool["webhook"].get("previous_secret_until").is_none(),
        "{tool}"
    );
    let r = app
        .admin(Method::POST, "/tenants/acme/tools")
        .json(&json!({ "name": "fresh", "description": "d",
            "webhook": { "url": format!("{base}/echo"), "rotation_overlap_secs": 60 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "nothing to rotate from on create");
    let tool: Value = r.json().await.unwrap();
    assert!(
        tool["webhook"].get("previous_secret_until").is_none(),
        "{tool}"
    );

    let before = mcp_harbor::store::now_millis();
    let r = replace(Some(&new), Some(3600)).await.unwrap();
    assert_eq!(r.status(), 200);
    let tool: Value = r.json().await.unwrap();
    assert_eq!(tool["webhook"]["secret"], new.as_str());
    let until = tool["webhook"]["previous_secret_until"].as_i64().unwrap();
    assert!(
        (before + 3_600_000..=before + 3_610_000).contains(&until),
        "{until}"
    );
    let during = c.result("tools/call", echo.clone()).await;
    assert_eq!(during["content"][0]["text"], "acme says hi", "{during}");

    // Replaced again without an overlap: only the newest secret signs.
    let r = replace(Some(&new), None).await.unwrap();
    assert_eq!(r.status(), 200);
    let tool: Value = r.json().await.unwrap();
    assert!(
        tool["webhook"].get("previous_secret_until").is_none(),
        "{tool}"
    );
    let after = c.result("tools/call", echo).await;
    assert_eq!(after["isError"], true, "{after}");
    assert!(after["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("401"));
    assert_eq!(endpoint.bad_signatures.load(Ordering::SeqCst), 1);

    // A rotation that has ended leaves only the new secret: the next replace keeps just it.
    let newest = mcp_harbor::tools::webhook::new_secret();
    let newest = secrecy::ExposeSecret::expose_secret(&newest).to_string();
    let r = replace(Some(&newest), Some(1)).await.unwrap();
    let tool: Value = r.json().await.unwrap();
    assert!(tool["webhook"]["previous_secret_until"].is_i64(), "{tool}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = replace(None, None).await.unwrap();
    assert_eq!(r.status(), 200);
    let tool: Value = r.json().await.unwrap();
    assert!(
        tool["webhook"].get("previous_secret_until").is_none(),
        "{tool}"
    );
}

/// `webhooks.max_in_flight_per_tenant` caps each tenant's calls to its endpoints on a replica:
/// with a tenant's one slot held by a slow call, its next call waits for its timeout (500 ms),
/// then is a tool error (never sent), while another tenant's calls go on; once the slow call
/// has answered, calls go through.
#[actix_rt::test]
async fn a_tenants_webhook_calls_in_flight_are_capped() {
    let app = crate::helpers::spawn_app_with(|c| c.webhooks.max_in_flight_per_tenant = 1).await;
    let (base, endpoint) = start_endpoint().await;
    for tenant in ["acme", "beta"] {
        app.tenant(tenant).create().await;
        publish(&app, tenant, "echo_hook", format!("{base}/echo"), 500).await;
    }
    publish(&app, "acme", "slow", format!("{base}/slow"), 5000).await;
    let mut slow = app.open_session("acme", "2025-11-25", json!({})).await;
    let mut acme = app.open_session("acme", "2025-11-25", json!({})).await;
    let mut beta = app.open_session("beta", "2025-11-25", json!({})).await;
    let echo = json!({ "name": "echo_hook", "arguments": { "text": "hi" } });

    let slow_call = slow.result("tools/call", json!({ "name": "slow", "arguments": {} }));
    let while_slow = async {
        while endpoint.calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let refused = acme.result("tools/call", echo.clone()).await;
        let other_tenant = beta.result("tools/call", echo.clone()).await;
        (refused, other_tenant)
    };
    let (late, (refused, other_tenant)) = tokio::join!(slow_call, while_slow);
    assert_eq!(late["content"][0]["text"], "late", "{late}");
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("as many calls to their endpoints as this server allows"),
        "{text}"
    );
    assert_eq!(other_tenant["content"][0]["text"], "beta says hi");
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        2,
        "the slow call and beta's; acme's refused call was not sent"
    );
    let after = acme.result("tools/call", echo).await;
    assert_eq!(after["content"][0]["text"], "acme says hi", "{after}");
}

/// A content block the session's revision has no type for (a resource link before 2025-06-18,
/// audio before 2025-03-26) reaches its client as text saying what it was, not as a block its
/// schema refuses.
#[actix_rt::test]
async fn content_a_revision_lacks_is_sent_as_text() {
    let app = spawn_app().await;
    let (base, _endpoint) = start_endpoint().await;
    publish(&app, "demo", "link", format!("{base}/link"), 2000).await;
    let call = |name: &str| json!({ "name": name, "arguments": {} });
    let mut older = app.open_session("demo", "2025-03-26", json!({})).await;
    let r = older.result("tools/call", call("link")).await;
    assert_eq!(
        r["content"],
        json!([{ "type": "text", "text": "Resource link: report.pdf <file:///report.pdf>" }])
    );
    let audio = older.result("tools/call", call("test_audio_content")).await;
    assert_eq!(audio["content"][0]["type"], "audio", "2025-03-26 has audio");
    let mut oldest = app.open_session("demo", "2024-11-05", json!({})).await;
    let audio = oldest
        .result("tools/call", call("test_audio_content"))
        .await;
    assert_eq!(audio["content"][0]["type"], "text", "{audio}");
    let text = audio["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("audio/wav") && text.contains("2024-11-05"),
        "{text}"
    );
    let mut newer = app.open_session("demo", "2025-06-18", json!({})).await;
    let r = newer.result("tools/call", call("link")).await;
    assert_eq!(r["content"][0]["type"], "resource_link", "{r}");
}

#[actix_rt::test]
async fn an_input_request_is_relayed_to_the_client_as_an_elicitation() {
    let app = spawn_app().await;
    let (base, _endpoint) = start_endpoint().await;
    app.tenant("acme").create().await;
    publish(&app, "acme", "ask", format!("{base}/ask"), 2000).await;
    let c = app
        .open_session("acme", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "ask", "arguments": {} } })).await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        if let Some(m) = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("elicitation")
            .json()
        {
            break m;
        }
    };
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Which project?");
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "accept", "content": { "project": "apollo" } } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let result = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"],
        "state=\"asked\" project=\"apollo\""
    );
}

/// A raw TCP endpoint that reads one request, never answers, and records when the caller hangs
/// up (read returns 0): proof that the server abandoned the webhook request.
async fn start_silent_endpoint() -> (String, Arc<Endpoint>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Arc::new(Endpoint::default());
    let seen = state.clone();
    actix_rt::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got_request = false;
        loop {
            match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    seen.finished.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                Ok(Ok(_)) if !got_request => {
                    got_request = true;
                    seen.calls.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Ok(_)) => {}
                Err(_) => break,
            }
        }
    });
    (format!("http://127.0.0.1:{port}"), state)
}

#[actix_rt::test]
async fn cancelling_a_call_stops_the_webhook_request() {
    cancelling_stops_the_webhook_request("2025-11-25").await;
}

/// A revision without SSE polling, whose running call waits for its first message.
#[actix_rt::test]
async fn cancelling_a_call_stops_the_webhook_request_on_2025_06_18() {
    cancelling_stops_the_webhook_request("2025-06-18").await;
}

async fn cancelling_stops_the_webhook_request(version: &str) {
    let app = spawn_app().await;
    let (base, endpoint) = start_silent_endpoint().await;
    app.tenant("acme").create().await;
    publish(&app, "acme", "slow", format!("{base}/slow"), 10_000).await;
    let c = app.open_session("acme", version, json!({})).await;
    let call = c.post(&json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": "slow", "arguments": {} } })).send();
    let pending = actix_rt::spawn(call);
    for _ in 0..100 {
        if endpoint.calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        1,
        "the endpoint was called"
    );
    assert_eq!(
        endpoint.finished.load(Ordering::SeqCst),
        0,
        "and the call is still open"
    );
    let resp = c.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 9 } })).await;
    assert_eq!(resp.status(), 202);
    let answered = pending.await.unwrap().unwrap();
    // A request is answered with JSON or an SSE stream (transports.mdx), never a bare 202: a
    // cancelled call's stream ends without a response.
    assert_eq!(answered.status(), 200, "{version}");
    assert_eq!(
        answered.headers()["content-type"],
        "text/event-stream",
        "{version}"
    );
    let body = answered.text().await.unwrap();
    assert!(
        !body.contains("\"id\":9"),
        "a cancelled request gets no response: {body}"
    );
    let mut hung_up = false;
    for _ in 0..100 {
        if endpoint.finished.load(Ordering::SeqCst) > 0 {
            hung_up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        hung_up,
        "the server hung up on the webhook endpoint when the client cancelled"
    );
}

/// A webhook call of tool `ask` (tenant `acme`) that asked the client a question, and the
/// session's actor crashed while it waited: its running call is gone with it and the session
/// restarts from its snapshot. Returns the client, the question and the last event id seen.
async fn crash_while_asking(
    app: &crate::helpers::TestApp,
) -> (
    crate::helpers::Client<'_>,
    Value,
    Option<String>,
    Arc<Endpoint>,
) {
    let (base, endpoint) = start_endpoint().await;
    app.tenant("acme").create().await;
    publish(app, "acme", "ask", format!("{base}/ask"), 2000).await;
    let c = app
        .open_session("acme", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "ask", "arguments": {} } })).await;
    let mut sse = SseReader::new(resp);
    let mut last_id = None;
    let request = loop {
        let e = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("events");
        last_id = e.id.clone().or(last_id);
        if let Some(m) = e.json().filter(|m| m["method"] == "elicitation/create") {
            break m;
        }
    };
    let tenant = app.tenants.get("acme").unwrap();
    let before = tenant.sessions.inject_panic(&c.session).unwrap();
    for _ in 0..100 {
        if tenant
            .sessions
            .actor_start(&c.session)
            .is_some_and(|start| start != before)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(sse);
    (c, request, last_id, endpoint)
}

/// The messages on a stream resumed after `last_id`, up to the response to request 4.
async fn resumed_until_answer(c: &crate::helpers::Client<'_>, last_id: Option<&str>) -> Vec<Value> {
    let mut resumed = SseReader::new(c.get_stream(last_id).await);
    let mut messages = Vec::new();
    loop {
        let e = resumed
            .next_event(Duration::from_secs(5))
            .await
            .expect("the result on the resumed stream");
        if let Some(m) = e.json() {
            let done = m["id"] == 4;
            messages.push(m);
            if done {
                return messages;
            }
        }
    }
}

/// The session's actor dies while a webhook call waits for the client's answer to its
/// elicitation: the call's round and state were recorded in the database, so the restarted
/// session goes on from that round when the answer arrives (the endpoint is not called again
/// for round 1), and the result reaches the client on the resumed stream.
#[actix_rt::test]
async fn a_call_waiting_for_input_goes_on_from_its_recorded_round_after_a_crash() {
    let app = spawn_app().await;
    let (c, request, last_id, endpoint) = crash_while_asking(&app).await;
    let calls_before = endpoint.calls.load(Ordering::SeqCst);
    // The answer arrives afterwards and completes the call.
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "accept", "content": { "project": "gemini" } } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let messages = resumed_until_answer(&c, last_id.as_deref()).await;
    let result = messages.last().unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"], "state=\"asked\" project=\"gemini\"",
        "{result}"
    );
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        calls_before + 1,
        "only round 2 was sent after the crash"
    );
}

/// The restarted session times out the question it restored as the first owner would have
/// (`sessions.client_request_timeout_secs`): the client gets `notifications/cancelled` naming
/// it and the call ends with the tool's failure instead of waiting for ever.
#[actix_rt::test]
async fn a_restored_call_times_out_the_question_nobody_answers() {
    let app = crate::helpers::spawn_app_with(|c| c.sessions.client_request_timeout_secs = 1).await;
    let (c, request, last_id, _endpoint) = crash_while_asking(&app).await;
    let messages = resumed_until_answer(&c, last_id.as_deref()).await;
    let cancelled = messages
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no notifications/cancelled: {messages:?}"));
    assert_eq!(cancelled["params"]["requestId"], request["id"]);
    // The endpoint's next round got the error instead of an answer.
    let answer = messages.last().unwrap();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("no answer:"), "{text}");
    assert!(text.contains("within 1 s"), "{text}");
}
