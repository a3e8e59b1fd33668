//! The session state machine, in plain Rust: lifecycle and version negotiation, request routing,
//! in-flight requests and cancellation, server→client requests, log level, subscriptions, and the
//! session's streams (which message goes on which stream, JSON or SSE, the event log). The actor in
//! `session::actor` only feeds it messages and runs the futures it hands back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::catalog::{CallFuture, CatalogHandle, RequestContext, SessionPort};
use crate::eventlog::{EventId, EventLog, StreamId};
use crate::protocol::jsonrpc::{self, RESOURCE_NOT_FOUND};
use crate::protocol::mcp::{paginate, server_capabilities, LogLevel};
use crate::protocol::{
    Message, Notification, Payload, ProtocolVersion, Request, RequestId, Response, RpcError,
};
use crate::transport::sse;

/// How the client reaches this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransportKind {
    /// 2025-03-26 and later: POST answers carry their own streams; GET opens the standalone one.
    Streamable,
    /// 2024-11-05 HTTP+SSE: one SSE stream carries everything; POSTs are only accepted.
    Legacy,
}

/// Settings shared by every session of a server.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub page_size: usize,
    /// `retry:` sent in priming events, in milliseconds.
    pub sse_retry_ms: u64,
    pub server_name: String,
    pub server_version: String,
    pub instructions: Option<String>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            page_size: 50,
            sse_retry_ms: 1000,
            server_name: "mcp-harbor".into(),
            server_version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
        }
    }
}

/// One piece of an HTTP response body: the whole JSON answer, or one SSE event.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Json(Bytes),
    Sse(Bytes),
}

pub type FrameReceiver = mpsc::UnboundedReceiver<Frame>;
type Sink = mpsc::UnboundedSender<Frame>;

/// A refusal that maps to an HTTP status with a JSON-RPC error body.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub error: RpcError,
}

impl Refusal {
    pub fn new(status: u16, error: RpcError) -> Self {
        Refusal { status, error }
    }
}

/// What the transport should answer to a POST.
#[derive(Debug)]
pub enum Reply {
    /// 202 Accepted, no body.
    Accepted,
    /// 200 with this JSON body (the whole answer was ready at once).
    Json(Bytes),
    /// A body: its first frame decides JSON or SSE.
    Stream(FrameReceiver),
    Refused(Refusal),
}

/// A request whose answer comes from a future (a tool call): the actor polls it and hands the
/// outcome back to `Session::complete`.
pub struct Invocation {
    pub id: RequestId,
    pub future: CallFuture,
    pub ctx: RequestContext,
}

/// What survives a session actor's crash: enough to go on serving the same session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSnapshot {
    pub id: String,
    pub tenant: String,
    pub transport: TransportKind,
    pub version: Option<String>,
    pub initialized: bool,
    pub client_capabilities: Value,
    pub client_info: Value,
    pub log_level: String,
    pub subscriptions: Vec<String>,
    pub standalone_stream: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StreamKey(u64);

/// Where a stream's frames go.
enum Outlet {
    /// The POST that opened the stream is still being handled: frames wait here, so an answer
    /// that is ready before the handler returns goes out as plain JSON with no channel at all.
    Unclaimed(Vec<Frame>),
    Open(Sink),
    /// No client connected: it left, or the server closed the connection (SSE polling).
    Detached,
}

impl Outlet {
    /// Writes a frame; a closed connection just means the client is gone (the log keeps the
    /// event for a resumption).
    fn send(&mut self, frame: Frame) {
        match self {
            Outlet::Unclaimed(frames) => frames.push(frame),
            Outlet::Open(sink) => {
                if sink.send(frame).is_err() {
                    *self = Outlet::Detached;
                }
            }
            Outlet::Detached => {}
        }
    }

    fn is_connected(&self) -> bool {
        matches!(self, Outlet::Open(sink) if !sink.is_closed())
    }
}

struct Stream {
    outlet: Outlet,
    /// Set once the stream is SSE (its log id); `None` while the first message may still be sent
    /// as a plain JSON answer.
    log_id: Option<StreamId>,
    /// Responses this stream still owes (requests of its POST not yet answered).
    owed: usize,
    /// For a batch answered as JSON: the responses gathered so far.
    batch: Option<Vec<Bytes>>,
    /// The standalone GET stream (or the legacy stream): never ends by itself.
    standalone: bool,
}

