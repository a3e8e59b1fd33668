//! The stateless revision (2026-07-28) on the same endpoint as the session revisions, over real
//! HTTP: discovery, per-request `_meta`, the header rules and their error codes and statuses,
//! cache hints, multi round-trip requests (built-in and webhook tools; the tamper, replay,
//! cross-call and cross-tenant cases of `requestState`), progress and logging per request,
//! `subscriptions/listen`, and a session-era client on the same tenant at the same time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{
    spawn_app, stateless_body as body, stateless_meta as meta, SseReader, TestApp, STATELESS as V,
};
use actix_web::{web, HttpRequest, HttpResponse};
use reqwest::Method;
use serde_json::{json, Value};

/// How long a test waits for the next message on a stream.
const WAIT: Duration = Duration::from_secs(5);

/// Sends and reads the answer (JSON or SSE): the status, the response, the notifications.
async fn send(app: &TestApp, tenant: &str, body: &Value) -> (u16, Value, Vec<Value>) {
    let resp = app.post_stateless(tenant, body).send().await.unwrap();
    let status = resp.status().as_u16();
    assert!(
        resp.headers().get("mcp-session-id").is_none(),
        "no session id is minted"
    );
    let id = body["id"].as_i64().unwrap();
    let (answer, notes) = crate::helpers::read_answer(resp, id).await;
    (status, answer, notes)
}

