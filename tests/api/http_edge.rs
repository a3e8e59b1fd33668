//! Every refusal of the HTTP edge: its status code and its JSON-RPC error.

use crate::helpers::{initialize_body, spawn_app, spawn_app_with};
use serde_json::{json, Value};

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.expect("error bodies are JSON-RPC");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null, "edge errors carry no id");
    (status, body["error"].clone())
}

#[actix_rt::test]
async fn malformed_json_is_400_parse_error() {
    let app = spawn_app().await;
    let resp = app
        .http
        .post(app.mcp_url("demo"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{\"jsonrpc\": \"2.0\", ")
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(resp).await;
    assert_eq!(status, 400);
    assert_eq!(error["code"], -32700);
}

#[actix_rt::test]
async fn invalid_jsonrpc_is_400_invalid_request() {
    let app = spawn_app().await;
    for body in [
        json!({ "jsonrpc": "1.0", "id": 1, "method": "initialize" }),
        json!({ "id": 1 }),
        json!([]),
        json!("x"),
    ] {
        let (status, error) = error_of(app.post("demo", None, &body).send().await.unwrap()).await;
        assert_eq!(
            (status, error["code"].as_i64()),
            (400, Some(-32600)),
            "for {body}"
        );
    }
}

/// A client that cannot read a request of the server answers with an error response without an
/// id (or JSON-RPC's `"id": null`): a valid message (2025-11-25 schema: `JSONRPCErrorResponse.id`
/// is optional), accepted with 202 like any response. A result still needs its id.
#[actix_rt::test]
async fn an_error_response_without_an_id_is_accepted() {
    let app = spawn_app().await;
    let c = app.open_session("demo", "2025-11-25", json!({})).await;
    let error = json!({ "code": -32700, "message": "Parse error" });
    for body in [
        json!({ "jsonrpc": "2.0", "error": error }),
        json!({ "jsonrpc": "2.0", "id": null, "error": error }),
    ] {
        let resp = c.send(&body).await;
        assert_eq!(resp.status(), 202, "for {body}");
        assert!(resp.text().await.unwrap().is_empty());
    }
    let (status, error) = error_of(c.send(&json!({ "jsonrpc": "2.0", "result": {} })).await).await;
    assert_eq!((status, error["code"].as_i64()), (400, Some(-32600)));
    // The session goes on.
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }))
        .await;
    assert_eq!(resp.status(), 200);
}

