//! `TenantSupervisor`: one actor per tenant per replica that watches the tenant's session actors:
//! it expires idle sessions, keeps the shared state of active ones alive, relays tenant-wide
//! changes to every session, and ends or hands over all of them (tenant removal, drain).
//!
//! `TenantSessions` is the tenant's index of the sessions this replica holds and what it takes
//! to start, restore (after a takeover) and restart (after a crash) one. Everything outside
//! `session` reaches it through the front door (`session::Sessions`).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_rt::ArbiterHandle;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use super::actor::{
    ExpireIfIdle, HandOver, IsRunning, Recover, SessionActor, SessionHost, TenantBroadcast,
    Terminate,
};
use super::core::{Session, SessionSettings, SessionSnapshot, TransportKind};
use super::id::new_session_id;
use super::outbox::Outbox;
use super::replica::{Replica, SessionError};
use super::Reply;
use crate::catalog::CatalogHandle;
use crate::cluster::{Acquired, Lease, SessionAdmission, SessionCaps, SessionKey, StreamId};

/// Milliseconds since the process started (cheap monotonic clock for activity stamps).
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// When a session last saw its client.
#[derive(Debug, Default)]
pub struct Activity {
    last_active_ms: AtomicU64,
    /// The activity stamp when shared state was last kept alive.
    kept_ms: AtomicU64,
}

impl Activity {
    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Ordering::Relaxed);
    }
    fn idle_for_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
    }
}

impl SessionEntry {
    /// Which start of the session's actor this is (a restart after a crash is another).
    pub fn start(&self) -> u64 {
        self.instance
    }
}

#[derive(Clone)]
pub struct SessionEntry {
    pub addr: Addr<SessionActor>,
    pub activity: Arc<Activity>,
    pub transport: TransportKind,
    /// The binding of the principal that opened the session (protected tenants).
    pub owner: Option<Arc<str>>,
    /// What the session publishes for requests answered without its actor (`direct`).
    pub view: Arc<super::view::SessionView>,
    /// When this replica started holding the session (for `mcp.server.session.duration`).
    started: Instant,
    instance: u64,
    arbiter: ArbiterHandle,
    lease: Lease,
}

/// Changes a listener may fall behind by before it is told to re-read everything.
const LISTENER_BACKLOG: usize = 256;

/// Called when a tool changed a resource or a list: every session and listener of the tenant (on
/// every replica) concerned must hear.
pub type AnnounceHook = Arc<dyn Fn(TenantBroadcast) + Send + Sync>;

/// The tenant's sessions on this replica, and what it takes to start one.
pub struct TenantSessions {
    pub tenant: Arc<str>,
    /// Entries behind an `Arc`: a request's lookup clones one pointer, not the entry's
    /// address, handles and lease; and the map moves 8-byte values when it grows.
    index: RwLock<crate::FastMap<Arc<str>, Arc<SessionEntry>>>,
    /// Sessions being restored here, so concurrent requests wait for one restore.
    restoring: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    catalog: CatalogHandle,
    pub replica: Arc<Replica>,
    settings: Arc<SessionSettings>,
    limits: SessionLimits,
    /// The cap in force on this replica (the tenant's own, or the server default).
    max_sessions: AtomicUsize,
    /// The tenant's own caps, counted across all replicas; change while running.
    caps: RwLock<SessionCaps>,
    next_instance: AtomicU64,
    on_change: OnceLock<AnnounceHook>,
    supervisor: OnceLock<Addr<TenantSupervisor>>,
    /// Stateless listeners (`subscriptions/listen`) hear every change sessions hear. Dropped
    /// when the tenant stops being served here (`StopAll`): that ends their streams.
    listeners: RwLock<Option<tokio::sync::broadcast::Sender<TenantBroadcast>>>,
}

impl TenantSessions {
    pub fn new(
        tenant: Arc<str>,
        catalog: CatalogHandle,
        replica: Arc<Replica>,
        settings: Arc<SessionSettings>,
        limits: SessionLimits,
    ) -> Self {
        TenantSessions {
            tenant,
            index: RwLock::new(crate::FastMap::default()),
            restoring: Mutex::new(HashMap::new()),
            catalog,
            replica,
            settings,
            max_sessions: AtomicUsize::new(limits.max_sessions),
            caps: RwLock::new(SessionCaps::default()),
            limits,
            next_instance: AtomicU64::new(0),
            on_change: OnceLock::new(),
            supervisor: OnceLock::new(),
            listeners: RwLock::new(None),
        }
    }