struct InFlight {
    stream: StreamKey,
    abort: Option<AbortHandle>,
}

struct PendingRequest {
    origin: RequestId,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// The state of one MCP session.
pub struct Session {
    id: Arc<str>,
    tenant: Arc<str>,
    transport: TransportKind,
    version: Option<ProtocolVersion>,
    initialized: bool,
    client_capabilities: Arc<Value>,
    client_info: Value,
    log_level: LogLevel,
    subscriptions: HashSet<String>,
    inflight: HashMap<RequestId, InFlight>,
    pending: HashMap<RequestId, PendingRequest>,
    next_server_request: i64,
    streams: HashMap<StreamKey, Stream>,
    next_stream: u64,
    standalone: Option<StreamKey>,
    /// What a stream finished while its POST was still being handled said (see `claim`).
    finished: Option<Vec<Frame>>,
    catalog: CatalogHandle,
    log: Arc<dyn EventLog>,
    settings: Arc<SessionSettings>,
}

impl Session {
    pub fn new(
        id: Arc<str>,
        tenant: Arc<str>,
        transport: TransportKind,
        catalog: CatalogHandle,
        log: Arc<dyn EventLog>,
        settings: Arc<SessionSettings>,
    ) -> Self {
        Session {
            id,
            tenant,
            transport,
            version: None,
            initialized: false,
            client_capabilities: Arc::new(json!({})),
            client_info: Value::Null,
            log_level: LogLevel::Info,
            subscriptions: HashSet::new(),
            inflight: HashMap::new(),
            pending: HashMap::new(),
            next_server_request: 0,
            streams: HashMap::new(),
            next_stream: 0,
            standalone: None,
            finished: None,
            catalog,
            log,
            settings,
        }
    }

