//! MCP behaviour over real HTTP: version negotiation, lifecycle, batches, errors, pagination,
//! logging, progress, cancellation, completion.

use std::time::Duration;

use crate::helpers::{initialize_body, spawn_app, spawn_app_with, SseReader};
use serde_json::{json, Value};

#[actix_rt::test]
async fn negotiates_every_served_revision_and_falls_back_to_the_latest() {
    let app = spawn_app().await;
    for (asked, expected) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2030-01-01", "2025-11-25"),
    ] {
        let resp = app
            .post("demo", None, &initialize_body(asked, json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let session = resp
            .headers()
            .get("mcp-session-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(session.len(), 32, "session ids are 128-bit hex");
        assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["result"]["protocolVersion"], expected, "asked {asked}");
        assert_eq!(body["result"]["serverInfo"]["name"], "mcp-harbor");
        assert_eq!(
            body["result"]["capabilities"]["resources"]["subscribe"],
            true
        );
    }
}

#[actix_rt::test]
async fn initialize_without_a_version_is_refused_and_opens_no_session() {
    let app = spawn_app().await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "capabilities": {} } });
    let resp = app.post("demo", None, &body).send().await.unwrap();
    assert!(resp.headers().get("mcp-session-id").is_none());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32602);
}

#[actix_rt::test]
async fn second_initialize_on_a_session_is_refused() {
    let app = spawn_app().await;
    let c = app.open_session("demo", "2025-11-25", json!({})).await;
    let resp = c.send(&initialize_body("2025-11-25", json!({}))).await;
    assert_eq!(resp.status(), 400);
}

#[actix_rt::test]
async fn unknown_method_and_bad_params_are_jsonrpc_errors() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let (r, _) = c.call("tools/frobnicate", json!({})).await;
    assert_eq!(r["error"]["code"], -32601);
    let (r, _) = c
        .call("tools/call", json!({ "name": "no_such_tool" }))
        .await;
    assert_eq!(r["error"]["code"], -32602);
    let (r, _) = c.call("tools/call", json!({ "arguments": {} })).await;
    assert_eq!(r["error"]["code"], -32602);
    let (r, _) = c
        .call("resources/read", json!({ "uri": "test://missing" }))
        .await;
    assert_eq!(r["error"]["code"], -32002);
    let (r, _) = c
        .call(
            "prompts/get",
            json!({ "name": "test_prompt_with_arguments" }),
        )
        .await;
    assert_eq!(
        r["error"]["code"], -32602,
        "missing required prompt arguments"
    );
    let (r, _) = c.call("logging/setLevel", json!({ "level": "loud" })).await;
    assert_eq!(r["error"]["code"], -32602);
    // String ids keep their type.
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": "abc", "method": "ping" }))
        .await;
    let (r, _) = read_answer_any(resp).await;
    assert_eq!(r["id"], "abc");
    assert_eq!(r["result"], json!({}));
}

async fn read_answer_any(resp: reqwest::Response) -> (Value, Vec<Value>) {
    let body: Value = resp.json().await.unwrap();
    (body, vec![])
}

#[actix_rt::test]
async fn tool_errors_are_results_and_structured_output_is_returned() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-06-18", json!({})).await;
    let r = c
        .result(
            "tools/call",
            json!({ "name": "test_error_handling", "arguments": {} }),
        )
        .await;
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().contains("error"));
    let r = c
        .result(
            "tools/call",
            json!({ "name": "add", "arguments": { "numbers": [1, 2, 3.5] } }),
        )
        .await;
    assert_eq!(r["structuredContent"]["sum"], 6.5);
    assert_eq!(r["structuredContent"]["count"], 3);
    // A sum too large for a number is the tool's error, not `"sum": null` against its schema.
    let r = c
        .result(
            "tools/call",
            json!({ "name": "add", "arguments": { "numbers": [1e308, 1e308] } }),
        )
        .await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.get("structuredContent").is_none(), "{r}");
    let tools = c.result("tools/list", json!({})).await;
    let add = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap()
        .clone();
    assert!(add["outputSchema"].is_object());
    assert_eq!(add["annotations"]["readOnlyHint"], true);
}