    /// Starts the tenant's supervisor (once).
    pub fn start_supervisor(self: &Arc<Self>) -> Addr<TenantSupervisor> {
        self.supervisor
            .get_or_init(|| TenantSupervisor::new(self.clone()).start())
            .clone()
    }

    /// Where changes made by tools are announced (set once by the tenant directory).
    pub fn set_announce_hook(&self, hook: AnnounceHook) {
        let _ = self.on_change.set(hook);
    }

    pub fn resource_updated(&self, uri: &str) {
        self.announce(TenantBroadcast::ResourceUpdated(uri.to_string()));
    }

    pub fn list_changed(&self, list: &'static str) {
        self.announce(TenantBroadcast::ListChanged(list));
    }

    /// A change a tool made: to the hook (every replica), or without one to this replica.
    fn announce(&self, change: TenantBroadcast) {
        match self.on_change.get() {
            Some(hook) => hook(change),
            None => self.broadcast(change),
        }
    }

    /// Tells every session and listener of the tenant on this replica.
    pub fn broadcast(&self, msg: TenantBroadcast) {
        for entry in self.index.read().values() {
            entry.addr.do_send(msg.clone());
        }
        if let Some(listeners) = self.listeners.read().as_ref() {
            if listeners.receiver_count() > 0 {
                let _ = listeners.send(msg);
            }
        }
    }

    /// Changes from now on, for a stateless listener.
    pub fn listen(&self) -> tokio::sync::broadcast::Receiver<TenantBroadcast> {
        self.listeners
            .write()
            .get_or_insert_with(|| tokio::sync::broadcast::channel(LISTENER_BACKLOG).0)
            .subscribe()
    }

    /// `Err(max)` when this replica holds more of the tenant's stateless listeners than the
    /// tenant may have sessions: each holds a stream as a session's GET stream does, and an open
    /// tenant's would otherwise be limited by nothing.
    pub fn listeners_within_cap(&self) -> Result<(), usize> {
        let max = self.max_sessions.load(Ordering::Relaxed);
        let open = self
            .listeners
            .read()
            .as_ref()
            .map_or(0, |l| l.receiver_count());
        if open > max {
            return Err(max);
        }
        Ok(())
    }

    /// Ends every listener's stream (they hear the channel close).
    fn close_listeners(&self) {
        self.listeners.write().take();
    }

    /// The server's identity and settings its sessions share.
    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    /// The tenant's catalog (what direct answers read).
    pub(super) fn catalog(&self) -> &CatalogHandle {
        &self.catalog
    }

    pub fn get(&self, id: &str) -> Option<Arc<SessionEntry>> {
        self.index.read().get(id).cloned()
    }

    /// Sets the tenant's session caps (`per_tenant` `None`: the server default, on each
    /// replica). Live sessions over them are kept.
    pub fn set_caps(&self, caps: SessionCaps) {
        let local = caps
            .per_tenant
            .map_or(self.limits.max_sessions, |m| m as usize);
        self.max_sessions.store(local, Ordering::Relaxed);
        *self.caps.write() = caps;
    }

