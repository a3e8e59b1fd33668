//! The session state machine, in plain Rust: lifecycle and version negotiation, in-flight
//! requests and cancellation, server→client requests, log level, subscriptions, and the session's
//! streams (which message goes on which stream, JSON or SSE). Methods that need no session are
//! handled by `methods`; this module only builds their scope. It hands out typed stream items
//! (SSE framing is the transport's job) and writes shared state through its `Outbox`. The actor in
//! `session::actor` only feeds it messages and runs the futures it hands back.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::direct::SessionView;
use super::outbox::{Outbox, OutboxItem, PendingEvent};
use crate::catalog::{CallFuture, CatalogHandle, RequestContext, SessionPort, TenantCatalog};
use crate::cluster::{EventId, StoredEvent, StreamId};
use crate::methods::{self, Handled, RequestScope};
use crate::protocol::jsonrpc;
use crate::protocol::mcp::{self, server_capabilities, LogLevel};
use crate::protocol::{
    Message, Notification, Payload, ProtocolVersion, Request, RequestId, Response, RpcError,
};
use crate::{FastMap, FastSet};

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
    /// Bytes an SSE stream may hold that its client has not read; past it the stream is closed
    /// (and resumable), so a client that stops reading cannot grow server memory.
    pub stream_buffer_bytes: usize,
    /// How long a request to the client (sampling, elicitation, roots) may wait for its answer:
    /// then it is cancelled (lifecycle.mdx: implementations SHOULD always enforce a maximum).
    pub client_request_timeout: std::time::Duration,
    pub server_name: String,
    pub server_version: String,
    pub instructions: Option<String>,
    /// The `initialize` result of each revision, encoded on first use.
    pub(crate) initialize_results: InitializeResults,
}

/// The `initialize` result depends only on the revision and the settings: each session's
/// opening copies it instead of building and encoding it again (about 8k instructions of the
/// ~123k an opening costs, by bench/profile.sh inits).
#[derive(Default)]
pub(crate) struct InitializeResults([std::sync::OnceLock<Box<RawValue>>; 5]);

/// A copy of settings starts with no results: they are made from the copy's own fields.
impl Clone for InitializeResults {
    fn clone(&self) -> Self {
        InitializeResults::default()
    }
}

impl std::fmt::Debug for InitializeResults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InitializeResults")
    }
}

impl SessionSettings {
    /// The `initialize` result for `version`, as JSON text.
    fn initialize_result(&self, version: ProtocolVersion) -> std::borrow::Cow<'_, RawValue> {
        let make = || {
            serde_json::value::to_raw_value(&self.initialize_result_value(version))
                .unwrap_or_else(|_| RawValue::NULL.to_owned())
        };
        match self.initialize_results.0.get(version as usize) {
            Some(slot) => std::borrow::Cow::Borrowed(&**slot.get_or_init(make)),
            None => std::borrow::Cow::Owned(make()),
        }
    }

    fn initialize_result_value(&self, version: ProtocolVersion) -> Value {
        let mut server_info = Map::new();
        server_info.insert("name".into(), self.server_name.clone().into());
        server_info.insert("version".into(), self.server_version.clone().into());
        if version >= ProtocolVersion::V2025_06_18 {
            server_info.insert("title".into(), "mcp-harbor".into());
        }
        let mut result = Map::new();
        result.insert("protocolVersion".into(), version.as_str().into());
        result.insert("capabilities".into(), server_capabilities(version));
        result.insert("serverInfo".into(), server_info.into());
        if let Some(instructions) = &self.instructions {
            result.insert("instructions".into(), instructions.clone().into());
        }
        Value::Object(result)
    }
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            page_size: 50,
            sse_retry_ms: 1000,
            stream_buffer_bytes: 1024 * 1024,
            client_request_timeout: std::time::Duration::from_secs(600),
            server_name: "mcp-harbor".into(),
            server_version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            initialize_results: InitializeResults::default(),
        }
    }
}

/// One item of a response body, typed until the transport frames it.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The whole answer, as a JSON body.
    Json(Bytes),
    /// A logged JSON-RPC message (an SSE event with its id).
    Event { id: EventId, data: Bytes },
    /// The priming event of SSE polling: an id, empty data, and the reconnection delay.
    Priming { id: EventId, retry_ms: u64 },
    /// The legacy transport's first event: where to POST.
    Endpoint(String),
    /// A resumption was accepted (written as nothing; replayed events follow).
    Resumed,
    /// A resumption named an event the log does not know.
    UnknownEvent(EventId),
    /// The server is going away: reconnect after this delay (then the stream ends).
    Reconnect { retry_ms: u64 },
}

use super::channel::{closed_stream, stream_channel};
pub use super::channel::{StreamReceiver, StreamSink};

/// Why the session refused a message (the transport picks the HTTP status).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The message is not acceptable here (HTTP 400).
    Invalid(RpcError),
    /// The session could not handle it (HTTP 500); the client may retry.
    Failed(RpcError),
}

/// What the transport should answer to a POST.
#[derive(Debug)]
pub enum Reply {
    /// 202 Accepted, no body.
    Accepted,
    /// 200 with this JSON body (the whole answer was ready at once).
    Json(Bytes),
    /// A body: its first item decides JSON or SSE.
    Stream(StreamReceiver),
    Refused(Refusal),
}

/// A POST handled up to its answer: the reply, or the stream to claim once the calls it started
/// were polled (see `Session::finish_post`).
pub enum PostState {
    Ready(Reply),
    Claim(StreamKey),
}

/// A request whose answer comes from a future (a tool call): the actor polls it and hands the
/// outcome back to `Session::complete`.
pub struct Invocation {
    pub id: RequestId,
    pub future: CallFuture,
    pub ctx: RequestContext,
    /// The request's server span (disabled when not tracing): the future runs inside it.
    pub span: tracing::Span,
}

/// A request that was running when the snapshot was taken: enough to run it again (or to tell
/// the client it was interrupted) on another replica.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InFlightRecord {
    pub id: RequestId,
    /// The SSE stream its answer goes to (`None`: not an SSE stream yet, nobody can resume it).
    pub stream: Option<u64>,
    pub method: String,
    pub params: Value,
    pub rerunnable: bool,
}

/// A server→client request the client has not answered yet, and the request it serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AwaitingRecord {
    pub id: RequestId,
    pub origin: RequestId,
}

/// What another replica (or a restarted actor) needs to go on serving the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSnapshot {
    pub id: String,
    pub tenant: String,
    pub transport: TransportKind,
    pub version: Option<String>,
    pub initialized: bool,
    /// Shared with the live session (a snapshot is taken after every change that matters).
    pub client_capabilities: Arc<Value>,
    /// As the client sent it, kept as text: nothing reads inside it.
    pub client_info: Box<RawValue>,
    pub log_level: String,
    pub subscriptions: Vec<String>,
    pub standalone_stream: Option<u64>,
    /// Streams opened in the current ownership epoch.
    #[serde(default)]
    pub streams_opened: u64,
    #[serde(default)]
    pub next_server_request: i64,
    #[serde(default)]
    pub inflight: Vec<InFlightRecord>,
    #[serde(default)]
    pub awaiting: Vec<AwaitingRecord>,
    /// Who opened the session (protected tenants): only that principal may use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Arc<Value>>,
}

