//! Webhook tools over real HTTP: a local actix-web endpoint that verifies the Standard Webhooks
//! signature with its own HMAC code and answers per path, and a test `SessionPort` that plays
//! the MCP client for elicitation and sampling.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use mcp_harbor::catalog::{RequestContext, SessionPort};
use mcp_harbor::protocol::{ProtocolVersion, RequestId, RpcError};
use mcp_harbor::tools::webhook::{
    self, invoke, sign, validate_url, WebhookCall, WebhookTarget, MAX_ROUNDS,
};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::helpers::webhook::{hmac_sha256, verify, SECRET};

/// The client webhook calls go out through, as a development server has it (loopback allowed).
fn http_client() -> reqwest::Client {
    mcp_harbor::egress::Egress::new(true)
        .unwrap()
        .client()
        .clone()
}

// ---------------------------------------------------------------------------------------------
// The test endpoint.

#[derive(Default)]
struct Seen {
    /// Bodies of verified deliveries, in order.
    bodies: Vec<Value>,
    /// (webhook-id, content-type) of verified deliveries.
    headers: Vec<(String, String)>,
    /// Deliveries refused with 401.
    rejected: usize,
    /// How many signatures each delivery's `webhook-signature` carried.
    signatures: Vec<usize>,
}

struct Endpoint {
    secret: String,
    seen: Mutex<Seen>,
    /// Lifecycle events of the `/hang` handler: "started", "dropped", "completed".
    events: mpsc::UnboundedSender<&'static str>,
}

/// Reports "dropped" unless the handler ran to completion.
struct DropGuard {
    events: mpsc::UnboundedSender<&'static str>,
    completed: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.events.send(if self.completed {
            "completed"
        } else {
            "dropped"
        });
    }
}

