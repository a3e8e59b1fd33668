//! SSE streams: server→client requests answered on a separate POST, resumption with
//! `Last-Event-ID`, the standalone stream and resource subscriptions.

use std::time::Duration;

use crate::helpers::{spawn_app, SseReader};
use serde_json::{json, Value};

#[actix_rt::test]
async fn elicitation_round_trip_through_a_separate_post() {
    let app = spawn_app().await;
    let c = app
        .open_session("demo", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": { "name": "test_elicitation", "arguments": { "message": "Who are you?" } } })).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut sse = SseReader::new(resp);
    let priming = sse.next_event(Duration::from_secs(5)).await.unwrap();
    assert!(
        priming.id.is_some() && priming.data.is_empty() && priming.retry.is_some(),
        "priming event first: {priming:?}"
    );
    let request = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "form");
    assert_eq!(request["params"]["message"], "Who are you?");
    assert_eq!(
        request["params"]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "accept", "content": { "username": "ada", "email": "ada@example.com" } } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let result = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(result["id"], 5);
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("accept") && text.contains("ada@example.com"),
        "{text}"
    );
    assert!(
        sse.ends_within(Duration::from_secs(2), &mut Vec::new())
            .await,
        "the stream ends after the response"
    );
}

/// An accepted elicitation whose content does not match the requested schema is refused, not
/// handed to the tool as if it did (elicitation.mdx: servers SHOULD validate it).
#[actix_rt::test]
async fn an_elicitation_answer_off_its_schema_is_refused() {
    let app = spawn_app().await;
    let c = app
        .open_session("demo", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": { "name": "test_elicitation", "arguments": { "message": "Who?" } } })).await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        let e = sse.next_event(Duration::from_secs(5)).await.unwrap();
        if let Some(m) = e.json() {
            break m;
        }
    };
    assert_eq!(request["method"], "elicitation/create");
    // No email, and a number for the username.
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "accept", "content": { "username": 5 } } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let result = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("requested schema"), "{text}");
}

/// A form with multi-select or titled enums (2025-11-25) is not sent to a 2025-06-18 client,
/// whose schema has no such fields: the tool fails saying so.
#[actix_rt::test]
async fn a_form_a_revision_cannot_carry_is_not_sent() {
    let app = spawn_app().await;
    let mut c = app
        .open_session("demo", "2025-06-18", json!({ "elicitation": {} }))
        .await;
    let r = c
        .result(
            "tools/call",
            json!({ "name": "test_elicitation_sep1330_enums", "arguments": {} }),
        )
        .await;
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("needs protocol version 2025-11-25"), "{text}");
}

/// lifecycle.mdx: no request but ping goes to the client before its
/// `notifications/initialized`; the tool that would ask fails saying so.
#[actix_rt::test]
async fn nothing_is_asked_of_a_client_before_it_is_initialized() {
    let app = spawn_app().await;
    let mut c = app
        .initialize_only("demo", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let (r, others) = c
        .call(
            "tools/call",
            json!({ "name": "test_elicitation", "arguments": { "message": "?" } }),
        )
        .await;
    assert!(others.is_empty(), "nothing was asked: {others:?}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("notifications/initialized"), "{text}");
}

#[actix_rt::test]
async fn sampling_round_trip() {
    let app = spawn_app().await;
    let c = app
        .open_session("demo", "2025-06-18", json!({ "sampling": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": { "name": "test_sampling", "arguments": { "prompt": "Say hi" } } })).await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        let e = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("sampling request arrives");
        if let Some(m) = e.json() {
            break m;
        }
    };
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "Say hi"
    );
    assert_eq!(request["params"]["maxTokens"], 100);
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "role": "assistant", "content": { "type": "text", "text": "hi there" }, "model": "m" } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let result = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"],
        "LLM response: hi there"
    );
}

/// A request to the client that is never answered is cancelled after
/// `sessions.client_request_timeout_secs` (lifecycle.mdx: timeouts): the client gets
/// `notifications/cancelled` naming it, the tool an error, and the call ends.
#[actix_rt::test]
async fn an_unanswered_request_to_the_client_times_out() {
    let app = crate::helpers::spawn_app_with(|c| c.sessions.client_request_timeout_secs = 1).await;
    let c = app
        .open_session("demo", "2025-06-18", json!({ "sampling": {} }))
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": { "name": "test_sampling", "arguments": { "prompt": "Say hi" } } })).await;
    let mut sse = SseReader::new(resp);
    let mut messages = Vec::new();
    while let Some(event) = sse.next_event(Duration::from_secs(5)).await {
        if let Some(m) = event.json() {
            let done = m["id"] == 8;
            messages.push(m);
            if done {
                break;
            }
        }
    }
    let methods: Vec<&Value> = messages.iter().map(|m| &m["method"]).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(methods[0], "sampling/createMessage");
    assert_eq!(methods[1], "notifications/cancelled");
    assert_eq!(messages[1]["params"]["requestId"], messages[0]["id"]);
    assert!(messages[1]["params"]["reason"]
        .as_str()
        .unwrap()
        .contains("did not answer within 1 s"));
    // The call's answer: the tool's failure, not a wait for ever.
    let answer = &messages[2];
    let failed = answer["result"]["isError"] == true || answer.get("error").is_some();
    assert!(failed, "{answer}");
    // A late answer is to no pending request: accepted and dropped.
    let late = json!({ "jsonrpc": "2.0", "id": messages[0]["id"], "result": { "role": "assistant", "content": { "type": "text", "text": "late" }, "model": "m" } });
    assert_eq!(c.send(&late).await.status(), 202);
}

#[actix_rt::test]
async fn elicitation_needs_the_client_capability() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let r = c
        .result(
            "tools/call",
            json!({ "name": "test_elicitation", "arguments": { "message": "?" } }),
        )
        .await;
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("elicitation"));
    let r = c
        .result(
            "tools/call",
            json!({ "name": "test_sampling", "arguments": { "prompt": "?" } }),
        )
        .await;
    assert_eq!(r["isError"], true);
}