    pub fn len(&self) -> usize {
        self.index.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long shared state of an untouched session lives: the idle timeout and a margin (a
    /// minute, or the idle timeout when that is shorter) for the sweep to renew it.
    fn ttl(&self) -> Duration {
        let idle = self.limits.idle_timeout;
        idle + idle.min(Duration::from_secs(60))
    }

    fn key(&self, id: &str) -> SessionKey {
        SessionKey::new(self.tenant.clone(), id)
    }

    fn outbox(self: &Arc<Self>, key: SessionKey, lease: Lease) -> Outbox {
        Outbox::new(
            key,
            lease,
            self.replica.backends.clone(),
            self.ttl(),
            Arc::new(|| {}),
        )
    }

    fn at_capacity(&self) -> Result<(), SessionError> {
        let max = self.max_sessions.load(Ordering::Relaxed);
        if self.index.read().len() >= max {
            return Err(SessionError::AtCapacity(max));
        }
        Ok(())
    }

    /// Starts a new session on the calling thread's arbiter, unless the tenant's cap is reached
    /// or this replica is draining. Its lease is taken first (no round trip in-process).
    pub async fn start(
        self: &Arc<Self>,
        transport: TransportKind,
        principal: Option<Arc<Value>>,
    ) -> Result<(Arc<str>, Addr<SessionActor>), SessionError> {
        let (id, lease, core) = self.admit(transport, principal).await?;
        let addr = self.launch_new(&id, core, transport, lease).await?;
        Ok((id, addr))
    }

    /// Opens a Streamable HTTP session with its `initialize`: the new session's core answers it
    /// here, on the HTTP worker, before the session has an actor, and only a session it
    /// initialized is started (kept: its id is returned). That saves an opening the hop through
    /// the mailbox, and a refused `initialize` the actor; the session is the same as one
    /// started by [`TenantSessions::start`] that was then posted its `initialize`.
    pub async fn open(
        self: &Arc<Self>,
        principal: Option<Arc<Value>>,
        initialize: crate::protocol::Request,
    ) -> Result<(Reply, Option<Arc<str>>), SessionError> {
        let transport = TransportKind::Streamable;
        let (id, lease, mut core) = self.admit(transport, principal).await?;
        let Ok(reply) = catch_unwind(AssertUnwindSafe(|| core.open_with(initialize))) else {
            tracing::error!(session = %id, "opening a session panicked");
            core.shutdown();
            return Err(SessionError::Unavailable(
                "the session could not be opened; retry".into(),
            ));
        };
        // A refused initialize (bad params) leaves no session behind.
        if core.version().is_none() || !matches!(reply, Reply::Json(_)) {
            core.shutdown();
            return Ok((reply, None));
        }
        self.launch_new(&id, core, transport, lease).await?;
        Ok((reply, Some(id)))
    }

    /// Admits a new session (replica not draining, tenant under its caps, its lease taken) and
    /// builds its core.
    async fn admit(
        self: &Arc<Self>,
        transport: TransportKind,
        principal: Option<Arc<Value>>,
    ) -> Result<(Arc<str>, Lease, Session), SessionError> {
        self.replica.admit_new()?;
        self.at_capacity()?;
        let id: Arc<str> = new_session_id(self.replica.session_route.as_deref()).into();
        let key = self.key(&id);
        let owner = principal
            .as_deref()
            .and_then(crate::auth::binding_of_value)
            .map(|binding| crate::auth::quota_id(&binding));
        let caps = *self.caps.read();
        let quotas = &self.replica.backends.quotas;
        // An uncapped tenant's sessions are not counted as they open: no shared-state round
        // trip on every initialize.
        let admission = if caps.is_unlimited() {
            SessionAdmission::Opened
        } else {
            quotas
                .open_session(&key, owner.as_deref(), caps, self.ttl())
                .await?
        };
        match admission {
            SessionAdmission::Opened => {}
            SessionAdmission::TenantFull => {
                return Err(SessionError::AtCapacity(
                    caps.per_tenant.unwrap_or_default() as usize,
                ))
            }
            SessionAdmission::PrincipalFull => {
                return Err(SessionError::PrincipalAtCapacity(
                    caps.per_principal.unwrap_or_default(),
                ))
            }
        }
        // From here on, a failure forgets the session again (it would count until it expired).
        let acquired = self
            .replica
            .backends
            .leases
            .acquire(&key, &self.replica.info.id, None, self.ttl())
            .await;
        let lease = match acquired {
            Ok(Acquired::Granted(lease)) => lease,
            Ok(Acquired::HeldBy(_)) => {
                return Err(SessionError::Unavailable(
                    "session id collision; retry".into(),
                ))
            }
            Err(e) => {
                self.forget(&key).await;
                return Err(e.into());
            }
        };
        let core = Session::new(
            id.clone(),
            self.tenant.clone(),
            transport,
            self.catalog.clone(),
            self.outbox(key.clone(), lease.clone()),
            self.settings.clone(),
        )
        .with_principal(principal);
        Ok((id, lease, core))
    }

    /// Starts the actor of a session [`TenantSessions::admit`] admitted; a failure forgets it.
    async fn launch_new(
        self: &Arc<Self>,
        id: &Arc<str>,
        core: Session,
        transport: TransportKind,
        lease: Lease,
    ) -> Result<Addr<SessionActor>, SessionError> {
        match self.launch(id.clone(), core, transport, lease, None) {
            Ok(addr) => Ok(addr),
            Err(e) => {
                self.forget(&self.key(id)).await;
                Err(e)
            }
        }
    }

    /// Forgets a session that was admitted but not started: it would count under the tenant's
    /// caps until it expired.
    async fn forget(&self, key: &SessionKey) {
        let _ = self.replica.backends.snapshots.delete(key).await;
    }

    /// Starts an actor for `core` (on `arbiter`, or this thread's) and registers it.
    fn launch(
        self: &Arc<Self>,
        id: Arc<str>,
        core: Session,
        transport: TransportKind,
        lease: Lease,
        arbiter: Option<ArbiterHandle>,
    ) -> Result<Addr<SessionActor>, SessionError> {
        let restart = arbiter.is_some();
        if !restart && !self.index.read().contains_key(&id) {
            self.at_capacity()?;
        }
        let instance = self.next_instance.fetch_add(1, Ordering::Relaxed) + 1;
        let owner = core.owner();
        let view = core.view();
        let actor = SessionActor::new(core, instance, self.clone());
        let (addr, arbiter) = match arbiter {
            Some(arbiter) => (
                SessionActor::start_in_arbiter(&arbiter, move |_| actor),
                arbiter,
            ),
            None => (actor.start(), actix_rt::Arbiter::current()),
        };
        let activity = Arc::new(Activity::default());
        activity.touch();
        let mut index = self.index.write();
        let started = index.get(&id).map_or_else(Instant::now, |e| e.started);
        let replaced = index.insert(
            id,
            Arc::new(SessionEntry {
                addr: addr.clone(),
                activity,
                transport,
                owner,
                view,
                started,
                instance,
                arbiter,
                lease,
            }),
        );
        if replaced.is_none() {
            crate::observe::metrics::global().session_started(&self.tenant);
        }
        Ok(addr)
    }

    /// Restores a session this replica does not hold: takes its lease over from `expected` (its
    /// previous holder, `None` when nobody holds it), loads its snapshot, continues its streams'
    /// numbering from the event log and starts it here. `Ok(None)` when there is no such
    /// session (never existed, ended, expired).
    pub async fn restore(
        self: &Arc<Self>,
        id: &str,
        expected: Option<Lease>,
    ) -> Result<Option<Arc<SessionEntry>>, SessionError> {
        let gate = self
            .restoring
            .lock()
            .entry(id.into())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
            .clone();
        let _turn = gate.lock().await;
        let result = self.restore_once(id, expected).await;
        self.restoring.lock().remove(id);
        result
    }

    async fn restore_once(
        self: &Arc<Self>,
        id: &str,
        expected: Option<Lease>,
    ) -> Result<Option<Arc<SessionEntry>>, SessionError> {
        if let Some(entry) = self.get(id) {
            return Ok(Some(entry));
        }
        self.replica.admit_new()?;
        let key = self.key(id);
        let backends = &self.replica.backends;
        let Some(bytes) = backends.snapshots.load(&key).await? else {
            return Ok(None);
        };
        let snapshot: SessionSnapshot = serde_json::from_slice(&bytes)
            .map_err(|e| SessionError::Unavailable(format!("unreadable snapshot: {e}")))?;
        if snapshot.tenant != *self.tenant || snapshot.id != id {
            return Ok(None);
        }
        if snapshot.transport == TransportKind::Legacy {
            // A legacy session is its one SSE connection: it cannot move.
            return Ok(None);
        }
        let lease = match backends
            .leases
            .acquire(&key, &self.replica.info.id, expected.as_ref(), self.ttl())
            .await?
        {
            Acquired::Granted(lease) => lease,
            Acquired::HeldBy(other) => return Err(SessionError::Moved(other)),
        };
        // Whatever stops the restore from here leaves the lease free again: the session is not
        // left without an owner for the lease's lifetime.
        let started = self
            .start_restored(id, &key, &lease, expected.as_ref())
            .await;
        if !matches!(started, Ok(Some(_))) {
            let _ = backends.leases.release(&key, &lease).await;
        }
        started
    }

    /// Starts the session restored under `lease`, from its snapshot read again under it: the
    /// previous holder's writes are fenced off from here on, so this is its last word. What was
    /// read before may be older (it went on saving until the lease moved: a subscription, the
    /// next server request id), or the session may have ended meanwhile (deleted: it must not
    /// come back). `Ok(None)`: no snapshot any more.
    async fn start_restored(
        self: &Arc<Self>,
        id: &str,
        key: &SessionKey,
        lease: &Lease,
        expected: Option<&Lease>,
    ) -> Result<Option<Arc<SessionEntry>>, SessionError> {
        let backends = &self.replica.backends;
        let Some(bytes) = backends.snapshots.load(key).await? else {
            return Ok(None);
        };
        let snapshot: SessionSnapshot = serde_json::from_slice(&bytes)
            .map_err(|e| SessionError::Unavailable(format!("unreadable snapshot: {e}")))?;
        let mut last_seqs = HashMap::new();
        for stream in snapshot.live_streams() {
            let last = backends.events.last_seq(key, stream).await?.unwrap_or(0);
            last_seqs.insert(stream, last);
        }
        let core = Session::restore(
            &snapshot,
            false,
            &last_seqs,
            self.catalog.clone(),
            self.outbox(key.clone(), lease.clone()),
            self.settings.clone(),
        );
        tracing::info!(tenant = %self.tenant, session = %id, token = lease.token,
            previous = ?expected.map(|l| l.replica.to_string()), "session taken over");
        crate::observe::metrics::global().session_taken_over(&self.tenant);
        let addr = self.launch(id.into(), core, snapshot.transport, lease.clone(), None)?;
        addr.do_send(Recover { last_seqs });
        Ok(self.get(id))
    }

    /// Restarts a crashed session actor from its snapshot, under the same id and lease, in a new
    /// actor registered before the old one's mailbox closes (so a request retried at once finds
    /// it). `false`: the session cannot go on and must end: a legacy session is its one SSE
    /// stream, which ends with the crashed actor (its messages would be answered where nobody
    /// listens, and nobody can resume a legacy stream).
    pub(super) fn restart(
        self: &Arc<Self>,
        instance: u64,
        snapshot: SessionSnapshot,
        seqs: HashMap<StreamId, u64>,
        outbox: Outbox,
    ) -> bool {
        let Some(entry) = self.get(&snapshot.id).filter(|e| e.instance == instance) else {
            return true;
        };
        if entry.transport == TransportKind::Legacy {
            return false;
        }
        let core = Session::restore(
            &snapshot,
            true,
            &seqs,
            self.catalog.clone(),
            outbox,
            self.settings.clone(),
        );
        let id: Arc<str> = snapshot.id.as_str().into();
        match self.launch(
            id,
            core,
            entry.transport,
            entry.lease.clone(),
            Some(entry.arbiter.clone()),
        ) {
            Ok(addr) => {
                addr.do_send(Recover { last_seqs: seqs });
                tracing::warn!(tenant = %self.tenant, session = %snapshot.id, "session actor restarted");
            }
            Err(e) => {
                tracing::error!(tenant = %self.tenant, session = %snapshot.id, error = %e, "session actor could not be restarted")
            }
        }
        true
    }

    /// An actor stopped: forget it (unless a newer instance replaced it).
    pub(super) fn ended(&self, id: &str, instance: u64) {
        let mut index = self.index.write();
        if index.get(id).is_some_and(|e| e.instance == instance) {
            if let Some(entry) = index.remove(id) {
                crate::observe::metrics::global()
                    .session_ended(&self.tenant, entry.started.elapsed());
            }
        }
    }

    fn entries(&self) -> Vec<Arc<SessionEntry>> {
        self.index.read().values().cloned().collect()
    }
}

impl SessionHost for TenantSessions {
    fn ended(&self, id: &str, instance: u64) {
        TenantSessions::ended(self, id, instance);
    }
    fn restart(
        self: Arc<Self>,
        instance: u64,
        snapshot: SessionSnapshot,
        seqs: HashMap<StreamId, u64>,
        outbox: Outbox,
    ) -> bool {
        TenantSessions::restart(&self, instance, snapshot, seqs, outbox)
    }
    fn resource_updated(&self, uri: &str) {
        TenantSessions::resource_updated(self, uri);
    }
    fn list_changed(&self, list: &'static str) {
        TenantSessions::list_changed(self, list);
    }
}

#[derive(Debug, Clone)]
pub struct SessionLimits {
    pub max_sessions: usize,
    pub idle_timeout: Duration,
}

pub struct TenantSupervisor {
    sessions: Arc<TenantSessions>,
}

impl TenantSupervisor {
    pub fn new(sessions: Arc<TenantSessions>) -> Self {
        TenantSupervisor { sessions }
    }

    /// Ends idle sessions, and keeps the shared state (snapshot, lease) of the others alive, in
    /// one batch: those active since the last sweep, and those idle for longer than the timeout
    /// that stay because they are busy (a connected stream, a running call): without requests
    /// they must keep their lease too, or their next event is fenced off and the session lost.
    fn sweep(&mut self, ctx: &mut Context<Self>) {
        let now = now_ms();
        let idle_ms = self.sessions.limits.idle_timeout.as_millis() as u64;
        let mut active = Vec::new();
        let mut asked = Vec::new();
        for (id, entry) in self.sessions.index.read().iter() {
            if entry.activity.idle_for_ms(now) >= idle_ms {
                asked.push((self.sessions.key(id), entry.addr.send(ExpireIfIdle)));
            }
            let last = entry.activity.last_active_ms.load(Ordering::Relaxed);
            if entry.activity.kept_ms.swap(last, Ordering::Relaxed) != last {
                active.push(self.sessions.key(id));
            }
        }
        if active.is_empty() && asked.is_empty() {
            return;
        }
        let snapshots = self.sessions.replica.backends.snapshots.clone();
        let ttl = self.sessions.ttl();
        // Two batches: the active sessions' at once, the busy ones' once they have answered
        // (all asked at once, each given a moment: a stuck actor delays nobody else).
        let keep = move |keys: Vec<SessionKey>| {
            let snapshots = snapshots.clone();
            async move {
                if keys.is_empty() {
                    return;
                }
                if let Err(e) = snapshots.touch(&keys, ttl).await {
                    tracing::warn!(error = %e, "could not keep session state alive");
                }
            }
        };
        ctx.spawn(keep(active).into_actor(self));
        if asked.is_empty() {
            return;
        }
        let answers =
            futures_util::future::join_all(asked.into_iter().map(|(key, stays)| async move {
                let stays = tokio::time::timeout(ASK_BUSY_WAIT, stays).await;
                matches!(stays, Ok(Ok(true))).then_some(key)
            }));
        ctx.spawn(
            async move {
                let busy = answers.await.into_iter().flatten().collect();
                keep(busy).await;
            }
            .into_actor(self),
        );
    }
}

/// How long the sweep waits for a session asked to end whether it stays (busy).
const ASK_BUSY_WAIT: Duration = Duration::from_secs(5);

impl Actor for TenantSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = (self.sessions.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(30));
        ctx.run_interval(every, |me, ctx| me.sweep(ctx));
    }
}