fn result_text(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

async fn hook(req: HttpRequest, body: web::Bytes, ep: web::Data<Endpoint>) -> HttpResponse {
    let signatures = req
        .headers()
        .get("webhook-signature")
        .and_then(|v| v.to_str().ok())
        .map_or(0, |v| v.split(' ').count());
    ep.seen.lock().unwrap().signatures.push(signatures);
    if let Err(e) = verify(&ep.secret, &req, &body) {
        ep.seen.lock().unwrap().rejected += 1;
        return HttpResponse::Unauthorized().body(e);
    }
    let call: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return HttpResponse::BadRequest().body(e.to_string()),
    };
    {
        let mut seen = ep.seen.lock().unwrap();
        seen.bodies.push(call.clone());
        let h = |n: &str| {
            req.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        seen.headers.push((h("webhook-id"), h("content-type")));
    }
    let round = call["round"].as_u64().unwrap_or(0);
    match req.path() {
        "/ok" => {
            let name = call["arguments"]["name"].as_str().unwrap_or("nobody");
            HttpResponse::Ok().json(json!({
                "content": [{ "type": "text", "text": format!("hello {name}") }],
                "structuredContent": { "greeting": format!("hello {name}") },
                "isError": false,
                "_meta": { "trace": "t-1" },
                "internal": "must not reach the client",
            }))
        }
        "/elicit" if round == 1 => HttpResponse::Ok().json(json!({
            "input_request": { "type": "elicitation", "message": "What is your name?",
                "requested_schema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] } },
            "state": { "step": 1, "opaque": "s-42" },
        })),
        "/elicit" => {
            if call["state"] != json!({ "step": 1, "opaque": "s-42" }) {
                return HttpResponse::BadRequest().body("state not echoed");
            }
            let input = &call["input"];
            if let Some(error) = input.get("error") {
                return HttpResponse::Ok().json(json!({
                    "content": [{ "type": "text", "text": format!("cannot ask the user: {}", error["message"]) }],
                    "isError": true,
                }));
            }
            match input["action"].as_str() {
                Some("accept") => HttpResponse::Ok().json(result_text(format!(
                    "Nice to meet you, {}",
                    input["content"]["name"].as_str().unwrap_or("?")
                ))),
                other => HttpResponse::Ok().json(result_text(format!("user said {other:?}"))),
            }
        }
        "/sample" if round == 1 => HttpResponse::Ok().json(json!({
            "input_request": { "type": "sampling", "params": {
                "messages": [{ "role": "user", "content": { "type": "text", "text": "What is 2+2?" } }],
                "maxTokens": 10 } },
            "state": "sampling-state",
        })),
        "/sample" => {
            if call["state"] != "sampling-state" {
                return HttpResponse::BadRequest().body("state not echoed");
            }
            HttpResponse::Ok().json(result_text(format!(
                "the model said {}",
                call["input"]["content"]["text"].as_str().unwrap_or("?")
            )))
        }
        "/nested" if round == 1 => HttpResponse::Ok().json(json!({
            "input_request": { "type": "elicitation", "message": "Where do you live?",
                "requested_schema": { "type": "object", "properties": {
                    "address": { "type": "object", "properties": { "city": { "type": "string" } } } } } },
            "state": "nested",
        })),
        "/nested" => HttpResponse::Ok().json(json!({
            "content": [{ "type": "text", "text": format!("cannot ask the user: {}", call["input"]["error"]["message"]) }],
            "isError": true,
        })),
        "/forever" => HttpResponse::Ok().json(json!({
            "input_request": { "type": "elicitation", "message": format!("round {round}"),
                "requested_schema": { "type": "object", "properties": {} } },
            "state": { "round": round },
        })),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            HttpResponse::Ok().json(result_text("too late"))
        }
        "/hang" => {
            let mut guard = DropGuard {
                events: ep.events.clone(),
                completed: false,
            };
            let _ = ep.events.send("started");
            tokio::time::sleep(Duration::from_secs(30)).await;
            guard.completed = true;
            HttpResponse::Ok().json(result_text("finished"))
        }
        "/fail500" => HttpResponse::InternalServerError()
            .body(format!("database exploded\n{}", "x".repeat(5000))),
        "/notjson" => HttpResponse::Ok()
            .content_type("application/json")
            .body("<html>this is not json</html>"),
        "/empty" => HttpResponse::Ok().finish(),
        "/neither" => HttpResponse::Ok().json(json!({ "hello": "world" })),
        "/typed" => HttpResponse::Ok().json(json!({
            "content": [{ "type": "text", "text": "{\"celsius\":\"hot\"}" }],
            "structuredContent": { "celsius": "hot" },
        })),
        "/typed_ok" => HttpResponse::Ok().json(json!({
            "content": [{ "type": "text", "text": "{\"celsius\":21.5}" }],
            "structuredContent": { "celsius": 21.5 },
        })),
        "/unstructured" => HttpResponse::Ok().json(result_text("21.5 degrees")),
        "/big" => HttpResponse::Ok()
            .content_type("application/json")
            .body(format!("{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}", "a".repeat(5 << 20))),
        // Within the 4 MiB limit, but with more JSON values than a result may hold (a string
        // holding commas and brackets, 300,000 of them, counts as one value).
        "/many" | "/many_ok" => {
            let n = if req.path() == "/many" { 250_001 } else { 200_000 };
            let numbers = vec!["0"; n - 3].join(",");
            let text = MANY_TEXT.replace('"', "\\\"");
            HttpResponse::Ok().content_type("application/json").body(format!(
                r#"{{"content":[{{"type":"text","text":"{text}"}}],"structuredContent":{{"n":[{numbers}]}}}}"#
            ))
        }
        "/redirect" => HttpResponse::TemporaryRedirect()
            .insert_header(("location", "/ok"))
            .finish(),
        _ => HttpResponse::NotFound().body("no such test path"),
    }
}

struct Server {
    base: String,
    endpoint: web::Data<Endpoint>,
    events: mpsc::UnboundedReceiver<&'static str>,
}

impl Server {
    fn seen_bodies(&self) -> Vec<Value> {
        self.endpoint.seen.lock().unwrap().bodies.clone()
    }
    fn target(&self, path: &str) -> WebhookTarget {
        WebhookTarget {
            url: format!("{}{path}", self.base),
            secret: SECRET.into(),
            previous_secret: None,
            timeout_ms: Some(5_000),
        }
    }
}

async fn start_endpoint() -> Server {
    let (tx, events) = mpsc::unbounded_channel();
    let endpoint = web::Data::new(Endpoint {
        secret: SECRET.to_string(),
        seen: Mutex::new(Seen::default()),
        events: tx,
    });
    let data = endpoint.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(16 << 20))
            .default_service(web::to(hook))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(0)
    // A client closing its side ends the connection (and drops the running handler).
    .h1_allow_half_closed(false)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    Server {
        base: format!("http://127.0.0.1:{port}"),
        endpoint,
        events,
    }
}