#[actix_rt::test]
async fn a_closed_stream_resumes_with_last_event_id() {
    let app = spawn_app().await;
    let c = app.open_session("demo", "2025-11-25", json!({})).await;
    // test_reconnection closes its POST stream after the priming event (SSE polling).
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "test_reconnection", "arguments": {} } })).await;
    let mut sse = SseReader::new(resp);
    let priming = sse.next_event(Duration::from_secs(5)).await.unwrap();
    let last = priming.id.clone().expect("priming event has an id");
    assert!(priming.retry.is_some());
    assert!(
        sse.ends_within(Duration::from_secs(5), &mut Vec::new())
            .await,
        "server closed the connection"
    );

    let resp = c.get_stream(Some(&last)).await;
    assert_eq!(resp.status(), 200);
    let mut resumed = SseReader::new(resp);
    let result = resumed.next_event(Duration::from_secs(5)).await.unwrap();
    let msg = result.json().unwrap();
    assert_eq!(msg["id"], 1);
    assert_eq!(
        msg["result"]["content"][0]["text"],
        "Reconnection test completed successfully"
    );
    assert_ne!(result.id.as_deref(), Some(last.as_str()));
}

#[actix_rt::test]
async fn resumption_replays_only_that_streams_later_events() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    // Two SSE streams with events: progress on one, logging on the other.
    let (_, _) = c
        .call(
            "tools/call",
            json!({ "name": "test_tool_with_logging", "arguments": {} }),
        )
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": { "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": "p" } } })).await;
    let mut sse = SseReader::new(resp);
    let mut events = Vec::new();
    while let Some(e) = sse.next_event(Duration::from_secs(5)).await {
        events.push(e);
    }
    assert_eq!(events.len(), 5, "priming, three progress, result");
    let ids: Vec<String> = events.iter().map(|e| e.id.clone().unwrap()).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());

    // Pretend the connection dropped after the first progress event.
    let mut resumed = SseReader::new(c.get_stream(Some(&ids[1])).await);
    let mut replayed = Vec::new();
    while let Some(e) = resumed.next_event(Duration::from_secs(2)).await {
        replayed.push(e);
    }
    let replayed_ids: Vec<String> = replayed.iter().map(|e| e.id.clone().unwrap()).collect();
    assert_eq!(
        replayed_ids,
        ids[2..].to_vec(),
        "exactly the later events of that stream"
    );
    assert!(
        replayed
            .iter()
            .all(|e| e.json().unwrap()["method"] != "notifications/message"),
        "nothing from the other stream"
    );

    let resp = c.get_stream(Some("not-an-id")).await;
    assert_eq!(resp.status(), 400);
    let resp = c.get_stream(Some("999-1")).await;
    assert_eq!(resp.status(), 400, "an unknown stream cannot be resumed");
}

