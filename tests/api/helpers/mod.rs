//! Test harness: spawns the real server on a free loopback port and speaks MCP to it over HTTP,
//! with a small SSE reader. Tests assert on what a client sees.
#![allow(dead_code)]

pub mod db;
pub mod oauth;
pub mod redis_proxy;
pub mod webhook;

use std::time::Duration;

use bytes::BytesMut;
use futures_util::StreamExt;
use mcp_harbor::config::TenantConfig;
use mcp_harbor::tenant::TenantRegistry;
use mcp_harbor::{Application, Config};
use serde_json::{json, Value};

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef";

pub struct TestApp {
    pub base: String,
    pub port: u16,
    pub tenants: TenantRegistry,
    pub replica_id: String,
    /// Stops the server abruptly (no drain): a crash as far as HTTP peers can tell.
    pub handle: actix_web::dev::ServerHandle,
    /// Drains the replica as SIGTERM does.
    pub drainer: mcp_harbor::server::app::Drainer,
    pub http: reqwest::Client,
    /// The embedded database's directory, removed when the app is dropped.
    pub data_dir: Option<tempfile::TempDir>,
}

/// A config for tests: port 0, one worker, tenants `demo` and `other`, a known admin token.
pub fn test_config() -> Config {
    let mut c = Config::default();
    c.server.port = 0;
    c.server.workers = 1;
    c.admin.token = secrecy::SecretString::from(ADMIN_TOKEN.to_string());
    // Tenants the MCP-behaviour tests create are open; tests/api/oauth.rs covers protected ones
    // (and the production default, `oauth`).
    c.auth.default_mode = "none".into();
    // The tests' webhook endpoints, OpenID providers and metadata documents are on loopback.
    c.egress.allow_private = true;
    c.tenants.push(TenantConfig {
        slug: "other".into(),
        catalogs: vec!["demo".into()],
    });
    c
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = test_config();
    let data_dir = tempfile::tempdir().expect("temp dir");
    config.storage.data_dir = data_dir.path().display().to_string();
    tweak(&mut config);
    config.validate().expect("test config is valid");
    let app = Application::build(config).await.expect("app builds");
    let port = app.port();
    let tenants = app.tenants().clone();
    let replica_id = app.replica().info.id.to_string();
    let handle = app.server_handle();
    let drainer = app.drainer();
    actix_rt::spawn(app.run_until_stopped());
    TestApp {
        base: format!("http://127.0.0.1:{port}"),
        port,
        tenants,
        replica_id,
        handle,
        drainer,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
        data_dir: Some(data_dir),
    }
}

impl TestApp {
    /// A connection to the app's own SQLite database (its embedded default), to read or set up
    /// what the server stored.
    pub async fn database(&self) -> sqlx::SqlitePool {
        let dir = self.data_dir.as_ref().expect("a data directory").path();
        let url = format!("sqlite://{}/mcp-harbor.db", dir.display());
        sqlx::SqlitePool::connect(&url).await.unwrap()
    }

    /// Creates a tenant through the admin API (`POST /tenants` with `tenant`, which names its
    /// `slug`); the created tenant.
    pub async fn create_tenant(&self, tenant: Value) -> Value {
        let resp = self
            .admin(reqwest::Method::POST, "/tenants")
            .json(&tenant)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 201, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// A tenant to create through the admin API: `app.tenant("acme").catalogs(..).create()`.
    pub fn tenant(&self, slug: &str) -> TenantBuilder<'_> {
        TenantBuilder {
            app: self,
            body: json!({ "slug": slug }),
        }
    }