/// Publishes a webhook tool on the `demo` tenant: the status and the body of the answer.
async fn publish(app: &TestApp, tool: &Value) -> (u16, String) {
    let resp = app
        .admin(Method::POST, "/tenants/demo/tools")
        .json(tool)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

async fn result(app: &TestApp, tenant: &str, body: &Value) -> Value {
    let (status, answer, _) = send(app, tenant, body).await;
    assert_eq!(status, 200, "{answer}");
    answer["result"].clone()
}

#[actix_rt::test]
async fn discovery_lists_results_and_errors_of_the_stateless_revision() {
    let app = spawn_app().await;
    let discovered = result(
        &app,
        "demo",
        &body(1, "server/discover", json!({}), json!({})),
    )
    .await;
    assert_eq!(discovered["resultType"], "complete");
    let versions: Vec<&str> = discovered["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(versions.contains(&"2026-07-28") && versions.contains(&"2025-11-25"));
    assert!(discovered["capabilities"]["tools"].is_object());
    assert_eq!(discovered["ttlMs"], 60_000);
    assert_eq!(discovered["cacheScope"], "public");
    assert_eq!(
        discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-harbor"
    );

    // Lists: resultType, server identity, cache hints (public on an open tenant), stable order.
    let tools = result(&app, "demo", &body(2, "tools/list", json!({}), json!({}))).await;
    assert_eq!(tools["resultType"], "complete");
    assert_eq!(tools["ttlMs"], 60_000);
    assert_eq!(tools["cacheScope"], "public");
    let again = result(&app, "demo", &body(3, "tools/list", json!({}), json!({}))).await;
    assert_eq!(tools["tools"], again["tools"]);
    // A tenant's own cache hint.
    let resp = patch_other(&app, json!({ "limits": { "cache_ttl_ms": 5000 } }))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let other = result(
        &app,
        "other",
        &body(4, "prompts/list", json!({}), json!({})),
    )
    .await;
    assert_eq!(other["ttlMs"], 5000);

    let call = result(
        &app,
        "demo",
        &body(
            5,
            "tools/call",
            json!({ "name": "test_simple_text", "arguments": {} }),
            json!({}),
        ),
    )
    .await;
    assert_eq!(call["resultType"], "complete");
    assert_eq!(call["content"][0]["type"], "text");
    // Every result names the server (written once, the same each time).
    for r in [&call, &tools] {
        assert_eq!(
            r["_meta"],
            json!({ "io.modelcontextprotocol/serverInfo": discovered["_meta"]["io.modelcontextprotocol/serverInfo"] }),
            "{r}"
        );
    }
    assert!(
        call.get("ttlMs").is_none(),
        "tool results carry no cache hint"
    );

    let read = result(
        &app,
        "demo",
        &body(
            6,
            "resources/read",
            json!({ "uri": "test://static-text" }),
            json!({}),
        ),
    )
    .await;
    assert_eq!(read["contents"][0]["uri"], "test://static-text");
    assert_eq!(read["cacheScope"], "public");

    // Resource not found is Invalid Params in this revision.
    let (status, answer, _) = send(
        &app,
        "demo",
        &body(
            7,
            "resources/read",
            json!({ "uri": "test://nope" }),
            json!({}),
        ),
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_i64()),
        (200, Some(-32602))
    );

    // Methods this revision removed, and unknown ones: 404 with Method not found.
    for (id, method) in [(8, "ping"), (9, "logging/setLevel"), (10, "no/such")] {
        let (status, answer, _) = send(&app, "demo", &body(id, method, json!({}), json!({}))).await;
        assert_eq!(
            (status, answer["error"]["code"].as_i64()),
            (404, Some(-32601)),
            "{method}"
        );
    }

    // A session id sent by an older client is ignored (and none is minted: see `send`).
    let resp = app
        .post_stateless("demo", &body(11, "tools/list", json!({}), json!({})))
        .header("mcp-session-id", "0123456789abcdef0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // No GET stream and no DELETE in this revision.
    for method in [Method::GET, Method::DELETE] {
        let resp = app
            .http
            .request(method.clone(), app.mcp_url("demo"))
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", V)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{method}");
        // RFC 9110 §15.5.6: a 405 lists what the resource serves (here, to this revision).
        assert_eq!(resp.headers()["allow"], "POST, OPTIONS", "{method}");
    }
}

/// A tool that answers at once (`echo`) is answered without a round, and keeps every rule of a
/// stateless call: the result's shape, the tool's own errors, a `requestState` still checked,
/// progress still honoured, each call counted once in the operation metric (as are the other
/// stateless requests).
#[actix_rt::test]
async fn tools_answering_at_once_keep_the_rules_of_a_stateless_call() {
    let app = crate::helpers::spawn_app_with(|c| {
        c.metrics.token = secrecy::SecretString::from("modern-at-once-token")
    })
    .await;
    let call = |id: i64, arguments: Value, extra: Value| {
        let mut params = json!({ "name": "echo", "arguments": arguments });
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                params[k] = v;
            }
        }
        body(id, "tools/call", params, json!({}))
    };

    let (status, answer, notes) =
        send(&app, "demo", &call(1, json!({ "text": "one" }), json!({}))).await;
    assert_eq!(status, 200, "{answer}");
    assert!(notes.is_empty());
    assert_eq!(answer["result"]["content"][0]["text"], "one");
    assert_eq!(answer["result"]["resultType"], "complete");
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-harbor"
    );

    // The tool's own error (a missing argument), as on every other path: a tool execution
    // error, which the model can correct.
    let (status, answer, _) = send(&app, "demo", &call(2, json!({}), json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete");

    // A requestState is still opened (and this one is refused), even for a tool that never asks.
    let (_, answer, _) = send(
        &app,
        "demo",
        &call(
            3,
            json!({ "text": "x" }),
            json!({ "requestState": "forged" }),
        ),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requestState"),
        "{answer}"
    );

    // Asking for progress takes the full path, and still completes.
    let (status, answer, _) = send(
        &app,
        "demo",
        &call(
            4,
            json!({ "text": "p" }),
            json!({ "_meta": { "progressToken": "t4" } }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "p");
    assert_eq!(answer["result"]["resultType"], "complete");

    // Other stateless requests are counted too.
    let listed = result(&app, "demo", &body(5, "tools/list", json!({}), json!({}))).await;
    assert!(listed["tools"].is_array());
    let discovered = result(
        &app,
        "demo",
        &body(6, "server/discover", json!({}), json!({})),
    )
    .await;
    assert!(discovered["supportedVersions"].is_array());

    let metrics = app.metrics_text("modern-at-once-token").await;
    let series_count = |method: &str, error_type: &str| -> u64 {
        let series = format!(
            "mcp_server_operation_duration_seconds_count{{mcp_method_name=\"{method}\",tenant=\"demo\",error_type=\"{error_type}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let count = |error_type: &str| series_count("tools/call", error_type);
    assert_eq!(count(""), 2, "calls 1 and 4, once each: {metrics}");
    assert_eq!(count("tool_error"), 1, "call 2: {metrics}");
    assert_eq!(series_count("tools/list", ""), 1, "{metrics}");
    assert_eq!(series_count("server/discover", ""), 1, "{metrics}");
}

#[actix_rt::test]
async fn headers_must_match_the_body() {
    let app = spawn_app().await;
    let call = body(
        1,
        "tools/call",
        json!({ "name": "echo", "arguments": { "text": "hi" } }),
        json!({}),
    );
    let raw = |b: &Value| {
        app.http
            .post(app.mcp_url("demo"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(b.to_string())
    };
    let expect = |resp: reqwest::Response, code: i64| async move {
        let status = resp.status().as_u16();
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        answer
    };
    let mut other_version = call.clone();
    other_version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] =
        json!("2099-01-01");
    // Each case: the headers sent with the body; every one is a HeaderMismatch (400).
    let version = ("mcp-protocol-version", V);
    let method = ("mcp-method", "tools/call");
    let name = ("mcp-name", "echo");
    type Case<'a> = (&'a str, &'a Value, Vec<(&'a str, &'a str)>);
    let cases: [Case; 7] = [
        ("no MCP-Protocol-Version", &call, vec![method, name]),
        (
            "version differs from _meta",
            &other_version,
            vec![version, method, name],
        ),
        ("no Mcp-Method", &call, vec![version, name]),
        (
            "other Mcp-Method",
            &call,
            vec![version, ("mcp-method", "tools/list"), name],
        ),
        (
            "values are case-sensitive",
            &call,
            vec![version, ("mcp-method", "Tools/Call"), name],
        ),
        ("no Mcp-Name", &call, vec![version, method]),
        (
            "other Mcp-Name",
            &call,
            vec![version, method, ("mcp-name", "add")],
        ),
    ];
    for (case, body, headers) in cases {
        let mut request = raw(body);
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 400, "{case}");
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{case}: {answer}");
    }
    let resp = raw(&call)
        .header("MCP-PROTOCOL-VERSION", V)
        .header("Mcp-Method", "tools/call")
        .header("MCP-NAME", "=?base64?ZWNobw==?=")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        200,
        "header names are case-insensitive, sentinel decoded"
    );

    // Both the header and _meta name a version we do not serve: -32022 with what we do.
    let mut future = call.clone();
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let answer = expect(
        raw(&future)
            .header("mcp-protocol-version", "2099-01-01")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .send()
            .await
            .unwrap(),
        -32022,
    )
    .await;
    assert_eq!(answer["error"]["data"]["requested"], "2099-01-01");
    assert!(answer["error"]["data"]["supported"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    // A session-era client naming an unknown version gets the same error shape.
    let init = crate::helpers::initialize_body("2025-11-25", json!({}));
    let answer = expect(
        raw(&init)
            .header("mcp-protocol-version", "1999-01-01")
            .send()
            .await
            .unwrap(),
        -32022,
    )
    .await;
    assert_eq!(answer["error"]["data"]["requested"], "1999-01-01");

    // _meta without client capabilities.
    let mut no_caps = call.clone();
    no_caps["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let answer = expect(
        app.post_stateless("demo", &no_caps).send().await.unwrap(),
        -32602,
    )
    .await;
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("clientCapabilities"));
    // The header names the revision but _meta has no protocol version: a malformed request
    // (-32602), not a header mismatch; the same without any _meta.
    let mut no_version = call.clone();
    no_version["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/protocolVersion");
    let mut no_meta = call.clone();
    no_meta["params"].as_object_mut().unwrap().remove("_meta");
    for body in [&no_version, &no_meta] {
        let answer = expect(
            app.post_stateless("demo", body).send().await.unwrap(),
            -32602,
        )
        .await;
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion"));
    }

    // Batches and responses are not part of the revision; a notification is accepted.
    let resp = app
        .post_stateless("demo", &call)
        .body(json!([call.clone()]).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "_meta": meta(json!({})), "requestId": 1 } });
    let resp = app.post_stateless("demo", &note).send().await.unwrap();
    assert_eq!(resp.status(), 202);
}

#[actix_rt::test]
async fn x_mcp_header_parameters_are_mirrored_and_checked() {
    let app = spawn_app().await;
    let (base, _endpoint) = start_endpoint().await;
    let tool = json!({ "name": "query", "description": "runs a query in a region",
        "input_schema": { "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "limit": { "type": "integer", "x-mcp-header": "Limit" },
            "sql": { "type": "string" } } },
        "webhook": { "url": format!("{base}/echo"), "secret": SECRET, "timeout_ms": 2000 } });
    let (status, text) = publish(&app, &tool).await;
    assert_eq!(status, 201, "{text}");
    let call = body(
        1,
        "tools/call",
        json!({ "name": "query", "arguments": { "region": "Hello, 世界", "limit": 42, "sql": "select 1" } }),
        json!({}),
    );
    let status = |resp: reqwest::Response| resp.status().as_u16();
    // Missing the headers of set arguments.
    assert_eq!(
        status(app.post_stateless("demo", &call).send().await.unwrap()),
        400
    );
    // Present, encoded, numerically equal: accepted.
    let ok = app
        .post_stateless("demo", &call)
        .header("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?=")
        .header("Mcp-Param-Limit", "42.0")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let (answer, _) = crate::helpers::read_answer(ok, 1).await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    // A different value.
    let bad = app
        .post_stateless("demo", &call)
        .header("mcp-param-region", "us-west1")
        .header("mcp-param-limit", "42")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let answer: Value = bad.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32020);
    // Integers compare exactly, up to the largest JavaScript holds exactly (2^53-1).
    let big = body(
        3,
        "tools/call",
        json!({ "name": "query", "arguments": { "region": "eu", "limit": 9_007_199_254_740_991_u64 } }),
        json!({}),
    );
    let limit = |call: &Value, value: &'static str| {
        app.post_stateless("demo", call)
            .header("mcp-param-region", "eu")
            .header("mcp-param-limit", value)
    };
    let mismatch = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), 400);
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
        answer["error"]["message"].as_str().unwrap().to_string()
    };
    mismatch(limit(&big, "9007199254740990").send().await.unwrap()).await;
    assert_eq!(
        status(limit(&big, "9007199254740991").send().await.unwrap()),
        200
    );
    // Beyond it (2^53+1, which a JavaScript intermediary reads as 2^53) the value is refused,
    // even with the exact header: x-mcp-header integers must be within the safe range.
    let beyond = body(
        4,
        "tools/call",
        json!({ "name": "query", "arguments": { "region": "eu", "limit": 9_007_199_254_740_993_u64 } }),
        json!({}),
    );
    let message = mismatch(limit(&beyond, "9007199254740993").send().await.unwrap()).await;
    assert!(message.contains("2^53-1"), "{message}");
    // A header for an argument that is not there.
    let call = body(
        2,
        "tools/call",
        json!({ "name": "query", "arguments": { "sql": "select 1" } }),
        json!({}),
    );
    let extra = app
        .post_stateless("demo", &call)
        .header("mcp-param-limit", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(extra.status(), 400);
    assert_eq!(
        status(app.post_stateless("demo", &call).send().await.unwrap()),
        200
    );
    // A header sent twice, even with the body's value first, is a mismatch.
    let twice = app
        .post_stateless("demo", &big)
        .header("mcp-param-region", "eu")
        .header("mcp-param-region", "us")
        .header("mcp-param-limit", "9007199254740991");
    mismatch(twice.send().await.unwrap()).await;

    // A tool whose annotation clients must reject (a `number` parameter, a name that is not an
    // HTTP token, one under `items`) is not published.
    for schema in [
        json!({ "type": "object", "properties": { "n": { "type": "number", "x-mcp-header": "N" } } }),
        json!({ "type": "object", "properties": { "r": { "type": "string", "x-mcp-header": "a/b" } } }),
        json!({ "type": "object", "properties": { "l": { "type": "array",
            "items": { "type": "string", "x-mcp-header": "L" } } } }),
    ] {
        let tool = json!({ "name": "invalid_header", "description": "d", "input_schema": schema,
            "webhook": { "url": format!("{base}/echo"), "secret": SECRET } });
        let (status, text) = publish(&app, &tool).await;
        assert_eq!(status, 422, "{schema}");
        assert!(text.contains("x-mcp-header"), "{text}");
    }
}