// ---------------------------------------------------------------------------------------------
// The MCP client side.

/// A client's answer to a server request.
type Answer = Result<Value, RpcError>;

#[derive(Default)]
struct TestPort {
    /// Server→client requests: (method, params).
    requests: Mutex<Vec<(String, Value)>>,
    notifications: Mutex<Vec<(String, Value)>>,
    /// Canned answers by method; methods without one get "method not found".
    answers: HashMap<&'static str, Result<Value, RpcError>>,
    /// Holds each answer (with its reply) instead of sending it, until `answer_held`.
    hold: bool,
    held: Mutex<Vec<(Answer, oneshot::Sender<Answer>)>>,
}

impl TestPort {
    fn client() -> TestPort {
        let mut answers = HashMap::new();
        answers.insert(
            "elicitation/create",
            Ok(json!({ "action": "accept", "content": { "name": "Ada" } })),
        );
        answers.insert(
            "sampling/createMessage",
            Ok(
                json!({ "role": "assistant", "content": { "type": "text", "text": "4" },
                "model": "test-model", "stopReason": "endTurn" }),
            ),
        );
        TestPort {
            answers,
            ..TestPort::default()
        }
    }
    fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }
    /// Sends the answers held so far.
    fn answer_held(&self) {
        for (answer, reply) in self.held.lock().unwrap().drain(..) {
            let _ = reply.send(answer);
        }
    }
}

