//! Session state shared between replicas: the SSE event log, session snapshots, ownership leases,
//! the message bus and the tenants' quotas (request rates, live sessions). Each is an async trait with two backends: in-process (`memory`, the
//! embedded default: one replica, nothing to install) and Redis (`redis`, many replicas). One
//! contract suite (`tests/api/cluster_contract.rs`) runs against both.
//!
//! This is a lower room: it knows sessions only as keys and opaque bytes, never the session types.
//!
//! Ownership model: every replica has an id and keeps a liveness key alive with a heartbeat. A
//! session's lease names its owner replica and a fencing token (a number that only grows). The
//! owner is alive while its liveness key exists; a replica that finds the owner dead (or that
//! cannot reach it) takes the lease over with a compare-and-set, which issues a new token. Every
//! write of an owner (event appends, snapshot saves) carries its lease and is refused
//! (`BackendError::Fenced`) once someone else holds the session, so a paused old owner cannot
//! write after losing it.

pub mod memory;
pub mod redis;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

/// What can go wrong talking to shared state.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum BackendError {
    /// The backend cannot be reached now (Redis down): retry later (HTTP 503 + Retry-After).
    #[error("shared state unavailable: {0}")]
    Unavailable(String),
    /// The write was refused: the session is owned by someone else now.
    #[error("the session lease is held by another owner")]
    Fenced,
    /// Stored data could not be read back.
    #[error("stored session state is corrupt: {0}")]
    Corrupt(String),
}

/// A session, namespaced by its tenant: every key of shared state is built from both, so an id
/// of one tenant can never reach another's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub tenant: Arc<str>,
    pub session: Arc<str>,
}

impl SessionKey {
    pub fn new(tenant: impl Into<Arc<str>>, session: impl Into<Arc<str>>) -> Self {
        SessionKey {
            tenant: tenant.into(),
            session: session.into(),
        }
    }
}

/// A session's lease: which replica owns it, under which fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub replica: Arc<str>,
    pub token: u64,
}

/// What `Leases::acquire` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The lease is ours now, with a new fencing token.
    Granted(Lease),
    /// Someone else holds it (not the holder we expected to replace).
    HeldBy(Lease),
}

/// A stream of one session: the standalone GET stream, or the stream of one POST. Stream ids are
/// allocated by the session's owner without a round trip: the high bits are the owner's fencing
/// token (its ownership epoch), the low [`STREAM_BITS`] bits count streams within that epoch, so
/// ids stay unique across takeovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// Bits of a stream id that count streams within one ownership epoch.
pub const STREAM_BITS: u32 = 24;

impl StreamId {
    pub fn new(epoch: u64, n: u64) -> StreamId {
        StreamId((epoch << STREAM_BITS) | (n & ((1 << STREAM_BITS) - 1)))
    }
}

/// An SSE event id: `<stream>-<seq>`. It names its stream, so a `Last-Event-ID` leads back to it.
/// `seq` starts at 1 in every stream and grows by one per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId {
    pub stream: StreamId,
    pub seq: u64,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.stream.0, self.seq)
    }
}

impl FromStr for EventId {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (stream, seq) = s.trim().split_once('-').ok_or(())?;
        Ok(EventId {
            stream: StreamId(stream.parse().map_err(|_| ())?),
            seq: seq.parse().map_err(|_| ())?,
        })
    }
}

/// A stored event: its id and the JSON-RPC message (empty for a priming event).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: EventId,
    pub data: Bytes,
}

/// How much of each stream the event log keeps.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Most events kept per stream (the oldest go first).
    pub max_events: usize,
    /// A stream (and a session's whole log) is forgotten this long after its last event.
    pub max_age: Duration,
}

/// The SSE event log: every server→client message of a session's SSE streams is appended here
/// before it is written to any connection, so a client reconnecting with `Last-Event-ID` (to any
/// replica) misses nothing.
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Appends `events` (in order; ids chosen by the owner) under the owner's `lease`. Refused
    /// with `Fenced` when `lease` is no longer the session's lease.
    async fn append(
        &self,
        key: &SessionKey,
        lease: &Lease,
        events: &[StoredEvent],
    ) -> Result<(), BackendError>;
    /// The events of `after.stream` that follow `after`, oldest first. `Ok(None)` when the log
    /// knows nothing of that stream in this session (never written, forgotten, or `after.seq` is
    /// beyond anything written).
    async fn replay_after(
        &self,
        key: &SessionKey,
        after: EventId,
    ) -> Result<Option<Vec<StoredEvent>>, BackendError>;
    /// The highest seq written to `stream` (to continue its numbering after a takeover).
    async fn last_seq(
        &self,
        key: &SessionKey,
        stream: StreamId,
    ) -> Result<Option<u64>, BackendError>;
    /// Forgets a session's events (it ended).
    async fn remove_session(&self, key: &SessionKey) -> Result<(), BackendError>;
}

