//! In-process shared state (the embedded default, one replica): the event log, snapshots, leases,
//! replica liveness, the bus and the quotas, all in this process's memory with the same semantics as Redis.
//!
//! Expiry is lazy (checked on access) plus a sweep of everything expired at most once a second,
//! so state nobody asks for again does not pile up.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::{
    gcra, Acquired, BackendError, Bus, BusMessage, EventId, EventLog, Lease, Leases, Quota, Quotas,
    RateScope, ReplicaInfo, Retention, SessionAdmission, SessionCaps, SessionKey, SnapshotStore,
    StoredEvent, StreamId,
};
use crate::FastMap;

/// How often expired state is swept (besides the lazy checks on access).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// One stream of a session's event log.
struct StreamLog {
    events: VecDeque<StoredEvent>,
    /// The highest seq ever written (retained or trimmed).
    last_seq: u64,
    /// Forgotten at this instant unless appended to again.
    expires: Instant,
}

/// A value that lapses at `expires`.
struct Expiring<T> {
    value: T,
    expires: Instant,
}

impl<T> Expiring<T> {
    fn new(value: T, ttl: Duration, now: Instant) -> Self {
        Expiring {
            value,
            expires: now + ttl,
        }
    }

    fn alive(&self, now: Instant) -> bool {
        now < self.expires
    }
}

/// Microseconds from a fixed instant of this process to `now` (GCRA's clock).
fn micros(now: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(now.saturating_duration_since(epoch).as_micros()).unwrap_or(u64::MAX)
}

/// A session counted among its tenant's live sessions.
struct LiveSession {
    expires: Instant,
    principal: Option<Arc<str>>,
}

#[derive(Default)]
struct State {
    logs: FastMap<SessionKey, FastMap<StreamId, StreamLog>>,
    snapshots: FastMap<SessionKey, Expiring<Bytes>>,
    leases: FastMap<SessionKey, Expiring<Lease>>,
    replicas: FastMap<Arc<str>, Expiring<String>>,
    /// Request rates: GCRA's theoretical arrival time (see [`micros`]) per tenant and principal.
    rates: FastMap<(Arc<str>, Option<Box<str>>), u64>,
    /// Each tenant's live sessions.
    live: FastMap<Arc<str>, FastMap<Arc<str>, LiveSession>>,
    /// Fencing tokens come from one counter for all sessions: every session's tokens still only
    /// grow, and nothing per session has to be remembered forever.
    last_token: u64,
    last_sweep: Option<Instant>,
}

impl State {
    /// The session's current lease, forgetting it if it lapsed.
    fn lease(&mut self, key: &SessionKey, now: Instant) -> Option<&Lease> {
        if self.leases.get(key).is_some_and(|l| !l.alive(now)) {
            self.leases.remove(key);
        }
        self.leases.get(key).map(|l| &l.value)
    }

    fn check_lease(&mut self, key: &SessionKey, lease: &Lease, now: Instant) -> bool {
        self.lease(key, now) == Some(lease)
    }

    /// A stream of a session's log, forgetting it if it expired.
    fn stream(&mut self, key: &SessionKey, stream: StreamId, now: Instant) -> Option<&StreamLog> {
        let log = self.logs.get_mut(key)?;
        if log.get(&stream).is_some_and(|s| now >= s.expires) {
            log.remove(&stream);
            if log.is_empty() {
                self.logs.remove(key);
                return None;
            }
        }
        self.logs.get(key)?.get(&stream)
    }

    fn maybe_sweep(&mut self, now: Instant) {
        if self
            .last_sweep
            .is_some_and(|t| now.duration_since(t) < SWEEP_EVERY)
        {
            return;
        }
        self.last_sweep = Some(now);
        self.logs.retain(|_, log| {
            log.retain(|_, s| now < s.expires);
            !log.is_empty()
        });
        self.snapshots.retain(|_, s| s.alive(now));
        self.leases.retain(|_, l| l.alive(now));
        self.replicas.retain(|_, r| r.alive(now));
        let now_us = micros(now);
        self.rates.retain(|_, tat| *tat > now_us);
        self.live.retain(|_, sessions| {
            sessions.retain(|_, s| now < s.expires);
            !sessions.is_empty()
        });
    }
}

