//! The per-session ordered outbox: everything a session writes to shared state goes through one
//! FIFO worker, so the session never waits on the network to keep handling messages, and order
//! is kept: an SSE event is appended to the event log *before* it is written to its connection,
//! snapshots are saved in the order they were taken, and a resumption replays exactly the events
//! queued before it (later ones reach the resumed connection live).
//!
//! Writes carry the session's lease; a `Fenced` refusal means another replica took the session
//! over, and the session is told to stop (`on_fenced`). While the backend is unreachable the
//! worker retries with backoff and delivers nothing it could not log.
//!
//! The worker exists only while there is work: it stops after [`IDLE`] without any, and the
//! next write starts a new one (an idle session holds no task and no channel). A new worker
//! waits for its predecessor to finish, so writes never overtake each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::channel::{StreamItem, StreamSink};
use crate::cluster::{BackendError, Backends, EventId, Lease, SessionKey, StoredEvent};

/// An event to log, then hand to its connection (when one is attached).
pub struct PendingEvent {
    pub event: StoredEvent,
    pub item: StreamItem,
    pub sink: Option<StreamSink>,
}

/// What the worker does, in order. (Kept small: a channel allocates room for 32 at once.)
pub enum OutboxItem {
    /// Log the event, then hand it to its connection.
    Event(Box<PendingEvent>),
    /// Save this snapshot (a newer one queued behind it makes it moot).
    Snapshot(Bytes),
    /// Replay the events of `after.stream` that follow `after` (up to seq `upto` when the stream
    /// is live here: later ones reach `sink` as they are logged), then close `sink` unless the
    /// stream is live.
    Resume {
        after: EventId,
        upto: Option<u64>,
        sink: StreamSink,
    },
    /// Answered once everything queued before it is done.
    Flush(oneshot::Sender<()>),
    /// The session ended: forget its events, snapshot and lease.
    Remove,
    /// The session moves to another replica: give the lease up (after the queued writes).
    Release,
}

/// What the copies of an outbox (and their worker) share, in one allocation.
#[derive(Default)]
struct Shared {
    /// The running worker's queue. The worker empties it when it stops, so an idle session
    /// holds no channel (a tokio channel keeps ~2 KB allocated for as long as any sender lives).
    tx: parking_lot::Mutex<Option<mpsc::UnboundedSender<OutboxItem>>>,
    /// Held by the running worker: a new one starts only when the previous one is done.
    turn: tokio::sync::Mutex<()>,
    /// Set once a write was fenced: nothing more is written for this copy of the session.
    fenced: AtomicBool,
}

impl Shared {
    /// A write was refused under this copy's lease: another replica took the session over.
    fn fence(&self, key: &SessionKey) {
        tracing::warn!(session = %key.session, tenant = %key.tenant,
            "session taken over by another replica; this copy stops");
        self.fenced.store(true, Ordering::Release);
    }
}

/// The sending side, owned by the session. The worker starts with the first item.
pub struct Outbox {
    key: SessionKey,
    lease: Lease,
    backends: Arc<Backends>,
    ttl: Duration,
    on_fenced: Arc<dyn Fn() + Send + Sync>,
    /// The worker's queue, its turn and the fenced flag, shared with forks.
    shared: Arc<Shared>,
}

/// How long a worker waits for more work before it stops.
pub const IDLE: Duration = Duration::from_millis(250);

impl Outbox {
    pub fn new(
        key: SessionKey,
        lease: Lease,
        backends: Arc<Backends>,
        ttl: Duration,
        on_fenced: Arc<dyn Fn() + Send + Sync>,
    ) -> Outbox {
        Outbox {
            key,
            lease,
            backends,
            ttl,
            on_fenced,
            shared: Arc::default(),
        }
    }

    /// Whether its snapshots are read back by anyone. Only another replica restores a session
    /// from its snapshot (shared backends); in-process, a crashed actor restarts from its live
    /// core and nothing outlives the process, so a saved snapshot would only cost time and room.
    pub fn keeps_snapshots(&self) -> bool {
        self.backends.shared
    }

    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    /// The ownership epoch: stream ids allocated under this lease start with it.
    pub fn epoch(&self) -> u64 {
        self.lease.token
    }

    /// Replaces the callback run when the session is fenced (set by the actor once it runs).
    pub fn set_on_fenced(&mut self, f: Arc<dyn Fn() + Send + Sync>) {
        self.on_fenced = f;
    }

