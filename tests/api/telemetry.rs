//! OpenTelemetry export end to end: the real binary exports OTLP (HTTP/protobuf) to a receiver in
//! this test that decodes the protobuf requests; an MCP session's spans and metrics are checked
//! (names, attributes, parent/child links, the client's `_meta.traceparent` continuing into the
//! webhook call's headers, an `isError` tool result recorded as an error), and the spans are
//! flushed when the server stops. The JSON log lines of a traced request carry its trace id.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::{span, status, Span};
use prost::Message;
use serde_json::{json, Value};

const ADMIN_TOKEN: &str = "telemetry-test-admin-token-0123456789abcdef";
/// The client's trace: `_meta.traceparent` of the tool calls.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// The client's trace of a stateless (2026-07-28) call.
const MODERN_TRACE: &str = "5ce929d0e0e47364bf92f3577b34da6a";
/// The trace of the HTTP `traceparent` header sent with initialize.
const HTTP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HTTP_SPAN: &str = "b7ad6b7169203331";

#[derive(Default)]
struct Received {
    spans: Vec<(Vec<KeyValue>, Span)>,
    metrics: Vec<ExportMetricsServiceRequest>,
    /// `traceparent` headers the webhook endpoint received.
    hook_traceparents: Vec<String>,
}

type Shared = web::Data<Arc<Mutex<Received>>>;

async fn traces(body: web::Bytes, state: Shared) -> HttpResponse {
    let Ok(req) = ExportTraceServiceRequest::decode(body.as_ref()) else {
        return HttpResponse::BadRequest().finish();
    };
    let mut r = state.lock().unwrap();
    for rs in req.resource_spans {
        let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                r.spans.push((resource.clone(), s));
            }
        }
    }
    HttpResponse::Ok()
        .content_type("application/x-protobuf")
        .finish()
}

async fn metrics(body: web::Bytes, state: Shared) -> HttpResponse {
    let Ok(req) = ExportMetricsServiceRequest::decode(body.as_ref()) else {
        return HttpResponse::BadRequest().finish();
    };
    state.lock().unwrap().metrics.push(req);
    HttpResponse::Ok()
        .content_type("application/x-protobuf")
        .finish()
}

/// The webhook tools' endpoint: `/ok` answers, `/fails` answers an `isError` result.
async fn hook(req: HttpRequest, state: Shared) -> HttpResponse {
    if let Some(tp) = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
    {
        state.lock().unwrap().hook_traceparents.push(tp.to_string());
    }
    if req.path() == "/fails" {
        return HttpResponse::Ok().json(json!({
            "content": [{ "type": "text", "text": "the upstream said no" }], "isError": true }));
    }
    HttpResponse::Ok().json(json!({ "content": [{ "type": "text", "text": "found it" }] }))
}

const METRICS_TOKEN: &str = "metrics-token-for-telemetry-test";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// Asserts string attributes of a span.
fn assert_attrs(span: &Span, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(
            attr_str(&span.attributes, key).as_deref(),
            Some(*value),
            "{key}"
        );
    }
}

fn attr_str(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The server process and its data directory (removed after it).
struct Server(Child, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn rpc(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: Value,
) -> (reqwest::StatusCode, Option<String>, Option<Value>) {
    let mut req = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&body);
    // A session-era request unless the caller names another version.
    if !headers.iter().any(|(k, _)| *k == "mcp-protocol-version") {
        req = req.header("mcp-protocol-version", "2025-06-18");
    }
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let text = resp.text().await.unwrap();
    let answer = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| {
                m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some())
            })
    } else {
        serde_json::from_str(&text).ok()
    };
    (status, sid, answer)
}

/// The receiver: OTLP/HTTP collector routes and the webhook endpoint, on one local server.
fn start_receiver() -> (Arc<Mutex<Received>>, u16) {
    let received = Arc::new(Mutex::new(Received::default()));
    let data = web::Data::new(received.clone());
    let receiver = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
            .route("/v1/traces", web::post().to(traces))
            .route("/v1/metrics", web::post().to(metrics))
            .default_service(web::to(hook))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = receiver.addrs()[0].port();
    actix_rt::spawn(receiver.run());
    (received, port)
}