    /// Rebuilds a session from its snapshot (after its actor crashed). Streams and in-flight
    /// requests are gone; their events stay in the event log for the client to resume.
    pub fn restore(
        snapshot: &SessionSnapshot,
        catalog: CatalogHandle,
        log: Arc<dyn EventLog>,
        settings: Arc<SessionSettings>,
    ) -> Self {
        let mut s = Session::new(
            snapshot.id.as_str().into(),
            snapshot.tenant.as_str().into(),
            snapshot.transport,
            catalog,
            log,
            settings,
        );
        s.version = snapshot.version.as_deref().and_then(ProtocolVersion::parse);
        s.initialized = snapshot.initialized;
        s.client_capabilities = Arc::new(snapshot.client_capabilities.clone());
        s.client_info = snapshot.client_info.clone();
        s.log_level = LogLevel::parse(&snapshot.log_level).unwrap_or(LogLevel::Info);
        s.subscriptions = snapshot.subscriptions.iter().cloned().collect();
        if let Some(standalone) = snapshot.standalone_stream {
            // Keep the standalone stream's identity so its events can still be resumed.
            let key = s.new_stream_key();
            s.streams.insert(
                key,
                Stream {
                    outlet: Outlet::Detached,
                    log_id: Some(StreamId(standalone)),
                    owed: 0,
                    batch: None,
                    standalone: true,
                },
            );
            s.standalone = Some(key);
        }
        s
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        let mut subscriptions: Vec<String> = self.subscriptions.iter().cloned().collect();
        subscriptions.sort();
        SessionSnapshot {
            id: self.id.to_string(),
            tenant: self.tenant.to_string(),
            transport: self.transport,
            version: self.version.map(|v| v.as_str().to_string()),
            initialized: self.initialized,
            client_capabilities: (*self.client_capabilities).clone(),
            client_info: self.client_info.clone(),
            log_level: self.log_level.as_str().to_string(),
            subscriptions,
            standalone_stream: self
                .standalone
                .and_then(|k| self.streams.get(&k))
                .and_then(|s| s.log_id)
                .map(|s| s.0),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    pub fn transport(&self) -> TransportKind {
        self.transport
    }

    /// Whether the session is doing anything: requests running or a client connected.
    pub fn is_busy(&self) -> bool {
        !self.inflight.is_empty() || self.streams.values().any(|s| s.outlet.is_connected())
    }

    /// Handles one POST body. Invocations returned must be run and their outcomes passed to
    /// `complete`.
    pub fn handle_post(
        &mut self,
        payload: Payload,
        port: &Arc<dyn SessionPort>,
    ) -> (Reply, Vec<Invocation>) {
        let mut jobs = Vec::new();
        let reply = match payload {
            Payload::Single(Message::Request(req)) => {
                let key = self.open_request_stream(1, false);
                self.dispatch(req, key, port, &mut jobs);
                self.claim(key)
            }
            Payload::Single(Message::Notification(n)) => {
                self.on_notification(n);
                Reply::Accepted
            }
            Payload::Single(Message::Response(r)) => {
                self.on_response(r);
                Reply::Accepted
            }
            Payload::Batch(items) => return self.handle_batch(items, port),
        };
        (reply, jobs)
    }

    fn handle_batch(
        &mut self,
        items: Vec<Result<Message, RpcError>>,
        port: &Arc<dyn SessionPort>,
    ) -> (Reply, Vec<Invocation>) {
        let mut jobs = Vec::new();
        match self.version {
            Some(v) if v.allows_batches() => {}
            Some(v) => {
                let msg = format!("JSON-RPC batches are not supported in protocol version {v}");
                return (
                    Reply::Refused(Refusal::new(400, RpcError::invalid_request(msg))),
                    jobs,
                );
            }
            None => {
                let msg = "JSON-RPC batches are not accepted before initialization (initialize cannot be batched)";
                return (
                    Reply::Refused(Refusal::new(400, RpcError::invalid_request(msg))),
                    jobs,
                );
            }
        }
        let owed = items
            .iter()
            .filter(|i| matches!(i, Ok(Message::Request(_)) | Err(_)))
            .count();
        let stream = (owed > 0).then(|| self.open_request_stream(owed, true));
        for item in items {
            match item {
                Ok(Message::Request(req)) => {
                    if let Some(key) = stream {
                        self.dispatch(req, key, port, &mut jobs);
                    }
                }
                Ok(Message::Notification(n)) => self.on_notification(n),
                Ok(Message::Response(r)) => self.on_response(r),
                Err(e) => {
                    if let Some(key) = stream {
                        self.emit(key, to_bytes(&jsonrpc::error_message(None, &e)), true);
                    }
                }
            }
        }
        let reply = stream.map_or(Reply::Accepted, |key| self.claim(key));
        (reply, jobs)
    }

    /// Hands a POST's stream to the transport once the POST is handled: plain JSON when the
    /// whole answer is already there, else a channel that carries what was said so far and what
    /// follows. (Legacy sessions answer on their one SSE stream, so the POST gets no body.)
    fn claim(&mut self, key: StreamKey) -> Reply {
        if self.transport == TransportKind::Legacy && self.standalone == Some(key) {
            return Reply::Accepted;
        }
        let frames = match self.streams.get_mut(&key) {
            Some(stream) => match std::mem::replace(&mut stream.outlet, Outlet::Detached) {
                Outlet::Unclaimed(frames) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    for frame in frames {
                        let _ = tx.send(frame);
                    }
                    stream.outlet = Outlet::Open(tx);
                    return Reply::Stream(rx);
                }
                other => {
                    stream.outlet = other;
                    return Reply::Accepted;
                }
            },
            None => self.finished.take().unwrap_or_default(),
        };
        match <[Frame; 1]>::try_from(frames) {
            Ok([Frame::Json(body)]) => Reply::Json(body),
            Ok(frames) => Reply::Stream(closed_channel(frames.into())),
            Err(frames) if frames.is_empty() => Reply::Accepted,
            Err(frames) => Reply::Stream(closed_channel(frames)),
        }
    }

    /// The stream a POST's requests are answered on: its own for Streamable HTTP, the one SSE
    /// stream for the legacy transport (then there is no body to return).
    fn open_request_stream(&mut self, owed: usize, batch: bool) -> StreamKey {
        if self.transport == TransportKind::Legacy {
            if let Some(key) = self.standalone {
                return key;
            }
        }
        let key = self.new_stream_key();
        let batch = batch.then(Vec::new);
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Unclaimed(Vec::new()),
                log_id: None,
                owed,
                batch,
                standalone: false,
            },
        );
        key
    }

    /// Removes a finished stream; what it said before its POST was claimed is kept for `claim`.
    fn finish(&mut self, key: StreamKey) {
        if let Some(stream) = self.streams.remove(&key) {
            if let Outlet::Unclaimed(frames) = stream.outlet {
                self.finished = Some(frames);
            }
        }
    }

