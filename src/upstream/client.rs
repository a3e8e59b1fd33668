//! The MCP client of one upstream server: Streamable HTTP, a session-era revision negotiated
//! (2025-11-25 asked for), one upstream session shared by every call through this client and
//! opened again when the upstream forgets it (404). While a call runs, what the upstream sends on
//! its stream is relayed to the caller's client through the call's `RequestContext`: progress,
//! log messages and server→client requests (sampling, elicitation, roots), whose answers go back
//! to the upstream. A call dropped before its answer (the client cancelled, the session ended)
//! is cancelled at the upstream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};

use super::sse::Decoder;
use crate::egress::Egress;
use crate::protocol::mcp::LogLevel;
use crate::protocol::{ProtocolVersion, RpcError};
use crate::request::RequestContext;

/// One message of an upstream (a JSON body or one SSE event) may be at most this large.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// A call's stream resumed more often than this without an answer is given up.
const MAX_RESUMES: u32 = 32;
const ERROR_EXCERPT: usize = 200;

/// Something the upstream announced outside any call's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `tools`, `prompts` or `resources`.
    ListChanged(&'static str),
    ResourceUpdated(String),
}

/// Why a request to the upstream has no result.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream answered with a JSON-RPC error: passed on as it is.
    #[error("{}", .0.message)]
    Rpc(RpcError),
    #[error("could not reach it: {0}")]
    Unreachable(String),
    #[error("it did not answer within {0} ms")]
    Timeout(u64),
    #[error("it refused the server's credentials (HTTP {0})")]
    Unauthorized(u16),
    #[error("{0}")]
    Protocol(String),
    /// The upstream no longer knows the session (404): opened again by `request`.
    #[error("it no longer knows the session")]
    SessionGone,
}

impl UpstreamError {
    /// The error a client of the tenant gets: the upstream's own, or one naming the upstream.
    pub fn into_rpc(self, upstream: &str) -> RpcError {
        match self {
            UpstreamError::Rpc(e) => e,
            other => RpcError::internal(format!("upstream {upstream:?}: {other}"))
                .with_data(json!({ "upstream": upstream })),
        }
    }
}

/// The upstream session the client holds.
#[derive(Debug)]
pub struct Session {
    pub id: Option<String>,
    pub version: ProtocolVersion,
    pub capabilities: Value,
    pub server_info: Value,
}

pub struct Client {
    name: Arc<str>,
    egress: Egress,
    url: reqwest::Url,
    headers: HeaderMap,
    timeout: Duration,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    next_id: AtomicU64,
    on_notice: Arc<dyn Fn(Notice) + Send + Sync>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish()
    }
}

impl Client {
    /// A client of the upstream at `url` (checked by the egress policy when configured),
    /// sending `headers` (sensitive: never logged) on every request.
    pub fn new(
        name: &str,
        egress: Egress,
        url: &str,
        headers: Vec<(String, secrecy::SecretString)>,
        timeout_ms: u64,
        on_notice: Arc<dyn Fn(Notice) + Send + Sync>,
    ) -> Result<Client, String> {
        use secrecy::ExposeSecret;
        let url = reqwest::Url::parse(url).map_err(|e| format!("its URL is invalid ({e})"))?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            let mut value = HeaderValue::from_str(value.expose_secret())
                .map_err(|_| format!("the value of {name} is not a header value"))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(Client {
            name: name.into(),
            egress,
            url,
            headers: map,
            timeout: Duration::from_millis(timeout_ms),
            session: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
            on_notice,
        })
    }

    fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis() as u64
    }

    /// The upstream session, opened when there is none (with its standalone stream, see
    /// [`Self::listen`]).
    pub async fn session(self: &Arc<Self>) -> Result<Arc<Session>, UpstreamError> {
        let mut held = self.session.lock().await;
        if let Some(session) = &*held {
            return Ok(session.clone());
        }
        let session = Arc::new(self.initialize().await?);
        *held = Some(session.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(Self::listen(Arc::downgrade(self), session.clone()));
        }
        Ok(session)
    }

    /// Reads the session's standalone stream (a GET) while the session is the one held and the
    /// client lives: what the upstream sends outside any call (list changes, resource updates)
    /// becomes a [`Notice`]; its requests, asked of no client, are answered with an error (a
    /// ping with an empty result). Opened again (resumed with `Last-Event-ID`) when it ends, with
    /// a growing pause; not at all when the upstream offers none (405).
    async fn listen(client: std::sync::Weak<Client>, session: Arc<Session>) {
        // Whether `session` is still the one held by a live client (the client only while it
        // is looked at: a stream never keeps a dropped upstream alive).
        let held = |client: &std::sync::Weak<Client>| {
            let this = client.upgrade()?;
            let current = this
                .current_session()
                .is_some_and(|held| Arc::ptr_eq(&held, &session));
            current.then_some(this)
        };
        let mut last_id: Option<String> = None;
        let mut pause = Duration::from_millis(500);
        loop {
            let Some(this) = held(&client) else { return };
            let mut request = this
                .request_builder(reqwest::Method::GET, Some(&session))
                .header(ACCEPT, "text/event-stream");
            if let Some(id) = &last_id {
                request = request.header("last-event-id", id);
            }
            let response = match request.send().await {
                Ok(r) if r.status().is_success() => Some(r),
                Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => return,
                Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => {
                    this.forget(&session).await;
                    return;
                }
                _ => None,
            };
            drop(this);
            if let Some(mut response) = response {
                pause = Duration::from_millis(500);
                let mut decoder = Decoder::new(MAX_MESSAGE);
                // No timeout: the stream is quiet while the upstream has nothing to say (its
                // heartbeats, if any, let a dropped client or replaced session end it sooner).
                while let Ok(Some(bytes)) = response.chunk().await {
                    let Some(this) = held(&client) else { return };
                    let Ok(events) = decoder.push(&bytes) else {
                        break;
                    };
                    for event in events {
                        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                            continue;
                        };
                        if let Err(e) = this.on_message(Some(&session), message, 0, None).await {
                            tracing::debug!(upstream = %this.name, error = %e, "could not answer a request of the upstream's standalone stream");
                        }
                    }
                }
                last_id = decoder.last_id.or(last_id);
                if let Some(ms) = decoder.retry_ms {
                    pause = Duration::from_millis(ms.min(30_000));
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    }

    /// The session as it is now, without opening one.
    pub fn current_session(&self) -> Option<Arc<Session>> {
        self.session.try_lock().ok().and_then(|s| s.clone())
    }

    async fn forget(&self, stale: &Arc<Session>) {
        let mut held = self.session.lock().await;
        if held.as_ref().is_some_and(|s| Arc::ptr_eq(s, stale)) {
            *held = None;
        }
    }

    async fn initialize(&self) -> Result<Session, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": ProtocolVersion::LATEST.as_str(),
                // Whatever the upstream asks is relayed to the client of the call that it asks in,
                // which may refuse it (then the upstream gets the client's error).
                "capabilities": { "sampling": {}, "elicitation": { "form": {}, "url": {} }, "roots": {} },
                "clientInfo": { "name": "mcp-harbor", "version": env!("CARGO_PKG_VERSION") }
            }
        });
        let response = self.post(None, &body).await?;
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let result = self.answer(None, response, id, None).await?;
        let version = result["protocolVersion"]
            .as_str()
            .and_then(ProtocolVersion::parse)
            .ok_or_else(|| {
                UpstreamError::Protocol(format!(
                    "it answered initialize with protocol version {} , which the server does not speak",
                    result["protocolVersion"]
                ))
            })?;
        let session = Session {
            id: session_id,
            version,
            capabilities: result["capabilities"].clone(),
            server_info: result["serverInfo"].clone(),
        };
        self.send(
            &session,
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        )
        .await?;
        Ok(session)
    }

    /// Sends request `method` in the upstream session (opened, or opened again once when the
    /// upstream forgot it) and waits for its answer, relaying what the upstream sends meanwhile
    /// through `ctx`.
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        ctx: Option<&RequestContext>,
    ) -> Result<Value, UpstreamError> {
        let mut retried = false;
        loop {
            let session = self.session().await?;
            match self.exchange(&session, method, params.clone(), ctx).await {
                Err(UpstreamError::SessionGone) if !retried => {
                    tracing::info!(upstream = %self.name, "the upstream forgot its session; opening another");
                    self.forget(&session).await;
                    retried = true;
                }
                other => return other,
            }
        }
    }

    async fn exchange(
        self: &Arc<Self>,
        session: &Arc<Session>,
        method: &str,
        mut params: Value,
        ctx: Option<&RequestContext>,
    ) -> Result<Value, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if ctx.is_some_and(|c| c.progress_token.is_some()) {
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("progressToken".into(), json!(format!("harbor-{id}")));
                }
            }
        }
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let mut guard = CancelOnDrop {
            client: self.clone(),
            session: session.clone(),
            id,
            armed: true,
        };
        let response = match self.post(Some(session), &body).await {
            Err(UpstreamError::SessionGone) => {
                guard.armed = false;
                return Err(UpstreamError::SessionGone);
            }
            other => other?,
        };
        let outcome = self.answer(Some(session), response, id, ctx).await;
        if matches!(outcome, Ok(_) | Err(UpstreamError::Rpc(_))) {
            guard.armed = false;
        }
        outcome
    }

    fn request_builder(
        &self,
        method: reqwest::Method,
        session: Option<&Session>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .egress
            .client()
            .request(method, self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(session) = session {
            if let Some(id) = &session.id {
                request = request.header("mcp-session-id", id);
            }
            if session.version >= ProtocolVersion::V2025_06_18 {
                request = request.header("mcp-protocol-version", session.version.as_str());
            }
        }
        for (name, value) in crate::observe::telemetry::outgoing_headers() {
            request = request.header(name, value);
        }
        request
    }

    /// POSTs a message; the response once its head arrived and its status is a success.
    async fn post(
        &self,
        session: Option<&Session>,
        body: &Value,
    ) -> Result<reqwest::Response, UpstreamError> {
        if let Err(e) = self.egress.check_address(self.url.as_str()) {
            return Err(UpstreamError::Unreachable(e));
        }
        let request = self
            .request_builder(reqwest::Method::POST, session)
            .header(CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default());
        self.sent(request, session).await
    }

    async fn sent(
        &self,
        request: reqwest::RequestBuilder,
        session: Option<&Session>,
    ) -> Result<reqwest::Response, UpstreamError> {
        let response = match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => return Err(UpstreamError::Timeout(self.timeout_ms())),
            Ok(Err(e)) if e.is_timeout() => return Err(UpstreamError::Timeout(self.timeout_ms())),
            Ok(Err(e)) => return Err(UpstreamError::Unreachable(crate::egress::root_cause(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status == reqwest::StatusCode::NOT_FOUND && session.is_some_and(|s| s.id.is_some()) {
            return Err(UpstreamError::SessionGone);
        }
        if matches!(status.as_u16(), 401 | 403) {
            return Err(UpstreamError::Unauthorized(status.as_u16()));
        }
        let text = tokio::time::timeout(Duration::from_secs(2), response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let excerpt: String = text.chars().take(ERROR_EXCERPT).collect();
        Err(UpstreamError::Protocol(format!(
            "it answered HTTP {status}{}",
            if excerpt.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", excerpt.trim())
            }
        )))
    }

    /// Sends a notification or a response to the upstream (answered 202 Accepted).
    async fn send(&self, session: &Session, message: &Value) -> Result<(), UpstreamError> {
        self.post(Some(session), message).await.map(drop)
    }

    /// Reads the answer to request `id` from a response: a JSON body, or an SSE stream carrying
    /// what the upstream sends before it (resumed with `Last-Event-ID` when it closes early).
    async fn answer(
        &self,
        session: Option<&Arc<Session>>,
        mut response: reqwest::Response,
        id: u64,
        ctx: Option<&RequestContext>,
    ) -> Result<Value, UpstreamError> {
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if !is_stream {
            let bytes = self.read_body(response).await?;
            let message: Value = serde_json::from_slice(&bytes).map_err(|e| {
                UpstreamError::Protocol(format!("it answered with invalid JSON ({e})"))
            })?;
            return match self.on_message(session, message, id, ctx).await? {
                Some(outcome) => outcome,
                None => Err(UpstreamError::Protocol(
                    "its JSON answer is not the response to the request".into(),
                )),
            };
        }
        let mut decoder = Decoder::new(MAX_MESSAGE);
        let mut resumes = 0;
        loop {
            match tokio::time::timeout(self.timeout, response.chunk()).await {
                Err(_) => return Err(UpstreamError::Timeout(self.timeout_ms())),
                Ok(Ok(Some(bytes))) => {
                    let events = decoder
                        .push(&bytes)
                        .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
                    // (An event without data is a priming event: its id is what counts.)
                    for event in events.into_iter().filter(|e| !e.data.is_empty()) {
                        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                            tracing::debug!(upstream = %self.name, "an event of the upstream's stream is not JSON; skipped");
                            continue;
                        };
                        if let Some(outcome) = self.on_message(session, message, id, ctx).await? {
                            return outcome;
                        }
                    }
                    continue;
                }
                // The stream ended (or broke) before the answer: resume it where it stopped.
                Ok(Ok(None)) | Ok(Err(_)) => {}
            }
            let (Some(session), Some(last)) = (session, decoder.last_id.clone()) else {
                return Err(UpstreamError::Protocol(
                    "it ended the stream without answering".into(),
                ));
            };
            // It closed the stream for its client to poll (SSE polling): so does the call's
            // stream to its own client, which resumes it as the upstream's is resumed here.
            if let Some(ctx) = ctx {
                ctx.close_stream();
            }
            resumes += 1;
            if resumes > MAX_RESUMES {
                return Err(UpstreamError::Protocol(format!(
                    "it ended the stream {MAX_RESUMES} times without answering"
                )));
            }
            let wait = decoder.retry_ms.unwrap_or(0).min(5_000);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let request = self
                .request_builder(reqwest::Method::GET, Some(session))
                .header(ACCEPT, "text/event-stream")
                .header("last-event-id", last);
            response = self.sent(request, Some(session)).await?;
        }
    }

    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, UpstreamError> {
        let mut buf = Vec::new();
        loop {
            match tokio::time::timeout(self.timeout, response.chunk()).await {
                Err(_) => return Err(UpstreamError::Timeout(self.timeout_ms())),
                Ok(Err(e)) => {
                    return Err(UpstreamError::Unreachable(crate::egress::root_cause(&e)))
                }
                Ok(Ok(None)) => return Ok(buf),
                Ok(Ok(Some(chunk))) => {
                    if buf.len() + chunk.len() > MAX_MESSAGE {
                        return Err(UpstreamError::Protocol(format!(
                            "its answer is larger than {} MiB",
                            MAX_MESSAGE >> 20
                        )));
                    }
                    buf.extend_from_slice(&chunk);
                }
            }
        }
    }

    /// One message from the upstream while request `id` runs (0: none, on the standalone
    /// stream): `Some` outcome when it is the answer.
    async fn on_message(
        &self,
        session: Option<&Arc<Session>>,
        message: Value,
        id: u64,
        ctx: Option<&RequestContext>,
    ) -> Result<Option<Result<Value, UpstreamError>>, UpstreamError> {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (None, Some(answered)) => {
                if id == 0 || answered.as_u64() != Some(id) {
                    return Ok(None);
                }
                if let Some(error) = message.get("error") {
                    let e: RpcError = serde_json::from_value(error.clone()).map_err(|_| {
                        UpstreamError::Protocol(format!("its error is malformed: {error}"))
                    })?;
                    return Ok(Some(Err(UpstreamError::Rpc(e))));
                }
                Ok(Some(Ok(message
                    .get("result")
                    .cloned()
                    .unwrap_or(json!({})))))
            }
            (Some(method), Some(asked)) => {
                let params = message.get("params").cloned().unwrap_or(json!({}));
                let answer = ask(method, params, ctx).await;
                let reply = match answer {
                    Ok(result) => json!({ "jsonrpc": "2.0", "id": asked, "result": result }),
                    Err(e) => json!({ "jsonrpc": "2.0", "id": asked, "error": e }),
                };
                if let Some(session) = session {
                    self.send(session, &reply).await?;
                }
                Ok(None)
            }
            (Some(method), None) => {
                self.on_notification(method, message.get("params"), ctx);
                Ok(None)
            }
            (None, None) => Ok(None),
        }
    }

    fn on_notification(&self, method: &str, params: Option<&Value>, ctx: Option<&RequestContext>) {
        let params = params.cloned().unwrap_or(json!({}));
        match method {
            "notifications/progress" => {
                if let (Some(ctx), Some(progress)) = (ctx, params["progress"].as_f64()) {
                    ctx.progress(
                        progress,
                        params["total"].as_f64(),
                        params["message"].as_str(),
                    );
                }
            }
            "notifications/message" => {
                if let Some(ctx) = ctx {
                    let level = params["level"]
                        .as_str()
                        .and_then(LogLevel::parse)
                        .unwrap_or(LogLevel::Info);
                    let logger = params["logger"].as_str().unwrap_or(&self.name);
                    ctx.log(level, logger, params["data"].clone());
                }
            }
            "notifications/tools/list_changed" => (self.on_notice)(Notice::ListChanged("tools")),
            "notifications/prompts/list_changed" => {
                (self.on_notice)(Notice::ListChanged("prompts"))
            }
            "notifications/resources/list_changed" => {
                (self.on_notice)(Notice::ListChanged("resources"))
            }
            "notifications/resources/updated" => {
                if let Some(uri) = params["uri"].as_str() {
                    (self.on_notice)(Notice::ResourceUpdated(uri.to_string()))
                }
            }
            _ => {}
        }
    }
}

/// A server→client request of the upstream, asked of the client of the call it came in.
async fn ask(method: &str, params: Value, ctx: Option<&RequestContext>) -> Result<Value, RpcError> {
    let relayed: &'static str = match method {
        "ping" => return Ok(json!({})),
        // The standalone stream's requests belong to no call: there is no one client to ask.
        "sampling/createMessage" => "sampling/createMessage",
        "elicitation/create" => "elicitation/create",
        "roots/list" => "roots/list",
        other => return Err(RpcError::method_not_found(other)),
    };
    let Some(ctx) = ctx else {
        return Err(RpcError::invalid_request(format!(
            "{relayed} outside a call: there is no client to ask"
        )));
    };
    ctx.require(relayed, &params)?;
    ctx.request(relayed, params).await
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting for it.
struct CancelOnDrop {
    client: Arc<Client>,
    session: Arc<Session>,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, session, id) = (self.client.clone(), self.session.clone(), self.id);
        runtime.spawn(async move {
            let cancel = json!({
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": { "requestId": id, "reason": "the client stopped waiting" }
            });
            if let Err(e) = client.send(&session, &cancel).await {
                tracing::debug!(upstream = %client.name, error = %e, "could not cancel a request at the upstream");
            }
        });
    }
}