impl SessionSnapshot {
    /// The streams a restored session continues (whose numbering it must pick up).
    pub fn live_streams(&self) -> Vec<StreamId> {
        let mut streams: Vec<StreamId> = self
            .standalone_stream
            .into_iter()
            .chain(self.inflight.iter().filter_map(|f| f.stream))
            .map(StreamId)
            .collect();
        streams.sort();
        streams.dedup();
        streams
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey(u64);

/// Where a stream's items go.
enum Outlet {
    /// The POST that opened the stream is still being handled and it is not SSE (yet): a JSON
    /// answer ready before the handler returns goes out with no channel at all.
    Unclaimed(Vec<StreamItem>),
    Open(StreamSink),
    /// No client connected: it left, or the server closed the connection (SSE polling).
    Detached,
}

impl Outlet {
    /// Hands an item that is not logged (a JSON answer, the legacy `endpoint` event) to the
    /// stream's client: kept for the claim while unclaimed, dropped when nobody is connected.
    fn send(&mut self, item: StreamItem) {
        match self {
            Outlet::Unclaimed(items) => items.push(item),
            Outlet::Open(sink) => {
                if sink.send(item).is_err() {
                    *self = Outlet::Detached;
                }
            }
            Outlet::Detached => {}
        }
    }

    fn sink(&self) -> Option<StreamSink> {
        match self {
            Outlet::Open(sink) if !sink.is_closed() => Some(sink.clone()),
            _ => None,
        }
    }

    fn is_connected(&self) -> bool {
        matches!(self, Outlet::Open(sink) if !sink.is_closed())
    }
}

struct Stream {
    outlet: Outlet,
    /// Set once the stream is SSE; `None` while the first message may still be a JSON answer.
    log_id: Option<StreamId>,
    /// The last event seq given out on this stream.
    seq: u64,
    /// The receiving end of an SSE stream whose POST is not claimed yet.
    unclaimed_rx: Option<StreamReceiver>,
    /// Responses this stream still owes (requests of its POST not yet answered).
    owed: usize,
    /// For a batch answered as JSON: the responses gathered so far.
    batch: Option<Vec<Bytes>>,
    /// The standalone GET stream (or the legacy stream): never ends by itself.
    standalone: bool,
}

/// Where a restored stream whose log holds nothing (it expired, or the stream never had an
/// event) goes on numbering: the current time in milliseconds. A client may have seen events
/// of it before its log expired; restarting at 1 would give new events ids below its
/// `Last-Event-ID`, and its resumption would skip them. A stream numbers one per event, so
/// this is above any id it gave out (unless it averaged more than an event per millisecond
/// since an earlier such restart).
fn renumbered_from() -> u64 {
    u64::try_from(crate::store::now_millis()).unwrap_or(0)
}

impl Stream {
    /// The id of this SSE stream's next event, and where the event goes once it is logged.
    fn next_event(&mut self) -> Option<(EventId, Option<StreamSink>)> {
        let stream = self.log_id?;
        self.seq += 1;
        Some((
            EventId {
                stream,
                seq: self.seq,
            },
            self.outlet.sink(),
        ))
    }
}

struct InFlight {
    stream: StreamKey,
    /// The method and when the request arrived (for `mcp.server.operation.duration`).
    method: Box<str>,
    started: std::time::Instant,
    abort: Option<AbortHandle>,
    /// Kept while the call runs on its own, so a snapshot can hand it to another replica.
    record: Option<(String, Value, bool)>,
    /// Bytes of `record`'s arguments counted against [`mcp::MAX_REPLAY_BYTES`].
    replay_bytes: usize,
    /// Its server span (ended with the answer); disabled when not tracing.
    span: tracing::Span,
}

struct PendingRequest {
    origin: RequestId,
    reply: oneshot::Sender<Result<Value, RpcError>>,
    /// Counts it in `mcp_harbor_pending_client_requests` while it waits.
    _gauge: crate::observe::metrics::PendingGauge,
}

/// The state of one MCP session.
pub struct Session {
    id: Arc<str>,
    tenant: Arc<str>,
    transport: TransportKind,
    version: Option<ProtocolVersion>,
    client_capabilities: Arc<Value>,
    /// The client's `clientInfo` as JSON text: only snapshots read it, and a `Value` object
    /// costs a B-tree node of ~600 bytes for as long as the session lives.
    client_info: Box<RawValue>,
    log_level: LogLevel,
    subscriptions: FastSet<String>,
    inflight: FastMap<RequestId, InFlight>,
    /// What the in-flight calls' records hold of arguments (see [`mcp::MAX_REPLAY_BYTES`]).
    replay_bytes: usize,
    pending: FastMap<RequestId, PendingRequest>,
    next_server_request: i64,
    streams: FastMap<StreamKey, Stream>,
    next_stream: u64,
    /// Streams opened in this ownership epoch (the low bits of their ids).
    streams_opened: u64,
    standalone: Option<StreamKey>,
    /// What a stream finished while its POST was still being handled said (see `claim`).
    finished: Option<Vec<StreamItem>>,
    /// Requests of a restored snapshot, to run again or to answer as interrupted.
    recovered: Vec<InFlightRecord>,
    /// Server→client requests of a restored snapshot the client may still answer.
    recovered_awaiting: Vec<AwaitingRecord>,
    /// Something a snapshot holds changed since the last one was queued.
    dirty: bool,
    catalog: CatalogHandle,
    outbox: Outbox,
    settings: Arc<SessionSettings>,
    /// Who opened the session (protected tenants); webhook calls receive it.
    principal: Option<Arc<Value>>,
    /// What the transport may read without a hop through the actor (see `direct`).
    view: Arc<SessionView>,
}

impl Session {
    pub fn new(
        id: Arc<str>,
        tenant: Arc<str>,
        transport: TransportKind,
        catalog: CatalogHandle,
        outbox: Outbox,
        settings: Arc<SessionSettings>,
    ) -> Self {
        Session {
            id,
            tenant,
            transport,
            version: None,
            client_capabilities: Arc::new(json!({})),
            client_info: RawValue::NULL.to_owned(),
            log_level: LogLevel::Info,
            subscriptions: FastSet::default(),
            inflight: FastMap::default(),
            replay_bytes: 0,
            pending: FastMap::default(),
            next_server_request: 0,
            streams: FastMap::default(),
            next_stream: 0,
            streams_opened: 0,
            standalone: None,
            finished: None,
            recovered: Vec::new(),
            recovered_awaiting: Vec::new(),
            // Nothing to save until its initialize: nobody knows the id before that answer (and
            // a refused initialize ends the session).
            dirty: false,
            catalog,
            outbox,
            settings,
            principal: None,
            view: Arc::default(),
        }
    }

    /// Binds the session to the principal that opened it.
    pub fn with_principal(mut self, principal: Option<Arc<Value>>) -> Self {
        self.principal = principal;
        self
    }

    /// The binding key of the session's principal (`None` on open tenants).
    pub fn owner(&self) -> Option<Arc<str>> {
        self.principal
            .as_deref()
            .and_then(crate::auth::binding_of_value)
    }

    /// Rebuilds a session from its snapshot: after its actor crashed (same lease: `same_epoch`)
    /// or on another replica that took it over (a new lease). `last_seqs` are the last event
    /// seqs the log holds for the streams it continues, so numbering goes on without a gap or a
    /// repeat. Connections are gone; clients resume with `Last-Event-ID`. In-flight requests are
    /// kept for `recover`.
    pub fn restore(
        snapshot: &SessionSnapshot,
        same_epoch: bool,
        last_seqs: &HashMap<StreamId, u64>,
        catalog: CatalogHandle,
        outbox: Outbox,
        settings: Arc<SessionSettings>,
    ) -> Self {
        let mut s = Session::new(
            snapshot.id.as_str().into(),
            snapshot.tenant.as_str().into(),
            snapshot.transport,
            catalog,
            outbox,
            settings,
        );
        s.version = snapshot.version.as_deref().and_then(ProtocolVersion::parse);
        // The flag reaches the snapshot with the session's next save, which a session that
        // only ran quick requests may never have made: a restored session that had answered
        // `initialize` counts as initialized (the client will not send the notification
        // again, and server requests wait for it).
        if snapshot.initialized || s.version.is_some() {
            s.view.set_initialized();
        }
        s.client_capabilities = snapshot.client_capabilities.clone();
        s.client_info = snapshot.client_info.clone();
        s.log_level = LogLevel::parse(&snapshot.log_level).unwrap_or(LogLevel::Info);
        s.subscriptions = snapshot.subscriptions.iter().cloned().collect();
        s.next_server_request = snapshot.next_server_request;
        if same_epoch {
            s.streams_opened = snapshot.streams_opened;
        }
        if let Some(standalone) = snapshot.standalone_stream {
            let key = s.restored_stream(StreamId(standalone), last_seqs, true);
            s.standalone = Some(key);
        }
        s.recovered = snapshot.inflight.clone();
        s.recovered_awaiting = snapshot.awaiting.clone();
        s.principal = snapshot.principal.clone();
        s.publish_view();
        // Saved again under the lease it is restored with.
        s.dirty = true;
        s
    }

    /// A stream of a snapshot, detached until its client resumes it.
    fn restored_stream(
        &mut self,
        id: StreamId,
        last_seqs: &HashMap<StreamId, u64>,
        standalone: bool,
    ) -> StreamKey {
        if let Some((key, _)) = self.streams.iter().find(|(_, s)| s.log_id == Some(id)) {
            return *key;
        }
        let key = self.new_stream_key();
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Detached,
                log_id: Some(id),
                seq: last_seqs.get(&id).copied().unwrap_or_else(renumbered_from),
                unclaimed_rx: None,
                owed: 0,
                batch: None,
                standalone,
            },
        );
        key
    }