/// Senders of the bus's subscriptions, by topic.
#[derive(Default)]
struct Topics {
    subscribers: HashMap<String, Vec<mpsc::UnboundedSender<BusMessage>>>,
    last_prune: Option<Instant>,
}

/// All four backends in this process's memory.
pub struct MemoryCluster {
    retention: Retention,
    state: Mutex<State>,
    topics: Mutex<Topics>,
    attempts: Attempts,
}

/// Attempts (sign-ins, client registrations) per key in fixed windows: the in-process
/// counterpart of the Redis counters, and what a replica counts on while Redis is unreachable. A
/// std `HashMap` (SipHash): its keys come from anyone who opens a sign-in page.
#[derive(Default)]
pub struct Attempts {
    counts: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Attempts {
    /// Keys held past this many: those whose window ended are forgotten first.
    const SWEEP_ABOVE: usize = 100_000;

    /// A tenant's counter under `key`.
    fn key(tenant: &str, key: &str) -> String {
        format!("{tenant}/{key}")
    }

    /// See [`Quotas::count_attempt`].
    pub fn count(&self, tenant: &str, keys: &[(&str, u32)], window: Duration) -> Quota {
        let mut counts = self.counts.lock();
        if counts.len() > Self::SWEEP_ABOVE {
            counts.retain(|_, (first, _)| first.elapsed() < window);
        }
        let keys: Vec<(String, u32)> = keys
            .iter()
            .map(|(k, limit)| (Self::key(tenant, k), *limit))
            .collect();
        for (key, limit) in &keys {
            if let Some((first, n)) = counts.get(key) {
                let age = first.elapsed();
                if age < window && n >= limit {
                    return Quota::Exceeded {
                        retry_after: window - age,
                    };
                }
            }
        }
        for (key, _) in keys {
            let entry = counts.entry(key).or_insert((Instant::now(), 0));
            if entry.0.elapsed() >= window {
                *entry = (Instant::now(), 0);
            }
            entry.1 += 1;
        }
        Quota::Allowed
    }

    /// See [`Quotas::forgive_attempt`].
    pub fn forgive(&self, tenant: &str, key: &str, all: bool) {
        let key = Self::key(tenant, key);
        let mut counts = self.counts.lock();
        if all {
            counts.remove(&key);
        } else if let Some(entry) = counts.get_mut(&key) {
            entry.1 = entry.1.saturating_sub(1);
        }
    }
}

impl MemoryCluster {
    pub fn new(retention: Retention) -> Arc<MemoryCluster> {
        Arc::new(MemoryCluster {
            retention,
            state: Mutex::new(State::default()),
            topics: Mutex::new(Topics::default()),
            attempts: Attempts::default(),
        })
    }

    fn state(&self) -> (parking_lot::MutexGuard<'_, State>, Instant) {
        let now = Instant::now();
        let mut state = self.state.lock();
        state.maybe_sweep(now);
        (state, now)
    }
}

#[async_trait]
impl EventLog for MemoryCluster {
    async fn append(
        &self,
        key: &SessionKey,
        lease: &Lease,
        events: &[StoredEvent],
    ) -> Result<(), BackendError> {
        let (mut state, now) = self.state();
        if !state.check_lease(key, lease, now) {
            return Err(BackendError::Fenced);
        }
        if events.is_empty() {
            return Ok(());
        }
        let max_events = self.retention.max_events.max(1);
        let expires = now + self.retention.max_age;
        let log = state.logs.entry(key.clone()).or_default();
        for event in events {
            let stream = log.entry(event.id.stream).or_insert_with(|| StreamLog {
                events: VecDeque::new(),
                last_seq: 0,
                expires,
            });
            if now >= stream.expires {
                stream.events.clear();
                stream.last_seq = 0;
            }
            stream.expires = expires;
            // Seqs only grow: an event at or below the last one written is a retry, not news.
            if event.id.seq <= stream.last_seq {
                continue;
            }
            stream.events.push_back(event.clone());
            stream.last_seq = event.id.seq;
            while stream.events.len() > max_events {
                stream.events.pop_front();
            }
        }
        Ok(())
    }