/// Session snapshots: what another replica needs to go on serving a session. Opaque bytes here
/// (the session module owns the format).
#[async_trait]
pub trait SnapshotStore: Send + Sync + 'static {
    /// Saves the snapshot under the owner's `lease` (refused with `Fenced` otherwise); it is
    /// forgotten after `ttl` unless saved or touched again.
    async fn save(
        &self,
        key: &SessionKey,
        lease: &Lease,
        snapshot: Bytes,
        ttl: Duration,
    ) -> Result<(), BackendError>;
    async fn load(&self, key: &SessionKey) -> Result<Option<Bytes>, BackendError>;
    /// Extends the life of these sessions' snapshots and leases (they are still in use), and
    /// keeps them counted among their tenant's live sessions for `ttl` more (see
    /// [`Quotas::open_session`]).
    async fn touch(&self, keys: &[SessionKey], ttl: Duration) -> Result<(), BackendError>;
    /// Forgets a session everywhere: snapshot, lease and its place among the tenant's live
    /// sessions (DELETE, idle expiry).
    async fn delete(&self, key: &SessionKey) -> Result<(), BackendError>;
}

/// A replica as the others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub id: Arc<str>,
    /// Where other replicas reach it (`http://10.0.0.7:8080`), to forward requests to it.
    pub url: String,
}

/// Ownership leases and replica liveness.
#[async_trait]
pub trait Leases: Send + Sync + 'static {
    /// Marks `replica` alive for `ttl` (called every heartbeat, well within `ttl`).
    async fn heartbeat(&self, replica: &ReplicaInfo, ttl: Duration) -> Result<(), BackendError>;
    /// Marks `replica` dead at once (it is shutting down).
    async fn retire(&self, replica: &str) -> Result<(), BackendError>;
    /// The URL of a live replica; `None` when it is dead (its heartbeat lapsed or it retired).
    async fn replica_url(&self, replica: &str) -> Result<Option<String>, BackendError>;
    /// The current lease of a session, if any.
    async fn owner(&self, key: &SessionKey) -> Result<Option<Lease>, BackendError>;
    /// Takes the lease for `replica` if its current holder is `expected` (`None`: nobody holds
    /// it). Atomic: of two replicas racing for the same session, one wins. A grant carries a
    /// fencing token greater than any issued before for this session.
    async fn acquire(
        &self,
        key: &SessionKey,
        replica: &str,
        expected: Option<&Lease>,
        ttl: Duration,
    ) -> Result<Acquired, BackendError>;
    /// Gives the lease up, if `lease` still holds it (a session handed over or ended).
    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<(), BackendError>;
}

/// A message received from the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusMessage {
    pub topic: String,
    pub payload: Bytes,
}

/// The bus between replicas: at-most-once delivery to every current subscriber of a topic.
/// Used for what must reach a session's owner (a client's answer, a cancellation) and for
/// tenant-wide events every replica must hear (catalog changes, suspension, deletion).
#[async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Publishes `payload` on `topic`; returns how many subscriptions received it (0: nobody
    /// listens, e.g. the replica whose topic it is has died).
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<usize, BackendError>;
    /// Receives what is published on `topics` from now on. The subscription survives backend
    /// outages (it reconnects and resubscribes; messages published meanwhile are lost). It ends
    /// when the receiver is dropped.
    async fn subscribe(
        &self,
        topics: &[String],
    ) -> Result<mpsc::UnboundedReceiver<BusMessage>, BackendError>;
}

/// What a request-rate quota said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    Allowed,
    /// Over the rate: the next request is allowed after this long.
    Exceeded {
        retry_after: Duration,
    },
}

/// Whose requests a rate counts: the tenant's as a whole, or one principal's within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateScope<'a> {
    Tenant,
    /// An opaque id of the principal (the caller passes a hash, so keys stay short).
    Principal(&'a str),
}

/// The caps on a tenant's live sessions across all replicas (`None`: no cap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCaps {
    pub per_tenant: Option<u32>,
    pub per_principal: Option<u32>,
}

impl SessionCaps {
    /// No cap: new sessions need not be counted when they open (the sweep's `touch` still
    /// records the active ones, so a cap set later sees them).
    pub fn is_unlimited(&self) -> bool {
        self.per_tenant.is_none() && self.per_principal.is_none()
    }
}