#[actix_rt::test]
async fn batches_are_answered_on_2025_03_26_and_refused_later() {
    let app = spawn_app().await;
    let c = app.open_session("demo", "2025-03-26", json!({})).await;
    let batch = json!([
        { "jsonrpc": "2.0", "id": 1, "method": "ping" },
        { "jsonrpc": "2.0", "method": "notifications/roots/list_changed" },
        { "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "b" } } },
        { "jsonrpc": "2.0", "id": 3, "method": "nope" },
        42
    ]);
    let resp = c.send(&batch).await;
    assert_eq!(resp.status(), 200);
    let answers: Value = resp.json().await.unwrap();
    let answers = answers.as_array().expect("a batch answer is an array");
    assert_eq!(
        answers.len(),
        4,
        "one answer per request and per invalid element: {answers:?}"
    );
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned().unwrap();
    assert_eq!(by_id(json!(1))["result"], json!({}));
    assert_eq!(by_id(json!(2))["result"]["content"][0]["text"], "b");
    assert_eq!(by_id(json!(3))["error"]["code"], -32601);
    assert_eq!(by_id(Value::Null)["error"]["code"], -32600);

    // Notifications only: 202.
    let resp = c
        .send(&json!([{ "jsonrpc": "2.0", "method": "notifications/initialized" }]))
        .await;
    assert_eq!(resp.status(), 202);

    // A request cancelled in its own batch is owed no response, but a POST holding a request is
    // answered with JSON or a stream, never a bare 202: a stream that ends at once.
    let resp = c
        .send(&json!([
            { "jsonrpc": "2.0", "id": 5, "method": "tools/call",
              "params": { "name": "slow_count", "arguments": { "steps": 3, "interval_ms": 50 } } },
            { "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 5 } }
        ]))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = tokio::time::timeout(Duration::from_secs(5), resp.text())
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(!text.contains("\"result\""), "{text}");

    let newer = app.open_session("demo", "2025-06-18", json!({})).await;
    let resp = newer
        .send(&json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }]))
        .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert!(body["error"]["message"].as_str().unwrap().contains("batch"));
}

#[actix_rt::test]
async fn pagination_walks_every_list_with_opaque_cursors() {
    let app = spawn_app_with(|c| c.sessions.page_size = 3).await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    for (method, key, total) in [
        ("tools/list", "tools", 35),
        ("prompts/list", "prompts", 6),
        ("resources/list", "resources", 4),
    ] {
        let mut seen = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let params = cursor
                .as_ref()
                .map_or(json!({}), |c| json!({ "cursor": c }));
            let page = c.result(method, params).await;
            let items = page[key].as_array().unwrap();
            assert!(items.len() <= 3);
            seen.extend(
                items
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_string()),
            );
            match page.get("nextCursor") {
                Some(next) => cursor = Some(next.clone()),
                None => break,
            }
        }
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), seen.len(), "{method}: no item twice");
        assert_eq!(seen.len(), total, "{method}: every item once");
    }
    let (r, _) = c
        .call("tools/list", json!({ "cursor": "not-a-cursor" }))
        .await;
    assert_eq!(r["error"]["code"], -32602);
}

/// A cursor resumes at the item it points at even when the list changed between pages
/// (pagination.mdx: stable cursors): a prompt published ahead of it is neither repeated nor
/// the cause of a skip.
#[actix_rt::test]
async fn a_cursor_survives_a_publish_between_pages() {
    let app = spawn_app_with(|c| c.sessions.page_size = 2).await;
    let admin = |method, path: &str, body: Value| {
        let r = app.admin(method, path).json(&body);
        async move { r.send().await.unwrap().status().as_u16() }
    };
    let tenant = json!({ "slug": "paged", "catalogs": [] });
    assert_eq!(admin(reqwest::Method::POST, "/tenants", tenant).await, 201);
    let prompt = |name: &str| json!({ "name": name, "description": "d", "messages": [{ "role": "user", "text": "hi" }] });
    for name in ["b", "c", "d"] {
        let status = admin(
            reqwest::Method::POST,
            "/tenants/paged/prompts",
            prompt(name),
        )
        .await;
        assert_eq!(status, 201);
    }
    let mut c = app.open_session("paged", "2025-11-25", json!({})).await;
    let names = |page: &Value| -> Vec<String> {
        page["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = c.result("prompts/list", json!({})).await;
    assert_eq!(names(&first), ["b", "c"]);
    let status = admin(reqwest::Method::POST, "/tenants/paged/prompts", prompt("a")).await;
    assert_eq!(status, 201);
    let second = c
        .result("prompts/list", json!({ "cursor": first["nextCursor"] }))
        .await;
    assert_eq!(names(&second), ["d"]);
    assert!(second.get("nextCursor").is_none());
}

#[actix_rt::test]
async fn logging_follows_the_level_the_client_sets() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    assert_eq!(
        c.result("logging/setLevel", json!({ "level": "debug" }))
            .await,
        json!({})
    );
    let (resp, others) = c
        .call(
            "tools/call",
            json!({ "name": "test_tool_with_logging", "arguments": {} }),
        )
        .await;
    assert_eq!(resp["result"]["isError"], false);
    let logs: Vec<_> = others
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 3, "three log messages before the result");
    assert_eq!(logs[0]["params"]["level"], "info");
    assert_eq!(logs[0]["params"]["data"], "Tool execution started");

    c.result("logging/setLevel", json!({ "level": "error" }))
        .await;
    let (_, others) = c
        .call(
            "tools/call",
            json!({ "name": "test_tool_with_logging", "arguments": {} }),
        )
        .await;
    assert!(
        others
            .iter()
            .all(|m| m["method"] != "notifications/message"),
        "info is below error"
    );
}