    fn new_stream_key(&mut self) -> StreamKey {
        self.next_stream += 1;
        StreamKey(self.next_stream)
    }

    fn dispatch(
        &mut self,
        mut req: Request,
        stream: StreamKey,
        port: &Arc<dyn SessionPort>,
        jobs: &mut Vec<Invocation>,
    ) {
        if self.inflight.contains_key(&req.id) {
            let e = RpcError::invalid_request(format!(
                "Request id {} is already in use by a request in flight",
                req.id
            ));
            self.emit(
                stream,
                to_bytes(&jsonrpc::error_message(Some(&req.id), &e)),
                true,
            );
            return;
        }
        self.inflight.insert(
            req.id.clone(),
            InFlight {
                stream,
                abort: None,
            },
        );
        match self.route(&mut req, port) {
            Routed::Done(outcome) => self.complete(&req.id, outcome),
            Routed::Run(future, ctx) => jobs.push(Invocation {
                id: req.id,
                future,
                ctx,
            }),
        }
    }

    fn route(&mut self, req: &mut Request, port: &Arc<dyn SessionPort>) -> Routed {
        let progress_token = req.progress_token();
        let mut params = match req.take_params() {
            Ok(p) => p,
            Err(e) => return Routed::Done(Err(e)),
        };
        let Some(version) = self.version else {
            return Routed::Done(match req.method.as_str() {
                "initialize" => self.initialize(&params),
                "ping" => Ok(json!({})),
                _ => Err(RpcError::invalid_request(
                    "Session not initialized: send initialize first",
                )),
            });
        };
        let catalog = self.catalog.current();
        let page = |list: &str, items: &[Value]| -> Result<Value, RpcError> {
            let (page, next) =
                paginate(list, items, params.get("cursor"), self.settings.page_size)?;
            let mut result = json!({ list: page });
            if let Some(next) = next {
                result["nextCursor"] = json!(next);
            }
            Ok(result)
        };
        Routed::Done(match req.method.as_str() {
            "initialize" => Err(RpcError::invalid_request("Session already initialized")),
            "ping" => Ok(json!({})),
            "tools/list" => page("tools", &catalog.tools),
            "resources/list" => page("resources", &catalog.resources),
            "resources/templates/list" => page("resourceTemplates", &catalog.resource_templates),
            "prompts/list" => page("prompts", &catalog.prompts),
            "tools/call" => {
                let arguments = match params.remove("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(m)) => m,
                    Some(_) => {
                        return Routed::Done(Err(RpcError::invalid_params(
                            "tools/call \"arguments\" must be an object",
                        )))
                    }
                };
                let name = match params.get("name").and_then(Value::as_str) {
                    Some(n) => n,
                    None => {
                        return Routed::Done(Err(RpcError::invalid_params(
                            "tools/call needs a string \"name\"",
                        )))
                    }
                };
                let ctx = RequestContext::new(
                    req.id.clone(),
                    version,
                    self.client_capabilities.clone(),
                    progress_token,
                    port.clone(),
                );
                match catalog.call_tool(name, arguments, ctx.clone()) {
                    Some(future) => return Routed::Run(future, ctx),
                    None => Err(RpcError::invalid_params(format!("Unknown tool: {name}"))),
                }
            }
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => catalog.read_resource(uri).unwrap_or_else(|| {
                    Err(RpcError::new(RESOURCE_NOT_FOUND, "Resource not found")
                        .with_data(json!({ "uri": uri })))
                }),
                None => Err(RpcError::invalid_params(
                    "resources/read needs a string \"uri\"",
                )),
            },
            "resources/subscribe" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => {
                    self.subscriptions.insert(uri.to_string());
                    Ok(json!({}))
                }
                None => Err(RpcError::invalid_params(
                    "resources/subscribe needs a string \"uri\"",
                )),
            },
            "resources/unsubscribe" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => {
                    self.subscriptions.remove(uri);
                    Ok(json!({}))
                }
                None => Err(RpcError::invalid_params(
                    "resources/unsubscribe needs a string \"uri\"",
                )),
            },
            "prompts/get" => match params.get("name").and_then(Value::as_str) {
                Some(name) => {
                    let arguments = match params.get("arguments") {
                        None | Some(Value::Null) => Map::new(),
                        Some(Value::Object(m)) => m.clone(),
                        Some(_) => {
                            return Routed::Done(Err(RpcError::invalid_params(
                                "prompts/get \"arguments\" must be an object",
                            )))
                        }
                    };
                    catalog.get_prompt(name, &arguments).unwrap_or_else(|| {
                        Err(RpcError::invalid_params(format!("Unknown prompt: {name}")))
                    })
                }
                None => Err(RpcError::invalid_params(
                    "prompts/get needs a string \"name\"",
                )),
            },
            "logging/setLevel" => match params
                .get("level")
                .and_then(Value::as_str)
                .and_then(LogLevel::parse)
            {
                Some(level) => {
                    self.log_level = level;
                    Ok(json!({}))
                }
                None => Err(RpcError::invalid_params(
                    "logging/setLevel needs a valid \"level\" (debug … emergency)",
                )),
            },
            "completion/complete" => {
                let reference = params.get("ref").cloned().unwrap_or(Value::Null);
                let argument = params.get("argument");
                match (reference.get("type").and_then(Value::as_str), argument.and_then(|a| a["name"].as_str())) {
                    (Some("ref/prompt" | "ref/resource"), Some(name)) => {
                        let value = argument.and_then(|a| a["value"].as_str()).unwrap_or("");
                        let mut values = catalog.complete(&reference, name, value).unwrap_or_default();
                        let total = values.len();
                        values.truncate(100);
                        Ok(json!({ "completion": { "values": values, "total": total, "hasMore": total > 100 } }))
                    }
                    _ => Err(RpcError::invalid_params("completion/complete needs \"ref\" (ref/prompt or ref/resource) and \"argument.name\"")),
                }
            }
            other => Err(RpcError::method_not_found(other)),
        })
    }

    fn initialize(&mut self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        if requested.is_none() {
            return Err(RpcError::invalid_params(
                "initialize needs a string \"protocolVersion\"",
            ));
        }
        let version = ProtocolVersion::negotiate(requested);
        self.version = Some(version);
        self.client_capabilities = Arc::new(
            params
                .get("capabilities")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({})),
        );
        self.client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
        let mut server_info =
            json!({ "name": self.settings.server_name, "version": self.settings.server_version });
        if version >= ProtocolVersion::V2025_06_18 {
            server_info["title"] = json!("mcp-harbor");
        }
        let mut result = json!({
            "protocolVersion": version.as_str(),
            "capabilities": server_capabilities(version),
            "serverInfo": server_info,
        });
        if let Some(instructions) = &self.settings.instructions {
            result["instructions"] = json!(instructions);
        }
        tracing::debug!(session = %self.id, tenant = %self.tenant, version = %version, "session initialized");
        Ok(result)
    }

    fn on_notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "notifications/initialized" => self.initialized = true,
            "notifications/cancelled" => {
                let id = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
                if let Some(id) = id {
                    self.cancel(&id);
                }
            }
            other => tracing::debug!(session = %self.id, method = other, "notification ignored"),
        }
    }

    fn on_response(&mut self, r: Response) {
        match self.pending.remove(&r.id) {
            Some(p) => {
                let _ = p.reply.send(r.outcome);
            }
            None => {
                tracing::debug!(session = %self.id, id = %r.id, "response to no pending request")
            }
        }
    }

    /// Stops an in-flight request: its future is dropped and no response is sent.
    pub fn cancel(&mut self, id: &RequestId) {
        let Some(inflight) = self.inflight.remove(id) else {
            return;
        };
        if let Some(abort) = inflight.abort {
            abort.abort();
        }
        self.pending.retain(|_, p| &p.origin != id);
        if let Some(stream) = self.streams.get_mut(&inflight.stream) {
            if !stream.standalone {
                stream.owed = stream.owed.saturating_sub(1);
            }
        }
        self.settle(inflight.stream);
        tracing::debug!(session = %self.id, %id, "request cancelled");
    }

    /// Records how to abort an invocation that is now running on its own.
    pub fn set_abort(&mut self, id: &RequestId, abort: AbortHandle) {
        match self.inflight.get_mut(id) {
            Some(f) => f.abort = Some(abort),
            None => abort.abort(),
        }
    }

    /// A request finished: send its response on its stream (dropped if it was cancelled).
    pub fn complete(&mut self, id: &RequestId, outcome: Result<Value, RpcError>) {
        let Some(inflight) = self.inflight.remove(id) else {
            return;
        };
        let message = Bytes::from(jsonrpc::encode_response(id, &outcome));
        self.emit(inflight.stream, message, true);
    }

    /// A notification from a running request, on that request's stream.
    pub fn notify(&mut self, origin: &RequestId, method: &str, params: Value) {
        if method == "notifications/message" && !self.log_level_allows(&params) {
            return;
        }
        if let Some(stream) = self.inflight.get(origin).map(|f| f.stream) {
            self.emit(
                stream,
                to_bytes(&jsonrpc::notification_message(method, params)),
                false,
            );
        }
    }

    fn log_level_allows(&self, params: &Value) -> bool {
        params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .is_some_and(|l| l >= self.log_level)
    }

    /// A server→client request from a running request, on that request's stream.
    pub fn server_request(
        &mut self,
        origin: &RequestId,
        method: &str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        let Some(stream) = self.inflight.get(origin).map(|f| f.stream) else {
            let _ = reply.send(Err(RpcError::internal(
                "the originating request is no longer running",
            )));
            return;
        };
        self.next_server_request += 1;
        let id = RequestId::Number(self.next_server_request);
        self.pending.insert(
            id.clone(),
            PendingRequest {
                origin: origin.clone(),
                reply,
            },
        );
        self.emit(
            stream,
            to_bytes(&jsonrpc::request_message(&id, method, params)),
            false,
        );
    }

    /// SSE polling: ends the HTTP connection of `origin`'s stream but keeps the stream, so what
    /// follows is logged and delivered when the client resumes with `Last-Event-ID`. Only for
    /// revisions that have SSE polling, on Streamable HTTP.
    pub fn close_stream(&mut self, origin: &RequestId) {
        if self.transport != TransportKind::Streamable
            || !self.version.is_some_and(ProtocolVersion::has_sse_polling)
        {
            return;
        }
        let Some(key) = self.inflight.get(origin).map(|f| f.stream) else {
            return;
        };
        self.ensure_sse(key);
        if let Some(stream) = self.streams.get_mut(&key) {
            stream.outlet = Outlet::Detached;
        }
    }

    /// A resource changed: tell this session if it subscribed.
    pub fn resource_updated(&mut self, uri: &str) {
        if self.subscriptions.contains(uri) {
            self.send_unrelated(jsonrpc::notification_message(
                "notifications/resources/updated",
                json!({ "uri": uri }),
            ));
        }
    }

    /// A list (`tools`, `prompts`, `resources`) changed.
    pub fn list_changed(&mut self, list: &str) {
        let method = match list {
            "tools" => "notifications/tools/list_changed",
            "prompts" => "notifications/prompts/list_changed",
            "resources" => "notifications/resources/list_changed",
            _ => return,
        };
        self.send_unrelated(jsonrpc::notification_message(method, json!({})));
    }

    /// A message unrelated to any request: on the standalone stream (logged even while no client
    /// is connected to it, so a resuming client gets it).
    fn send_unrelated(&mut self, message: Value) {
        if self.version.is_none() {
            return;
        }
        if let Some(key) = self.standalone {
            self.emit(key, to_bytes(&message), false);
        }
    }

    /// Opens the standalone stream (GET without `Last-Event-ID`, or the legacy SSE stream). A
    /// new one replaces the previous one, so no message goes to two streams.
    pub fn open_standalone(&mut self) -> FrameReceiver {
        if let Some(old) = self.standalone.take() {
            self.streams.remove(&old);
        }
        let key = self.new_stream_key();
        let (tx, rx) = mpsc::unbounded_channel();
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Open(tx),
                log_id: None,
                owed: 0,
                batch: None,
                standalone: true,
            },
        );
        self.standalone = Some(key);
        self.ensure_sse(key);
        rx
    }

    /// Resumes the stream that `last` belongs to: replays its later events, then (if the stream
    /// is still live) goes on delivering.
    pub fn resume(&mut self, last: EventId) -> Result<FrameReceiver, Refusal> {
        let events = self.log.replay_after(&self.id, last).ok_or_else(|| {
            Refusal::new(
                400,
                RpcError::invalid_request(format!(
                    "Unknown Last-Event-ID {last}: nothing to resume"
                )),
            )
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        for e in events.iter().filter(|e| !e.data.is_empty()) {
            let _ = tx.send(Frame::Sse(sse::event(&e.id.to_string(), &e.data)));
        }
        if let Some(stream) = self
            .streams
            .values_mut()
            .find(|s| s.log_id == Some(last.stream))
        {
            stream.outlet = Outlet::Open(tx);
        }
        Ok(rx)
    }

    /// Ends the session: running requests stop, connections close, its events are forgotten.
    pub fn shutdown(&mut self) {
        for (_, f) in self.inflight.drain() {
            if let Some(abort) = f.abort {
                abort.abort();
            }
        }
        self.pending.clear();
        self.streams.clear();
        self.standalone = None;
        self.log.remove_session(&self.id);
    }

    /// Sends `message` on `key`. A stream whose first message is its (last) response answers
    /// with plain JSON; anything else makes it an SSE stream whose events are logged first.
    fn emit(&mut self, key: StreamKey, message: Bytes, is_response: bool) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        if is_response && !stream.standalone {
            stream.owed = stream.owed.saturating_sub(1);
        }
        if stream.log_id.is_none() && is_response && !stream.standalone {
            match &mut stream.batch {
                None => {
                    stream.outlet.send(Frame::Json(message));
                    self.finish(key);
                }
                Some(gathered) => {
                    gathered.push(message);
                    if stream.owed == 0 {
                        let all = json_array(&std::mem::take(gathered));
                        stream.outlet.send(Frame::Json(all));
                        self.finish(key);
                    }
                }
            }
            return;
        }
        self.ensure_sse(key);
        self.write_event(key, message);
        self.settle(key);
    }

    /// Ends a request stream once it owes nothing more.
    fn settle(&mut self, key: StreamKey) {
        if self
            .streams
            .get(&key)
            .is_some_and(|s| !s.standalone && s.owed == 0)
        {
            if let Some(stream) = self.streams.get_mut(&key) {
                if let Some(gathered) = stream
                    .batch
                    .take()
                    .filter(|g| !g.is_empty() && stream.log_id.is_none())
                {
                    stream.outlet.send(Frame::Json(json_array(&gathered)));
                }
            }
            self.finish(key);
        }
    }

    /// Turns a stream into an SSE stream: gives it a log id and sends the priming event (an id
    /// and empty data, with `retry:`) on revisions with SSE polling; responses gathered for a
    /// batch go out first.
    fn ensure_sse(&mut self, key: StreamKey) {
        let polling = self.version.is_some_and(ProtocolVersion::has_sse_polling)
            && self.transport == TransportKind::Streamable;
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        if stream.log_id.is_some() {
            return;
        }
        let log_id = self.log.open_stream(&self.id);
        stream.log_id = Some(log_id);
        let gathered = stream
            .batch
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        if polling {
            let id = self.log.append(&self.id, log_id, Bytes::new());
            stream.outlet.send(Frame::Sse(sse::priming(
                &id.to_string(),
                self.settings.sse_retry_ms,
            )));
        }
        for message in gathered {
            self.write_event(key, message);
        }
    }

    fn write_event(&mut self, key: StreamKey, data: Bytes) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let Some(log_id) = stream.log_id else { return };
        let id = self.log.append(&self.id, log_id, data.clone());
        stream
            .outlet
            .send(Frame::Sse(sse::event(&id.to_string(), &data)));
    }

    /// The legacy transport's single stream: opened with the `endpoint` event.
    pub fn open_legacy_stream(&mut self, endpoint: &str) -> FrameReceiver {
        let rx = self.open_standalone();
        if let Some(stream) = self.standalone.and_then(|k| self.streams.get_mut(&k)) {
            stream
                .outlet
                .send(Frame::Sse(sse::named_event("endpoint", endpoint)));
        }
        rx
    }
}

enum Routed {
    Done(Result<Value, RpcError>),
    Run(CallFuture, RequestContext),
}

/// A JSON array of already-serialized messages (a batch answer).
fn json_array(items: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(items.iter().map(|b| b.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    Bytes::from(out)
}

fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// A receiver that yields `frames` and then ends.
fn closed_channel(frames: Vec<Frame>) -> FrameReceiver {
    let (tx, rx) = mpsc::unbounded_channel();
    for frame in frames {
        let _ = tx.send(frame);
    }
    rx
}