    /// A handle for a restarted copy of the same session (same lease): it shares this one's
    /// worker, so what both queue stays in order.
    pub fn fork(&self) -> Outbox {
        Outbox {
            key: self.key.clone(),
            lease: self.lease.clone(),
            backends: self.backends.clone(),
            ttl: self.ttl,
            on_fenced: self.on_fenced.clone(),
            shared: self.shared.clone(),
        }
    }

    pub fn push(&mut self, item: OutboxItem) {
        if self.shared.fenced.load(Ordering::Acquire) {
            // Another replica owns the session: nothing may be written; flushes are answered.
            if let OutboxItem::Flush(done) = item {
                let _ = done.send(());
            }
            return;
        }
        let mut slot = self.shared.tx.lock();
        let item = match slot.as_ref() {
            Some(tx) => match tx.send(item) {
                Ok(()) => return,
                // The worker stopped (idle, or fenced): start another.
                Err(mpsc::error::SendError(item)) => item,
            },
            None => item,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let worker = Worker {
            key: self.key.clone(),
            lease: self.lease.clone(),
            backends: self.backends.clone(),
            ttl: self.ttl,
            on_fenced: self.on_fenced.clone(),
            shared: self.shared.clone(),
        };
        // No runtime: the process is tearing down (the runtime dropping its tasks); nothing can
        // be written any more, so nothing is started.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(session = %self.key.session, "outbox write after the runtime stopped; dropped");
            return;
        };
        runtime.spawn(worker.run(rx));
        let _ = tx.send(item);
        *slot = Some(tx);
    }

    /// Resolves once everything queued so far is written.
    pub fn flush(&mut self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.push(OutboxItem::Flush(tx));
        rx
    }
}

struct Worker {
    key: SessionKey,
    lease: Lease,
    backends: Arc<Backends>,
    ttl: Duration,
    on_fenced: Arc<dyn Fn() + Send + Sync>,
    shared: Arc<Shared>,
}

/// Backoff between retries while the backend is unreachable.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long an ended session's shared state is retried for removal.
const REMOVE_PATIENCE: Duration = Duration::from_secs(10);

impl Worker {
    async fn run(mut self, rx: mpsc::UnboundedReceiver<OutboxItem>) {
        let shared = self.shared.clone();
        let _turn = shared.turn.lock().await;
        self.work(rx).await;
        // Stopped with its queue closed: the session's sender goes too (unless a newer worker's
        // is in the slot already), so nothing of the channel stays allocated while idle.
        let mut slot = shared.tx.lock();
        if slot.as_ref().is_some_and(|tx| tx.is_closed()) {
            *slot = None;
        }
    }

