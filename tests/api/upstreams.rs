//! Upstream MCP servers (gateway mode), end to end: a tenant of one server federates a tenant of
//! another real server (mcp-harbor itself, its `reference` catalog, on its own port) through the
//! admin API, and MCP clients of the first see the second's entries renamed, filtered and
//! overridden, with calls, reads, prompts, completions, progress and sampling relayed both ways.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, stateless_body, SseReader, TestApp};

/// Two servers: `upstream` serving tenant `up` (the `reference` catalog), `gateway` serving
/// tenant `gw` with no catalog of its own.
async fn pair() -> (TestApp, TestApp) {
    let upstream = spawn_app().await;
    upstream
        .tenant("up")
        .catalogs(json!(["reference"]))
        .create()
        .await;
    let gateway = spawn_app().await;
    gateway.tenant("gw").catalogs(json!([])).create().await;
    (upstream, gateway)
}

async fn put_upstream(gateway: &TestApp, name: &str, body: Value) -> (u16, Value) {
    let resp = gateway
        .admin(Method::PUT, &format!("/tenants/gw/upstreams/{name}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// `GET /tenants/gw/upstreams/ref`: the definition and its state.
async fn upstream_ref(gateway: &TestApp) -> Value {
    let resp = gateway
        .admin(Method::GET, "/tenants/gw/upstreams/ref")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

fn names(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[field].as_str().unwrap().to_string())
        .collect()
}

#[actix_rt::test]
async fn a_federated_upstream_is_served_renamed_filtered_and_relayed() {
    let (upstream, gateway) = pair().await;
    let (status, shown) = put_upstream(
        &gateway,
        "ref",
        json!({
            "name": "ref", "url": upstream.mcp_url("up"), "prefix": "ref",
            "tools": { "deny": ["test_image_*"] },
            "prompts": { "allow": ["test_*_arguments", "test_simple_prompt"] },
            "resources": { "deny": ["test://static-binary"] },
            "overrides": { "test_simple_text": { "description": "Says hello, federated" } }
        }),
    )
    .await;
    assert_eq!(status, 201, "{shown}");
    assert_eq!(shown["state"]["connected"], true, "{shown}");
    assert_eq!(shown["state"]["protocol_version"], "2025-11-25");
    assert!(shown["state"]["tools"].as_u64().unwrap() > 10, "{shown}");

    let mut c = gateway
        .open_session("gw", "2025-11-25", json!({ "sampling": {} }))
        .await;
    let tools = c.result("tools/list", json!({})).await;
    let tool_names = names(&tools, "tools", "name");
    assert!(
        tool_names.iter().all(|n| n.starts_with("ref_")),
        "{tool_names:?}"
    );
    assert!(tool_names.contains(&"ref_test_simple_text".to_string()));
    assert!(
        !tool_names.contains(&"ref_test_image_content".to_string()),
        "denied tools are not listed"
    );
    let simple = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ref_test_simple_text")
        .unwrap();
    assert_eq!(simple["description"], "Says hello, federated");

    // A call reaches the upstream under the upstream's own name.
    let r = c
        .result(
            "tools/call",
            json!({ "name": "ref_test_simple_text", "arguments": {} }),
        )
        .await;
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("test"),
        "{r}"
    );
    // A denied tool does not exist: the spec's unknown-tool error.
    let (denied, _) = c
        .call(
            "tools/call",
            json!({ "name": "ref_test_image_content", "arguments": {} }),
        )
        .await;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");

    // Progress the upstream reports reaches the client, under the client's own token.
    let (done, others) = c
        .call(
            "tools/call",
            json!({ "name": "ref_test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": "p-7" } }),
        )
        .await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Progress test completed"
    );
    let progress: Vec<&Value> = others
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{others:?}");
    assert!(progress
        .iter()
        .all(|p| p["params"]["progressToken"] == "p-7"));
    assert_eq!(progress[2]["params"]["progress"], 100.0);

    // The upstream's sampling request reaches this client, and its answer the upstream.
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 77, "method": "tools/call",
            "params": { "name": "ref_test_sampling", "arguments": { "prompt": "Say hi" } } }))
        .await;
    let mut sse = SseReader::new(resp);
    let request = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "Say hi"
    );
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "role": "assistant", "content": { "type": "text", "text": "hi there" }, "model": "m" } });
    assert_eq!(c.send(&answer).await.status(), 202);
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(result["id"], 77);
    assert_eq!(
        result["result"]["content"][0]["text"], "LLM response: hi there",
        "{result}"
    );

    // Prompts: filtered, renamed, rendered by the upstream.
    let prompts = c.result("prompts/list", json!({})).await;
    let mut prompt_names = names(&prompts, "prompts", "name");
    prompt_names.sort();
    assert_eq!(
        prompt_names,
        ["ref_test_prompt_with_arguments", "ref_test_simple_prompt"]
    );
    let prompt = c
        .result(
            "prompts/get",
            json!({ "name": "ref_test_prompt_with_arguments", "arguments": { "arg1": "a", "arg2": "b" } }),
        )
        .await;
    let text = prompt["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains('a') && text.contains('b'), "{prompt}");
    let (hidden, _) = c
        .call(
            "prompts/get",
            json!({ "name": "ref_test_prompt_with_image" }),
        )
        .await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");

    // Resources: listed as the upstream has them (less the denied one), read from it, and by
    // its templates.
    let resources = c.result("resources/list", json!({})).await;
    let uris = names(&resources, "resources", "uri");
    assert!(uris.contains(&"test://static-text".to_string()), "{uris:?}");
    assert!(
        !uris.contains(&"test://static-binary".to_string()),
        "{uris:?}"
    );
    let read = c
        .result("resources/read", json!({ "uri": "test://static-text" }))
        .await;
    assert_eq!(read["contents"][0]["uri"], "test://static-text");
    let templated = c
        .result(
            "resources/read",
            json!({ "uri": "test://template/42/data" }),
        )
        .await;
    assert!(
        templated["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42"),
        "{templated}"
    );
    let (missing, _) = c
        .call("resources/read", json!({ "uri": "test://static-binary" }))
        .await;
    assert_eq!(missing["error"]["code"], -32002, "{missing}");

    // Completion of an upstream prompt's argument, by its exposed name.
    let completion = c
        .result(
            "completion/complete",
            json!({ "ref": { "type": "ref/prompt", "name": "ref_test_prompt_with_arguments" },
                    "argument": { "name": "arg1", "value": "test" } }),
        )
        .await;
    let values = completion["completion"]["values"].as_array().unwrap();
    assert!(values.iter().any(|v| v == "testValue1"), "{completion}");

    // A stateless (2026-07-28) client sees the same catalog and reads through it too.
    let list = gateway
        .post_stateless("gw", &stateless_body(1, "tools/list", json!({}), json!({})))
        .send()
        .await
        .unwrap();
    let list: Value = list.json().await.unwrap();
    assert!(
        names(&list["result"], "tools", "name").contains(&"ref_test_simple_text".to_string()),
        "{list}"
    );
    let read = gateway
        .post_stateless(
            "gw",
            &stateless_body(
                2,
                "resources/read",
                json!({ "uri": "test://static-text" }),
                json!({}),
            ),
        )
        .send()
        .await
        .unwrap();
    let read: Value = read.json().await.unwrap();
    assert_eq!(
        read["result"]["contents"][0]["uri"], "test://static-text",
        "{read}"
    );
}