    /// After a restore: a call that was waiting for the client's input goes on from its recorded
    /// round when its catalog can (the client's answer, sent to any replica, completes it); other
    /// interrupted requests that may safely run twice run again (their answers go to their
    /// original streams); the rest are answered with an error saying they were interrupted.
    /// Returns the invocations to run.
    pub fn recover(
        &mut self,
        last_seqs: &HashMap<StreamId, u64>,
        port: &Arc<dyn SessionPort>,
    ) -> Vec<Invocation> {
        let mut jobs = Vec::new();
        let awaiting = std::mem::take(&mut self.recovered_awaiting);
        for record in std::mem::take(&mut self.recovered) {
            let Some(stream) = record.stream else {
                continue; // Never became SSE: no client can receive its answer.
            };
            let key = self.restored_stream(StreamId(stream), last_seqs, false);
            if let Some(s) = self.streams.get_mut(&key) {
                s.owed += 1;
            }
            if let Some(waiting) = awaiting.iter().find(|a| a.origin == record.id) {
                if let Some(job) = self.resume_waiting(&record, waiting, key, port) {
                    jobs.push(job);
                    continue;
                }
            }
            // Not going on from where it waited: what it asked the client is not waited for
            // any more, and the client is told so on the request's stream (an open form or
            // sampling prompt closes instead of being answered into the void).
            for asked in awaiting.iter().filter(|a| a.origin == record.id) {
                let cancelled = jsonrpc::notification_message(
                    "notifications/cancelled",
                    json!({ "requestId": asked.id,
                        "reason": "the request that asked was interrupted (its server stopped)" }),
                );
                self.emit(key, to_bytes(&cancelled), false);
            }
            if record.rerunnable {
                tracing::info!(session = %self.id, id = %record.id, method = %record.method,
                    "re-running a request interrupted by a failover");
                let params = match record.params {
                    Value::Null => None,
                    // Without its progress token: run again from the start, it would report
                    // progress the client already saw, and progress MUST increase. The client
                    // gets the call's answer, with no more progress.
                    mut p => {
                        if let Some(meta) = p.get_mut("_meta").and_then(Value::as_object_mut) {
                            meta.remove("progressToken");
                        }
                        Some(p)
                    }
                };
                let req = Request {
                    id: record.id,
                    method: record.method,
                    params,
                    meta: None,
                };
                self.dispatch(req, key, port, &mut jobs);
            } else {
                self.inflight.insert(
                    record.id.clone(),
                    InFlight {
                        stream: key,
                        method: record.method.as_str().into(),
                        started: std::time::Instant::now(),
                        abort: None,
                        record: None,
                        replay_bytes: 0,
                        span: tracing::Span::none(),
                    },
                );
                let error = RpcError::internal(
                    "The request was interrupted: the server running it stopped before it \
                     finished. It may or may not have taken effect; retry it if that is safe.",
                )
                .with_data(json!({ "interrupted": true }));
                self.complete(&record.id, Err(error));
            }
        }
        self.dirty = true;
        jobs
    }