    async fn work(&mut self, mut rx: mpsc::UnboundedReceiver<OutboxItem>) {
        let mut batch: Vec<OutboxItem> = Vec::new();
        loop {
            let first = match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some(item)) => item,
                Ok(None) => return,
                Err(_) => {
                    // Idle: refuse new items (the session starts another worker, which waits for
                    // this one), then finish what raced in before the refusal.
                    rx.close();
                    while let Some(item) = rx.recv().await {
                        batch.push(item);
                    }
                    if !batch.is_empty() {
                        Box::pin(self.process(std::mem::take(&mut batch))).await;
                    }
                    return;
                }
            };
            batch.push(first);
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
                if batch.len() >= 256 {
                    break;
                }
            }
            // Boxed: the write path's state lives only while there is work, not in every
            // session's idle worker.
            Box::pin(self.process(std::mem::take(&mut batch))).await;
            if self.is_fenced() {
                (self.on_fenced)();
                // Answer flushes without writing, so nobody waits forever.
                rx.close();
                while let Some(item) = rx.recv().await {
                    if let OutboxItem::Flush(done) = item {
                        let _ = done.send(());
                    }
                }
                return;
            }
        }
    }

    fn is_fenced(&self) -> bool {
        self.shared.fenced.load(Ordering::Acquire)
    }

    async fn process(&mut self, items: Vec<OutboxItem>) {
        let mut events: Vec<(StoredEvent, StreamItem, Option<StreamSink>)> = Vec::new();
        let mut iter = items.into_iter().peekable();
        while let Some(item) = iter.next() {
            match item {
                OutboxItem::Event(pending) => {
                    let PendingEvent { event, item, sink } = *pending;
                    events.push((event, item, sink));
                    // Gather consecutive events into one append.
                    if matches!(iter.peek(), Some(OutboxItem::Event(_))) {
                        continue;
                    }
                    self.write_events(std::mem::take(&mut events)).await;
                }
                OutboxItem::Snapshot(bytes) => {
                    // A newer snapshot right behind makes this one moot.
                    if matches!(iter.peek(), Some(OutboxItem::Snapshot(_))) {
                        continue;
                    }
                    self.save_snapshot(bytes).await;
                }
                OutboxItem::Resume { after, upto, sink } => self.resume(after, upto, sink).await,
                OutboxItem::Flush(done) => {
                    let _ = done.send(());
                }
                OutboxItem::Remove => self.remove().await,
                OutboxItem::Release => {
                    let _ = self.backends.leases.release(&self.key, &self.lease).await;
                }
            }
            if self.is_fenced() {
                return;
            }
        }
    }

    /// Retries `op` while the backend is unreachable; `None` when fenced.
    async fn retrying<T, F, Fut>(&mut self, what: &str, mut op: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, BackendError>>,
    {
        let mut delay = RETRY_MIN;
        let mut warned = false;
        loop {
            match op().await {
                Ok(v) => {
                    if warned {
                        tracing::info!(session = %self.key.session, "{what}: shared state reachable again");
                    }
                    return Some(v);
                }
                Err(BackendError::Fenced) => {
                    self.shared.fence(&self.key);
                    return None;
                }
                Err(e) => {
                    if !warned {
                        tracing::warn!(session = %self.key.session, error = %e, "{what} failed; retrying");
                        warned = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RETRY_MAX);
                }
            }
        }
    }

    async fn write_events(&mut self, events: Vec<(StoredEvent, StreamItem, Option<StreamSink>)>) {
        let stored: Vec<StoredEvent> = events.iter().map(|(e, _, _)| e.clone()).collect();
        let (log, key, lease) = (
            self.backends.events.clone(),
            self.key.clone(),
            self.lease.clone(),
        );
        let appended = self
            .retrying("event log append", || {
                let (log, key, lease, stored) = (&log, &key, &lease, &stored);
                async move { log.append(key, lease, stored).await }
            })
            .await;
        if appended.is_none() {
            return;
        }
        crate::observe::metrics::global().event_log_appended(&self.key.tenant, events.len() as u64);
        for (_, item, sink) in events {
            if let Some(sink) = sink {
                let _ = sink.send(item);
            }
        }
    }

    async fn save_snapshot(&mut self, bytes: Bytes) {
        let (store, key, lease, ttl) = (
            self.backends.snapshots.clone(),
            self.key.clone(),
            self.lease.clone(),
            self.ttl,
        );
        self.retrying("snapshot save", || {
            let (store, key, lease, bytes) = (&store, &key, &lease, bytes.clone());
            async move { store.save(key, lease, bytes, ttl).await }
        })
        .await;
    }

    async fn resume(&mut self, after: EventId, upto: Option<u64>, sink: StreamSink) {
        let (log, key) = (self.backends.events.clone(), self.key.clone());
        let replay = self
            .retrying("event log replay", || {
                let (log, key) = (&log, &key);
                async move { log.replay_after(key, after).await }
            })
            .await;
        crate::observe::metrics::global().event_log_replayed(
            &self.key.tenant,
            match &replay {
                None => "failed",
                Some(None) => "unknown",
                Some(Some(_)) => "replayed",
            },
        );
        match replay.flatten() {
            None => {
                let _ = sink.send(StreamItem::UnknownEvent(after));
            }
            Some(events) => {
                let _ = sink.send(StreamItem::Resumed);
                for e in events {
                    if upto.is_some_and(|u| e.id.seq > u) {
                        break;
                    }
                    let item = if e.data.is_empty() {
                        continue;
                    } else {
                        StreamItem::Event {
                            id: e.id,
                            data: e.data,
                        }
                    };
                    let _ = sink.send_replayed(item);
                }
            }
        }
        // A stream that is not live here ends after its replay (dropping `sink` closes it).
        drop(sink);
    }

    /// Removes the session's shared state, retried for up to [`REMOVE_PATIENCE`] (the DELETE
    /// that asked waits for it): left behind, the snapshot and lease would let the session be
    /// found and restored after its client was told it ended.
    async fn remove(&mut self) {
        let backends = self.backends.clone();
        let key = self.key.clone();
        let deadline = tokio::time::Instant::now() + REMOVE_PATIENCE;
        let mut delay = RETRY_MIN;
        loop {
            let removed = async {
                backends.events.remove_session(&key).await?;
                backends.snapshots.delete(&key).await
            }
            .await;
            match removed {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() + delay < deadline => {
                    tracing::warn!(session = %key.session, error = %e, "removing an ended session's shared state failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RETRY_MAX);
                }
                Err(e) => {
                    tracing::error!(session = %key.session, error = %e, "could not remove an ended session's shared state; it expires after the idle timeout");
                    return;
                }
            }
        }
    }
}