/// A resume the server refuses (an id the stream never sent) leaves the stream's own connection
/// alone: it goes on receiving the stream's messages.
#[actix_rt::test]
async fn a_refused_resume_leaves_the_live_stream_alone() {
    let app = spawn_app().await;
    let mut watcher = app.open_session("demo", "2025-11-25", json!({})).await;
    watcher
        .result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let mut stream = SseReader::new(watcher.get_stream(None).await);
    let priming = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("the priming event");
    let id = priming.id.expect("the priming event has an id");
    let (stream_id, _) = id.split_once('-').expect("{stream}-{seq}");
    let resp = watcher.get_stream(Some(&format!("{stream_id}-999"))).await;
    assert_eq!(resp.status(), 400, "an id the stream never sent");

    let mut writer = app.open_session("demo", "2025-11-25", json!({})).await;
    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "still here" } }),
        )
        .await;
    let event = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("the live stream still gets its messages");
    assert_eq!(
        event.json().unwrap()["method"],
        "notifications/resources/updated"
    );
}

#[actix_rt::test]
async fn subscribed_sessions_hear_about_resource_updates_on_the_standalone_stream() {
    let app = spawn_app().await;
    let mut watcher = app.open_session("demo", "2025-06-18", json!({})).await;
    let mut bystander = app.open_session("demo", "2025-06-18", json!({})).await;
    let mut writer = app.open_session("demo", "2025-06-18", json!({})).await;
    assert_eq!(
        watcher
            .result("resources/subscribe", json!({ "uri": "demo://note" }))
            .await,
        json!({})
    );
    let mut stream = SseReader::new(watcher.get_stream(None).await);
    let mut quiet = SseReader::new(bystander.get_stream(None).await);
    tokio::time::sleep(Duration::from_millis(100)).await;

    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "remember the milk" } }),
        )
        .await;
    let event = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("an update arrives");
    let msg = event.json().unwrap();
    assert_eq!(msg["method"], "notifications/resources/updated");
    assert_eq!(msg["params"]["uri"], "demo://note");
    assert!(
        quiet.next_event(Duration::from_millis(300)).await.is_none(),
        "unsubscribed sessions hear nothing"
    );
    let r = bystander
        .result("resources/read", json!({ "uri": "demo://note" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "remember the milk");

    watcher
        .result("resources/unsubscribe", json!({ "uri": "demo://note" }))
        .await;
    writer
        .result(
            "tools/call",
            json!({ "name": "set_note", "arguments": { "text": "again" } }),
        )
        .await;
    assert!(
        stream
            .next_event(Duration::from_millis(300))
            .await
            .is_none(),
        "no update after unsubscribing"
    );
}

#[actix_rt::test]
async fn each_message_goes_on_one_stream_only() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    c.result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let mut standalone = SseReader::new(c.get_stream(None).await);
    // Request-related messages stay on the request's stream.
    let (_, others) = c.call("tools/call", json!({ "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": 1 } })).await;
    assert_eq!(others.len(), 3);
    let first = standalone.next_event(Duration::from_millis(300)).await;
    assert!(
        first.as_ref().is_none_or(|e| e.data.is_empty()),
        "only a priming event may appear on the standalone stream: {first:?}"
    );
    assert!(standalone
        .next_event(Duration::from_millis(300))
        .await
        .is_none());
    // A second standalone stream replaces the first; updates go to the new one only.
    let mut second = SseReader::new(c.get_stream(None).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.result(
        "tools/call",
        json!({ "name": "set_note", "arguments": { "text": "x" } }),
    )
    .await;
    let mut got = Vec::<Value>::new();
    while let Some(e) = second.next_event(Duration::from_millis(500)).await {
        if let Some(m) = e.json() {
            got.push(m);
        }
    }
    assert_eq!(got.len(), 1);
    assert!(standalone
        .next_event(Duration::from_millis(200))
        .await
        .is_none());
}

#[actix_rt::test]
async fn roots_list_round_trip() {
    let app = spawn_app().await;
    let c = app
        .open_session(
            "demo",
            "2025-06-18",
            json!({ "roots": { "listChanged": true } }),
        )
        .await;
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "client_roots", "arguments": {} } })).await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        if let Some(m) = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("roots request")
            .json()
        {
            break m;
        }
    };
    assert_eq!(request["method"], "roots/list");
    let roots = json!([{ "uri": "file:///home/ada/project", "name": "project" }]);
    assert_eq!(
        c.send(&json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "roots": roots } }))
            .await
            .status(),
        202
    );
    let result = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(result["result"]["structuredContent"]["roots"], roots);
}