    /// A request to the admin API with the admin token.
    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}/admin/v1{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
    }

    /// The value of the counter `name` (without `_total`) in `/metrics`, 0 when absent.
    pub async fn counter(&self, token: &str, name: &str) -> f64 {
        counter_in(&self.metrics_text(token).await, name)
    }

    /// The `/metrics` text, read with its token on the main port.
    pub async fn metrics_text(&self, token: &str) -> String {
        metrics_text_via(&self.http, &self.base, token).await
    }

    pub fn mcp_url(&self, tenant: &str) -> String {
        format!("{}/t/{tenant}/mcp", self.base)
    }

    /// A stateless (2026-07-28) POST of `body` with the headers a conforming client sends:
    /// `MCP-Protocol-Version`, and `Mcp-Method`/`Mcp-Name` mirroring the body.
    pub fn post_stateless(&self, tenant: &str, body: &Value) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(self.mcp_url(tenant))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", STATELESS)
            .header("mcp-method", body["method"].as_str().unwrap_or(""));
        let name = body["params"]["name"]
            .as_str()
            .or(body["params"]["uri"].as_str());
        if let Some(name) = name {
            r = r.header(
                "mcp-name",
                mcp_harbor::protocol::stateless::encode_header_value(name),
            );
        }
        r.body(body.to_string())
    }

    /// A POST to a tenant's MCP endpoint with the headers a well-behaved client sends.
    pub fn post(
        &self,
        tenant: &str,
        session: Option<&str>,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(self.mcp_url(tenant))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r
    }

    /// POSTs `initialize` at `version` with the given client capabilities (no session yet).
    pub async fn initialize(
        &self,
        tenant: &str,
        version: &str,
        capabilities: Value,
    ) -> reqwest::Response {
        self.post(tenant, None, &initialize_body(version, capabilities))
            .send()
            .await
            .unwrap()
    }

    /// Opens a session at `version` (initialize + initialized) with the given client capabilities.
    pub async fn open_session(
        &self,
        tenant: &str,
        version: &str,
        capabilities: Value,
    ) -> Client<'_> {
        let client = self.initialize_only(tenant, version, capabilities).await;
        let r = client
            .send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        assert_eq!(r.status(), 202);
        client
    }

    /// A session that answered `initialize` and has not been sent `notifications/initialized`.
    pub async fn initialize_only(
        &self,
        tenant: &str,
        version: &str,
        capabilities: Value,
    ) -> Client<'_> {
        let resp = self.initialize(tenant, version, capabilities).await;
        assert_eq!(resp.status(), 200, "initialize succeeds");
        let session = resp
            .headers()
            .get("mcp-session-id")
            .expect("session id header")
            .to_str()
            .unwrap()
            .to_string();
        let body: Value = resp.json().await.unwrap();
        let negotiated = body["result"]["protocolVersion"]
            .as_str()
            .unwrap()
            .to_string();
        Client {
            app: self,
            tenant: tenant.to_string(),
            session,
            version: negotiated,
            next_id: 100,
        }
    }
}

/// The Redis the shared-state tests use: `MCP_HARBOR_TEST_REDIS_URL` or the local one. `None`
/// when it is unreachable, unless `MCP_HARBOR_REQUIRE_REDIS=1` (CI), where that fails the test.
pub async fn test_redis_url() -> Option<String> {
    let url = std::env::var("MCP_HARBOR_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string());
    let reachable = async {
        let client = redis::Client::open(url.as_str()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    let ok = tokio::time::timeout(Duration::from_secs(2), reachable)
        .await
        .ok()
        .flatten()
        .is_some();
    if ok {
        return Some(url);
    }
    if std::env::var("MCP_HARBOR_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
        panic!("Redis at {url} is unreachable and MCP_HARBOR_REQUIRE_REDIS=1");
    }
    eprintln!("skipping: Redis at {url} is unreachable");
    None
}

/// An app whose Redis (under a key prefix of its own) is reached through a proxy the test can
/// cut ([`redis_proxy::Proxy`]); `None` when Redis is unreachable (see [`test_redis_url`]).
pub async fn app_behind_redis_proxy(
    tweak: impl FnOnce(&mut Config),
) -> Option<(TestApp, redis_proxy::Proxy)> {
    let redis = test_redis_url().await?;
    let proxy = redis_proxy::Proxy::start(&redis).await;
    let through_proxy = proxy.url(&redis);
    let app = spawn_app_with(move |c| {
        c.redis.url = through_proxy;
        c.redis.key_prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        tweak(c);
    })
    .await;
    Some((app, proxy))
}

/// Replicas (one per name) sharing a Redis key prefix and one SQLite database, with short
/// heartbeats; `None` when Redis is unreachable (see [`test_redis_url`]). `tweak` applies to
/// every replica.
pub async fn shared_replicas(
    names: &[&str],
    tweak: impl Fn(&mut Config),
) -> Option<(Vec<TestApp>, tempfile::TempDir)> {
    let redis = test_redis_url().await?;
    let shared = tempfile::tempdir().unwrap();
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let mut apps = Vec::new();
    for name in names {
        apps.push(
            spawn_app_with(|c| {
                c.redis.url = redis.clone();
                c.redis.key_prefix = prefix.clone();
                c.storage.data_dir = shared.path().display().to_string();
                c.cluster.replica_id = format!("{name}-{}", uuid::Uuid::new_v4().simple());
                c.cluster.heartbeat_ms = 200;
                c.cluster.liveness_ttl_ms = 1000;
                c.cluster.drain_grace_secs = 2;
                tweak(c);
            })
            .await,
        );
    }
    Some((apps, shared))
}

/// The key of the first input request of an `input_required` result.
pub fn first_input_key(result: &Value) -> String {
    let requests = result["inputRequests"].as_object();
    let key = requests.and_then(|r| r.keys().next());
    key.unwrap_or_else(|| panic!("no input request in {result}"))
        .clone()
}

/// Now, in unix milliseconds (what the server stores times in).
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub fn initialize_body(version: &str, capabilities: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities, "clientInfo": { "name": "harbor-tests", "version": "1.0.0" } } })
}