impl SessionPort for TestPort {
    fn notify(&self, _origin: &RequestId, method: &'static str, params: Value) {
        self.notifications
            .lock()
            .unwrap()
            .push((method.to_string(), params));
    }
    fn request(
        &self,
        _origin: &RequestId,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        self.requests
            .lock()
            .unwrap()
            .push((method.to_string(), params));
        let answer = self
            .answers
            .get(method)
            .cloned()
            .unwrap_or_else(|| Err(RpcError::method_not_found(method)));
        if self.hold {
            self.held.lock().unwrap().push((answer, reply));
        } else {
            let _ = reply.send(answer);
        }
    }
    fn close_stream(&self, _origin: &RequestId) {}
    fn resource_updated(&self, _uri: &str) {}
    fn list_changed(&self, _list: &'static str) {}
}

fn context(id: RequestId, capabilities: Value, port: Arc<TestPort>) -> RequestContext {
    let call_key = format!("acme/session-{}/{id}", uuid::Uuid::new_v4().simple());
    RequestContext::new(
        id,
        ProtocolVersion::V2025_11_25,
        Arc::new(capabilities),
        None,
        call_key.into(),
        port,
    )
}

fn webhook_call(tool: &str, arguments: Value, output_schema: Option<Value>) -> WebhookCall {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    WebhookCall {
        tenant: "acme".into(),
        tool: tool.into(),
        arguments,
        principal: Some(json!({ "sub": "user-1" })),
        output_schema: output_schema.map(|s| Arc::new(mcp_harbor::protocol::schema::compile(&s))),
        slots: None,
    }
}

/// Calls `path` on the endpoint with a default client context; returns the result and the port.
async fn call_path(
    server: &Server,
    path: &str,
    output_schema: Option<Value>,
) -> (Value, Arc<TestPort>) {
    let port = Arc::new(TestPort::client());
    let ctx = context(
        RequestId::Number(7),
        json!({ "elicitation": {}, "sampling": {} }),
        port.clone(),
    );
    let client = http_client();
    let result = invoke(
        &client,
        &server.target(path),
        webhook_call("greet", json!({ "name": "Grace" }), output_schema),
        ctx,
    )
    .await
    .expect("a tool result, not a protocol error");
    (result, port)
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
        .to_string()
}

fn assert_tool_error(result: &Value, needles: &[&str]) {
    assert_eq!(
        result["isError"], true,
        "expected an error result: {result}"
    );
    let text = text_of(result);
    assert!(
        text.starts_with("The `greet` tool failed: "),
        "message names the tool: {text}"
    );
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing from {text:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[actix_rt::test]
async fn success_passes_content_through_and_the_signature_verifies() {
    let server = start_endpoint().await;
    let (result, port) = call_path(&server, "/ok", None).await;
    assert_eq!(
        result,
        json!({
            "content": [{ "type": "text", "text": "hello Grace" }],
            "structuredContent": { "greeting": "hello Grace" },
            "isError": false,
            "_meta": { "trace": "t-1" },
        }),
        "only content/structuredContent/isError/_meta pass through"
    );
    assert!(port.requests().is_empty());

    let seen = server.endpoint.seen.lock().unwrap();
    assert_eq!(seen.rejected, 0, "the endpoint verified the signature");
    assert_eq!(
        seen.bodies,
        vec![json!({
            "type": "tools/call", "tenant": "acme", "tool": "greet",
            "arguments": { "name": "Grace" }, "request_id": 7,
            "principal": { "sub": "user-1" }, "round": 1,
        })]
    );
    let (id, content_type) = &seen.headers[0];
    assert!(id.starts_with("msg_") && id.len() > 10, "webhook-id: {id}");
    assert_eq!(content_type, "application/json");
}

#[actix_rt::test]
async fn a_wrong_secret_is_rejected_by_the_endpoint() {
    let server = start_endpoint().await;
    let mut target = server.target("/ok");
    target.secret = webhook::new_secret();
    let client = http_client();
    let ctx = context(
        RequestId::Number(1),
        json!({}),
        Arc::new(TestPort::client()),
    );
    let result = invoke(
        &client,
        &target,
        webhook_call("greet", json!({}), None),
        ctx,
    )
    .await
    .expect("a tool result, not a protocol error");
    assert_tool_error(&result, &["401", "signature mismatch"]);
    assert_eq!(server.endpoint.seen.lock().unwrap().rejected, 1);
}

#[actix_rt::test]
async fn elicitation_round_trip_carries_state_and_input() {
    let server = start_endpoint().await;
    let port = Arc::new(TestPort::client());
    let ctx = context(
        RequestId::String("req-abc".into()),
        json!({ "elicitation": {}, "sampling": {} }),
        port.clone(),
    );
    let client = http_client();
    let result = invoke(
        &client,
        &server.target("/elicit"),
        webhook_call("greet", json!({}), None),
        ctx.clone(),
    )
    .await
    .expect("a tool result, not a protocol error");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text_of(&result), "Nice to meet you, Ada");
    assert!(ctx.used_port());

    let requests = port.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, "elicitation/create");
    assert_eq!(requests[0].1["message"], "What is your name?");
    assert_eq!(requests[0].1["mode"], "form");
    assert_eq!(
        requests[0].1["requestedSchema"]["required"],
        json!(["name"])
    );

    let bodies = server.seen_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["round"], 1);
    assert_eq!(
        bodies[0]["request_id"], "req-abc",
        "string ids stay strings"
    );
    assert!(bodies[0].get("state").is_none() && bodies[0].get("input").is_none());
    assert_eq!(bodies[1]["round"], 2);
    assert_eq!(bodies[1]["state"], json!({ "step": 1, "opaque": "s-42" }));
    assert_eq!(
        bodies[1]["input"],
        json!({ "action": "accept", "content": { "name": "Ada" } })
    );
    let seen = server.endpoint.seen.lock().unwrap();
    assert_ne!(
        seen.headers[0].0, seen.headers[1].0,
        "a new webhook-id per round"
    );
}