/// What [`Quotas::open_session`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAdmission {
    /// Counted among the tenant's live sessions.
    Opened,
    /// The tenant has `per_tenant` live sessions already.
    TenantFull,
    /// The principal has `per_principal` live sessions already.
    PrincipalFull,
}

/// Quotas every replica counts against together.
///
/// Request rates use GCRA (the generic cell rate algorithm, see [`gcra`]): one stored time per
/// rate, one atomic step per request. Live sessions are a per-tenant set of session ids, each
/// with an expiry renewed by [`SnapshotStore::touch`] and removed by [`SnapshotStore::delete`];
/// the sessions of a replica that died without deleting them lapse on their own. Failed sign-ins
/// and client registrations are counters in fixed windows that start with their first attempt.
#[async_trait]
pub trait Quotas: Send + Sync + 'static {
    /// Counts `cost` requests of `tenant` (as a whole, or of one principal; a JSON-RPC batch
    /// counts its messages) against a rate of `per_minute` requests a minute, with a burst of as
    /// many (a cost above it counts as the whole burst).
    async fn take(
        &self,
        tenant: &str,
        scope: RateScope<'_>,
        per_minute: u32,
        cost: u32,
    ) -> Result<Quota, BackendError>;
    /// Counts a new session among its tenant's live sessions for `ttl` (owned by `principal`,
    /// an opaque id like [`RateScope::Principal`]'s), unless the tenant or the principal is at
    /// its cap. Expired sessions are forgotten first.
    async fn open_session(
        &self,
        key: &SessionKey,
        principal: Option<&str>,
        caps: SessionCaps,
        ttl: Duration,
    ) -> Result<SessionAdmission, BackendError>;
    /// Counts an attempt of `tenant` (a sign-in, a client registration) under each of `keys`
    /// (opaque ids: a user, a client address), each against its own limit, in a window of
    /// `window` from that key's first attempt; unless one of them holds its limit already (then
    /// none is counted, and the answer says when that key's window ends).
    async fn count_attempt(
        &self,
        tenant: &str,
        keys: &[(&str, u32)],
        window: Duration,
    ) -> Result<Quota, BackendError>;
    /// Takes back one attempt counted under `key` (it succeeded, or was never checked); `all`:
    /// every attempt counted under it.
    async fn forgive_attempt(&self, tenant: &str, key: &str, all: bool)
        -> Result<(), BackendError>;
}

/// After a call to shared state failed, how long its caller uses its own fallback instead of
/// asking again: a hung backend then costs one request its deadline, not every request.
pub struct Backoff {
    /// Not asked again before this (unix ms; 0: asked).
    until_ms: std::sync::atomic::AtomicI64,
    pause_ms: i64,
}

impl Backoff {
    pub const fn new(pause: Duration) -> Self {
        Backoff {
            until_ms: std::sync::atomic::AtomicI64::new(0),
            pause_ms: pause.as_millis() as i64,
        }
    }