    async fn replay_after(
        &self,
        key: &SessionKey,
        after: EventId,
    ) -> Result<Option<Vec<StoredEvent>>, BackendError> {
        let (mut state, now) = self.state();
        let Some(stream) = state.stream(key, after.stream, now) else {
            return Ok(None);
        };
        if after.seq > stream.last_seq {
            return Ok(None);
        }
        // Events right after `after` were already trimmed: a replay would skip them silently.
        let oldest = stream.events.front().map(|e| e.id.seq);
        if after.seq < stream.last_seq && oldest.is_none_or(|first| first > after.seq + 1) {
            return Ok(None);
        }
        Ok(Some(
            stream
                .events
                .iter()
                .filter(|e| e.id.seq > after.seq)
                .cloned()
                .collect(),
        ))
    }

    async fn last_seq(
        &self,
        key: &SessionKey,
        stream: StreamId,
    ) -> Result<Option<u64>, BackendError> {
        let (mut state, now) = self.state();
        Ok(state.stream(key, stream, now).map(|s| s.last_seq))
    }

    async fn remove_session(&self, key: &SessionKey) -> Result<(), BackendError> {
        self.state().0.logs.remove(key);
        Ok(())
    }
}

#[async_trait]
impl SnapshotStore for MemoryCluster {
    async fn save(
        &self,
        key: &SessionKey,
        lease: &Lease,
        snapshot: Bytes,
        ttl: Duration,
    ) -> Result<(), BackendError> {
        let (mut state, now) = self.state();
        if !state.check_lease(key, lease, now) {
            return Err(BackendError::Fenced);
        }
        state
            .snapshots
            .insert(key.clone(), Expiring::new(snapshot, ttl, now));
        Ok(())
    }