#[actix_rt::test]
async fn wrong_accept_is_406() {
    let app = spawn_app().await;
    let resp = app
        .http
        .post(app.mcp_url("demo"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(initialize_body("2025-11-25", json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 406);
    let resp = app
        .http
        .get(app.mcp_url("demo"))
        .header("accept", "application/json")
        .header("mcp-session-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 406);
}

#[actix_rt::test]
async fn wrong_content_type_is_415() {
    let app = spawn_app().await;
    let resp = app
        .http
        .post(app.mcp_url("demo"))
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body(initialize_body("2025-11-25", json!({})).to_string())
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(resp).await;
    assert_eq!(status, 415);
    assert_eq!(error["code"], -32600);
}

#[actix_rt::test]
async fn oversized_body_is_413() {
    let app = spawn_app_with(|c| c.server.max_body_bytes = 2048).await;
    let big = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "padding": "x".repeat(4096) } });
    let (status, _) = error_of(app.post("demo", None, &big).send().await.unwrap()).await;
    assert_eq!(status, 413);
    // A body over the limit whose client goes on sending is answered, and its connection
    // closed, without reading the rest.
    mcp_post_is_cut_off(app.port, 3000, 413).await;
    // Just under the limit is still served.
    let resp = app
        .post("demo", None, &initialize_body("2025-11-25", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// Sends a request head and the first bytes of its body to `path`, then one more byte every
/// 100 ms, and reads the answer for at most 5 s: the answer's text, and whether the server
/// closed the connection after it. The body has a `Content-Length` of 4,000 bytes, or is
/// `chunked` (a first chunk of `lead` bytes, then one of one byte every 100 ms, never the last
/// one); it starts with `lead` bytes at once.
async fn trickle(
    port: u16,
    path: &str,
    headers: &str,
    chunked: bool,
    lead: usize,
) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let lead = format!("{{\"a\"{}", " ".repeat(lead.saturating_sub(4)));
    let (framing, first, more): (_, _, &[u8]) = if chunked {
        let first = format!("{:x}\r\n{lead}\r\n", lead.len());
        ("Transfer-Encoding: chunked", first, b"1\r\n \r\n")
    } else {
        ("Content-Length: 4000", lead, b" ")
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}{framing}\r\n\r\n{first}"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut closed = false;
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        loop {
            tokio::select! {
                n = conn.read(&mut buf) => {
                    let n = n.unwrap_or(0);
                    answer.extend_from_slice(&buf[..n]);
                    if n == 0 {
                        closed = true;
                        break;
                    }
                }
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                    // The client goes on trickling until the server closes.
                    let _ = conn.write_all(more).await;
                }
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "{path}: no answer within 5 s while the client trickled its body"
    );
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}

/// A POST to the MCP endpoint whose body starts with `lead` bytes and then trickles, with a
/// `Content-Length` and chunked, is answered `status` and its connection closed.
async fn mcp_post_is_cut_off(port: u16, lead: usize, status: u16) {
    for chunked in [false, true] {
        let (text, closed) = trickle(
            port,
            "/t/demo/mcp",
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            chunked,
            lead,
        )
        .await;
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}")),
            "chunked {chunked}: {text}"
        );
        assert!(
            closed,
            "chunked {chunked}: the connection stayed open: {text}"
        );
    }
}

/// A body that does not arrive in time is 408 (its head alone does not hold the connection),
/// and a batch of more than 100 messages is refused as a whole.
#[actix_rt::test]
async fn a_trickled_body_is_408_and_an_overlong_batch_400() {
    let app = spawn_app_with(|c| c.server.body_timeout_secs = 0.5).await;
    mcp_post_is_cut_off(app.port, 4, 408).await;

    let app = spawn_app().await;
    let session = app.open_session("demo", "2025-03-26", json!({})).await;
    let batch: Vec<Value> = (0..101)
        .map(|i| json!({ "jsonrpc": "2.0", "id": i, "method": "ping" }))
        .collect();
    let (status, error) = error_of(session.send(&Value::Array(batch)).await).await;
    assert_eq!(
        (status, error["code"].as_i64()),
        (400, Some(-32600)),
        "{error}"
    );
    let ok: Vec<Value> = (0..100)
        .map(|i| json!({ "jsonrpc": "2.0", "id": i, "method": "ping" }))
        .collect();
    assert_eq!(session.send(&Value::Array(ok)).await.status(), 200);
}

/// The routes that read their bodies through actix-web's extractors keep the same deadline: the
/// admin API, the authorization servers (a tenant's and the root endpoints, public) and the
/// elicitation page each answer a trickled body 408 in their own error shape and close the
/// connection, instead of waiting on the client for as long as it trickles.
#[actix_rt::test]
async fn every_route_that_reads_a_body_answers_a_trickled_one_408() {
    let app = spawn_app_with(|c| c.server.body_timeout_secs = 0.5).await;
    let json = "Content-Type: application/json\r\n";
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let admin = format!(
        "{json}Authorization: Bearer {}\r\n",
        crate::helpers::ADMIN_TOKEN
    );
    let app = &app;
    let cases = [
        ("/admin/v1/tenants", admin.as_str(), "\"request_timeout\""),
        ("/t/demo/oauth/token", form, "\"invalid_request\""),
        ("/t/demo/oauth/register", json, "\"invalid_request\""),
        ("/t/demo/oauth/revoke", form, "\"invalid_request\""),
        ("/t/demo/oauth/authorize", form, "<html"),
        ("/authorize", form, "<html"),
        ("/token", form, "\"invalid_request\""),
        ("/register", json, "\"invalid_request\""),
        ("/t/demo/elicitations/e1", form, "<html"),
    ]
    .into_iter()
    .flat_map(|route| [(route, false), (route, true)])
    .map(|((path, headers, shape), chunked)| async move {
        let answer = trickle(app.port, path, headers, chunked, 4).await;
        (format!("{path} (chunked {chunked})"), shape, answer)
    });
    // All at once: each takes the body timeout and more.
    for (case, shape, (text, closed)) in futures_util::future::join_all(cases).await {
        assert!(text.starts_with("HTTP/1.1 408"), "{case}: {text}");
        assert!(text.contains(shape), "{case}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{case}: {text}"
        );
        assert!(closed, "{case}: the connection stayed open");
    }
    // A chunked body over a route's limit (actix-web's 256 KiB for the token and registration
    // endpoints) whose client goes on sending: 413, and the connection closed, the rest unread.
    for path in ["/token", "/t/demo/oauth/register"] {
        let (text, closed) = trickle(app.port, path, form, true, 300_000).await;
        assert!(text.starts_with("HTTP/1.1 413"), "{path}: {text}");
        assert!(closed, "{path}: the connection stayed open: {text}");
    }
    // A body that arrives in time is read as before.
    app.create_tenant(json!({ "slug": "punctual", "catalogs": ["demo"] }))
        .await;
}

#[actix_rt::test]
async fn a_tenants_own_body_and_message_limits_are_413_and_change_live() {
    let app = spawn_app().await;
    let resp = app
        .admin(reqwest::Method::POST, "/tenants")
        .json(&json!({ "slug": "small", "catalogs": ["demo"],
            "limits": { "max_body_bytes": 4096, "max_message_bytes": 2048 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let echo = |id: i64, len: usize| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "echo", "arguments": { "text": "x".repeat(len) } } })
    };
    let mut c = app.open_session("small", "2025-03-26", json!({})).await;
    // Two 1.5 KB messages in one 3 KB batch: within both limits.
    let id = c.next_id();
    let batch = json!([echo(id, 1500), echo(id + 1, 1500)]);
    let resp = c.send(&batch).await;
    assert_eq!(resp.status(), 200);
    let answers: Value = resp.json().await.unwrap();
    assert_eq!(answers.as_array().map(Vec::len), Some(2), "{answers}");
    // One 3 KB message, alone or in a batch: over the message limit.
    let (status, error) = error_of(c.send(&echo(10, 3000)).await).await;
    assert_eq!((status, error["code"].clone()), (413, json!(-32600)));
    assert!(
        error["message"].as_str().unwrap().contains("2048"),
        "{error}"
    );
    let (status, _) = error_of(c.send(&json!([echo(11, 100), echo(12, 3000)])).await).await;
    assert_eq!(status, 413);
    // A 5 KB batch of small messages: over the body limit.
    let batch: Vec<Value> = (20..24).map(|i| echo(i, 1200)).collect();
    let (status, error) = error_of(c.send(&json!(batch)).await).await;
    assert_eq!(status, 413);
    assert!(
        error["message"].as_str().unwrap().contains("4096"),
        "{error}"
    );
    // Other tenants keep the server's limits.
    let mut other = app.open_session("demo", "2025-03-26", json!({})).await;
    let id = other.next_id();
    assert_eq!(other.send(&echo(id, 3000)).await.status(), 200);
    // Lifting the limits applies to the open session at once.
    let resp = app
        .admin(reqwest::Method::PATCH, "/tenants/small")
        .json(&json!({ "limits": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let id = c.next_id();
    assert_eq!(c.send(&echo(id, 3000)).await.status(), 200);
}

#[actix_rt::test]
async fn bad_origin_or_host_is_403() {
    let app = spawn_app().await;
    let init = initialize_body("2025-11-25", json!({}));
    let resp = app
        .post("demo", None, &init)
        .header("origin", "http://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 403);
    let resp = app
        .post("demo", None, &init)
        .header("host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 403);
    let resp = app
        .post("demo", None, &init)
        .header("origin", format!("http://localhost:{}", app.port))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "a loopback origin is allowed");
    // A present, invalid Origin is 403 whatever else is wrong with the request (an unknown
    // tenant, a method the endpoint does not take); without it those are 404 and 405.
    for origin in [Some("http://evil.example.com"), None] {
        let with_origin = |r: reqwest::RequestBuilder| match origin {
            Some(o) => r.header("origin", o),
            None => r,
        };
        let unknown = with_origin(app.post("nosuch", None, &init))
            .send()
            .await
            .unwrap();
        let put = with_origin(app.http.put(app.mcp_url("demo")))
            .send()
            .await
            .unwrap();
        let want = if origin.is_some() {
            (403, 403)
        } else {
            (404, 405)
        };
        assert_eq!((unknown.status().as_u16(), put.status().as_u16()), want);
    }
}

#[actix_rt::test]
async fn configured_hosts_and_origins_are_allowed() {
    let app = spawn_app_with(|c| {
        c.server.allowed_hosts = vec!["mcp.example.com".into()];
        c.server.allowed_origins = vec!["https://app.example.com".into()];
    })
    .await;
    let init = initialize_body("2025-11-25", json!({}));
    let resp = app
        .post("demo", None, &init)
        .header("host", "mcp.example.com")
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[actix_rt::test]
async fn missing_session_is_400_and_unknown_session_is_404() {
    let app = spawn_app().await;
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let (status, error) = error_of(app.post("demo", None, &list).send().await.unwrap()).await;
    assert_eq!((status, error["code"].as_i64()), (400, Some(-32600)));
    let (status, _) = error_of(
        app.post("demo", Some("0123456789abcdef0123456789abcdef"), &list)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    let resp = app
        .http
        .get(app.mcp_url("demo"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 400);
    let resp = app
        .http
        .delete(app.mcp_url("demo"))
        .header("mcp-session-id", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 404);
}

#[actix_rt::test]
async fn ended_session_is_404() {
    let app = spawn_app().await;
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    c.result("ping", json!({})).await;
    let resp = app
        .http
        .delete(app.mcp_url("demo"))
        .header("mcp-session-id", &c.session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }))
        .await;
    assert_eq!(error_of(resp).await.0, 404);
    assert_eq!(c.get_stream(None).await.status(), 404);
}

#[actix_rt::test]
async fn unsupported_protocol_version_header_is_400() {
    let app = spawn_app().await;
    let c = app.open_session("demo", "2025-06-18", json!({})).await;
    let ping = json!({ "jsonrpc": "2.0", "id": 5, "method": "ping" });
    let resp = app
        .post("demo", Some(&c.session), &ping)
        .header("mcp-protocol-version", "1999-01-01")
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(resp).await;
    assert_eq!(status, 400);
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("MCP-Protocol-Version"));
    // The error a modern client recognises, listing what is served.
    assert_eq!(error["code"], -32022);
    assert_eq!(error["data"]["requested"], "1999-01-01");
    // Any revision we serve is accepted on the header.
    let resp = app
        .post("demo", Some(&c.session), &ping)
        .header("mcp-protocol-version", "2025-03-26")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[actix_rt::test]
async fn unknown_tenant_is_404() {
    let app = spawn_app().await;
    let (status, error) = error_of(
        app.post("nobody", None, &initialize_body("2025-11-25", json!({})))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    assert!(error["message"].as_str().unwrap().contains("nobody"));
}

#[actix_rt::test]
async fn server_discover_without_a_session_is_a_clean_4xx() {
    let app = spawn_app().await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {} });
    let (status, error) = error_of(app.post("demo", None, &body).send().await.unwrap()).await;
    assert_eq!(status, 400);
    assert_eq!(error["code"], -32600);
}

#[actix_rt::test]
async fn healthz_answers() {
    let app = spawn_app().await;
    let resp = app
        .http
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[actix_rt::test]
async fn unknown_paths_are_404_and_wrong_methods_405() {
    let app = spawn_app().await;
    let resp = app.http.put(app.mcp_url("demo")).send().await.unwrap();
    assert_eq!(error_of(resp).await.0, 405);
    let resp = app
        .http
        .post(format!("{}/t/demo/sse", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 405);
    // Every endpoint refuses the methods it does not serve, naming the replica as its answers do
    // and the methods it serves (`Allow`, RFC 9110 §15.5.6).
    for (method, endpoint, allow) in [
        ("GET", "messages", "POST, OPTIONS"),
        ("DELETE", "sse", "GET, OPTIONS"),
        ("PATCH", "messages", "POST, OPTIONS"),
        ("HEAD", "mcp", "GET, POST, DELETE, OPTIONS"),
        ("PUT", "mcp", "GET, POST, DELETE, OPTIONS"),
        ("POST", "sse", "GET, OPTIONS"),
    ] {
        let resp = app
            .http
            .request(
                method.parse().unwrap(),
                format!("{}/t/demo/{endpoint}", app.base),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{method} {endpoint}");
        assert!(
            resp.headers().contains_key("x-harbor-replica"),
            "{method} {endpoint}"
        );
        assert_eq!(resp.headers()["allow"], allow, "{method} {endpoint}");
    }
    // Paths that are no endpoint: a trailing slash, a segment too many, none at all.
    for path in [
        "/t/demo/nothing",
        "/t/demo/mcp/",
        "/t/demo/x/mcp",
        "/t//mcp",
        "/t/mcp",
        "/t/demo",
    ] {
        let resp = post_json(
            &app,
            path,
            &[],
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        )
        .await;
        assert_eq!(resp.status(), 404, "{path}");
    }
    // A percent-encoded spelling of an endpoint's path names that endpoint, as on every other
    // route (RFC 3986 §6.2.2.2); an encoded `/` separates nothing.
    for (path, status) in [
        ("/t/dem%6F/mc%70", 200),
        ("/t/%64emo/mcp", 200),
        ("/t/demo%2Fx/mcp", 404),
        ("/t/demo/mcp%2F", 404),
    ] {
        let accept = ("accept", "application/json, text/event-stream");
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let resp = post_json(&app, path, &[accept], initialize).await;
        assert_eq!(resp.status(), status, "{path}");
        if status == 200 {
            // The session is the tenant's, reached at the canonical path.
            let session = resp.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_string();
            let headers = [
                accept,
                ("mcp-session-id", &session),
                ("mcp-protocol-version", "2025-06-18"),
            ];
            let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
            let resp = post_json(&app, "/t/demo/mcp", &headers, ping).await;
            assert_eq!(resp.status(), 200, "{path}");
        }
    }
    let resp = app
        .http
        .get(format!("{}/t/demo/nothing", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 404);
    let resp = app
        .http
        .get(format!("{}/elsewhere", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.0, 404);
}

/// POSTs `body` as JSON to `path` with `headers` besides.
async fn post_json(
    app: &crate::helpers::TestApp,
    path: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> reqwest::Response {
    let mut req = app
        .http
        .post(format!("{}{path}", app.base))
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(body).send().await.unwrap()
}

/// A configured tenant naming a built-in catalog that does not exist stops the start, naming it.
#[actix_rt::test]
async fn a_configured_tenant_with_an_unknown_catalog_stops_the_start() {
    let mut config = crate::helpers::test_config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.data_dir = dir.path().display().to_string();
    config.tenants[0].catalogs = vec!["nope".into()];
    let refused = mcp_harbor::Application::build(config)
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("nope"), "{refused}");
}

/// A browser page at an admitted origin can call the endpoints (CORS): its preflight learns the
/// endpoint's methods and may send the headers it asked for; every answer to it, a 401's
/// challenge included, names the origin and exposes the headers a client reads. A refused
/// origin gets a 403 and no grant, a tenant's own origins admit no page to another tenant, and a
/// request without `Origin` gets no CORS headers.
#[actix_rt::test]
async fn browsers_at_admitted_origins_get_cors_grants_and_others_do_not() {
    let app = spawn_app().await;
    let created = app
        .admin(reqwest::Method::POST, "/tenants")
        .json(
            &json!({ "slug": "web", "catalogs": ["demo"], "auth": { "mode": "oauth" },
            "limits": { "allowed_origins": ["https://App.example/"] } }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let options = |tenant: &str, endpoint: &str, origin: Option<&str>| {
        let mut r = app
            .http
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/t/{tenant}/{endpoint}", app.base),
            )
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,mcp-protocol-version,mcp-session-id",
            );
        if let Some(origin) = origin {
            r = r.header("origin", origin);
        }
        r.send()
    };
    let header = |resp: &reqwest::Response, name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let initialize = |tenant: &str, origin: Option<&str>| {
        let mut r = app.post(tenant, None, &initialize_body("2025-11-25", json!({})));
        if let Some(origin) = origin {
            r = r.header("origin", origin);
        }
        r.send()
    };

    // The preflight of the tenant's own origin.
    let resp = options("web", "mcp", Some("https://app.example"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    for (name, value) in [
        ("access-control-allow-origin", "https://app.example"),
        ("access-control-allow-methods", "GET, POST, DELETE, OPTIONS"),
        (
            "access-control-allow-headers",
            "authorization,content-type,mcp-protocol-version,mcp-session-id",
        ),
        ("access-control-max-age", "7200"),
    ] {
        assert_eq!(header(&resp, name).as_deref(), Some(value), "{name}");
    }
    assert!(header(&resp, "vary").unwrap().starts_with("Origin"));
    assert_eq!(header(&resp, "access-control-allow-credentials"), None);
    let resp = options("web", "sse", Some("https://app.example"))
        .await
        .unwrap();
    assert_eq!(
        header(&resp, "access-control-allow-methods").as_deref(),
        Some("GET, OPTIONS")
    );

    // Refused: an origin nobody allows, and the tenant's origin on another tenant.
    for (tenant, origin) in [
        ("web", "https://evil.example"),
        ("demo", "https://app.example"),
    ] {
        let resp = options(tenant, "mcp", Some(origin)).await.unwrap();
        assert_eq!(resp.status(), 403, "{tenant} {origin}");
        assert_eq!(header(&resp, "access-control-allow-origin"), None);
        let resp = initialize(tenant, Some(origin)).await.unwrap();
        assert_eq!(resp.status(), 403, "{tenant} {origin}");
        assert_eq!(header(&resp, "access-control-allow-origin"), None);
    }
    // An unknown tenant allows no origin of its own: 403 (a present, invalid Origin), and 404
    // without one.
    let resp = options("nobody", "mcp", Some("https://app.example"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let resp = options("nobody", "mcp", None).await.unwrap();
    assert_eq!(resp.status(), 404);

    // The protected tenant's 401: the page can read the challenge and start authorization.
    let resp = initialize("web", Some("https://app.example"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert!(header(&resp, "www-authenticate").is_some());
    assert_eq!(
        header(&resp, "access-control-allow-origin").as_deref(),
        Some("https://app.example")
    );
    let exposed = header(&resp, "access-control-expose-headers").unwrap();
    assert!(exposed.contains("WWW-Authenticate"), "{exposed}");

    // An open tenant from a loopback page (the Inspector's): a session the page can read.
    let origin = "http://localhost:6274";
    let resp = initialize("demo", Some(origin)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "mcp-session-id").is_some());
    assert_eq!(
        header(&resp, "access-control-allow-origin").as_deref(),
        Some(origin)
    );
    let exposed = header(&resp, "access-control-expose-headers").unwrap();
    assert!(exposed.contains("Mcp-Session-Id"), "{exposed}");
    assert_eq!(header(&resp, "vary").as_deref(), Some("Origin"));

    // No Origin (not a browser): no CORS headers; OPTIONS names the methods.
    let resp = initialize("demo", None).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
    let resp = options("demo", "messages", None).await.unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(header(&resp, "allow").as_deref(), Some("POST, OPTIONS"));
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
}

/// `crate::helpers::large_echo_body` as raw HTTP/1.1.
fn large_echo_request(text_len: usize) -> Vec<u8> {
    let body = crate::helpers::large_echo_body(text_len);
    let mut request = format!(
        "POST /t/demo/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body.as_bytes());
    request
}

/// Reads what the server sends until it ends the connection, the whole response is in or
/// `patience` runs out, `pace` between reads; returns the bytes and whether the connection
/// ended.
async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    pace: std::time::Duration,
    patience: std::time::Duration,
) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (got, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
        if got.windows(4).any(|w| w == b"\r\n\r\n") {
            let (head, length) = response_length(&got);
            if got.len() >= head + length {
                return (got, false);
            }
        }
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
    }
}

/// `(head length, Content-Length)` of the HTTP response at the start of `bytes`.
fn response_length(bytes: &[u8]) -> (usize, usize) {
    let head_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head")
        + 4;
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    (head_end, length)
}

/// A client that stops reading an answer (here 8 MB, more than the sockets hold) loses its
/// connection after `server.write_timeout_secs`, and with it what the server still held of the
/// answer (counted in `mcp_harbor_http_write_timeouts_total`); a client reading it slowly, with
/// pauses shorter than the timeout, gets all of it.
#[actix_rt::test]
async fn a_client_that_stops_reading_its_answer_is_cut_off_after_the_write_timeout() {
    use tokio::io::AsyncWriteExt;
    const TEXT: usize = 8 * 1024 * 1024;
    const METRICS_TOKEN: &str = "edge-metrics-token";
    const TIMEOUTS: &str = "mcp_harbor_http_write_timeouts";
    let app = spawn_app_with(|c| {
        c.server.write_timeout_secs = 1.0;
        c.server.max_body_bytes = 16 * 1024 * 1024;
        c.metrics.token = secrecy::SecretString::from(METRICS_TOKEN);
    })
    .await;
    // A small window: what the server sends waits in its own buffers, not in the client's.
    let connect = |window: u32| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(window).unwrap();
        socket
            .connect(([127, 0, 0, 1], app.port).into())
            .await
            .unwrap()
    };
    let request = large_echo_request(TEXT);

    // Sends the request, then reads nothing for three times the timeout.
    let mut stalled = connect(4096).await;
    stalled.write_all(&request).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (got, closed) = read_until_closed(
        &mut stalled,
        std::time::Duration::ZERO,
        std::time::Duration::from_secs(20),
    )
    .await;
    assert!(
        closed,
        "the connection stayed open ({} bytes read)",
        got.len()
    );
    let (head, length) = response_length(&got);
    assert!(length > TEXT, "{length}");
    assert!(
        got.len() < head + length,
        "the whole answer arrived ({} bytes)",
        got.len()
    );
    assert_eq!(app.counter(METRICS_TOKEN, TIMEOUTS).await, 1.0);

    // Reads what its window holds every 100 ms: seconds for the whole answer, and the server
    // waits on it all along, but never a second without the client taking some.
    let mut reading = connect(256 * 1024).await;
    reading.write_all(&request).await.unwrap();
    let (got, closed) = read_until_closed(
        &mut reading,
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(30),
    )
    .await;
    assert!(
        !closed,
        "the connection was closed after {} bytes",
        got.len()
    );
    let (head, length) = response_length(&got);
    assert_eq!(got.len(), head + length);
    assert_eq!(app.counter(METRICS_TOKEN, TIMEOUTS).await, 1.0);
}