    /// Whether shared state may be asked now.
    pub fn ready(&self) -> bool {
        crate::store::now_millis() >= self.until_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A call failed (measured from now: the failure may have been a timeout).
    pub fn failed(&self) {
        let until = crate::store::now_millis() + self.pause_ms;
        self.until_ms
            .store(until, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One GCRA step for `cost` requests at once (see [`gcra_parameters`]) at a rate of
/// `per_minute` requests a minute with a burst of `per_minute`. Times are microseconds; `tat` is
/// the stored theoretical arrival time (`None`: nothing stored). Admitted: `Ok(new tat)` to
/// store; refused: `Err(how long until admitted)`. The Redis backend runs the same steps in a
/// script.
pub fn gcra(now: u64, tat: Option<u64>, per_minute: u32, cost: u32) -> Result<u64, Duration> {
    let (interval, tolerance) = gcra_parameters(per_minute, cost);
    let tat = tat.unwrap_or(now).max(now);
    let allowed_at = (tat + interval).saturating_sub(tolerance);
    if allowed_at > now {
        return Err(Duration::from_micros(allowed_at - now));
    }
    Ok(tat + interval)
}

/// GCRA's emission interval for `cost` requests (µs between requests at the steady rate, times
/// the cost) and tolerance (the burst: `per_minute` intervals). A cost above the burst counts as
/// the whole burst, so it is admitted once the bucket is full.
pub fn gcra_parameters(per_minute: u32, cost: u32) -> (u64, u64) {
    let n = u64::from(per_minute.max(1));
    let interval = 60_000_000 / n;
    (
        interval * u64::from(cost.clamp(1, per_minute.max(1))),
        interval * n,
    )
}

/// The backends, chosen once by configuration.
#[derive(Clone)]
pub struct Backends {
    pub events: Arc<dyn EventLog>,
    pub snapshots: Arc<dyn SnapshotStore>,
    pub leases: Arc<dyn Leases>,
    pub bus: Arc<dyn Bus>,
    pub quotas: Arc<dyn Quotas>,
    /// Whether they are shared with other replicas (Redis) or only this process's.
    pub shared: bool,
}

impl Backends {
    /// The in-process backends (the embedded default).
    pub fn in_process(retention: Retention) -> Backends {
        let state = memory::MemoryCluster::new(retention);
        Backends {
            events: state.clone(),
            snapshots: state.clone(),
            leases: state.clone(),
            bus: state.clone(),
            quotas: state,
            shared: false,
        }
    }

    /// The Redis backends; fails when Redis cannot be reached at start.
    pub async fn redis(
        url: &str,
        prefix: &str,
        retention: Retention,
    ) -> Result<Backends, BackendError> {
        Self::redis_with(url, &redis::RedisTls::default(), prefix, retention).await
    }

    /// [`Backends::redis`] with the certificates of a `rediss://` URL.
    pub async fn redis_with(
        url: &str,
        tls: &redis::RedisTls,
        prefix: &str,
        retention: Retention,
    ) -> Result<Backends, BackendError> {
        let state = redis::RedisCluster::connect(url, tls, prefix, retention).await?;
        Ok(Backends {
            events: state.clone(),
            snapshots: state.clone(),
            leases: state.clone(),
            bus: state.clone(),
            quotas: state,
            shared: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_name_their_stream() {
        let id = EventId {
            stream: StreamId::new(3, 7),
            seq: 12,
        };
        assert_eq!(id.to_string().parse::<EventId>(), Ok(id));
        assert!("x-1".parse::<EventId>().is_err());
        assert!("1".parse::<EventId>().is_err());
        assert_ne!(StreamId::new(1, 1), StreamId::new(2, 1));
    }

    /// Drives `gcra` like a store would: `n` requests at `now`, how many were admitted.
    fn burst(tat: &mut Option<u64>, now: u64, n: usize, per_minute: u32) -> usize {
        (0..n)
            .filter(|_| match gcra(now, *tat, per_minute, 1) {
                Ok(next) => {
                    *tat = Some(next);
                    true
                }
                Err(_) => false,
            })
            .count()
    }

    #[test]
    fn gcra_admits_the_burst_then_the_steady_rate() {
        let t0 = 1_000_000_000;
        let mut tat = None;
        assert_eq!(burst(&mut tat, t0, 50, 10), 10, "a burst of per_minute");
        // The 11th waits one interval (6 s at 10 a minute).
        assert_eq!(gcra(t0, tat, 10, 1), Err(Duration::from_secs(6)));
        assert_eq!(burst(&mut tat, t0 + 5_999_999, 5, 10), 0);
        assert_eq!(
            burst(&mut tat, t0 + 6_000_000, 5, 10),
            1,
            "one interval later, one more"
        );
        // A minute of silence refills the whole burst, never more.
        assert_eq!(burst(&mut tat, t0 + 600_000_000, 50, 10), 10);
        // A stored time in the past counts as now.
        assert_eq!(burst(&mut Some(1), t0, 3, 2), 2);
        // High rates: the burst is still exactly per_minute.
        let mut tat = None;
        assert_eq!(burst(&mut tat, t0, 10_000, 7_000), 7_000);
        assert!(gcra(t0, tat, 7_000, 1).unwrap_err() <= Duration::from_millis(9));
    }

    #[test]
    fn gcra_counts_a_cost_as_that_many_requests() {
        let t0 = 1_000_000_000;
        // 10 a minute: 4 at once, then 6 more, then nothing.
        let tat = gcra(t0, None, 10, 4).unwrap();
        let tat = gcra(t0, Some(tat), 10, 6).unwrap();
        assert_eq!(gcra(t0, Some(tat), 10, 1), Err(Duration::from_secs(6)));
        // A cost of 3 waits for three intervals' worth.
        let tat = gcra(t0, None, 10, 9).unwrap();
        assert_eq!(gcra(t0, Some(tat), 10, 3), Err(Duration::from_secs(12)));
        // A cost above the burst counts as the burst: admitted on a full bucket only.
        let tat = gcra(t0, None, 10, 500).unwrap();
        assert_eq!(gcra(t0, Some(tat), 10, 1), Err(Duration::from_secs(6)));
        assert_eq!(gcra(t0, None, 10, 500), gcra(t0, None, 10, 10));
    }
}
