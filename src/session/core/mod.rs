//! The session state machine, in plain Rust: lifecycle and version negotiation, in-flight
//! requests and cancellation, server→client requests, log level, subscriptions, and the session's
//! streams (which message goes on which stream, JSON or SSE). One file per job: `snapshot`
//! (lifecycle, snapshots, restore and recovery), `dispatch` (a POST's messages, the
//! session-only methods), `client` (answers, cancellation, notifications and requests to the
//! client) and `streams` (which stream a message goes on, JSON or SSE, resumption). Methods that need no session are
//! handled by `methods`; this module only builds their scope. It hands out typed stream items
//! (SSE framing is the transport's job) and writes shared state through its `Outbox`. The actor in
//! `session::actor` only feeds it messages and runs the futures it hands back.

mod client;
mod dispatch;
mod snapshot;
mod streams;

pub use snapshot::{AwaitingRecord, InFlightRecord, SessionSnapshot};

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::outbox::{Outbox, OutboxItem, PendingEvent};
use super::view::SessionView;
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

use super::channel::{closed_stream, stream_channel};
pub use super::channel::{StreamItem, StreamReceiver, StreamSink};

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
    pub span: crate::observe::trace::RequestSpan,
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
    span: crate::observe::trace::RequestSpan,
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
) -> crate::observe::trace::RequestSpan {
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