/// An MCP client session over Streamable HTTP.
pub struct Client<'a> {
    pub app: &'a TestApp,
    pub tenant: String,
    pub session: String,
    pub version: String,
    next_id: i64,
}

impl Client<'_> {
    pub fn next_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.app
            .post(&self.tenant, Some(&self.session), body)
            .header("mcp-protocol-version", &self.version)
    }

    pub async fn send(&self, body: &Value) -> reqwest::Response {
        self.post(body).send().await.unwrap()
    }

    /// Sends a request and returns its JSON-RPC response, whether it came as JSON or over SSE
    /// (along with every other message of that SSE stream).
    pub async fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.next_id();
        let resp = self
            .send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        assert_eq!(resp.status(), 200, "{method} answers 200");
        read_answer(resp, id).await
    }

    /// The `result` of a request that must succeed.
    pub async fn result(&mut self, method: &str, params: Value) -> Value {
        let (resp, _) = self.call(method, params).await;
        assert!(resp.get("error").is_none(), "{method} failed: {resp}");
        resp["result"].clone()
    }

    /// Opens a GET stream (the standalone one, or a resumption).
    pub async fn get_stream(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut r = self
            .app
            .http
            .get(self.app.mcp_url(&self.tenant))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", &self.version);
        if let Some(id) = last_event_id {
            r = r.header("last-event-id", id);
        }
        r.send().await.unwrap()
    }
}

/// Reads a POST answer: a JSON body, or SSE events up to the response with `id`.
pub async fn read_answer(resp: reqwest::Response, id: i64) -> (Value, Vec<Value>) {
    let content_type = resp
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    if content_type.starts_with("application/json") {
        return (resp.json().await.unwrap(), Vec::new());
    }
    assert!(
        content_type.starts_with("text/event-stream"),
        "unexpected content type {content_type}"
    );
    let mut sse = SseReader::new(resp);
    let mut others = Vec::new();
    while let Some(event) = sse.next_event(Duration::from_secs(10)).await {
        let Some(msg) = event.json() else { continue };
        if msg["id"] == json!(id) && (msg.get("result").is_some() || msg.get("error").is_some()) {
            return (msg, others);
        }
        others.push(msg);
    }
    panic!("stream ended without the response to {id}; saw {others:?}");
}

#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

impl SseEvent {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Reads SSE events from a streaming response.
pub struct SseReader {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: BytesMut,
    /// The body ended (as opposed to a read timing out).
    pub finished: bool,
}

impl SseReader {
    pub fn new(resp: reqwest::Response) -> Self {
        SseReader {
            stream: resp.bytes_stream().boxed(),
            buf: BytesMut::new(),
            finished: false,
        }
    }