/// The binary, exporting to the receiver; returns once it answers /healthz.
async fn start_server(
    receiver_port: u16,
    extra_env: &[(&str, &str)],
) -> (Server, String, std::thread::JoinHandle<String>) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-harbor"));
    cmd.arg("serve")
        .env_remove("MCP_HARBOR_CONFIG")
        .env_remove("RUST_LOG")
        .env("MCP_HARBOR__SERVER__PORT", port.to_string())
        .env("MCP_HARBOR__STORAGE__DATA_DIR", dir.path())
        .env("MCP_HARBOR__ADMIN__TOKEN", ADMIN_TOKEN)
        .env("MCP_HARBOR__AUTH__DEFAULT_MODE", "none")
        .env("MCP_HARBOR__EGRESS__ALLOW_PRIVATE", "true")
        .env("MCP_HARBOR__CLUSTER__REPLICA_ID", "replica-under-test")
        .env("MCP_HARBOR__CLUSTER__DRAIN_GRACE_SECS", "2")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{receiver_port}"),
        )
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_SERVICE_NAME", "harbor-under-test")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the binary runs");
    let mut stderr = child.stderr.take().unwrap();
    let log_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let server = Server(child, dir);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the server came up");
    (server, base, log_reader)
}

/// SIGTERM, wait for the exit (spans are flushed on the way out); returns the server's log.
async fn stop(mut server: Server, log_reader: std::thread::JoinHandle<String>) -> String {
    let pid = server.0.id();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let mut exited = false;
    for _ in 0..100 {
        if server.0.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exited, "the server stopped after SIGTERM");
    log_reader.join().unwrap()
}