const METRICS_TOKEN: &str = "metrics-token-0123456789";

/// The seq of an event id `<stream>-<seq>`, and its stream.
fn split_event_id(id: &str) -> (String, u64) {
    let (stream, seq) = id.rsplit_once('-').expect("event id is <stream>-<seq>");
    (stream.to_string(), seq.parse().expect("numeric seq"))
}

/// The `id:` lines of raw SSE text (chunk-size lines in between do not matter: each event is
/// written as one chunk).
fn event_ids(raw: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(raw)
        .lines()
        .filter_map(|l| l.strip_prefix("id: ").map(str::to_string))
        .collect()
}

#[actix_rt::test]
async fn a_client_that_stops_reading_has_its_stream_closed_and_resumes_it_without_loss() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = crate::helpers::spawn_app_with(|c| {
        c.sessions.stream_buffer_bytes = 4096;
        c.sessions.event_log_capacity = 50_000;
        c.metrics.token = secrecy::SecretString::from(METRICS_TOKEN);
    })
    .await;
    let mut watcher = app.open_session("demo", "2025-11-25", json!({})).await;
    let mut writer = app.open_session("demo", "2025-11-25", json!({})).await;
    watcher
        .result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;

    // The standalone stream, on a socket with a tiny receive window that the test stops reading
    // once the priming event is in.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket
        .connect(format!("127.0.0.1:{}", app.port).parse().unwrap())
        .await
        .unwrap();
    let request = format!(
        "GET /t/demo/mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n",
        app.port, watcher.session
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while event_ids(&raw).is_empty() {
        let n = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut buf))
            .await
            .expect("the priming event arrives")
            .unwrap();
        assert!(n > 0, "stream open");
        raw.extend_from_slice(&buf[..n]);
    }
    assert!(
        raw.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&raw)
    );

    // Updates until the server says it closed a stream: they fill the socket's buffers (a few
    // hundred KB on loopback), the server's write buffer (128 KB), then the 4 KiB stream budget.
    let overflowed = || async {
        app.metrics_text(METRICS_TOKEN)
            .await
            .lines()
            .any(|l| l.starts_with("mcp_harbor_sse_streams_overflowed_total 1"))
    };
    let mut updates = 0;
    while updates < 40_000 {
        for _ in 0..500 {
            writer
                .result(
                    "tools/call",
                    json!({ "name": "set_note", "arguments": { "text": format!("note {updates}") } }),
                )
                .await;
            updates += 1;
        }
        if overflowed().await {
            break;
        }
    }
    assert!(
        overflowed().await,
        "the stream was closed after {updates} unread updates"
    );

    // Reading again: what was buffered arrives, then the stream ends (it would otherwise stay
    // open for ever, as a standalone stream does).
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = stalled.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            raw.extend_from_slice(&buf[..n]);
            if raw.ends_with(b"\r\n0\r\n\r\n") {
                return;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled stream was closed by the server");
    let seen = event_ids(&raw);
    assert!(
        seen.len() < updates,
        "the closed stream delivered only part of the updates ({} of {updates})",
        seen.len()
    );

    // Resuming after the last event received delivers every later update, in order, none twice.
    let last = seen.last().unwrap().clone();
    let (stream_id, mut expected) = split_event_id(&last);
    let mut resumed = SseReader::new(watcher.get_stream(Some(&last)).await);
    let mut delivered = seen.len() - 1; // the priming event carries no update
    while delivered < updates {
        let event = resumed
            .next_event(Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("update {delivered} of {updates} is replayed"));
        let Some(id) = event.id.as_deref() else {
            continue;
        };
        let (stream, seq) = split_event_id(id);
        expected += 1;
        assert_eq!((stream.as_str(), seq), (stream_id.as_str(), expected));
        let msg = event.json().unwrap();
        assert_eq!(msg["method"], "notifications/resources/updated");
        delivered += 1;
    }
    let note = writer
        .result("resources/read", json!({ "uri": "demo://note" }))
        .await;
    assert_eq!(note["contents"][0]["text"], format!("note {}", updates - 1));
}