    async fn load(&self, key: &SessionKey) -> Result<Option<Bytes>, BackendError> {
        let (mut state, now) = self.state();
        match state.snapshots.get(key) {
            Some(s) if s.alive(now) => Ok(Some(s.value.clone())),
            Some(_) => {
                state.snapshots.remove(key);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn touch(&self, keys: &[SessionKey], ttl: Duration) -> Result<(), BackendError> {
        let (mut state, now) = self.state();
        for key in keys {
            if let Some(s) = state.snapshots.get_mut(key) {
                if s.alive(now) {
                    s.expires = now + ttl;
                }
            }
            if let Some(l) = state.leases.get_mut(key) {
                if l.alive(now) {
                    l.expires = now + ttl;
                }
            }
            state
                .live
                .entry(key.tenant.clone())
                .or_default()
                .entry(key.session.clone())
                .and_modify(|s| s.expires = now + ttl)
                .or_insert(LiveSession {
                    expires: now + ttl,
                    principal: None,
                });
        }
        Ok(())
    }

    async fn delete(&self, key: &SessionKey) -> Result<(), BackendError> {
        let (mut state, _) = self.state();
        state.snapshots.remove(key);
        state.leases.remove(key);
        if let Some(sessions) = state.live.get_mut(&key.tenant) {
            sessions.remove(&key.session);
            if sessions.is_empty() {
                state.live.remove(&key.tenant);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Quotas for MemoryCluster {
    async fn take(
        &self,
        tenant: &str,
        scope: RateScope<'_>,
        per_minute: u32,
        cost: u32,
    ) -> Result<Quota, BackendError> {
        let (mut state, now) = self.state();
        let principal = match scope {
            RateScope::Tenant => None,
            RateScope::Principal(p) => Some(Box::from(p)),
        };
        let key = (Arc::from(tenant), principal);
        match gcra(
            micros(now),
            state.rates.get(&key).copied(),
            per_minute,
            cost,
        ) {
            Ok(tat) => {
                state.rates.insert(key, tat);
                Ok(Quota::Allowed)
            }
            Err(retry_after) => Ok(Quota::Exceeded { retry_after }),
        }
    }

    async fn count_attempt(
        &self,
        tenant: &str,
        keys: &[(&str, u32)],
        window: Duration,
    ) -> Result<Quota, BackendError> {
        Ok(self.attempts.count(tenant, keys, window))
    }

    async fn forgive_attempt(
        &self,
        tenant: &str,
        key: &str,
        all: bool,
    ) -> Result<(), BackendError> {
        self.attempts.forgive(tenant, key, all);
        Ok(())
    }

    async fn open_session(
        &self,
        key: &SessionKey,
        principal: Option<&str>,
        caps: SessionCaps,
        ttl: Duration,
    ) -> Result<SessionAdmission, BackendError> {
        let (mut state, now) = self.state();
        let sessions = state.live.entry(key.tenant.clone()).or_default();
        // Expired sessions are forgotten when they could make a difference (not on every open:
        // that would walk every live session of the tenant each time).
        let full = |sessions: &FastMap<Arc<str>, LiveSession>| {
            caps.per_tenant
                .is_some_and(|cap| sessions.len() >= cap as usize)
                || caps
                    .per_principal
                    .is_some_and(|cap| sessions.len() >= cap as usize)
        };
        if full(sessions) {
            sessions.retain(|_, s| now < s.expires);
        }
        if caps
            .per_tenant
            .is_some_and(|cap| sessions.len() >= cap as usize)
        {
            return Ok(SessionAdmission::TenantFull);
        }
        if let (Some(cap), Some(p)) = (caps.per_principal, principal) {
            let held = sessions
                .values()
                .filter(|s| s.principal.as_deref() == Some(p))
                .count();
            if held >= cap as usize {
                return Ok(SessionAdmission::PrincipalFull);
            }
        }
        sessions.insert(
            key.session.clone(),
            LiveSession {
                expires: now + ttl,
                principal: principal.map(Arc::from),
            },
        );
        Ok(SessionAdmission::Opened)
    }
}

#[async_trait]
impl Leases for MemoryCluster {
    async fn heartbeat(&self, replica: &ReplicaInfo, ttl: Duration) -> Result<(), BackendError> {
        let (mut state, now) = self.state();
        state.replicas.insert(
            replica.id.clone(),
            Expiring::new(replica.url.clone(), ttl, now),
        );
        Ok(())
    }

    async fn retire(&self, replica: &str) -> Result<(), BackendError> {
        self.state().0.replicas.remove(replica);
        Ok(())
    }

    async fn replica_url(&self, replica: &str) -> Result<Option<String>, BackendError> {
        let (state, now) = self.state();
        Ok(state
            .replicas
            .get(replica)
            .filter(|r| r.alive(now))
            .map(|r| r.value.clone()))
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Lease>, BackendError> {
        let (mut state, now) = self.state();
        Ok(state.lease(key, now).cloned())
    }

    async fn acquire(
        &self,
        key: &SessionKey,
        replica: &str,
        expected: Option<&Lease>,
        ttl: Duration,
    ) -> Result<Acquired, BackendError> {
        let (mut state, now) = self.state();
        // Nobody holding the lease (never held, released, lapsed) is as good as the expected
        // holder: there is no one to take it from.
        if let Some(current) = state.lease(key, now) {
            if Some(current) != expected {
                return Ok(Acquired::HeldBy(current.clone()));
            }
        }
        state.last_token += 1;
        let lease = Lease {
            replica: replica.into(),
            token: state.last_token,
        };
        state
            .leases
            .insert(key.clone(), Expiring::new(lease.clone(), ttl, now));
        Ok(Acquired::Granted(lease))
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<(), BackendError> {
        let (mut state, now) = self.state();
        if state.check_lease(key, lease, now) {
            state.leases.remove(key);
        }
        Ok(())
    }
}

#[async_trait]
impl Bus for MemoryCluster {
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<usize, BackendError> {
        let mut topics = self.topics.lock();
        let mut received = 0;
        if let Some(senders) = topics.subscribers.get_mut(topic) {
            senders.retain(|tx| {
                tx.send(BusMessage {
                    topic: topic.to_string(),
                    payload: payload.clone(),
                })
                .is_ok()
            });
            received = senders.len();
            if senders.is_empty() {
                topics.subscribers.remove(topic);
            }
        }
        Ok(received)
    }

    async fn subscribe(
        &self,
        topics: &[String],
    ) -> Result<mpsc::UnboundedReceiver<BusMessage>, BackendError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = Instant::now();
        let mut all = self.topics.lock();
        // Subscriptions whose receiver is gone are dropped when their topic is published to,
        // and here for topics nobody publishes to any more.
        if all
            .last_prune
            .is_none_or(|t| now.duration_since(t) >= SWEEP_EVERY)
        {
            all.last_prune = Some(now);
            all.subscribers.retain(|_, senders| {
                senders.retain(|tx| !tx.is_closed());
                !senders.is_empty()
            });
        }
        let mut seen = Vec::with_capacity(topics.len());
        for topic in topics {
            if seen.contains(&topic) {
                continue;
            }
            seen.push(topic);
            all.subscribers
                .entry(topic.clone())
                .or_default()
                .push(tx.clone());
        }
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention() -> Retention {
        Retention {
            max_events: 10,
            max_age: Duration::from_millis(50),
        }
    }

    #[tokio::test]
    async fn expired_state_is_swept_without_being_asked_for() {
        let cluster = MemoryCluster::new(retention());
        let key = SessionKey::new("t", "s");
        let Acquired::Granted(lease) = cluster
            .acquire(&key, "r1", None, Duration::from_millis(50))
            .await
            .unwrap()
        else {
            panic!("a free lease is granted");
        };
        let event = StoredEvent {
            id: EventId {
                stream: StreamId(1),
                seq: 1,
            },
            data: Bytes::new(),
        };
        cluster.append(&key, &lease, &[event]).await.unwrap();
        cluster
            .save(
                &key,
                &lease,
                Bytes::from_static(b"x"),
                Duration::from_millis(50),
            )
            .await
            .unwrap();
        let short = SessionCaps::default();
        let opened = cluster.open_session(&key, None, short, Duration::from_millis(50));
        assert_eq!(opened.await, Ok(SessionAdmission::Opened));
        let taken = cluster.take("t", RateScope::Principal("p"), 6_000_000, 1);
        assert_eq!(taken.await, Ok(Quota::Allowed));
        {
            let mut state = cluster.state.lock();
            assert_eq!(state.logs.len(), 1);
            assert_eq!((state.live.len(), state.rates.len()), (1, 1));
            // Pretend the last sweep was long ago, and let everything lapse.
            state.last_sweep = Some(Instant::now() - SWEEP_EVERY);
        }
        tokio::time::sleep(Duration::from_millis(80)).await;
        cluster.replica_url("other").await.unwrap();
        let state = cluster.state.lock();
        assert!(state.logs.is_empty());
        assert!(state.snapshots.is_empty());
        assert!(state.leases.is_empty());
        assert!(state.live.is_empty() && state.rates.is_empty());
    }

    #[tokio::test]
    async fn closed_subscriptions_are_pruned() {
        let cluster = MemoryCluster::new(retention());
        let rx = cluster.subscribe(&["a".into(), "a".into()]).await.unwrap();
        assert_eq!(cluster.topics.lock().subscribers["a"].len(), 1);
        drop(rx);
        cluster.publish("a", Bytes::new()).await.unwrap();
        assert!(cluster.topics.lock().subscribers.is_empty());
    }
}