    /// Goes on with a tools/call that was waiting for the client's answer to `waiting`.
    fn resume_waiting(
        &mut self,
        record: &InFlightRecord,
        waiting: &AwaitingRecord,
        key: StreamKey,
        port: &Arc<dyn SessionPort>,
    ) -> Option<Invocation> {
        if record.method != "tools/call" {
            return None;
        }
        let version = self.version?;
        let name = record.params.get("name").and_then(Value::as_str)?;
        let arguments = match record.params.get("arguments") {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        let request = Request {
            id: record.id.clone(),
            method: record.method.clone(),
            params: Some(record.params.clone()),
            meta: None,
        };
        let catalog = self.catalog.current();
        let ctx = self
            .scope(version, &catalog, port)
            .context(&record.id, request.progress_token());
        let (tx, rx) = oneshot::channel();
        let future = catalog.resume_call(name, arguments, ctx.clone(), rx)?;
        tracing::info!(session = %self.id, id = %record.id, tool = name,
            "a call waiting for the client's input goes on after a failover");
        self.inflight.insert(
            record.id.clone(),
            InFlight {
                stream: key,
                method: record.method.as_str().into(),
                started: std::time::Instant::now(),
                abort: None,
                record: Some((
                    record.method.clone(),
                    record.params.clone(),
                    record.rerunnable,
                )),
                // Restored: counted with the snapshot it came in, not against this budget.
                replay_bytes: 0,
                span: tracing::Span::none(),
            },
        );
        self.pending.insert(
            waiting.id.clone(),
            PendingRequest {
                origin: record.id.clone(),
                reply: tx,
                _gauge: crate::observe::metrics::PendingGauge::open(&self.tenant, "unknown"),
            },
        );
        Some(Invocation {
            id: record.id.clone(),
            future,
            ctx,
            span: tracing::Span::none(),
        })
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        let mut subscriptions: Vec<String> = self.subscriptions.iter().cloned().collect();
        subscriptions.sort();
        let mut inflight: Vec<InFlightRecord> = self
            .inflight
            .iter()
            .filter_map(|(id, f)| {
                let (method, params, rerunnable) = f.record.clone()?;
                Some(InFlightRecord {
                    id: id.clone(),
                    stream: self
                        .streams
                        .get(&f.stream)
                        .and_then(|s| s.log_id)
                        .map(|s| s.0),
                    method,
                    params,
                    rerunnable,
                })
            })
            .collect();
        inflight.extend(self.recovered.iter().cloned());
        SessionSnapshot {
            id: self.id.to_string(),
            tenant: self.tenant.to_string(),
            transport: self.transport,
            version: self.version.map(|v| v.as_str().to_string()),
            initialized: self.view.initialized(),
            client_capabilities: self.client_capabilities.clone(),
            client_info: self.client_info.clone(),
            log_level: self.log_level.as_str().to_string(),
            subscriptions,
            standalone_stream: self
                .standalone
                .and_then(|k| self.streams.get(&k))
                .and_then(|s| s.log_id)
                .map(|s| s.0),
            streams_opened: self.streams_opened,
            next_server_request: self.next_server_request,
            principal: self.principal.clone(),
            inflight,
            awaiting: {
                let mut awaiting: Vec<AwaitingRecord> = self
                    .pending
                    .iter()
                    .map(|(id, p)| AwaitingRecord {
                        id: id.clone(),
                        origin: p.origin.clone(),
                    })
                    .collect();
                awaiting.extend(self.recovered_awaiting.iter().cloned());
                awaiting
            },
        }
    }

    /// Queues a snapshot when something it holds changed (called after each message).
    pub fn save_if_changed(&mut self) {
        self.view.set_running(self.inflight.len());
        self.release_emptied();
        if !self.dirty {
            return;
        }
        self.dirty = false;
        if !self.outbox.keeps_snapshots() {
            return;
        }
        // Room for a typical snapshot up front (`to_vec` starts at 128 bytes and regrows).
        let mut bytes = Vec::with_capacity(1024);
        match serde_json::to_writer(&mut bytes, &self.snapshot()) {
            // Copied to its exact length: the saved snapshot lives as long as the session.
            Ok(()) => self
                .outbox
                .push(OutboxItem::Snapshot(Bytes::copy_from_slice(&bytes))),
            Err(e) => tracing::error!(session = %self.id, error = %e, "snapshot not serializable"),
        }
    }

    /// Gives back the room of request and stream tables that emptied: an idle session would
    /// otherwise keep the room its initialize took (a few hundred bytes each) for good.
    fn release_emptied(&mut self) {
        fn release<K, V>(map: &mut FastMap<K, V>) {
            if map.is_empty() && map.capacity() > 0 {
                *map = FastMap::default();
            }
        }
        release(&mut self.inflight);
        release(&mut self.pending);
        release(&mut self.streams);
    }

    /// The last seq given out on each SSE stream (for a restart of this session in place).
    pub fn stream_seqs(&self) -> HashMap<StreamId, u64> {
        self.streams
            .values()
            .filter_map(|s| Some((s.log_id?, s.seq)))
            .collect()
    }

    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// What this session publishes for requests answered without its actor.
    pub fn view(&self) -> Arc<SessionView> {
        self.view.clone()
    }

    /// Publishes the scope of an initialized session (fixed from then on) in its view.
    fn publish_view(&self) {
        if let Some(version) = self.version {
            self.view.publish(
                &self.id,
                version,
                &self.client_capabilities,
                self.principal.as_ref(),
            );
        }
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

    /// Whether requests are running.
    pub fn has_inflight(&self) -> bool {
        !self.inflight.is_empty()
    }

    /// Handles one POST body. Invocations returned must be run (their outcomes passed to
    /// `complete`), then the answer taken with `finish_post`.
    pub fn handle_post(
        &mut self,
        payload: Payload,
        port: &Arc<dyn SessionPort>,
    ) -> (PostState, Vec<Invocation>) {
        let mut jobs = Vec::new();
        let state = match payload {
            Payload::Single(Message::Request(req)) => {
                let key = self.open_request_stream(1, false);
                self.dispatch(req, key, port, &mut jobs);
                PostState::Claim(key)
            }
            Payload::Single(Message::Notification(n)) => {
                self.on_notification(n);
                PostState::Ready(Reply::Accepted)
            }
            Payload::Single(Message::Response(r)) => {
                self.on_response(r);
                PostState::Ready(Reply::Accepted)
            }
            Payload::Batch(items) => return self.handle_batch(items, port),
        };
        (state, jobs)
    }

    /// Answers the request that opens a Streamable HTTP session (its `initialize`) before the
    /// session has an actor (`TenantSessions::open`): answering it starts no call and asks the
    /// client nothing, so it needs no port. Whether the session is now initialized is
    /// [`Session::version`].
    pub fn open_with(&mut self, initialize: Request) -> Reply {
        let key = self.open_request_stream(1, false);
        let mut jobs = Vec::new();
        self.dispatch(initialize, key, super::direct::no_port(), &mut jobs);
        // Only a method that runs on (a tool call) leaves a job; this one answers at once.
        debug_assert!(jobs.is_empty(), "an opening request started a call");
        self.save_if_changed();
        self.claim(key, false)
    }

    /// The answer to a POST, once the calls it started were polled: `running` says whether any
    /// is still running (its stream then becomes resumable SSE on revisions with polling).
    pub fn finish_post(&mut self, state: PostState, running: bool) -> Reply {
        match state {
            PostState::Ready(reply) => reply,
            PostState::Claim(key) => self.claim(key, running),
        }
    }

    fn handle_batch(
        &mut self,
        items: Vec<Result<Message, RpcError>>,
        port: &Arc<dyn SessionPort>,
    ) -> (PostState, Vec<Invocation>) {
        let mut jobs = Vec::new();
        match self.version {
            Some(v) if v.allows_batches() => {}
            Some(v) => {
                let msg = format!("JSON-RPC batches are not supported in protocol version {v}");
                return (
                    PostState::Ready(Reply::Refused(Refusal::Invalid(RpcError::invalid_request(
                        msg,
                    )))),
                    jobs,
                );
            }
            None => {
                let msg = "JSON-RPC batches are not accepted before initialization (initialize cannot be batched)";
                return (
                    PostState::Ready(Reply::Refused(Refusal::Invalid(RpcError::invalid_request(
                        msg,
                    )))),
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
        let state = stream.map_or(PostState::Ready(Reply::Accepted), PostState::Claim);
        (state, jobs)
    }

    /// Hands a POST's stream to the transport once the POST is handled: plain JSON when the
    /// whole answer is already there, else a channel that carries what was said so far and what
    /// follows. On revisions with SSE polling, an answer still being computed is made an SSE
    /// stream at once (priming event first), so the client can resume it from any replica if the
    /// connection breaks. (Legacy sessions answer on their one SSE stream: no body here.)
    fn claim(&mut self, key: StreamKey, running: bool) -> Reply {
        if self.transport == TransportKind::Legacy && self.standalone == Some(key) {
            return Reply::Accepted;
        }
        if running && self.polling() {
            self.ensure_sse(key);
        }
        let items = match self.streams.get_mut(&key) {
            Some(stream) => {
                if let Some(rx) = stream.unclaimed_rx.take() {
                    return Reply::Stream(rx);
                }
                match std::mem::replace(&mut stream.outlet, Outlet::Detached) {
                    Outlet::Unclaimed(items) => {
                        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
                        for item in items {
                            let _ = tx.send(item);
                        }
                        stream.outlet = Outlet::Open(tx);
                        return Reply::Stream(rx);
                    }
                    other => {
                        stream.outlet = other;
                        return Reply::Accepted;
                    }
                }
            }
            None => self.finished.take().unwrap_or_default(),
        };
        match <[StreamItem; 1]>::try_from(items) {
            Ok([StreamItem::Json(body)]) => Reply::Json(body),
            Ok(items) => Reply::Stream(closed_stream(items)),
            // Nothing is owed any more (its requests were cancelled): still a stream, which ends
            // at once; a POST holding requests is never answered a bare 202.
            Err(items) => Reply::Stream(closed_stream(items)),
        }
    }

    /// Whether streams of this session use SSE polling (priming events, server-side close).
    fn polling(&self) -> bool {
        self.transport == TransportKind::Streamable
            && self.version.is_some_and(ProtocolVersion::has_sse_polling)
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
                seq: 0,
                unclaimed_rx: None,
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
            if let Outlet::Unclaimed(items) = stream.outlet {
                self.finished = Some(items);
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
        let refused = if self.inflight.contains_key(&req.id) {
            Some(RpcError::invalid_request(format!(
                "Request id {} is already in use by a request in flight",
                req.id
            )))
        } else if self.inflight.len() >= mcp::MAX_IN_FLIGHT {
            Some(
                RpcError::new(
                    jsonrpc::SERVER_REFUSED,
                    format!(
                        "this session has {} requests running, the most it runs at once; send \
                         this one again when one of them has finished",
                        mcp::MAX_IN_FLIGHT
                    ),
                )
                .with_data(json!({ "maxInFlight": mcp::MAX_IN_FLIGHT })),
            )
        } else {
            None
        };
        if let Some(e) = refused {
            self.emit(
                stream,
                to_bytes(&jsonrpc::error_message(Some(&req.id), &e)),
                true,
            );
            return;
        }
        let span = request_span(
            &req,
            &self.id,
            self.version,
            &self.tenant,
            self.principal.as_ref(),
        );
        self.inflight.insert(
            req.id.clone(),
            InFlight {
                stream,
                method: req.method.as_str().into(),
                started: std::time::Instant::now(),
                abort: None,
                record: None,
                replay_bytes: 0,
                span: span.clone(),
            },
        );
        let progress_token = req.progress_token();
        // Tool calls may outlive this replica: keep what it takes to run them again.
        let replay = (req.method == "tools/call").then(|| req.params.clone());
        let params = match req.take_params() {
            Ok(p) => p,
            Err(e) => return self.complete(&req.id, Err(e)),
        };
        if self.version.is_none() && req.method == "initialize" {
            return self.open(&req.id, params);
        }
        match self.route(&req, params, progress_token, port) {
            Handled::Done(outcome) => self.complete(&req.id, outcome),
            Handled::Run {
                future,
                ctx,
                rerunnable,
            } => {
                if let Some(f) = self.inflight.get_mut(&req.id) {
                    let params = replay.flatten().unwrap_or(Value::Null);
                    let bytes = mcp::json_len(&params);
                    let kept = self.replay_bytes.saturating_add(bytes) <= mcp::MAX_REPLAY_BYTES;
                    f.record = Some(if kept {
                        self.replay_bytes += bytes;
                        f.replay_bytes = bytes;
                        (req.method.clone(), params, rerunnable)
                    } else {
                        // Not kept to run again: a failover answers it as interrupted.
                        (req.method.clone(), Value::Null, false)
                    });
                }
                jobs.push(Invocation {
                    id: req.id,
                    future,
                    ctx,
                    span,
                });
            }
            Handled::Unknown => {
                let method = req.method.clone();
                self.complete(&req.id, Err(RpcError::method_not_found(&method)))
            }
        }
    }

    /// Session-only methods here; everything else through `methods` with this session's scope.
    fn route(
        &mut self,
        req: &Request,
        params: Map<String, Value>,
        progress_token: Option<Value>,
        port: &Arc<dyn SessionPort>,
    ) -> Handled {
        let Some(version) = self.version else {
            // (`initialize` is answered by `open`.)
            return Handled::Done(match req.method.as_str() {
                "ping" => Ok(json!({})),
                _ => Err(RpcError::invalid_request(
                    "Session not initialized: send initialize first",
                )),
            });
        };
        let uri = || params.get("uri").and_then(Value::as_str);
        match req.method.as_str() {
            "initialize" => {
                return Handled::Done(Err(RpcError::invalid_request(
                    "Session already initialized",
                )))
            }
            "resources/subscribe" => {
                return Handled::Done(match uri() {
                    Some(uri) => {
                        let followed = self.subscriptions.contains(uri);
                        mcp::may_follow(uri, followed, self.subscriptions.len()).map(|()| {
                            if !followed {
                                self.subscriptions.insert(uri.to_string());
                                self.dirty = true;
                            }
                            json!({})
                        })
                    }
                    None => Err(RpcError::invalid_params(
                        "resources/subscribe needs a string \"uri\"",
                    )),
                })
            }
            "resources/unsubscribe" => {
                return Handled::Done(match uri() {
                    Some(uri) => {
                        self.subscriptions.remove(uri);
                        self.dirty = true;
                        Ok(json!({}))
                    }
                    None => Err(RpcError::invalid_params(
                        "resources/unsubscribe needs a string \"uri\"",
                    )),
                })
            }
            "logging/setLevel" => {
                return Handled::Done(
                    match params
                        .get("level")
                        .and_then(Value::as_str)
                        .and_then(LogLevel::parse)
                    {
                        Some(level) => {
                            self.log_level = level;
                            self.dirty = true;
                            Ok(json!({}))
                        }
                        None => Err(RpcError::invalid_params(
                            "logging/setLevel needs a valid \"level\" (debug … emergency)",
                        )),
                    },
                )
            }
            _ => {}
        }
        let catalog = self.catalog.current();
        let scope = self.scope(version, &catalog, port);
        methods::handle(&req.id, &req.method, params, progress_token, &scope)
    }

    /// The scope this session gives its requests.
    fn scope<'a>(
        &'a self,
        version: ProtocolVersion,
        catalog: &'a TenantCatalog,
        port: &'a Arc<dyn SessionPort>,
    ) -> RequestScope<'a> {
        RequestScope {
            version,
            client_capabilities: &self.client_capabilities,
            principal: self.principal.as_ref(),
            catalog,
            page_size: self.settings.page_size,
            call_key: crate::request::CallKey::InSession {
                tenant: self.tenant.clone(),
                session: self.id.clone(),
            },
            session: Some(&self.id),
            port,
        }
    }

    /// Answers `initialize` with the revision's result as the settings encoded it.
    fn open(&mut self, id: &RequestId, params: Map<String, Value>) {
        match self.initialize(params) {
            Ok(version) => {
                if let Some(stream) = self.conclude(id, &Ok(Value::Null)) {
                    let body =
                        jsonrpc::encode_result(id, &*self.settings.initialize_result(version));
                    self.emit(stream, Bytes::from(body), true);
                }
            }
            Err(e) => self.complete(id, Err(e)),
        }
    }

    fn initialize(&mut self, mut params: Map<String, Value>) -> Result<ProtocolVersion, RpcError> {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        if requested.is_none() {
            return Err(RpcError::invalid_params(
                "initialize needs a string \"protocolVersion\"",
            ));
        }
        let version = ProtocolVersion::negotiate(requested);
        let capabilities = params
            .remove("capabilities")
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let client_info = params
            .get("clientInfo")
            .and_then(|info| serde_json::value::to_raw_value(info).ok())
            .unwrap_or_else(|| RawValue::NULL.to_owned());
        // Both are kept for the session's life (and in each of its snapshots).
        let kept = client_info
            .get()
            .len()
            .saturating_add(mcp::json_len(&capabilities));
        if kept > mcp::MAX_CLIENT_DESCRIPTION_BYTES {
            return Err(RpcError::invalid_params(format!(
                "initialize: \"capabilities\" and \"clientInfo\" take at most {} KiB together",
                mcp::MAX_CLIENT_DESCRIPTION_BYTES / 1024
            )));
        }
        self.version = Some(version);
        self.client_capabilities = Arc::new(capabilities);
        self.client_info = client_info;
        self.publish_view();
        self.dirty = true;
        tracing::debug!(session = %self.id, tenant = %self.tenant, version = %version, "session initialized");
        Ok(version)
    }

    fn on_notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "notifications/initialized" => {
                // Not a reason for a snapshot of its own: nothing depends on the flag (requests
                // are gated on the negotiated version), and the next snapshot carries it. The
                // flag lives on the view, where an initialized session's lone one is set by the
                // HTTP worker (`direct::acknowledge`).
                self.view.set_initialized();
            }
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
        let Some(id) = r.id else {
            // Nothing to match it to: which request it answers is what its sender could not read.
            tracing::debug!(session = %self.id, error = ?r.outcome.err(),
                "error response without an id (the client could not read a request)");
            return;
        };
        match self.pending.remove(&id) {
            Some(p) => {
                self.dirty = true;
                let _ = p.reply.send(r.outcome);
            }
            None => {
                tracing::debug!(session = %self.id, id = %id, "response to no pending request")
            }
        }
    }

    /// Stops an in-flight request: its future is dropped and no response is sent.
    pub fn cancel(&mut self, id: &RequestId) {
        let Some(inflight) = self.inflight.remove(id) else {
            return;
        };
        self.replay_bytes -= inflight.replay_bytes;
        if let Some(abort) = inflight.abort {
            abort.abort();
        }
        if inflight.record.is_some() {
            self.dirty = true;
        }
        // What it was asking the client is cancelled too, and the client told so on the
        // request's stream before it ends (cancellation.mdx: the sender of a request it no
        // longer waits for sends notifications/cancelled): an open form or sampling prompt is
        // closed rather than answered into the void.
        let asked: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| &p.origin == id)
            .map(|(asked, _)| asked.clone())
            .collect();
        for asked in asked {
            self.pending.remove(&asked);
            self.dirty = true;
            let cancelled = jsonrpc::notification_message(
                "notifications/cancelled",
                json!({ "requestId": asked, "reason": "the request that asked was cancelled" }),
            );
            self.emit(inflight.stream, to_bytes(&cancelled), false);
        }
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
            Some(f) => {
                f.abort = Some(abort);
                if f.record.is_some() {
                    self.dirty = true;
                }
            }
            None => abort.abort(),
        }
    }

    /// A request finished: send its response on its stream (dropped if it was cancelled).
    pub fn complete(&mut self, id: &RequestId, outcome: Result<Value, RpcError>) {
        if let Some(stream) = self.conclude(id, &outcome) {
            let message = Bytes::from(jsonrpc::encode_response(id, &outcome));
            self.emit(stream, message, true);
        }
    }

    /// Forgets a finished request and records its outcome; the stream its answer goes on
    /// (`None`: it was cancelled, and is not answered).
    fn conclude(&mut self, id: &RequestId, outcome: &Result<Value, RpcError>) -> Option<StreamKey> {
        let inflight = self.inflight.remove(id)?;
        self.replay_bytes -= inflight.replay_bytes;
        if inflight.abort.is_some() {
            self.dirty = true;
        }
        crate::observe::telemetry::record_outcome(
            &inflight.method,
            &self.tenant,
            inflight.started,
            &inflight.span,
            outcome,
        );
        Some(inflight.stream)
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
    /// Sends a request to the client on `origin`'s stream; the id it went out with (the caller
    /// expires it with `expire_server_request` after `client_request_timeout`).
    pub fn server_request(
        &mut self,
        origin: &RequestId,
        method: &str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) -> Option<RequestId> {
        let Some(stream) = self.inflight.get(origin).map(|f| f.stream) else {
            let _ = reply.send(Err(RpcError::internal(
                "the originating request is no longer running",
            )));
            return None;
        };
        // lifecycle.mdx: the server SHOULD NOT send requests other than pings before the
        // client's `notifications/initialized`.
        if method != "ping" && !self.view.initialized() {
            let _ = reply.send(Err(RpcError::invalid_request(format!(
                "{method} cannot be sent yet: the client has not sent notifications/initialized"
            ))));
            return None;
        }
        self.next_server_request += 1;
        self.dirty = true;
        let id = RequestId::Number(self.next_server_request);
        self.pending.insert(
            id.clone(),
            PendingRequest {
                origin: origin.clone(),
                reply,
                _gauge: crate::observe::metrics::PendingGauge::open(&self.tenant, method),
            },
        );
        // Saved before the client can see the request: a replica taking the session over knows
        // which answer to wait for.
        self.save_if_changed();
        self.emit(
            stream,
            to_bytes(&jsonrpc::request_message(&id, method, params)),
            false,
        );
        Some(id)
    }

    /// The requests to the client that calls are waiting on.
    pub fn awaited_client_requests(&self) -> Vec<RequestId> {
        self.pending.keys().cloned().collect()
    }

    /// A request to the client still unanswered after `client_request_timeout`: the client is
    /// told it is cancelled (`notifications/cancelled`, on the stream it went out on) and the
    /// tool that asked gets an error instead of waiting for ever (lifecycle.mdx: timeouts).
    pub fn expire_server_request(&mut self, id: &RequestId) {
        let Some(pending) = self.pending.remove(id) else {
            return;
        };
        self.dirty = true;
        let timeout = self.settings.client_request_timeout.as_secs();
        let reason = format!("the client did not answer within {timeout} s");
        if let Some(stream) = self.inflight.get(&pending.origin).map(|f| f.stream) {
            let cancelled = jsonrpc::notification_message(
                "notifications/cancelled",
                json!({ "requestId": id, "reason": reason }),
            );
            self.emit(stream, to_bytes(&cancelled), false);
        }
        let _ = pending.reply.send(Err(RpcError::internal(reason)));
        tracing::info!(session = %self.id, %id, "request to the client timed out");
    }

    /// SSE polling: ends the HTTP connection of `origin`'s stream but keeps the stream, so what
    /// follows is logged and delivered when the client resumes with `Last-Event-ID`. Only for
    /// revisions that have SSE polling, on Streamable HTTP.
    pub fn close_stream(&mut self, origin: &RequestId) {
        if !self.polling() {
            return;
        }
        let Some(key) = self.inflight.get(origin).map(|f| f.stream) else {
            return;
        };
        self.ensure_sse(key);
        if let Some(stream) = self.streams.get_mut(&key) {
            stream.outlet = Outlet::Detached;
            stream.unclaimed_rx = None;
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
    pub fn open_standalone(&mut self) -> StreamReceiver {
        if let Some(old) = self.standalone.take() {
            self.streams.remove(&old);
        }
        let key = self.new_stream_key();
        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Open(tx),
                log_id: None,
                seq: 0,
                unclaimed_rx: None,
                owed: 0,
                batch: None,
                standalone: true,
            },
        );
        self.standalone = Some(key);
        self.ensure_sse(key);
        self.dirty = true;
        rx
    }

    /// Resumes the stream that `last` belongs to: the outbox replays its later events (every one
    /// queued before this call, exactly once), then, if the stream is live here, what follows is
    /// delivered as it is logged. The first item is `Resumed`, or `UnknownEvent` when the log does
    /// not know `last`.
    pub fn resume(&mut self, last: EventId) -> StreamReceiver {
        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
        // A live stream moves to the resuming connection, unless the id is one the stream never
        // sent: that resume is refused (400), and the stream's own connection goes on.
        let live = self
            .streams
            .values_mut()
            .find(|s| s.log_id == Some(last.stream))
            .filter(|s| last.seq <= s.seq);
        let upto = match live {
            Some(stream) => {
                stream.outlet = Outlet::Open(tx.clone());
                stream.unclaimed_rx = None;
                Some(stream.seq)
            }
            None => None,
        };
        self.outbox.push(OutboxItem::Resume {
            after: last,
            upto,
            sink: tx,
        });
        rx
    }

    /// Ends the session: running requests stop, connections close, its shared state (events,
    /// snapshot, lease) is forgotten.
    pub fn shutdown(&mut self) {
        self.stop_local();
        self.outbox.push(OutboxItem::Remove);
    }

    /// Hands the session over (this replica is draining): clients are told to reconnect, the
    /// latest snapshot is queued and then the lease released, so the next replica to see the
    /// session restores it. Running requests stay in the snapshot.
    pub fn hand_over(&mut self) {
        self.dirty = true;
        self.save_if_changed();
        let retry_ms = self.settings.sse_retry_ms;
        for stream in self.streams.values_mut() {
            if let Outlet::Open(sink) = &stream.outlet {
                let _ = sink.send(StreamItem::Reconnect { retry_ms });
            }
            stream.outlet = Outlet::Detached;
        }
        self.outbox.push(OutboxItem::Release);
    }

    /// Stops local work without touching shared state (the session lives on elsewhere).
    pub fn stop_local(&mut self) {
        self.replay_bytes = 0;
        for (_, f) in self.inflight.drain() {
            if let Some(abort) = f.abort {
                abort.abort();
            }
        }
        self.pending.clear();
        self.streams.clear();
        self.standalone = None;
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
                    stream.outlet.send(StreamItem::Json(message));
                    self.finish(key);
                }
                Some(gathered) => {
                    gathered.push(message);
                    if stream.owed == 0 {
                        let all = json_array(&std::mem::take(gathered));
                        stream.outlet.send(StreamItem::Json(all));
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
                    stream.outlet.send(StreamItem::Json(json_array(&gathered)));
                }
            }
            self.finish(key);
        }
    }