/// The lists whose changes a tenant's sessions and listeners are told about.
pub const LISTS: [&str; 3] = ["tools", "prompts", "resources"];

/// `name` as one of [`LISTS`].
pub fn list_named(name: &str) -> Option<&'static str> {
    LISTS.into_iter().find(|list| *list == name)
}

impl Handler<TenantBroadcast> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, msg: TenantBroadcast, _: &mut Context<Self>) {
        self.sessions.broadcast(msg);
    }
}

/// Ends every session and `subscriptions/listen` stream of the tenant (tenant removal or
/// suspension).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAll;

impl Handler<StopAll> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, _: StopAll, _: &mut Context<Self>) {
        for entry in self.sessions.index.write().drain().map(|(_, e)| e) {
            entry.addr.do_send(Terminate);
        }
        self.sessions.close_listeners();
    }
}

/// Drain: waits (until `deadline`) for running requests to finish, then hands every session
/// over (clients told to reconnect, snapshots written, leases released).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HandOverAll {
    pub deadline: tokio::time::Instant,
}

impl Handler<HandOverAll> for TenantSupervisor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: HandOverAll, _: &mut Context<Self>) -> Self::Result {
        let sessions = self.sessions.clone();
        Box::pin(async move {
            loop {
                let mut running = false;
                for entry in sessions.entries() {
                    if entry.addr.send(IsRunning).await.unwrap_or(false) {
                        running = true;
                        break;
                    }
                }
                if !running || tokio::time::Instant::now() >= msg.deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let handovers = sessions
                .entries()
                .into_iter()
                .map(|e| e.addr.send(HandOver));
            futures_util::future::join_all(handovers).await;
        })
    }
}