#[actix_rt::test]
async fn a_client_without_elicitation_gets_an_error_input() {
    let server = start_endpoint().await;
    let port = Arc::new(TestPort::client());
    let ctx = context(RequestId::Number(3), json!({}), port.clone());
    let client = http_client();
    let result = invoke(
        &client,
        &server.target("/elicit"),
        webhook_call("greet", json!({}), None),
        ctx,
    )
    .await
    .expect("a tool result, not a protocol error");
    assert!(port.requests().is_empty(), "nothing was sent to the client");
    let bodies = server.seen_bodies();
    assert_eq!(bodies[1]["input"]["error"]["code"], -32600);
    assert!(bodies[1]["input"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("elicitation"));
    // The endpoint's own error result passes through unchanged.
    assert_eq!(result["isError"], true);
    assert!(text_of(&result).starts_with("cannot ask the user"));
}

/// A form is a flat object of primitives (2025-11-25 included): one with a nested object is
/// not sent to the client, and the endpoint hears why.
#[actix_rt::test]
async fn a_form_with_a_nested_object_is_not_sent() {
    let server = start_endpoint().await;
    let (result, port) = call_path(&server, "/nested", None).await;
    assert!(port.requests().is_empty(), "nothing was sent to the client");
    assert_eq!(result["isError"], true, "{result}");
    let text = text_of(&result);
    assert!(
        text.contains("address") && text.contains("flat object"),
        "{text}"
    );
}

#[actix_rt::test]
async fn sampling_round_trip() {
    let server = start_endpoint().await;
    let (result, port) = call_path(&server, "/sample", None).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text_of(&result), "the model said 4");
    let requests = port.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, "sampling/createMessage");
    assert_eq!(requests[0].1["maxTokens"], 10);
    assert_eq!(
        requests[0].1["messages"][0]["content"]["text"],
        "What is 2+2?"
    );
    let bodies = server.seen_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1]["state"], "sampling-state");
    assert_eq!(bodies[1]["input"]["model"], "test-model");
}

#[actix_rt::test]
async fn a_slow_endpoint_times_out_promptly() {
    let server = start_endpoint().await;
    let mut target = server.target("/slow");
    target.timeout_ms = Some(300);
    let client = http_client();
    let ctx = context(
        RequestId::Number(1),
        json!({}),
        Arc::new(TestPort::client()),
    );
    let started = Instant::now();
    let result = invoke(
        &client,
        &target,
        webhook_call("greet", json!({}), None),
        ctx,
    )
    .await
    .expect("a tool result, not a protocol error");
    let elapsed = started.elapsed();
    assert_tool_error(&result, &["timed out after 300 ms"]);
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
        "returned after {elapsed:?}"
    );
}

#[actix_rt::test]
async fn a_server_error_reports_status_and_a_short_excerpt() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/fail500", None).await;
    assert_tool_error(&result, &["HTTP 500", "database exploded xxx", "…"]);
    assert!(
        text_of(&result).len() < 600,
        "the body excerpt is truncated"
    );
}

#[actix_rt::test]
async fn redirects_are_not_followed() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/redirect", None).await;
    assert_tool_error(&result, &["HTTP 307"]);
    assert_eq!(server.seen_bodies().len(), 1, "only the original delivery");
}

#[actix_rt::test]
async fn invalid_json_is_reported() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/notjson", None).await;
    assert_tool_error(&result, &["invalid JSON", "<html>this is not json</html>"]);
    let (result, _) = call_path(&server, "/empty", None).await;
    assert_tool_error(&result, &["empty body"]);
}

#[actix_rt::test]
async fn an_answer_that_is_neither_result_nor_input_request_is_reported() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/neither", None).await;
    assert_tool_error(
        &result,
        &["neither a tool result", "input request", "[hello]"],
    );
}

#[actix_rt::test]
async fn an_oversized_response_is_refused() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/big", None).await;
    assert_tool_error(&result, &["larger than the 4 MiB limit"]);
}

/// The text block of `/many` and `/many_ok`: JSON's structural characters inside a string.
static MANY_TEXT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("[,{{:\"]{}", ",".repeat(300_000)));

/// A result is refused before it is parsed when it holds more JSON values than a result may
/// (4 MiB of short values would take tens of times that parsed); one with fewer passes whole.
#[actix_rt::test]
async fn a_response_of_too_many_values_is_refused() {
    let server = start_endpoint().await;
    let (result, _) = call_path(&server, "/many", None).await;
    assert_tool_error(&result, &["more than 250000 JSON values"]);
    let (result, _) = call_path(&server, "/many_ok", None).await;
    assert_eq!(result["isError"], false, "{}", text_of(&result));
    assert_eq!(text_of(&result), *MANY_TEXT);
    let numbers = result["structuredContent"]["n"].as_array().unwrap();
    assert_eq!(numbers.len(), 200_000 - 3);
}