    /// Turns a stream into an SSE stream: gives it a log id (and, for a POST not claimed yet,
    /// the channel its body will read) and sends the priming event on revisions with SSE
    /// polling; responses gathered for a batch go out first.
    fn ensure_sse(&mut self, key: StreamKey) {
        let polling = self.polling();
        if self.streams.get(&key).is_none_or(|s| s.log_id.is_some()) {
            return;
        }
        self.streams_opened += 1;
        let log_id = StreamId::new(self.outbox.epoch(), self.streams_opened);
        let retry_ms = self.settings.sse_retry_ms;
        let stream_buffer_bytes = self.settings.stream_buffer_bytes;
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        stream.log_id = Some(log_id);
        if let Outlet::Unclaimed(items) = &mut stream.outlet {
            let (tx, rx) = stream_channel(stream_buffer_bytes);
            for item in items.drain(..) {
                let _ = tx.send(item);
            }
            stream.outlet = Outlet::Open(tx);
            stream.unclaimed_rx = Some(rx);
        }
        let gathered = stream
            .batch
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        if stream.standalone || !self.inflight.is_empty() {
            self.dirty = true;
        }
        if polling {
            if let Some((id, sink)) = stream.next_event() {
                self.outbox.push(OutboxItem::Event(Box::new(PendingEvent {
                    event: StoredEvent {
                        id,
                        data: Bytes::new(),
                    },
                    item: StreamItem::Priming { id, retry_ms },
                    sink,
                })));
            }
        }
        for message in gathered {
            self.write_event(key, message);
        }
    }