#[actix_rt::test]
async fn an_upstream_that_forgets_the_session_or_dies_is_handled() {
    let (upstream, gateway) = pair().await;
    let (status, _) = put_upstream(
        &gateway,
        "ref",
        json!({ "name": "ref", "url": upstream.mcp_url("up"), "timeout_ms": 3000 }),
    )
    .await;
    assert_eq!(status, 201);
    let mut c = gateway.open_session("gw", "2025-11-25", json!({})).await;
    let call = json!({ "name": "test_simple_text", "arguments": {} });
    c.result("tools/call", call.clone()).await;

    // Suspending the upstream tenant ends its sessions; resumed, it no longer knows the
    // gateway's: the next call opens another without the client noticing.
    for status in ["suspended", "active"] {
        let r = upstream
            .admin(Method::PATCH, "/tenants/up")
            .json(&json!({ "status": status }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    c.result("tools/call", call.clone()).await;

    // The upstream gone: calls fail at once with an error naming it; its lists are still
    // served from the last good copy, and its state says what went wrong.
    upstream.handle.stop(false).await;
    // (A connection it had open may answer once more while its worker stops.)
    let mut failed = Value::Null;
    for _ in 0..50 {
        failed = c.call("tools/call", call.clone()).await.0;
        if failed.get("error").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("upstream \"ref\""), "{failed}");
    assert_eq!(failed["error"]["data"]["upstream"], "ref");
    let tools = c.result("tools/list", json!({})).await;
    assert!(names(&tools, "tools", "name").contains(&"test_simple_text".to_string()));
    let shown = upstream_ref(&gateway).await;
    assert_eq!(shown["state"]["connected"], false, "{shown}");
    assert!(shown["state"]["last_error"].as_str().is_some(), "{shown}");

    // Failing again and again, it is no longer called for a while: calls fail at once, saying so.
    let mut last = Value::Null;
    for _ in 0..6 {
        last = c
            .call(
                "tools/call",
                json!({ "name": "test_simple_text", "arguments": {} }),
            )
            .await
            .0;
    }
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("is not called for another"), "{last}");
    let shown = upstream_ref(&gateway).await;
    assert_eq!(shown["state"]["circuit_open"], true, "{shown}");
}

#[actix_rt::test]
async fn upstreams_are_managed_through_the_admin_api() {
    let (upstream, gateway) = pair().await;
    let url = upstream.mcp_url("up");
    // Refused definitions say which field is wrong.
    for (body, field) in [
        (json!({ "name": "other", "url": url }), "name"),
        (
            json!({ "name": "ref", "url": url, "prefix": "has space" }),
            "prefix",
        ),
        (
            json!({ "name": "ref", "url": "http://example.com/mcp" }),
            "url",
        ),
        (
            json!({ "name": "ref", "url": url, "timeout_ms": 0 }),
            "timeout_ms",
        ),
        (
            json!({ "name": "ref", "url": url, "auth": { "type": "headers", "headers": { "Mcp-Session-Id": "x" } } }),
            "auth",
        ),
    ] {
        let (status, error) = put_upstream(&gateway, "ref", body.clone()).await;
        assert_eq!(status, 422, "{body} → {error}");
        assert!(
            error["error"]["field"]
                .as_str()
                .unwrap_or_default()
                .starts_with(field),
            "{body} → {error}"
        );
    }
    let missing = gateway
        .admin(Method::GET, "/tenants/gw/upstreams/ref")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // Static credentials are sealed at rest and shown by name only.
    let (status, shown) = put_upstream(
        &gateway,
        "ref",
        json!({ "name": "ref", "url": url, "auth": { "type": "headers", "headers": { "X-Api-Key": "k-s3cret-value" } } }),
    )
    .await;
    assert_eq!(status, 201, "{shown}");
    assert_eq!(
        shown["auth"],
        json!({ "type": "headers", "headers": ["X-Api-Key"] })
    );
    let rows: Vec<(String,)> = sqlx::query_as("SELECT body FROM upstreams")
        .fetch_all(&gateway.database().await)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].0.contains("k-s3cret-value"), "{}", rows[0].0);

    let mut c = gateway.open_session("gw", "2025-11-25", json!({})).await;
    let listen = c.get_stream(None).await;
    let mut stream = SseReader::new(listen);
    assert!(
        names(&c.result("tools/list", json!({})).await, "tools", "name")
            .contains(&"test_simple_text".to_string())
    );

    // A patch renames its entries; sessions hear the list changed.
    let r = gateway
        .admin(Method::PATCH, "/tenants/gw/upstreams/ref")
        .json(&json!({ "prefix": "r2", "tools": { "allow": ["test_simple_text"] } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let patched: Value = r.json().await.unwrap();
    assert_eq!(patched["prefix"], "r2");
    assert_eq!(
        patched["auth"]["headers"],
        json!(["X-Api-Key"]),
        "the stored credentials are kept"
    );
    let mut heard = Vec::new();
    while let Some(event) = stream.next_event(Duration::from_secs(5)).await {
        if let Some(m) = event.json() {
            heard.push(m["method"].as_str().unwrap_or_default().to_string());
            if heard
                .iter()
                .any(|m| m == "notifications/tools/list_changed")
            {
                break;
            }
        }
    }
    assert!(
        heard
            .iter()
            .any(|m| m == "notifications/tools/list_changed"),
        "{heard:?}"
    );
    let tools = c.result("tools/list", json!({})).await;
    assert_eq!(names(&tools, "tools", "name"), ["r2_test_simple_text"]);

    let list: Value = gateway
        .admin(Method::GET, "/tenants/gw/upstreams")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");

    // Deleted, its entries leave the catalog.
    let r = gateway
        .admin(Method::DELETE, "/tenants/gw/upstreams/ref")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let tools = c.result("tools/list", json!({})).await;
    assert!(tools["tools"].as_array().unwrap().is_empty(), "{tools}");
}

/// A tool whose definition changes at the upstream is held back (not listed, its calls refused
/// saying why) until an administrator approves the change, which the admin API shows as the
/// pinned and the offered definitions.
#[actix_rt::test]
async fn a_changed_tool_definition_is_held_back_until_approved() {
    let (upstream, gateway) = pair().await;
    let tool = |description: &str| {
        json!({ "name": "lookup", "description": description,
                "input_schema": { "type": "object" },
                "webhook": { "url": "http://127.0.0.1:9/never-called" } })
    };
    let r = upstream
        .admin(Method::POST, "/tenants/up/tools")
        .json(&tool("Looks an order up"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (status, shown) = put_upstream(
        &gateway,
        "ref",
        json!({ "name": "ref", "url": upstream.mcp_url("up"), "tools": { "allow": ["lookup", "test_simple_text"] } }),
    )
    .await;
    assert_eq!(status, 201, "{shown}");
    assert_eq!(shown["pinning"], "on");
    assert_eq!(shown["pending"], json!([]));
    let mut c = gateway.open_session("gw", "2025-11-25", json!({})).await;
    let listed = |tools: &Value| names(tools, "tools", "name");
    assert!(listed(&c.result("tools/list", json!({})).await).contains(&"lookup".to_string()));

    // The upstream changes the tool's description: the gateway hears its list changed (on the
    // upstream session's standalone stream) and holds the tool back.
    let r = upstream
        .admin(Method::PUT, "/tenants/up/tools/lookup")
        .json(&tool("Looks an order up, and deletes it"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut tools = Value::Null;
    for _ in 0..50 {
        tools = c.result("tools/list", json!({})).await;
        if !listed(&tools).contains(&"lookup".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed(&tools), ["test_simple_text"], "{tools}");
    let (refused, _) = c
        .call("tools/call", json!({ "name": "lookup", "arguments": {} }))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("held back"),
        "{refused}"
    );
    let shown = upstream_ref(&gateway).await;
    let pending = shown["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{shown}");
    assert_eq!(pending[0]["tool"], "lookup");
    assert_eq!(pending[0]["approved"]["description"], "Looks an order up");
    assert_eq!(
        pending[0]["offered"]["description"],
        "Looks an order up, and deletes it"
    );

    // Approved: served as the upstream defines it now.
    let r = gateway
        .admin(Method::POST, "/tenants/gw/upstreams/ref/approve")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let approved: Value = r.json().await.unwrap();
    assert_eq!(approved["approved"], 1, "{approved}");
    assert_eq!(approved["pending"], json!([]));
    let tools = c.result("tools/list", json!({})).await;
    let lookup = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "lookup")
        .expect("lookup is served again");
    assert_eq!(lookup["description"], "Looks an order up, and deletes it");
}