/// A tenant's calls in flight are capped: with its one slot held by a call its endpoint has not
/// answered, another call waits for its round's timeout, then is a tool error and never reaches
/// the endpoint; the slot comes back when the first call ends. A call holds a slot only while its endpoint answers a round,
/// not while the client is asked for input (two rounds run with one slot).
#[actix_rt::test]
async fn a_tenants_calls_in_flight_are_capped() {
    let mut server = start_endpoint().await;
    let slots = Arc::new(Semaphore::new(1));
    let client = http_client();
    let call = |name: &str| {
        let mut call = webhook_call(name, json!({ "name": "Grace" }), None);
        call.slots = Some(slots.clone());
        call
    };
    let ctx = || {
        context(
            RequestId::Number(1),
            json!({ "elicitation": {} }),
            Arc::new(TestPort::client()),
        )
    };
    let hanging = {
        let (client, target, call, ctx) =
            (client.clone(), server.target("/hang"), call("greet"), ctx());
        actix_rt::spawn(async move { invoke(&client, &target, call, ctx).await })
    };
    assert_eq!(server.events.recv().await, Some("started"));

    // It waits for a place as long as its round may take (200 ms here), then gives up.
    let mut target = server.target("/ok");
    target.timeout_ms = Some(200);
    let started = Instant::now();
    let refused = invoke(&client, &target, call("greet"), ctx())
        .await
        .unwrap();
    assert_tool_error(
        &refused,
        &[
            "as many calls to their endpoints as this server allows",
            "none ended within 200 ms",
        ],
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        server.seen_bodies().len(),
        1,
        "only the hanging call was sent"
    );

    hanging.abort();
    assert_eq!(server.events.recv().await, Some("dropped"));
    // While a call waits for its client's answer, its slot is free for another call.
    let port = Arc::new(TestPort {
        hold: true,
        ..TestPort::client()
    });
    let asking = {
        let (client, target, call) = (client.clone(), server.target("/elicit"), call("greet"));
        let ctx = context(
            RequestId::Number(2),
            json!({ "elicitation": {} }),
            port.clone(),
        );
        actix_rt::spawn(async move { invoke(&client, &target, call, ctx).await })
    };
    while port.held.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let answered = invoke(&client, &server.target("/ok"), call("greet"), ctx())
        .await
        .unwrap();
    assert_eq!(text_of(&answered), "hello Grace");
    port.answer_held();
    let asked = asking.await.unwrap().unwrap();
    assert_eq!(text_of(&asked), "Nice to meet you, Ada");
    assert_eq!(slots.available_permits(), 1, "every slot given back");
}

/// During a rotation a call carries a signature of each secret, so an endpoint still on the
/// replaced secret accepts it; once the overlap has ended, only the new secret signs.
#[actix_rt::test]
async fn a_rotating_secret_signs_with_both_until_the_overlap_ends() {
    let server = start_endpoint().await;
    let client = http_client();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let call = |until: i64| {
        let mut target = server.target("/ok");
        target.secret = webhook::new_secret();
        target.previous_secret = Some((SECRET.into(), until));
        let ctx = context(
            RequestId::Number(1),
            json!({}),
            Arc::new(TestPort::client()),
        );
        let client = client.clone();
        async move {
            invoke(
                &client,
                &target,
                webhook_call("greet", json!({}), None),
                ctx,
            )
            .await
            .unwrap()
        }
    };
    let during = call(now + 60_000).await;
    assert_eq!(text_of(&during), "hello nobody", "{during}");
    let after = call(now - 1).await;
    assert_tool_error(&after, &["HTTP 401"]);
    let seen = server.endpoint.seen.lock().unwrap();
    assert_eq!(seen.signatures, [2, 1]);
    assert_eq!(seen.rejected, 1);
}