    fn write_event(&mut self, key: StreamKey, data: Bytes) {
        let Some((id, sink)) = self.streams.get_mut(&key).and_then(Stream::next_event) else {
            return;
        };
        self.outbox.push(OutboxItem::Event(Box::new(PendingEvent {
            event: StoredEvent {
                id,
                data: data.clone(),
            },
            item: StreamItem::Event { id, data },
            sink,
        })));
    }

    /// The legacy transport's single stream: opened with the `endpoint` event.
    pub fn open_legacy_stream(&mut self, endpoint: &str) -> StreamReceiver {
        let rx = self.open_standalone();
        if let Some(stream) = self.standalone.and_then(|k| self.streams.get_mut(&k)) {
            stream
                .outlet
                .send(StreamItem::Endpoint(endpoint.to_string()));
        }
        rx
    }
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

/// The server span of a session's request (disabled when not tracing).
pub(super) fn request_span(
    req: &Request,
    session: &str,
    version: Option<ProtocolVersion>,
    tenant: &str,
    principal: Option<&Arc<Value>>,
) -> tracing::Span {
    crate::observe::telemetry::request_span(
        req,
        Some(session),
        version.map(ProtocolVersion::as_str),
        tenant,
        principal
            .and_then(|p| p.get("client_id"))
            .and_then(Value::as_str),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a changed session leaves a snapshot in the store: only where other replicas
    /// read it (shared backends); in-process nothing reads it back, so none is saved.
    const TTL: std::time::Duration = std::time::Duration::from_secs(60);

    /// In-process backends (`shared`: as if other replicas read them), session `t/s` and its
    /// lease taken by `replica`.
    async fn leased(
        shared: bool,
        replica: &str,
    ) -> (
        Arc<crate::cluster::Backends>,
        crate::cluster::SessionKey,
        crate::cluster::Lease,
    ) {
        use crate::cluster::{Acquired, Backends, Retention, SessionKey};
        let backends = Arc::new(Backends {
            shared,
            ..Backends::in_process(Retention {
                max_events: 10,
                max_age: TTL,
            })
        });
        let key = SessionKey {
            tenant: "t".into(),
            session: "s".into(),
        };
        let Ok(Acquired::Granted(lease)) = backends.leases.acquire(&key, replica, None, TTL).await
        else {
            panic!("the lease of a new session is granted");
        };
        (backends, key, lease)
    }

    async fn saved_snapshot(shared: bool) -> Option<Bytes> {
        let (backends, key, lease) = leased(shared, "r1").await;
        let outbox = Outbox::new(key.clone(), lease, backends.clone(), TTL, Arc::new(|| {}));
        let mut session = Session::new(
            key.session.clone(),
            key.tenant.clone(),
            TransportKind::Streamable,
            CatalogHandle::new(TenantCatalog::new(Vec::new())),
            outbox,
            Arc::new(SessionSettings::default()),
        );
        session.version = Some(ProtocolVersion::V2025_11_25);
        session.dirty = true;
        session.save_if_changed();
        let _ = session.outbox().flush().await;
        backends
            .snapshots
            .load(&key)
            .await
            .expect("the store answers")
    }

    #[tokio::test]
    async fn snapshots_are_saved_only_where_other_replicas_read_them() {
        let shared = saved_snapshot(true)
            .await
            .expect("a shared store holds the snapshot");
        let snapshot: SessionSnapshot = serde_json::from_slice(&shared).expect("a snapshot");
        assert_eq!(snapshot.version.as_deref(), Some("2025-11-25"));
        assert_eq!(
            saved_snapshot(false).await,
            None,
            "in-process: nothing saved"
        );
    }

    /// `snapshot` restored on replica r2 (a new lease), with the log's last seqs `last_seqs`.
    async fn restored_on_r2(
        snapshot: &SessionSnapshot,
        last_seqs: &HashMap<StreamId, u64>,
    ) -> Session {
        let (backends, key, lease) = leased(false, "r2").await;
        let outbox = Outbox::new(key, lease, backends, TTL, Arc::new(|| {}));
        Session::restore(
            snapshot,
            false,
            last_seqs,
            CatalogHandle::new(TenantCatalog::new(Vec::new())),
            outbox,
            Arc::new(SessionSettings::default()),
        )
    }

    /// A session that answered `initialize` but whose snapshot never recorded the client's
    /// `notifications/initialized` (a session saves only when something else changes) is
    /// restored initialized: the client will not send it again, and the session's requests to
    /// the client wait for it. One that never answered `initialize` is not.
    #[tokio::test]
    async fn a_restored_session_that_answered_initialize_counts_as_initialized() {
        let bytes = saved_snapshot(true).await.expect("a snapshot");
        let mut snapshot: SessionSnapshot = serde_json::from_slice(&bytes).expect("a snapshot");
        assert!(!snapshot.initialized, "the notification was never recorded");
        assert!(restored_on_r2(&snapshot, &HashMap::new())
            .await
            .view
            .initialized());
        snapshot.version = None;
        assert!(!restored_on_r2(&snapshot, &HashMap::new())
            .await
            .view
            .initialized());
    }

    /// A restored stream numbers on from its log's last event; when its log holds none (it
    /// expired), from above any id it gave out before, so a client resuming with an old
    /// `Last-Event-ID` is replayed what comes next.
    #[tokio::test]
    async fn a_restored_stream_never_numbers_below_what_it_gave_out() {
        let bytes = saved_snapshot(true).await.expect("a snapshot");
        let mut snapshot: SessionSnapshot = serde_json::from_slice(&bytes).expect("a snapshot");
        snapshot.standalone_stream = Some(3);
        let logged = HashMap::from([(StreamId(3), 57)]);
        let restored = restored_on_r2(&snapshot, &logged).await;
        assert_eq!(restored.stream_seqs()[&StreamId(3)], 57);
        let before = u64::try_from(crate::store::now_millis()).unwrap();
        let renumbered = restored_on_r2(&snapshot, &HashMap::new())
            .await
            .stream_seqs()[&StreamId(3)];
        assert!(renumbered >= before, "{renumbered} < {before}");
    }

    fn result_of(settings: &SessionSettings, version: ProtocolVersion) -> Value {
        serde_json::from_str(settings.initialize_result(version).get()).expect("JSON")
    }

    #[test]
    fn initialize_results_follow_the_revision_and_the_settings() {
        let settings = SessionSettings::default();
        let old = result_of(&settings, ProtocolVersion::V2024_11_05);
        assert_eq!(old["protocolVersion"], "2024-11-05");
        assert!(old["capabilities"].get("completions").is_none());
        assert!(old["serverInfo"].get("title").is_none());
        assert!(old.get("instructions").is_none());
        let new = result_of(&settings, ProtocolVersion::V2025_11_25);
        assert_eq!(new["protocolVersion"], "2025-11-25");
        assert_eq!(new["capabilities"]["completions"], json!({}));
        assert_eq!(new["serverInfo"]["title"], "mcp-harbor");
        // Encoded once per revision: the second opening gets the same text.
        let first = settings.initialize_result(ProtocolVersion::V2025_11_25);
        let again = settings.initialize_result(ProtocolVersion::V2025_11_25);
        assert!(std::ptr::eq(first.get(), again.get()));
        // A copy with other settings answers with its own.
        let mut other = settings.clone();
        other.instructions = Some("Use the echo tool.".into());
        other.server_name = "harbor-b".into();
        let theirs = result_of(&other, ProtocolVersion::V2025_11_25);
        assert_eq!(theirs["instructions"], "Use the echo tool.");
        assert_eq!(theirs["serverInfo"]["name"], "harbor-b");
        assert!(result_of(&settings, ProtocolVersion::V2025_11_25)
            .get("instructions")
            .is_none());
    }
}