#[actix_rt::test]
async fn progress_echoes_the_token_with_its_json_type() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    for token in [json!(17), json!("tok-1")] {
        let (resp, others) = c.call("tools/call", json!({ "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": token } })).await;
        assert!(resp.get("result").is_some());
        let progress: Vec<_> = others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3);
        assert!(progress
            .iter()
            .all(|p| p["params"]["progressToken"] == token));
        let values: Vec<f64> = progress
            .iter()
            .map(|p| p["params"]["progress"].as_f64().unwrap())
            .collect();
        assert_eq!(values, vec![0.0, 50.0, 100.0]);
    }
    // Without a token there is no progress.
    let (_, others) = c
        .call(
            "tools/call",
            json!({ "name": "test_tool_with_progress", "arguments": {} }),
        )
        .await;
    assert!(others
        .iter()
        .all(|m| m["method"] != "notifications/progress"));
}

#[actix_rt::test]
async fn cancellation_stops_the_request_and_no_response_is_sent() {
    let app = spawn_app().await;
    let c = app
        .open_session("demo", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    // test_elicitation waits for the client's answer: a request that stays in flight.
    let resp = c.send(&json!({ "jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": { "name": "test_elicitation", "arguments": { "message": "?" } } })).await;
    let mut sse = SseReader::new(resp);
    let mut elicitation_id = None;
    while let Some(e) = sse.next_event(Duration::from_secs(5)).await {
        if let Some(m) = e.json() {
            if m["method"] == "elicitation/create" {
                elicitation_id = Some(m["id"].clone());
                break;
            }
        }
    }
    let elicitation_id = elicitation_id.expect("the tool asked the client");
    let resp = c.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 77, "reason": "user gave up" } })).await;
    assert_eq!(resp.status(), 202);
    // The stream ends without a response to 77.
    let mut seen = Vec::new();
    assert!(
        sse.ends_within(Duration::from_secs(5), &mut seen).await,
        "the stream ends"
    );
    assert!(
        seen.iter()
            .filter_map(|e| e.json())
            .all(|m| m["id"] != json!(77)),
        "a cancelled request gets no response: {seen:?}"
    );
    // What it was asking the client is cancelled too: the form can close.
    assert!(
        seen.iter().filter_map(|e| e.json()).any(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == elicitation_id
        }),
        "the client is told its open elicitation is cancelled: {seen:?}"
    );
    // A late answer to the abandoned elicitation is accepted and ignored.
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": elicitation_id, "result": { "action": "cancel" } }))
        .await;
    assert_eq!(resp.status(), 202);
    // The id is free again and the session works.
    let mut c = c;
    c.result("ping", json!({})).await;
}

#[actix_rt::test]
async fn completion_suggests_prompt_arguments_and_template_variables() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let r = c
        .result("completion/complete", json!({ "ref": { "type": "ref/prompt", "name": "summarize" }, "argument": { "name": "style", "value": "b" } }))
        .await;
    assert_eq!(r["completion"]["values"], json!(["brief", "bullet-points"]));
    let r = c
        .result("completion/complete", json!({ "ref": { "type": "ref/resource", "uri": "test://template/{id}/data" }, "argument": { "name": "id", "value": "12" } }))
        .await;
    assert_eq!(r["completion"]["values"], json!(["123"]));
    let (r, _) = c
        .call(
            "completion/complete",
            json!({ "ref": { "type": "ref/nothing" }, "argument": { "name": "x", "value": "" } }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602);
    // An unknown prompt or template is Invalid params (completion.mdx), not an empty list.
    for (reference, message) in [
        (
            json!({ "type": "ref/prompt", "name": "nope" }),
            "Unknown prompt: nope",
        ),
        (
            json!({ "type": "ref/resource", "uri": "test://nope/{id}" }),
            "Unknown resource or resource template: test://nope/{id}",
        ),
        (
            json!({ "type": "ref/prompt" }),
            "ref/prompt needs a string \"name\"",
        ),
    ] {
        let (r, _) = c
            .call(
                "completion/complete",
                json!({ "ref": reference, "argument": { "name": "x", "value": "" } }),
            )
            .await;
        assert_eq!(r["error"]["code"], -32602, "{reference}");
        let text = r["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{text}");
    }
    // The argument's value is required, and context.arguments maps names to strings.
    let summarize = json!({ "type": "ref/prompt", "name": "summarize" });
    for (params, message) in [
        (
            json!({ "ref": summarize, "argument": { "name": "style" } }),
            "argument needs a string \"value\"",
        ),
        (
            json!({ "ref": summarize, "argument": { "name": "style", "value": "b" },
                    "context": { "arguments": { "text": 3 } } }),
            "context.arguments",
        ),
    ] {
        let (r, _) = c.call("completion/complete", params.clone()).await;
        assert_eq!(r["error"]["code"], -32602, "{params}");
        let text = r["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{text}");
    }
    let r = c
        .result("completion/complete", json!({ "ref": summarize, "argument": { "name": "style", "value": "b" }, "context": { "arguments": { "text": "hello" } } }))
        .await;
    assert_eq!(r["completion"]["values"], json!(["brief", "bullet-points"]));
}