#[actix_rt::test]
async fn an_unreachable_endpoint_is_reported() {
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let target = WebhookTarget {
        url: format!("http://127.0.0.1:{closed_port}/hook"),
        secret: SECRET.into(),
        previous_secret: None,
        timeout_ms: None,
    };
    let client = http_client();
    let ctx = context(
        RequestId::Number(1),
        json!({}),
        Arc::new(TestPort::client()),
    );
    let started = Instant::now();
    let result = invoke(
        &client,
        &target,
        webhook_call("greet", json!({}), None),
        ctx,
    )
    .await
    .expect("a tool result, not a protocol error");
    assert_tool_error(&result, &["could not connect", "127.0.0.1"]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[actix_rt::test]
async fn output_schema_is_enforced() {
    let schema = json!({ "type": "object", "properties": { "celsius": { "type": "number" } }, "required": ["celsius"] });
    let server = start_endpoint().await;

    let (result, _) = call_path(&server, "/typed", Some(schema.clone())).await;
    assert_tool_error(
        &result,
        &[
            "does not match the tool's outputSchema",
            "/celsius",
            "\"hot\"",
        ],
    );

    let (result, _) = call_path(&server, "/unstructured", Some(schema.clone())).await;
    assert_tool_error(&result, &["no `structuredContent`"]);

    let (result, _) = call_path(&server, "/typed_ok", Some(schema.clone())).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"], json!({ "celsius": 21.5 }));

    // Error results are not held to the schema.
    let port = Arc::new(TestPort::client());
    let ctx = context(RequestId::Number(9), json!({}), port.clone());
    let client = http_client();
    let call = webhook_call("greet", json!({}), Some(schema));
    let result = invoke(&client, &server.target("/elicit"), call, ctx)
        .await
        .expect("a tool result, not a protocol error");
    assert!(port.requests().is_empty());
    assert_eq!(result["isError"], true);
    assert!(
        text_of(&result).starts_with("cannot ask the user"),
        "{result}"
    );
}

#[actix_rt::test]
async fn rounds_are_capped() {
    let server = start_endpoint().await;
    let (result, port) = call_path(&server, "/forever", None).await;
    assert_tool_error(&result, &["8 times", "rounds"]);
    let bodies = server.seen_bodies();
    assert_eq!(bodies.len(), MAX_ROUNDS, "exactly MAX_ROUNDS deliveries");
    assert_eq!(bodies.last().unwrap()["round"], MAX_ROUNDS);
    assert_eq!(
        bodies.last().unwrap()["state"],
        json!({ "round": MAX_ROUNDS - 1 })
    );
    assert_eq!(
        port.requests().len(),
        MAX_ROUNDS - 1,
        "the last input request is not relayed"
    );
}

#[actix_rt::test]
async fn cancelling_the_call_closes_the_endpoint_connection() {
    let mut server = start_endpoint().await;
    let mut target = server.target("/hang");
    target.timeout_ms = Some(60_000);
    let client = http_client();
    let ctx = context(
        RequestId::Number(1),
        json!({}),
        Arc::new(TestPort::client()),
    );
    let call = invoke(
        &client,
        &target,
        webhook_call("greet", json!({}), None),
        ctx,
    );

    // Run the call until the endpoint is mid-request, then drop it (as a cancelled MCP request
    // drops its future).
    let mut call = Box::pin(call);
    tokio::select! {
        _ = &mut call => panic!("the call cannot finish: the endpoint hangs for 30 s"),
        event = server.events.recv() => assert_eq!(event, Some("started")),
    }
    let dropped_at = Instant::now();
    drop(call);

    // The endpoint sees the connection go away: actix drops the handler future it was running.
    let event = tokio::time::timeout(Duration::from_secs(5), server.events.recv())
        .await
        .expect("the endpoint noticed the disconnect within 5 s");
    assert_eq!(
        event,
        Some("dropped"),
        "the handler did not run to completion"
    );
    assert!(dropped_at.elapsed() < Duration::from_secs(5));
    assert_eq!(server.seen_bodies().len(), 1);
}

#[test]
fn sign_matches_the_standard_webhooks_test_vector() {
    assert_eq!(
        sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap(),
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
    assert!(sign("whsec_not base64!", "msg_1", 1, b"{}").is_err());
    assert!(sign("whsec_", "msg_1", 1, b"{}").is_err());
}

#[test]
fn new_secrets_are_random_and_usable() {
    use secrecy::ExposeSecret;
    let a = webhook::new_secret().expose_secret().to_string();
    let b = webhook::new_secret().expose_secret().to_string();
    assert_ne!(a, b);
    let key = BASE64.decode(a.strip_prefix("whsec_").unwrap()).unwrap();
    assert!((24..=64).contains(&key.len()), "{} bytes", key.len());
    // Our signature agrees with the independent HMAC.
    let signature = sign(&a, "msg_x", 42, b"body").unwrap();
    let expected = BASE64.encode(hmac_sha256(&key, b"msg_x.42.body"));
    assert_eq!(signature, format!("v1,{expected}"));
}

#[test]
fn validate_url_cases() {
    for ok in [
        "https://hooks.example.com/mcp",
        "https://example.com:8443/a?b=c",
        "https://127.0.0.1/x",
    ] {
        assert_eq!(validate_url(ok, false), Ok(()), "{ok}");
    }
    for ok in [
        "http://127.0.0.1:8080/hook",
        "http://127.9.9.9/hook",
        "http://localhost:3000/",
        "http://LOCALHOST/",
        "http://[::1]:8080/",
    ] {
        assert_eq!(validate_url(ok, true), Ok(()), "{ok} with the dev flag");
        let e = validate_url(ok, false).unwrap_err();
        assert!(e.contains("https://"), "{ok}: {e}");
    }
    for (bad, needle) in [
        ("http://example.com/hook", "https://"),
        ("http://10.0.0.1/hook", "https://"),
        ("http://localhost.evil.com/", "https://"),
        ("http://0.0.0.0/", "https://"),
        ("http://[::ffff:127.0.0.1]/", "https://"),
        ("https://user:pw@example.com/", "user name or password"),
        ("https://token@example.com/", "user name or password"),
        ("http://user@127.0.0.1/", "user name or password"),
        ("ftp://example.com/", "scheme"),
        ("file:///etc/passwd", "host"),
        ("not a url", "not a valid absolute URL"),
        ("/relative/path", "not a valid absolute URL"),
        ("", "not a valid absolute URL"),
    ] {
        let e = validate_url(bad, true).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn targets_are_stored_sealed_without_a_default_timeout() {
    use mcp_harbor::auth::Sealer;
    use mcp_harbor::catalog::stored::StoredWebhook;
    use secrecy::ExposeSecret;
    let sealer = Sealer::from_specs(&[Sealer::generate_spec("k")]).unwrap();
    let stored = StoredWebhook::sealed(
        &sealer,
        "acme",
        "hook",
        "https://a.example/h".into(),
        &SECRET.into(),
        None,
    );
    let v = serde_json::to_value(&stored).unwrap();
    let sealed = v["secret_sealed"].as_str().unwrap();
    assert!(
        sealed.starts_with("v1.k.") && !sealed.contains(&SECRET[6..]),
        "{v}"
    );
    assert_eq!(
        v,
        json!({ "url": "https://a.example/h", "secret_sealed": sealed })
    );
    let back: StoredWebhook = serde_json::from_value(v).unwrap();
    let target = back.open(&sealer, "acme", "hook").unwrap();
    assert_eq!(
        (
            target.url.as_str(),
            target.secret.expose_secret(),
            target.timeout_ms
        ),
        ("https://a.example/h", SECRET, None)
    );
}

#[test]
fn webhook_ids_are_stable_per_call_and_round() {
    use mcp_harbor::tools::webhook::message_id;
    let a = message_id("acme/s1/7", 1);
    assert_eq!(
        a,
        message_id("acme/s1/7", 1),
        "a re-sent round keeps its id"
    );
    assert_ne!(a, message_id("acme/s1/7", 2), "each round has its own id");
    assert_ne!(
        a,
        message_id("acme/s2/7", 1),
        "calls of other sessions differ"
    );
    assert!(a.starts_with("msg_") && a.len() == 36, "{a}");
}