#[actix_rt::test]
async fn a_tool_needing_input_answers_input_required_and_the_retry_completes() {
    let app = spawn_app().await;
    let (caps, args, first) = asked(&app).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let requests = first["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Who are you?");
    assert_eq!(request["params"]["mode"], "form");
    let state = first["requestState"].as_str().unwrap().to_string();
    assert!(!state.contains("Who"), "the state is opaque");

    let answer = json!({ key.clone(): { "action": "accept", "content": { "username": "ada", "email": "ada@example.com" } } });
    let retry = |id: i64, state: &str, responses: &Value, args: &Value| {
        retry_with(id, state, responses, args, caps.clone())
    };
    // No answer to what was asked: asked again (a new round), not an error.
    let again = result(
        &app,
        "demo",
        &retry(2, &state, &json!({ "unrelated": {} }), &args),
    )
    .await;
    assert_eq!(again["resultType"], "input_required");
    assert!(again["inputRequests"].get(key).is_some());
    let state = again["requestState"].as_str().unwrap().to_string();

    // A state for another call (different arguments) is refused, and so is an altered one.
    let other_args = json!({ "name": "test_elicitation", "arguments": { "message": "Other" } });
    let (_, refused, _) = send(&app, "demo", &retry(3, &state, &answer, &other_args)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let mut altered = state.clone().into_bytes();
    let i = altered.len() - 3;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let (_, refused, _) = send(&app, "demo", &retry(4, &altered, &answer, &args)).await;
    assert_eq!(refused["error"]["code"], -32602);

    // The retry with the answer completes, and the answer reached the tool.
    let done = result(&app, "demo", &retry(5, &state, &answer, &args)).await;
    assert_eq!(done["resultType"], "complete", "{done}");
    let text = done["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("action=accept") && text.contains("ada@example.com"),
        "{text}"
    );

    // A state is used once.
    let (_, replayed, _) = send(&app, "demo", &retry(6, &state, &answer, &args)).await;
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");

    // A client without the elicitation capability: MissingRequiredClientCapability, 400.
    let (status, missing, _) = send(
        &app,
        "demo",
        &body(7, "tools/call", args.clone(), json!({})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(missing["error"]["code"], -32021);
    assert!(missing["error"]["data"]["requiredCapabilities"]["elicitation"].is_object());

    // A retry that leaves a question unanswered is asked it again only if its own client
    // still declares the capability (none is inferred from the first request).
    let first = result(
        &app,
        "demo",
        &body(8, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    let state = first["requestState"].as_str().unwrap().to_string();
    let (status, missing, _) = send(
        &app,
        "demo",
        &retry_with(9, &state, &json!({}), &args, json!({ "sampling": {} })),
    )
    .await;
    assert_eq!(status, 400, "{missing}");
    assert_eq!(missing["error"]["code"], -32021, "{missing}");
    assert!(missing["error"]["data"]["requiredCapabilities"]["elicitation"]["form"].is_object());
    // That refusal did not use the round up: the retry with the answer goes on from it.
    let done = result(&app, "demo", &retry(10, &state, &answer, &args)).await;
    assert_eq!(done["resultType"], "complete", "{done}");
}

/// A retry claims its round while it runs. The claim of a replica that stopped while it ran a
/// retry lapses (here written to the database as that replica left it: 1 s to go): until then the
/// retry is refused as in use, after it the same retry goes on.
#[actix_rt::test]
async fn a_round_claimed_by_a_stopped_replica_is_retried_once_its_claim_lapses() {
    let app = spawn_app().await;
    let (caps, args, first) = asked(&app).await;
    let state = first["requestState"].as_str().unwrap();
    let key = crate::helpers::first_input_key(&first);
    let answer = json!({ key.clone(): { "action": "accept", "content": { "username": "ada", "email": "ada@example.com" } } });
    let until = crate::helpers::unix_ms() + 1000;
    let pool = app.database().await;
    let claimed = sqlx::query("UPDATE mrtr_rounds SET claimed_until = ?")
        .bind(until)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(claimed.rows_affected(), 1);
    pool.close().await;

    let retry = retry_with(2, state, &answer, &args, caps.clone());
    let (_, refused, _) = send(&app, "demo", &retry).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("in use by a retry still running"),
        "{message}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let done = result(&app, "demo", &retry).await;
    assert_eq!(done["resultType"], "complete", "{done}");
    let (_, used, _) = send(&app, "demo", &retry).await;
    assert_eq!(
        used["error"]["code"], -32602,
        "used up once answered: {used}"
    );
}

/// A requestState past its lifetime (`modern.request_state_ttl_secs`) is refused as expired.
#[actix_rt::test]
async fn an_expired_request_state_is_refused() {
    let app = crate::helpers::spawn_app_with(|c| c.modern.request_state_ttl_secs = 1).await;
    let (caps, args, first) = asked(&app).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let state = first["requestState"].as_str().unwrap();
    let key = crate::helpers::first_input_key(&first);
    let answer = json!({ key.clone(): { "action": "decline" } });
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, expired, _) =
        send(&app, "demo", &retry_with(2, state, &answer, &args, caps)).await;
    assert_eq!(status, 200, "{expired}");
    assert_eq!(expired["error"]["code"], -32602, "{expired}");
    assert!(
        expired["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("requestState has expired"),
        "{expired}"
    );
}

/// A call that answers `input_required` (a form elicitation), and the capabilities of a client
/// that takes it: (capabilities, params).
fn asking_call() -> (Value, Value) {
    (
        json!({ "elicitation": { "form": {} } }),
        json!({ "name": "test_elicitation", "arguments": { "message": "Who are you?" } }),
    )
}

/// [`asking_call`] sent to the `demo` tenant: (capabilities, params, its `input_required`).
async fn asked(app: &TestApp) -> (Value, Value, Value) {
    let (caps, args) = asking_call();
    let first = result(
        app,
        "demo",
        &body(1, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    (caps, args, first)
}

/// A retry of a call: its state, its answers, and the capabilities its client declares.
fn retry_with(id: i64, state: &str, responses: &Value, args: &Value, caps: Value) -> Value {
    let mut params = args.clone();
    params["requestState"] = json!(state);
    params["inputResponses"] = responses.clone();
    body(id, "tools/call", params, caps)
}

#[actix_rt::test]
async fn request_state_is_bound_to_its_tenant_and_holds_no_answers_in_clear() {
    let app = spawn_app().await;
    for slug in ["twin-a", "twin-b"] {
        let resp = app
            .admin(Method::POST, "/tenants")
            .json(&json!({ "slug": slug, "catalogs": ["reference"] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    let caps = json!({ "elicitation": {} });
    let args = json!({ "name": "test_elicitation", "arguments": {} });
    let first = result(
        &app,
        "twin-a",
        &body(1, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    let state = first["requestState"].as_str().unwrap();
    let key = crate::helpers::first_input_key(&first);
    let secret = "correct-horse-battery-staple";
    // The recorded round is sealed: nothing of the question is readable in the database.
    let answer = json!({ key.clone(): { "action": "accept", "content": { "username": secret, "email": "x@y.z" } } });
    let mut params = args.clone();
    params["requestState"] = json!(state);
    params["inputResponses"] = json!({ "unrelated": {} });
    let asked_again = result(&app, "twin-a", &body(4, "tools/call", params, caps.clone())).await;
    assert_eq!(asked_again["resultType"], "input_required");
    let state = asked_again["requestState"].as_str().unwrap();
    assert!(!database_holds(&app, b"Please provide your information"));
    // An answer that is not an ElicitResult is Invalid Params, and leaves the round for a
    // corrected retry.
    let mut malformed = args.clone();
    malformed["requestState"] = json!(state);
    malformed["inputResponses"] =
        json!({ key.clone(): { "error": { "code": -32600, "message": "x" } } });
    let (status, refused, _) = send(
        &app,
        "twin-a",
        &body(5, "tools/call", malformed, caps.clone()),
    )
    .await;
    assert_eq!(
        (status, refused["error"]["code"].clone()),
        (200, json!(-32602)),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ElicitResult"),
        "{refused}"
    );
    // So is an accepted answer off the requested schema (no email).
    let mut off_schema = args.clone();
    off_schema["requestState"] = json!(state);
    off_schema["inputResponses"] =
        json!({ key.clone(): { "action": "accept", "content": { "username": "x" } } });
    let (_, refused, _) = send(
        &app,
        "twin-a",
        &body(6, "tools/call", off_schema, caps.clone()),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("requested schema"), "{message}");
    let mut params = args.clone();
    params["requestState"] = json!(state);
    params["inputResponses"] = answer;
    // The same state at the twin tenant (same catalog, same tool, same arguments): refused.
    let (_, refused, _) = send(
        &app,
        "twin-b",
        &body(2, "tools/call", params.clone(), caps.clone()),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Still usable where it was issued.
    let done = result(&app, "twin-a", &body(3, "tools/call", params, caps.clone())).await;
    assert!(done["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains(secret));
}

/// Whether any file of the embedded database (main file, WAL) holds `needle`.
fn database_holds(app: &TestApp, needle: &[u8]) -> bool {
    let dir = app.data_dir.as_ref().expect("embedded database").path();
    std::fs::read_dir(dir).unwrap().flatten().any(|entry| {
        std::fs::read(entry.path())
            .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            .unwrap_or(false)
    })
}

// --- webhook tools: the endpoint's round is recorded and the retry goes on from it ---------

use crate::helpers::webhook::SECRET;

#[derive(Default)]
struct Endpoint {
    calls: AtomicUsize,
    rounds: parking_lot::Mutex<Vec<Value>>,
    /// The server hung up on the endpoint (silent endpoint only).
    hung_up: AtomicUsize,
}

/// An endpoint that reads one request, never answers, and records when the caller hangs up.
async fn start_silent_endpoint() -> (String, Arc<Endpoint>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Arc::new(Endpoint::default());
    let seen = state.clone();
    actix_rt::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    seen.hung_up.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                Ok(Ok(_)) => {
                    seen.calls.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => break,
            }
        }
    });
    (format!("http://127.0.0.1:{port}"), state)
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..300 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen within 6 s");
}

#[actix_rt::test]
async fn closing_the_connection_cancels_the_call() {
    let app = spawn_app().await;
    let (base, endpoint) = start_silent_endpoint().await;
    let tool = json!({ "name": "slow", "description": "never answers",
        "input_schema": { "type": "object", "properties": {} },
        "webhook": { "url": format!("{base}/slow"), "secret": SECRET, "timeout_ms": 10000 } });
    assert_eq!(publish(&app, &tool).await.0, 201);
    let call = body(
        1,
        "tools/call",
        json!({ "name": "slow", "arguments": {} }),
        json!({}),
    );
    let pending = actix_rt::spawn(app.post_stateless("demo", &call).send());
    eventually("the webhook call", || {
        endpoint.calls.load(Ordering::SeqCst) > 0
    })
    .await;
    assert_eq!(
        endpoint.hung_up.load(Ordering::SeqCst),
        0,
        "the call is still open"
    );
    // Still running after a moment: the answer is the request's stream; closing it cancels.
    let resp = pending.await.unwrap().unwrap();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    drop(resp);
    eventually("the server hanging up on the endpoint", || {
        endpoint.hung_up.load(Ordering::SeqCst) > 0
    })
    .await;
}

async fn hook(req: HttpRequest, body: web::Bytes, state: web::Data<Arc<Endpoint>>) -> HttpResponse {
    state.calls.fetch_add(1, Ordering::SeqCst);
    let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.rounds.lock().push(call.clone());
    let reply = match req.path() {
        "/echo" => {
            json!({ "content": [{ "type": "text", "text": format!("args={}", call["arguments"]) }] })
        }
        "/ask" if call["round"] == 1 => json!({
            "input_request": { "type": "elicitation", "message": "Which project?", "requested_schema": { "type": "object", "properties": { "project": { "type": "string" } }, "required": ["project"] } },
            "state": { "step": "asked" } }),
        "/ask" => {
            json!({ "content": [{ "type": "text", "text": format!("round={} state={} project={}", call["round"], call["state"]["step"], call["input"]["content"]["project"]) }] })
        }
        // Two questions in two rounds: an elicitation, then a sample.
        "/twice" if call["round"] == 1 => json!({
            "input_request": { "type": "elicitation", "message": "Which project?", "requested_schema": { "type": "object", "properties": { "project": { "type": "string" } } } },
            "state": { "asked": 1 } }),
        "/twice" if call["round"] == 2 => json!({
            "input_request": { "type": "sampling", "params": { "messages": [{ "role": "user", "content": { "type": "text", "text": format!("Name {}", call["input"]["content"]["project"]) } }], "maxTokens": 10 } },
            "state": { "asked": 2, "project": call["input"]["content"]["project"] } }),
        "/twice" => {
            json!({ "content": [{ "type": "text", "text": format!("round={} project={} name={}", call["round"], call["state"]["project"], call["input"]["content"]["text"]) }] })
        }
        "/tool_sample" => json!({
            "input_request": { "type": "sampling", "params": { "messages": [{ "role": "user", "content": { "type": "text", "text": "Weather?" } }], "maxTokens": 10,
                "tools": [{ "name": "get_weather", "inputSchema": { "type": "object" } }] } } }),
        "/bad_schema" => json!({
            "input_request": { "type": "elicitation", "message": "Name?", "requested_schema": { "type": "string" } } }),
        "/bad_size" => json!({
            "input_request": { "type": "elicitation", "message": "Name?", "requested_schema": crate::helpers::doubling_schema(30) } }),
        "/bad_types" => json!({
            "input_request": { "type": "elicitation", "message": "Name?", "requested_schema": { "type": "object", "properties": { "name": { "type": "nonsense" } } } } }),
        // The same question twice, in rounds 1 and 2.
        "/approve" if call["round"] == 1 || call["round"] == 2 => json!({
            "input_request": { "type": "elicitation", "message": "Approve?", "requested_schema": { "type": "object", "properties": { "ok": { "type": "boolean" } } } },
            "state": { "first": call["input"]["content"]["ok"] } }),
        "/approve" => {
            json!({ "content": [{ "type": "text", "text": format!("first={} second={}", call["state"]["first"], call["input"]["content"]["ok"]) }] })
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

#[actix_rt::test]
async fn a_webhook_input_request_becomes_input_required_and_goes_on_from_its_round() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    let tool = json!({ "name": "ask", "description": "asks which project",
        "input_schema": { "type": "object", "properties": {} },
        "webhook": { "url": format!("{base}/ask"), "secret": SECRET, "timeout_ms": 2000 } });
    assert_eq!(publish(&app, &tool).await.0, 201);
    let caps = json!({ "elicitation": {} });
    let args = json!({ "name": "ask", "arguments": {} });
    let first = result(
        &app,
        "demo",
        &body(10, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let (key, request) = first["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["params"]["message"], "Which project?");
    let mut params = args.clone();
    params["requestState"] = first["requestState"].clone();
    params["inputResponses"] =
        json!({ key.clone(): { "action": "accept", "content": { "project": "apollo" } } });
    let done = result(&app, "demo", &body(11, "tools/call", params, caps)).await;
    assert_eq!(
        done["content"][0]["text"], "round=2 state=\"asked\" project=\"apollo\"",
        "{done}"
    );
    // Round 1 once, round 2 once: the retry did not call the endpoint's first round again, and
    // both rounds carry the call's identity (the first request's id).
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 2);
    let rounds = endpoint.rounds.lock().clone();
    assert_eq!(rounds[0]["request_id"], 10);
    assert_eq!(rounds[1]["request_id"], 10);
}

/// A webhook that asks the same question again in a later round gets the client's new answer:
/// the repeat is a new input request under a new key, not answered from the earlier round.
#[actix_rt::test]
async fn a_question_asked_again_in_a_later_round_is_asked_again() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    let tool = json!({ "name": "approve", "description": "asks for approval twice",
        "input_schema": { "type": "object", "properties": {} },
        "webhook": { "url": format!("{base}/approve"), "secret": SECRET, "timeout_ms": 2000 } });
    assert_eq!(publish(&app, &tool).await.0, 201);
    let caps = json!({ "elicitation": {} });
    let args = json!({ "name": "approve", "arguments": {} });
    let retry = |previous: &Value, answers: Value, id: i64| {
        let mut params = args.clone();
        params["requestState"] = previous["requestState"].clone();
        params["inputResponses"] = answers;
        body(id, "tools/call", params, caps.clone())
    };
    let only_key = |r: &Value| -> String {
        let requests = r["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1, "{r}");
        requests.keys().next().unwrap().clone()
    };
    let first = result(
        &app,
        "demo",
        &body(1, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let k1 = only_key(&first);
    let accept = |ok: bool| json!({ "action": "accept", "content": { "ok": ok } });
    let second = result(
        &app,
        "demo",
        &retry(&first, json!({ k1.clone(): accept(true) }), 2),
    )
    .await;
    assert_eq!(second["resultType"], "input_required", "{second}");
    let k2 = only_key(&second);
    assert_ne!(k1, k2, "keys are unique within the request");
    assert_eq!(
        second["inputRequests"][&k2]["params"]["message"],
        "Approve?"
    );
    let done = result(
        &app,
        "demo",
        &retry(&second, json!({ k2: accept(false) }), 3),
    )
    .await;
    assert_eq!(
        done["content"][0]["text"], "first=true second=false",
        "{done}"
    );
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 3);
}

/// A webhook's tool-enabled sample goes only to a client that declared `sampling.tools`
/// (sampling.mdx MUST NOT); an elicitation schema that is not a flat object is the endpoint's
/// error, never sent to the client.
#[actix_rt::test]
async fn input_requests_need_the_sub_capability_and_shape_they_use() {
    let app = spawn_app().await;
    let (base, _endpoint) = start_endpoint().await;
    for (name, path) in [
        ("tool_sample", "/tool_sample"),
        ("bad_schema", "/bad_schema"),
        ("bad_types", "/bad_types"),
        ("bad_size", "/bad_size"),
    ] {
        let tool = json!({ "name": name, "description": "d",
            "input_schema": { "type": "object", "properties": {} },
            "webhook": { "url": format!("{base}{path}"), "secret": SECRET, "timeout_ms": 2000 } });
        assert_eq!(publish(&app, &tool).await.0, 201);
    }
    let call = json!({ "name": "tool_sample", "arguments": {} });
    let (status, missing, _) = send(
        &app,
        "demo",
        &body(1, "tools/call", call.clone(), json!({ "sampling": {} })),
    )
    .await;
    assert_eq!(status, 400, "{missing}");
    assert_eq!(missing["error"]["code"], -32021, "{missing}");
    assert_eq!(
        missing["error"]["data"]["requiredCapabilities"],
        json!({ "sampling": { "tools": {} } })
    );
    let asked = result(
        &app,
        "demo",
        &body(
            2,
            "tools/call",
            call,
            json!({ "sampling": { "tools": {} } }),
        ),
    )
    .await;
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let request = asked["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(request["params"]["tools"][0]["name"], "get_weather");

    // Not an object schema, not a JSON Schema at all (an unknown type), or one whose validation
    // could cost without bound (2^30 subschemas once its references are expanded).
    for (id, name) in [(3, "bad_schema"), (4, "bad_types"), (5, "bad_size")] {
        let bad = result(
            &app,
            "demo",
            &body(
                id,
                "tools/call",
                json!({ "name": name, "arguments": {} }),
                json!({ "elicitation": {} }),
            ),
        )
        .await;
        assert_eq!(bad["isError"], true, "{name}: {bad}");
        let text = bad["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("requested_schema"), "{name}: {text}");
        if name == "bad_size" {
            assert!(text.contains("expands to more than 2000"), "{text}");
        }
    }
}

#[actix_rt::test]
async fn multiple_rounds_and_sampling_go_through_input_required() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    let tool = json!({ "name": "twice", "description": "asks twice",
        "input_schema": { "type": "object", "properties": {} },
        "webhook": { "url": format!("{base}/twice"), "secret": SECRET, "timeout_ms": 2000 } });
    assert_eq!(publish(&app, &tool).await.0, 201);
    let caps = json!({ "elicitation": {}, "sampling": {} });
    let args = json!({ "name": "twice", "arguments": {} });
    let first = result(
        &app,
        "demo",
        &body(1, "tools/call", args.clone(), caps.clone()),
    )
    .await;
    let (key1, asked1) = first["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(asked1["method"], "elicitation/create");
    let mut params = args.clone();
    params["requestState"] = first["requestState"].clone();
    params["inputResponses"] =
        json!({ key1.clone(): { "action": "accept", "content": { "project": "apollo" } } });
    let second = result(&app, "demo", &body(2, "tools/call", params, caps.clone())).await;
    assert_eq!(second["resultType"], "input_required", "{second}");
    let (key2, asked2) = second["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(asked2["method"], "sampling/createMessage");
    assert_eq!(
        asked2["params"]["messages"][0]["content"]["text"],
        "Name \"apollo\""
    );
    assert_ne!(key1, key2);
    // The first round's state is spent once the second is issued.
    let mut stale = args.clone();
    stale["requestState"] = first["requestState"].clone();
    stale["inputResponses"] =
        json!({ key1.clone(): { "action": "accept", "content": { "project": "x" } } });
    let (_, refused, _) = send(&app, "demo", &body(3, "tools/call", stale, caps.clone())).await;
    assert_eq!(refused["error"]["code"], -32602);
    let mut params = args.clone();
    params["requestState"] = second["requestState"].clone();
    params["inputResponses"] = json!({ key2.clone(): { "role": "assistant", "content": { "type": "text", "text": "Apollo-1" }, "model": "m" } });
    let done = result(&app, "demo", &body(4, "tools/call", params, caps.clone())).await;
    assert_eq!(
        done["content"][0]["text"], "round=3 project=\"apollo\" name=\"Apollo-1\"",
        "{done}"
    );
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 3, "each round once");

    // A built-in tool's sample.
    let sample = json!({ "name": "test_sampling", "arguments": { "prompt": "2+2?" } });
    let asked = result(
        &app,
        "demo",
        &body(5, "tools/call", sample.clone(), caps.clone()),
    )
    .await;
    let (key, request) = asked["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "sampling/createMessage");
    let mut params = sample.clone();
    params["requestState"] = asked["requestState"].clone();
    params["inputResponses"] = json!({ key.clone(): { "role": "assistant", "content": { "type": "text", "text": "4" }, "model": "m" } });
    let done = result(&app, "demo", &body(6, "tools/call", params, caps)).await;
    assert_eq!(done["content"][0]["text"], "LLM response: 4");

    // Without the capability a tool needs: MissingRequiredClientCapability (400) naming it,
    // never a tool error, for a built-in tool's sample or roots...
    let roots = json!({ "name": "client_roots", "arguments": {} });
    for (id, call, lacking) in [(7, &sample, "sampling"), (8, &roots, "roots")] {
        let (status, missing, _) = send(
            &app,
            "demo",
            &body(id, "tools/call", call.clone(), json!({ "elicitation": {} })),
        )
        .await;
        assert_eq!(status, 400, "{missing}");
        assert_eq!(missing["error"]["code"], -32021, "{missing}");
        assert!(
            missing["error"]["data"]["requiredCapabilities"][lacking].is_object(),
            "{missing}"
        );
    }
    // ...and for a webhook's input request (its second round asks for a sample): the
    // endpoint is not handed the refusal as its next round's input.
    let no_sampling = json!({ "elicitation": {} });
    let first = result(
        &app,
        "demo",
        &body(9, "tools/call", args.clone(), no_sampling.clone()),
    )
    .await;
    let key1 = crate::helpers::first_input_key(&first);
    let mut params = args.clone();
    params["requestState"] = first["requestState"].clone();
    params["inputResponses"] =
        json!({ key1.clone(): { "action": "accept", "content": { "project": "apollo" } } });
    let (status, missing, _) =
        send(&app, "demo", &body(10, "tools/call", params, no_sampling)).await;
    assert_eq!(status, 400, "{missing}");
    assert_eq!(missing["error"]["code"], -32021, "{missing}");
    assert!(missing["error"]["data"]["requiredCapabilities"]["sampling"].is_object());
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        5,
        "rounds 1 and 2 of that call only"
    );
}

// --- progress, logging, subscriptions, both eras at once ------------------------------------

#[actix_rt::test]
async fn progress_and_logging_flow_on_the_request_stream_only_when_asked() {
    let app = spawn_app().await;
    let with_progress = body(
        1,
        "tools/call",
        json!({ "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": "p-1" } }),
        json!({}),
    );
    let (_, answer, notes) = send(&app, "demo", &with_progress).await;
    assert_eq!(answer["result"]["resultType"], "complete");
    assert!(
        !notes.is_empty(),
        "progress notifications before the result"
    );
    assert!(notes
        .iter()
        .all(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == "p-1"));

    // Logging without a level in _meta: no notifications/message at all.
    let quiet = body(
        2,
        "tools/call",
        json!({ "name": "test_tool_with_logging", "arguments": {} }),
        json!({}),
    );
    let (_, answer, notes) = send(&app, "demo", &quiet).await;
    assert_eq!(answer["result"]["resultType"], "complete");
    assert!(
        notes.iter().all(|n| n["method"] != "notifications/message"),
        "{notes:?}"
    );
    let loud = body(
        3,
        "tools/call",
        json!({ "name": "test_tool_with_logging", "arguments": {}, "_meta": { "io.modelcontextprotocol/logLevel": "debug" } }),
        json!({}),
    );
    let (_, _, notes) = send(&app, "demo", &loud).await;
    assert!(
        notes.iter().any(|n| n["method"] == "notifications/message"),
        "{notes:?}"
    );
}

#[actix_rt::test]
async fn listen_delivers_opted_in_changes_alongside_a_session_client() {
    let app = spawn_app().await;
    let listen = body(
        7,
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["demo://note"] } }),
        json!({}),
    );
    let resp = app.post_stateless("demo", &listen).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut sse = SseReader::new(resp);
    let ack = sse
        .next_event(Duration::from_secs(5))
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    assert!(ack["params"]["notifications"]
        .get("promptsListChanged")
        .is_none());

    // A session-era client on the same tenant, subscribed to the note, at the same time.
    let mut session = app.open_session("demo", "2025-11-25", json!({})).await;
    session
        .result("resources/subscribe", json!({ "uri": "demo://note" }))
        .await;
    let standalone = session.get_stream(None).await;
    let mut standalone = SseReader::new(standalone);

    // A stateless call changes the note: both hear it.
    let set = body(
        8,
        "tools/call",
        json!({ "name": "set_note", "arguments": { "text": "hello" } }),
        json!({}),
    );
    let done = result(&app, "demo", &set).await;
    assert_eq!(done["resultType"], "complete", "{done}");
    let updated = sse.next_json(WAIT).await;
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "demo://note");
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    let heard = standalone.next_json(WAIT).await;
    assert_eq!(heard["method"], "notifications/resources/updated");

    // The session client's call works as before, beside the stateless ones.
    let echoed = session
        .result(
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "old" } }),
        )
        .await;
    assert_eq!(echoed["content"][0]["text"], "old");
    assert!(
        echoed.get("resultType").is_none(),
        "session-era results are unchanged"
    );

    // A published tool: the listener hears tools/list_changed (it did not opt in to prompts).
    let tool = json!({ "name": "late", "description": "d", "input_schema": { "type": "object" },
        "webhook": { "url": "http://127.0.0.1:9/x", "secret": SECRET } });
    assert_eq!(publish(&app, &tool).await.0, 201);
    let changed = sse.next_json(WAIT).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );

    // The server ends the subscription when it drains: notifications/cancelled naming the
    // listen request, then its graceful result.
    let (_, cancelled) = tokio::join!(app.drainer.drain(), sse.next_json(WAIT));
    assert_eq!(
        cancelled["method"], "notifications/cancelled",
        "{cancelled}"
    );
    assert_eq!(cancelled["params"]["requestId"], 7);
    assert_eq!(
        cancelled["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "every notification on the stream is tagged: {cancelled}"
    );
    assert!(cancelled.get("id").is_none());
    let end = sse.next_json(WAIT).await;
    assert_eq!(end["id"], 7);
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
}

/// The reference catalog's list-change hooks (the conformance suite's diagnostic tools) announce
/// a change of the tenant's tool or prompt list: a listen stream hears only the lists it opted
/// in to, tagged with its subscription; a session-era client on the same tenant hears it on its
/// standalone stream; the list itself is what it was.
#[actix_rt::test]
async fn list_change_hooks_reach_the_listen_streams_that_opted_in_and_sessions() {
    let app = spawn_app().await;
    let tools = |id| body(id, "tools/list", json!({}), json!({}));
    let names = |listed: &Value| -> Vec<String> {
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let before = names(&result(&app, "demo", &tools(1)).await);
    assert!(before.iter().any(|n| n == "test_trigger_tool_change"));
    assert!(before.iter().any(|n| n == "test_trigger_prompt_change"));

    let mut sse = listening(&app, "demo").await;
    let mut session = app.open_session("demo", "2025-11-25", json!({})).await;
    let mut standalone = SseReader::new(session.get_stream(None).await);

    // The prompt list changed: the listener opted in to tools only and hears nothing of it
    // (the next event it gets is the tool change below); the session hears it.
    let trigger = |id, name| {
        body(
            id,
            "tools/call",
            json!({ "name": name, "arguments": {} }),
            json!({}),
        )
    };
    let done = result(&app, "demo", &trigger(2, "test_trigger_prompt_change")).await;
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(
        standalone.next_json(WAIT).await["method"],
        "notifications/prompts/list_changed"
    );

    // The tool list changed, announced from a session-era call this time.
    let done = session
        .result(
            "tools/call",
            json!({ "name": "test_trigger_tool_change", "arguments": {} }),
        )
        .await;
    assert_eq!(done["isError"], false, "{done}");
    let changed = sse.next_json(WAIT).await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    assert_eq!(
        standalone.next_json(WAIT).await["method"],
        "notifications/tools/list_changed"
    );

    // Announced, not changed: the list is the same.
    assert_eq!(names(&result(&app, "demo", &tools(3)).await), before);
}

/// A `subscriptions/listen` request (id 9) for tool list changes.
fn listen_request() -> Value {
    body(
        9,
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true } }),
        json!({}),
    )
}

/// Changes the `other` tenant through the admin API (`PATCH`).
fn patch_other(
    app: &TestApp,
    change: Value,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
    app.admin(Method::PATCH, "/tenants/other")
        .json(&change)
        .send()
}

/// A `subscriptions/listen` stream (request id 9) on `tenant`, past its acknowledgement.
async fn listening(app: &TestApp, tenant: &str) -> SseReader {
    let listen = listen_request();
    let resp = app.post_stateless(tenant, &listen).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let ack = sse.next_json(WAIT).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    sse
}

/// Open listen streams count against the tenant's session limit on each replica (each holds a
/// stream as a session does): one over it is refused with 429, other tenants are not affected,
/// and a higher limit lets it in.
#[actix_rt::test]
async fn listen_streams_are_limited_like_sessions() {
    let app = spawn_app().await;
    let limit = |n: u32| patch_other(&app, json!({ "limits": { "max_sessions": n } }));
    assert_eq!(limit(1).await.unwrap().status(), 200);
    let _first = listening(&app, "other").await;
    let listen = listen_request();
    let resp = app.post_stateless("other", &listen).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let refused: Value = resp.json().await.unwrap();
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(refused["id"], 9, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limit of 1 open subscriptions"));
    let _demo = listening(&app, "demo").await;
    assert_eq!(limit(2).await.unwrap().status(), 200);
    let _second = listening(&app, "other").await;
}

/// A listen stream its client closed gives its place back (noticed at the stream's next
/// keep-alive): at the limit, a new one is let in once the old one is gone.
#[actix_rt::test]
async fn a_closed_listen_stream_frees_its_place() {
    let app = crate::helpers::spawn_app_with(|c| c.server.sse_keepalive_secs = 1).await;
    let r = patch_other(&app, json!({ "limits": { "max_sessions": 1 } })).await;
    assert_eq!(r.unwrap().status(), 200);
    let listen = listen_request();
    let first = listening(&app, "other").await;
    assert_eq!(
        app.post_stateless("other", &listen)
            .send()
            .await
            .unwrap()
            .status(),
        429
    );
    drop(first);
    let mut statuses = Vec::new();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let resp = app.post_stateless("other", &listen).send().await.unwrap();
        statuses.push(resp.status().as_u16());
        if resp.status() == 200 {
            break;
        }
    }
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
}

/// The end of a listen stream (request id 9) the server tears down: `notifications/cancelled`
/// naming it, then its result, then the end of the stream.
async fn torn_down(mut sse: SseReader) {
    let cancelled = sse.next_json(WAIT).await;
    assert_eq!(
        cancelled["method"], "notifications/cancelled",
        "{cancelled}"
    );
    assert_eq!(cancelled["params"]["requestId"], 9);
    let end = sse.next_json(WAIT).await;
    assert_eq!(end["id"], 9);
    assert_eq!(end["result"]["resultType"], "complete");
    assert!(
        sse.ends_within(Duration::from_secs(3), &mut Vec::new())
            .await
    );
}

/// A tenant that stops being served (suspended, deleted) ends its listen streams as a draining
/// server does, instead of keeping them open on keep-alives; resumed, it is listened to again.
#[actix_rt::test]
async fn suspending_or_deleting_a_tenant_ends_its_listen_streams() {
    let app = spawn_app().await;
    let status = |s: &'static str| patch_other(&app, json!({ "status": s }));
    let sse = listening(&app, "other").await;
    assert_eq!(status("suspended").await.unwrap().status(), 200);
    torn_down(sse).await;
    assert_eq!(status("active").await.unwrap().status(), 200);
    let mut sse = listening(&app, "other").await;
    // The new stream hears changes again.
    let tool = json!({ "name": "late", "description": "d", "input_schema": { "type": "object" },
        "webhook": { "url": "http://127.0.0.1:9/x", "secret": SECRET } });
    let published = app
        .admin(Method::POST, "/tenants/other/tools")
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 201);
    let changed = sse.next_json(WAIT).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    let deleted = app
        .admin(Method::DELETE, "/tenants/other")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    torn_down(sse).await;
}

/// A `subscriptions/listen` stream follows at most 256 resources, each URI at most 4096 bytes:
/// past either, the request is Invalid Params and no stream opens.
#[actix_rt::test]
async fn listen_follows_a_bounded_number_of_resources() {
    let app = spawn_app().await;
    let many: Vec<String> = (0..257).map(|i| format!("demo://r/{i}")).collect();
    let long = format!("demo://{}", "x".repeat(4096));
    for (uris, why) in [
        (json!(many), "at most 256 resources"),
        (json!([long]), "at most 4096 bytes"),
    ] {
        let listen = body(
            9,
            "subscriptions/listen",
            json!({ "notifications": { "resourceSubscriptions": uris } }),
            json!({}),
        );
        let (_, answer, _) = send(&app, "demo", &listen).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
    }
    // 256, the same one named twice among them, are followed.
    let mut fits: Vec<String> = (0..256).map(|i| format!("demo://r/{i}")).collect();
    fits.push("demo://r/0".into());
    let listen = body(
        9,
        "subscriptions/listen",
        json!({ "notifications": { "resourceSubscriptions": fits } }),
        json!({}),
    );
    let resp = app.post_stateless("demo", &listen).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ack = SseReader::new(resp).next_json(WAIT).await;
    let agreed = &ack["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(agreed.as_array().map(Vec::len), Some(256), "{ack}");
}

/// The answer of an accepted form.
fn accept(content: Value) -> Value {
    json!({ "action": "accept", "content": content })
}

fn call_of(name: &str) -> Value {
    json!({ "name": name, "arguments": {} })
}

/// The keys of an `input_required` result's questions, sorted.
fn keys_of(result: &Value) -> Vec<String> {
    let mut keys: Vec<String> = result["inputRequests"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// The reference catalog's fixtures of the conformance suite's 2026-07-28 scenarios ask under
/// the keys its clients expect, several questions in one round when asked together, a round at
/// a time when asked in turn, and only what the request declared it can answer.
#[actix_rt::test]
async fn the_conformance_fixtures_ask_under_the_keys_their_clients_expect() {
    let app = spawn_app().await;
    let all = json!({ "elicitation": {}, "sampling": {}, "roots": {} });
    let call = |id: i64, args: &Value| body(id, "tools/call", args.clone(), all.clone());
    let retry = |id: i64, first: &Value, responses: Value, args: &Value| {
        let state = first["requestState"].as_str().unwrap();
        retry_with(id, state, &responses, args, all.clone())
    };

    let args = call_of("test_input_required_result_elicitation");
    let first = result(&app, "demo", &call(1, &args)).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert_eq!(keys_of(&first), ["user_name"], "{first}");
    let done = result(
        &app,
        "demo",
        &retry(
            2,
            &first,
            json!({ "user_name": accept(json!({ "name": "Alice" })) }),
            &args,
        ),
    )
    .await;
    assert_eq!(done["content"][0]["text"], "Hello, Alice!", "{done}");

    // Asked together: one round with all three.
    let args = call_of("test_input_required_result_multiple_inputs");
    let first = result(&app, "demo", &call(3, &args)).await;
    let requests = first["inputRequests"].as_object().unwrap();
    assert_eq!(
        keys_of(&first),
        ["client_roots", "greeting", "user_name"],
        "{first}"
    );
    assert_eq!(requests["greeting"]["method"], "sampling/createMessage");
    assert_eq!(requests["client_roots"]["method"], "roots/list");
    let answers = json!({
        "user_name": accept(json!({ "name": "Bob" })),
        "greeting": { "role": "assistant", "content": { "type": "text", "text": "Howdy" }, "model": "m" },
        "client_roots": { "roots": [{ "uri": "file:///work" }] },
    });
    let done = result(&app, "demo", &retry(4, &first, answers, &args)).await;
    let text = done["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Bob") && text.contains("Howdy") && text.contains("file:///work"),
        "{text}"
    );

    // Asked in turn: a round each, each with its own state.
    let args = call_of("test_input_required_result_multi_round");
    let first = result(&app, "demo", &call(5, &args)).await;
    assert!(first["inputRequests"].get("step1").is_some(), "{first}");
    let second = result(
        &app,
        "demo",
        &retry(
            6,
            &first,
            json!({ "step1": accept(json!({ "name": "Cy" })) }),
            &args,
        ),
    )
    .await;
    assert_eq!(second["resultType"], "input_required", "{second}");
    assert!(second["inputRequests"].get("step2").is_some(), "{second}");
    assert_ne!(second["requestState"], first["requestState"]);
    let done = result(
        &app,
        "demo",
        &retry(
            7,
            &second,
            json!({ "step2": accept(json!({ "color": "blue" })) }),
            &args,
        ),
    )
    .await;
    assert_eq!(
        done["content"][0]["text"], "Cy's favorite color is blue",
        "{done}"
    );

    // Only what the request declared: sampling alone.
    let args = call_of("test_input_required_result_capabilities");
    let first = result(
        &app,
        "demo",
        &body(8, "tools/call", args, json!({ "sampling": {} })),
    )
    .await;
    assert_eq!(keys_of(&first), ["greeting"], "{first}");
}

/// A prompt that asks the client something: in 2026-07-28 it answers `input_required` and the
/// retry renders it (its state serves no tool call); in a session it asks over the request's
/// stream like a tool.
#[actix_rt::test]
async fn a_prompt_that_asks_answers_input_required_and_its_retry_renders_it() {
    let app = spawn_app().await;
    let caps = json!({ "elicitation": {} });
    let args = json!({ "name": "test_input_required_result_prompt" });
    let first = result(
        &app,
        "demo",
        &body(1, "prompts/get", args.clone(), caps.clone()),
    )
    .await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let request = &first["inputRequests"]["user_context"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    let state = first["requestState"].as_str().unwrap();
    let answer = json!({ "user_context": accept(json!({ "context": "tide tables" })) });

    // The prompt's state is no tool call's.
    let as_tool = retry_with(
        2,
        state,
        &answer,
        &call_of("test_input_required_result_elicitation"),
        caps.clone(),
    );
    let (_, refused, _) = send(&app, "demo", &as_tool).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    let mut retry = retry_with(3, state, &answer, &args, caps.clone());
    retry["method"] = json!("prompts/get");
    let done = result(&app, "demo", &retry).await;
    assert_eq!(done["resultType"], "complete", "{done}");
    let text = done["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("tide tables"), "{text}");

    // Without the elicitation capability: MissingRequiredClientCapability.
    let (status, missing, _) = send(
        &app,
        "demo",
        &body(4, "prompts/get", args.clone(), json!({})),
    )
    .await;
    assert_eq!(status, 400, "{missing}");
    assert_eq!(missing["error"]["code"], -32021, "{missing}");

    // In a session: elicitation/create on the request's stream, the answer renders the prompt.
    let c = app.open_session("demo", "2025-11-25", caps.clone()).await;
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": args }))
        .await;
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let request = sse.next_json(WAIT).await;
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let r = c
        .send(&json!({ "jsonrpc": "2.0", "id": request["id"], "result": accept(json!({ "context": "harbours" })) }))
        .await;
    assert_eq!(r.status(), 202);
    let answer = sse.next_json(WAIT).await;
    assert_eq!(answer["id"], 9, "{answer}");
    let text = answer["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("harbours"), "{answer}");
}

/// A first request (no `requestState`) may already carry `inputResponses`: an answer that fits
/// what the tool asks under its key is taken (unknown keys ignored), one that does not is asked
/// for in a round, and answers taken are kept for the rounds that follow.
#[actix_rt::test]
async fn answers_offered_with_a_first_request_are_taken_when_they_fit() {
    let app = spawn_app().await;
    let caps = json!({ "elicitation": {} });
    let offer = |id: i64, name: &str, responses: Value| {
        let mut params = call_of(name);
        params["inputResponses"] = responses;
        body(id, "tools/call", params, caps.clone())
    };
    let name = "test_input_required_result_elicitation";
    let fits = json!({ "user_name": accept(json!({ "name": "Dee" })), "unknown": accept(json!({ "x": 1 })) });
    let done = result(&app, "demo", &offer(1, name, fits)).await;
    assert_eq!(done["content"][0]["text"], "Hello, Dee!", "{done}");

    // Not an answer to the form (a number for a string field): asked in a round.
    let wrong = json!({ "user_name": accept(json!({ "name": 5 })) });
    let asked = result(&app, "demo", &offer(2, name, wrong)).await;
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert!(asked["inputRequests"].get("user_name").is_some());

    // Step 1 offered, step 2 asked: the retry of that round does not ask step 1 again.
    let multi = "test_input_required_result_multi_round";
    let first = result(
        &app,
        "demo",
        &offer(
            3,
            multi,
            json!({ "step1": accept(json!({ "name": "Eve" })) }),
        ),
    )
    .await;
    assert_eq!(keys_of(&first), ["step2"], "{first}");
    let state = first["requestState"].as_str().unwrap();
    let answer = json!({ "step2": accept(json!({ "color": "green" })) });
    let done = result(
        &app,
        "demo",
        &retry_with(4, state, &answer, &call_of(multi), caps.clone()),
    )
    .await;
    assert_eq!(
        done["content"][0]["text"], "Eve's favorite color is green",
        "{done}"
    );
}