#[actix_rt::test]
async fn resources_templates_and_prompts_read_back() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    let r = c
        .result(
            "resources/read",
            json!({ "uri": "test://template/42/data" }),
        )
        .await;
    assert!(r["contents"][0]["text"].as_str().unwrap().contains("42"));
    let r = c.result("resources/templates/list", json!({})).await;
    assert_eq!(
        r["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    let r = c
        .result(
            "prompts/get",
            json!({ "name": "summarize", "arguments": { "text": "the quick fox" } }),
        )
        .await;
    assert!(r["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("the quick fox"));
}

/// Requests a session can answer without its actor (catalog reads, tools that answer at once)
/// follow the session's rules all the same: an id still in flight is refused, progress is
/// honoured, the metric is recorded, and an unknown session is 404.
#[actix_rt::test]
async fn requests_answered_at_once_keep_the_session_rules() {
    let app =
        spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from("at-once-metrics-token"))
            .await;
    let c = app.open_session("demo", "2025-11-25", json!({})).await;
    let call = |id: i64, name: &str, arguments: Value| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": arguments } })
    };
    let json_answer = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), 200);
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        resp.json::<Value>().await.unwrap()
    };

    let answer = json_answer(c.send(&call(5, "echo", json!({ "text": "one" }))).await).await;
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["result"]["content"][0]["text"], "one");
    // A bad argument is the tool's own error, as through the session: from 2025-11-25 on a
    // tool execution error the model can correct (isError), before that Invalid Params.
    let answer = json_answer(c.send(&call(6, "echo", json!({}))).await).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("text"));
    let older = app.open_session("demo", "2025-06-18", json!({})).await;
    let answer = json_answer(older.send(&call(6, "echo", json!({}))).await).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let answer = json_answer(
        c.send(&json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/list" }))
            .await,
    )
    .await;
    assert!(answer["result"]["tools"].as_array().unwrap().len() >= 4);

    // While request 7 runs, another request 7 is refused: the session sees it.
    let slow = c
        .send(&call(
            7,
            "slow_count",
            json!({ "steps": 3, "interval_ms": 300 }),
        ))
        .await;
    assert_eq!(slow.status(), 200);
    let answer = json_answer(c.send(&call(7, "echo", json!({ "text": "again" }))).await).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{answer}"
    );
    let answer = json_answer(c.send(&call(8, "echo", json!({ "text": "beside" }))).await).await;
    assert_eq!(answer["result"]["content"][0]["text"], "beside");
    let (done, _) = crate::helpers::read_answer(slow, 7).await;
    assert_eq!(done["result"]["content"][0]["text"], "counted 3", "{done}");
    let answer = json_answer(c.send(&call(7, "echo", json!({ "text": "free" }))).await).await;
    assert_eq!(answer["result"]["content"][0]["text"], "free");

    // A progress token is honoured (the call goes through the session, which owns the stream).
    let resp = c
        .send(
            &json!({ "jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
            "name": "echo", "arguments": { "text": "p" }, "_meta": { "progressToken": "t" } } }),
        )
        .await;
    let (answer, _) = crate::helpers::read_answer(resp, 10).await;
    assert_eq!(answer["result"]["content"][0]["text"], "p");

    // Unknown session: 404, as before.
    let resp = app
        .post(
            "demo",
            Some("no-such-session"),
            &call(11, "echo", json!({ "text": "x" })),
        )
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    let metrics = app.metrics_text("at-once-metrics-token").await;
    let series = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",tenant=\"demo\",error_type=\"\"} ";
    let count: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {metrics}"));
    // 5, 7 ("free") answered at once; 7 (slow_count), 8 and 10 through the session.
    assert_eq!(count, 5, "every successful call recorded once");
}