#[actix_rt::test]
async fn an_mcp_session_is_traced_and_measured_over_otlp() {
    let (received, receiver_port) = start_receiver();
    // The endpoint in `[telemetry]`: spans are encoded by the platform itself (the unsampled
    // test below goes through the SDK's exporter, its endpoint only in OTEL_* variables).
    let endpoint = format!("http://127.0.0.1:{receiver_port}");
    let (server, base, log_reader) = start_server(
        receiver_port,
        &[
            ("MCP_HARBOR__LOG__FORMAT", "json"),
            ("MCP_HARBOR__LOG__FILTER", "info,mcp_harbor::tools=debug"),
            ("MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS", "500"),
            ("MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT", &endpoint),
            ("MCP_HARBOR__TELEMETRY__SPAN_INTERVAL_MS", "100"),
            ("MCP_HARBOR__METRICS__TOKEN", METRICS_TOKEN),
        ],
    )
    .await;
    let http = reqwest::Client::new();

    // A tenant with two webhook tools (published through the admin API).
    let admin = |m: reqwest::Method, p: &str| {
        http.request(m, format!("{base}/admin/v1{p}"))
            .bearer_auth(ADMIN_TOKEN)
    };
    let r = admin(reqwest::Method::POST, "/tenants")
        .json(&json!({ "slug": "acme" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // lookup's URL carries a credential in its query: spans must not export it (nor the path,
    // where other endpoints carry theirs).
    for (name, path) in [("lookup", "ok?code=hook-credential"), ("flaky", "fails")] {
        let tool = json!({ "name": name, "description": "a webhook tool",
            "input_schema": { "type": "object" },
            "webhook": { "url": format!("http://127.0.0.1:{receiver_port}/{path}"),
                         "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" } });
        let r = admin(reqwest::Method::POST, "/tenants/acme/tools")
            .json(&tool)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }

    // A path no route serves, under a sampled traceparent: its span names no path.
    let stray = http
        .get(format!("{base}/t/acme/no-such-page-4711"))
        .header("traceparent", format!("00-{HTTP_TRACE}-{HTTP_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(stray.status(), 404);

    // The session: initialize under an HTTP traceparent, tool calls under `_meta.traceparent`.
    let url = format!("{base}/t/acme/mcp");
    let http_tp = format!("00-{HTTP_TRACE}-{HTTP_SPAN}-01");
    let (status, sid, answer) = rpc(
        &http,
        &url,
        None,
        &[("traceparent", &http_tp)],
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "telemetry-test", "version": "1" } } }),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    let sid = sid.expect("a session id");
    let (status, _, _) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    )
    .await;
    assert_eq!(status, 202);
    let meta_tp = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "lookup", "arguments": {}, "_meta": { "traceparent": meta_tp } } }),
    )
    .await;
    let answer = answer.expect("an answer to the call");
    assert_eq!(
        answer["result"]["content"][0]["text"], "found it",
        "{answer}"
    );
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "flaky", "arguments": {} } }),
    )
    .await;
    let answer = answer.expect("an answer to the failing call");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "id": 4, "method": "no/such/method" }),
    )
    .await;
    assert_eq!(answer.expect("an error")["error"]["code"], -32601);

    // Stateless (2026-07-28) requests on the same tenant: spans of their own, with no session.
    let modern_meta = |extra: Value| {
        let mut meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {} });
        if let (Some(meta), Value::Object(extra)) = (meta.as_object_mut(), extra) {
            meta.extend(extra);
        }
        meta
    };
    let modern_tp = format!("00-{MODERN_TRACE}-{CLIENT_SPAN}-01");
    let (status, modern_sid, answer) = rpc(
        &http,
        &url,
        None,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "lookup"),
        ],
        json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "lookup", "arguments": {},
            "_meta": modern_meta(json!({ "traceparent": modern_tp })) } }),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    assert!(modern_sid.is_none());
    let answer = answer.expect("an answer to the stateless call");
    assert_eq!(
        answer["result"]["content"][0]["text"], "found it",
        "{answer}"
    );
    let (status, _, answer) = rpc(
        &http,
        &url,
        None,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/list",
            "params": { "_meta": modern_meta(json!({})) } }),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");

    // Metrics are exported periodically (every 500 ms here) while the server runs.
    let mut saw_metrics = false;
    for _ in 0..50 {
        if !received.lock().unwrap().metrics.is_empty() {
            saw_metrics = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(saw_metrics, "metrics were exported while running");

    // Spans leave while the server runs too (every 100 ms here), counted by outcome.
    let mut exported = 0.0;
    for _ in 0..50 {
        let text = http
            .get(format!("{base}/metrics"))
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value = |outcome: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(&format!(
                        "mcp_harbor_telemetry_spans_total{{outcome=\"{outcome}\"}} "
                    ))
                })
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        assert_eq!(value("dropped"), None, "no span dropped: {text}");
        exported = value("exported").unwrap_or(0.0);
        if exported > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exported > 0.0, "spans were exported while running");
    assert!(
        received.lock().unwrap().spans.len() as f64 >= exported,
        "the receiver has every span counted as exported"
    );

    // Stop it: the spans still buffered are flushed on the way out.
    let logs = stop(server, log_reader).await;

    let r = received.lock().unwrap();
    let by_name = |name: &str| -> Vec<&(Vec<KeyValue>, Span)> {
        r.spans.iter().filter(|(_, s)| s.name == name).collect()
    };
    let names: Vec<&str> = r.spans.iter().map(|(_, s)| s.name.as_str()).collect();
    // The one span of that name.
    let one = |name: &str| -> &Span {
        let found = by_name(name);
        assert_eq!(found.len(), 1, "one {name} span: {names:?}");
        &found[0].1
    };

    // The stray request's span: `http.route` and the name are one value for every such path
    // (the path itself is only in `url.path`).
    assert_attrs(
        one("GET unmatched"),
        &[
            ("http.route", "unmatched"),
            ("url.path", "/t/acme/no-such-page-4711"),
        ],
    );
    assert!(
        !names.iter().any(|n| n.contains("no-such-page")),
        "{names:?}"
    );

    // Resource attributes.
    let (resource, _) = r.spans.first().expect("spans were exported");
    assert_eq!(
        attr_str(resource, "service.name").as_deref(),
        Some("harbor-under-test")
    );
    assert_eq!(
        attr_str(resource, "service.instance.id").as_deref(),
        Some("replica-under-test")
    );
    assert!(attr_str(resource, "service.version").is_some());

    // initialize: an MCP server span, child of the HTTP server span, which continues the
    // client's HTTP traceparent.
    let init = by_name("initialize");
    assert_eq!(init.len(), 1, "one initialize span: {names:?}");
    let (_, init) = init[0];
    assert_eq!(init.kind, span::SpanKind::Server as i32);
    assert_eq!(hex(&init.trace_id), HTTP_TRACE);
    let http_parent = r
        .spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.span_id == init.parent_span_id)
        .expect("initialize's parent span was exported");
    assert_eq!(http_parent.name, "POST /t/{tenant}/mcp");
    assert_eq!(http_parent.kind, span::SpanKind::Server as i32);
    assert_eq!(hex(&http_parent.parent_span_id), HTTP_SPAN);
    assert_eq!(
        attr_str(&http_parent.attributes, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(
        attr_str(&init.attributes, "mcp.method.name").as_deref(),
        Some("initialize")
    );
    assert_eq!(
        attr_str(&init.attributes, "mcp.session.id").as_deref(),
        Some(sid.as_str())
    );
    assert_eq!(
        attr_str(&init.attributes, "tenant").as_deref(),
        Some("acme")
    );

    // The stateless call: its own span, continuing its `_meta.traceparent`, no session id, its
    // webhook call under it; and the stateless list's span.
    let version_of = |s: &Span| attr_str(&s.attributes, "mcp.protocol.version");
    let modern_call: Vec<&Span> = by_name("tools/call lookup")
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| version_of(s).as_deref() == Some("2026-07-28"))
        .collect();
    assert_eq!(modern_call.len(), 1, "{names:?}");
    let modern_call = modern_call[0];
    assert_eq!(modern_call.kind, span::SpanKind::Server as i32);
    assert_eq!(hex(&modern_call.trace_id), MODERN_TRACE);
    assert_eq!(hex(&modern_call.parent_span_id), CLIENT_SPAN);
    assert!(attr(&modern_call.attributes, "mcp.session.id").is_none());
    assert_eq!(
        attr_str(&modern_call.attributes, "jsonrpc.request.id").as_deref(),
        Some("5")
    );
    assert!(
        r.spans
            .iter()
            .any(|(_, s)| s.name == "POST" && s.parent_span_id == modern_call.span_id),
        "the stateless call's webhook round is a child of its span: {names:?}"
    );
    let modern_list: Vec<&Span> = by_name("tools/list")
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| version_of(s).as_deref() == Some("2026-07-28"))
        .collect();
    assert_eq!(modern_list.len(), 1, "{names:?}");
    assert!(attr(&modern_list[0].attributes, "mcp.session.id").is_none());

    // tools/call lookup: continues `_meta.traceparent` and its webhook call.
    let call: Vec<&(Vec<KeyValue>, Span)> = by_name("tools/call lookup")
        .into_iter()
        .filter(|(_, s)| version_of(s).as_deref() == Some("2025-06-18"))
        .collect();
    assert_eq!(call.len(), 1, "{names:?}");
    let (_, call) = call[0];
    assert_eq!(call.kind, span::SpanKind::Server as i32);
    assert_eq!(
        hex(&call.trace_id),
        CLIENT_TRACE,
        "the trace of _meta.traceparent"
    );
    assert_eq!(hex(&call.parent_span_id), CLIENT_SPAN);
    assert_eq!(call.links.len(), 1, "linked to the HTTP request's span");
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "lookup"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "2"),
        ("mcp.protocol.version", "2025-06-18"),
        ("mcp.session.id", sid.as_str()),
        ("tenant", "acme"),
    ] {
        assert_eq!(
            attr_str(&call.attributes, key).as_deref(),
            Some(want),
            "{key} on {call:?}"
        );
    }
    assert!(attr(&call.attributes, "error.type").is_none());
    assert_ne!(
        call.status.as_ref().map(|s| s.code),
        Some(status::StatusCode::Error as i32)
    );
    let hooks: Vec<&Span> = r
        .spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "POST" && s.parent_span_id == call.span_id)
        .collect();
    assert_eq!(
        hooks.len(),
        1,
        "one webhook client span under the call: {names:?}"
    );
    let hook = hooks[0];
    assert_eq!(hook.trace_id, call.trace_id);
    assert_eq!(
        attr_str(&hook.attributes, "url.full"),
        Some(format!("http://127.0.0.1:{receiver_port}/REDACTED")),
        "the webhook URL without its path and query"
    );
    assert_eq!(
        attr_str(&hook.attributes, "http.response.status_code").as_deref(),
        Some("200")
    );
    let expected_tp = format!("00-{CLIENT_TRACE}-{}-01", hex(&hook.span_id));
    assert!(
        r.hook_traceparents.contains(&expected_tp),
        "the webhook got traceparent {expected_tp}: {:?}",
        r.hook_traceparents
    );

    // tools/call flaky: an isError result is an error span.
    let flaky = by_name("tools/call flaky");
    assert_eq!(flaky.len(), 1, "{names:?}");
    let (_, flaky) = flaky[0];
    assert_eq!(
        attr_str(&flaky.attributes, "error.type").as_deref(),
        Some("tool_error")
    );
    assert_eq!(
        flaky.status.as_ref().map(|s| s.code),
        Some(status::StatusCode::Error as i32)
    );
    // Without `_meta`, it is a child of its HTTP request's span.
    let flaky_parent = r
        .spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.span_id == flaky.parent_span_id)
        .expect("the failing call's parent span was exported");
    assert_eq!(flaky_parent.name, "POST /t/{tenant}/mcp");

    // An unknown method: the JSON-RPC error code is the error type and status code.
    assert_attrs(
        one("other"),
        &[
            ("error.type", "-32601"),
            ("rpc.response.status_code", "-32601"),
            ("mcp.method.name", "no/such/method"),
        ],
    );

    // Store queries are client spans under the admin request that made them.
    let parent_of = |child: &Span| {
        r.spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.span_id == child.parent_span_id)
            .map(|s| s.name.clone())
    };
    let inserts: Vec<Option<String>> = by_name("db insert_tenant")
        .into_iter()
        .filter(|(_, s)| s.kind == span::SpanKind::Client as i32)
        .map(|(_, s)| parent_of(s))
        .collect();
    assert!(
        inserts.contains(&Some("POST /admin/v1/tenants".to_string())),
        "an insert under the admin request: {inserts:?}"
    );

    // Metrics: the operation duration histogram as the conventions name it, with the
    // tool_error outcome on its own series.
    let mut op_points = Vec::new();
    let mut metric_names = std::collections::BTreeSet::new();
    for req in &r.metrics {
        for rm in &req.resource_metrics {
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    metric_names.insert(m.name.clone());
                    if m.name == "mcp.server.operation.duration" {
                        assert_eq!(m.unit, "s");
                        if let Some(metric::Data::Histogram(h)) = &m.data {
                            op_points.extend(h.data_points.iter().cloned());
                        }
                    }
                }
            }
        }
    }
    for want in [
        "mcp.server.operation.duration",
        "mcp_harbor.sessions.active",
        "mcp_harbor.webhook.duration",
        "mcp_harbor.http.requests",
    ] {
        assert!(metric_names.contains(want), "{want} in {metric_names:?}");
    }
    assert!(
        op_points.iter().any(|p| {
            attr_str(&p.attributes, "mcp.method.name").as_deref() == Some("tools/call")
                && attr_str(&p.attributes, "error.type").as_deref() == Some("tool_error")
                && attr_str(&p.attributes, "tenant").as_deref() == Some("acme")
                && p.count >= 1
        }),
        "a tools/call point with error.type=tool_error: {op_points:?}"
    );
    assert!(
        op_points.iter().any(|p| {
            attr_str(&p.attributes, "mcp.method.name").as_deref() == Some("tools/call")
                && attr(&p.attributes, "error.type").is_none()
        }),
        "a successful tools/call point"
    );

    // JSON logs: the webhook call's log line carries the call's trace id and its span id.
    let traced: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["trace_id"] == CLIENT_TRACE)
        .collect();
    assert!(
        !traced.is_empty(),
        "a log line with trace_id {CLIENT_TRACE}: {logs}"
    );
    assert!(traced
        .iter()
        .all(|l| l["span_id"].as_str().is_some_and(|s| s.len() == 16)));
    assert!(!logs.contains("whsec_"), "no webhook secret in the logs");
}