    /// Reads until the stream ends: true if it ended within `within`, false on timeout. Events
    /// read on the way are returned through `seen`.
    pub async fn ends_within(&mut self, within: Duration, seen: &mut Vec<SseEvent>) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            match tokio::time::timeout(left, self.next_event(left)).await {
                Ok(Some(e)) => seen.push(e),
                Ok(None) => return tokio::time::Instant::now() < deadline && self.finished,
                Err(_) => return false,
            }
        }
    }

    /// The next event holding a JSON message (other events skipped); panics when none comes
    /// within `within` of each read.
    pub async fn next_json(&mut self, within: Duration) -> Value {
        loop {
            let event = self
                .next_event(within)
                .await
                .unwrap_or_else(|| panic!("no JSON message within {within:?}"));
            if let Some(m) = event.json() {
                return m;
            }
        }
    }

    /// The next event (comments skipped), `None` when the stream ends or `within` passes.
    pub async fn next_event(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let raw = self.buf.split_to(pos + 2);
                let text = String::from_utf8_lossy(&raw).to_string();
                let mut e = SseEvent::default();
                let mut has_field = false;
                for line in text.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    has_field = true;
                    let (k, v) = line.split_once(':').unwrap_or((line, ""));
                    let v = v.strip_prefix(' ').unwrap_or(v);
                    match k {
                        "id" => e.id = Some(v.to_string()),
                        "event" => e.event = Some(v.to_string()),
                        "data" => e.data.push_str(v),
                        "retry" => e.retry = v.parse().ok(),
                        _ => {}
                    }
                }
                if has_field {
                    return Some(e);
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(None) | Ok(Some(Err(_))) => {
                    self.finished = true;
                    return None;
                }
                Err(_) => return None,
            }
        }
    }
}

/// Opens a URL-mode elicitation page (checking the headers every such page carries): its CSRF
/// token, the cookie that goes with it, and the page.
pub async fn open_elicitation_page(app: &TestApp, url: &str) -> (String, String, String) {
    let resp = app.http.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert!(resp.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    let cookie = resp.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let html = resp.text().await.unwrap();
    assert!(html.contains("type=\"password\" id=\"secret\""), "{html}");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    (csrf, cookie, html)
}

/// POSTs a form (`application/x-www-form-urlencoded`) with a cookie.
pub async fn post_form(
    app: &TestApp,
    url: &str,
    cookie: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    app.http
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", cookie)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// The `/metrics` text of the server at `base` (`http://…` or `https://…`), read with `token`
/// through `http`.
pub async fn metrics_text_via(http: &reqwest::Client, base: &str, token: &str) -> String {
    http.get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the counter `name` (without `_total`) in a `/metrics` text, 0 when absent.
pub fn counter_in(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name}_total ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The stateless revision.
pub const STATELESS: &str = "2026-07-28";

/// The `_meta` of a stateless request declaring `capabilities`.
pub fn stateless_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "modern-test", "version": "1.0.0" },
    })
}

/// A stateless request body: `stateless_meta(capabilities)` merged into `params._meta`.
pub fn stateless_body(id: i64, method: &str, mut params: Value, capabilities: Value) -> Value {
    let mut m = stateless_meta(capabilities);
    if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
        for (k, v) in extra {
            m[k] = v.clone();
        }
    }
    params["_meta"] = m;
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A stateless (2026-07-28) `tools/call` of `echo` with `text_len` bytes of text: an answer of
/// about as many bytes. Its headers: `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method:
/// tools/call`, `Mcp-Name: echo`.
pub fn large_echo_body(text_len: usize) -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": { "text": "x".repeat(text_len) },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string()
}

/// A JSON Schema of a few KB whose property `name` expands to 2^n subschemas: `n` definitions,
/// each `anyOf` two references to the next.
pub fn doubling_schema(n: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({ "anyOf": [{ "$ref": next }, { "$ref": next }] }),
        );
    }
    defs.insert(format!("d{n}"), json!({ "type": "string" }));
    json!({ "type": "object", "$defs": defs, "properties": { "name": { "$ref": "#/$defs/d0" } } })
}

/// A tenant's `POST /tenants` body, built field by field ([`TestApp::tenant`]).
pub struct TenantBuilder<'a> {
    app: &'a TestApp,
    body: Value,
}

impl TenantBuilder<'_> {
    /// The built-in catalogs it serves (a JSON list of names).
    pub fn catalogs(mut self, catalogs: Value) -> Self {
        self.body["catalogs"] = catalogs;
        self
    }
    /// How its MCP requests are authorized (the admin API's `auth` object).
    pub fn auth(mut self, auth: Value) -> Self {
        self.body["auth"] = auth;
        self
    }
    /// Its limits (the admin API's `limits` object).
    pub fn limits(mut self, limits: Value) -> Self {
        self.body["limits"] = limits;
        self
    }
    /// Creates it (201 expected); the created tenant.
    pub async fn create(self) -> Value {
        self.app.create_tenant(self.body).await
    }
}