/// `telemetry.sampling_ratio = 0`: a request that continues no trace makes no span at all (nor
/// do the store queries under it), while a client's sampled `traceparent` (header or `_meta`)
/// is still followed.
#[actix_rt::test]
async fn unsampled_requests_make_no_spans_and_sampled_parents_are_followed() {
    let (received, receiver_port) = start_receiver();
    let (server, base, log_reader) = start_server(
        receiver_port,
        &[("MCP_HARBOR__TELEMETRY__SAMPLING_RATIO", "0.0")],
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{base}/t/demo/mcp");
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": { "name": "sampling-test", "version": "1" } } });
    // Not sampled: no traceparent anywhere.
    let (status, sid, _) = rpc(&http, &url, None, &[], init.clone()).await;
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": { "name": "echo", "arguments": { "text": "quiet" } } }),
    )
    .await;
    assert!(answer.is_some());
    let r = admin_create(&http, &base, "unsampled").await;
    assert_eq!(r, 201);
    // Sampled parents: a traceparent header, and `_meta.traceparent`.
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[("traceparent", &format!("00-{HTTP_TRACE}-{HTTP_SPAN}-01"))],
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" }),
    )
    .await;
    assert!(answer.is_some());
    let (_, _, answer) = rpc(
        &http,
        &url,
        Some(&sid),
        &[],
        json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "echo", "arguments": { "text": "traced" },
            "_meta": { "traceparent": format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01") } } }),
    )
    .await;
    assert!(answer.is_some());
    let _ = stop(server, log_reader).await;

    let r = received.lock().unwrap();
    // Through the SDK's exporter too, every export carries the process's resource.
    assert!(!r.spans.is_empty(), "spans were exported");
    for (resource, _) in &r.spans {
        assert_eq!(
            attr_str(resource, "service.name").as_deref(),
            Some("harbor-under-test")
        );
    }
    let spans: Vec<(String, String)> = r
        .spans
        .iter()
        .map(|(_, s)| (s.name.clone(), hex(&s.trace_id)))
        .collect();
    for (name, trace) in &spans {
        assert!(
            trace == HTTP_TRACE || trace == CLIENT_TRACE,
            "only the clients' sampled traces are exported, not {name} in {trace}: {spans:?}"
        );
    }
    assert!(
        spans.contains(&("tools/list".into(), HTTP_TRACE.into())),
        "{spans:?}"
    );
    assert!(
        spans.contains(&("tools/call echo".into(), CLIENT_TRACE.into())),
        "{spans:?}"
    );
    assert!(
        !spans
            .iter()
            .any(|(n, _)| n == "initialize" || n.starts_with("db ")),
        "{spans:?}"
    );
}

async fn admin_create(http: &reqwest::Client, base: &str, slug: &str) -> u16 {
    http.post(format!("{base}/admin/v1/tenants"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "slug": slug }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}
