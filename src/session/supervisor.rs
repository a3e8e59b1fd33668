//! `TenantSupervisor`: one actor per tenant that starts, indexes and stops the tenant's session
//! actors. It enforces the per-tenant session cap and the idle timeout, relays tenant-wide
//! changes to every session, and restarts a crashed session actor from its snapshot.
//!
//! HTTP handlers find sessions through `SessionIndex` (read-only for them; only the supervisor
//! writes it), so a request to a live session costs no extra actor hop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_rt::ArbiterHandle;
use parking_lot::RwLock;

use super::actor::{ExpireIfIdle, SessionActor, Terminate};
use super::core::{Session, SessionSettings, SessionSnapshot, TransportKind};
use crate::catalog::CatalogHandle;
use crate::eventlog::EventLog;

/// Milliseconds since the process started (cheap monotonic clock for activity stamps).
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// When a session last saw its client.
#[derive(Debug, Default)]
pub struct Activity {
    last_active_ms: AtomicU64,
}

impl Activity {
    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Ordering::Relaxed);
    }
    fn idle_for_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
    }
}

#[derive(Clone)]
pub struct SessionEntry {
    pub addr: Addr<SessionActor>,
    pub activity: Arc<Activity>,
    pub transport: TransportKind,
    instance: u64,
    arbiter: ArbiterHandle,
}

/// The tenant's live sessions by id, and what it takes to start one. Shared by the supervisor
/// (which expires, restarts and stops sessions) and the HTTP edge (which finds sessions and
/// starts new ones on its own worker thread, under the same cap, with no actor hop).
pub struct TenantSessions {
    tenant: Arc<str>,
    index: RwLock<HashMap<Arc<str>, SessionEntry>>,
    catalog: CatalogHandle,
    log: Arc<dyn EventLog>,
    settings: Arc<SessionSettings>,
    limits: SessionLimits,
    /// The cap in force (the tenant's own, or the server default); changes while running.
    max_sessions: AtomicUsize,
    next_instance: AtomicU64,
}

impl TenantSessions {
    pub fn new(
        tenant: Arc<str>,
        catalog: CatalogHandle,
        log: Arc<dyn EventLog>,
        settings: Arc<SessionSettings>,
        limits: SessionLimits,
    ) -> Self {
        TenantSessions {
            tenant,
            index: RwLock::new(HashMap::new()),
            catalog,
            log,
            settings,
            max_sessions: AtomicUsize::new(limits.max_sessions),
            limits,
            next_instance: AtomicU64::new(0),
        }
    }

    pub fn get(&self, id: &str) -> Option<SessionEntry> {
        self.index.read().get(id).cloned()
    }

    /// Sets the session cap (`None`: the server default). Live sessions over it are kept.
    pub fn set_max_sessions(&self, max: Option<usize>) {
        self.max_sessions
            .store(max.unwrap_or(self.limits.max_sessions), Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.index.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts a session actor on the calling thread's arbiter, unless the tenant's cap is reached.
    pub fn start(
        &self,
        transport: TransportKind,
        supervisor: Addr<TenantSupervisor>,
    ) -> Result<(Arc<str>, Addr<SessionActor>), AtCapacity> {
        let id: Arc<str> = new_session_id().into();
        let core = Session::new(
            id.clone(),
            self.tenant.clone(),
            transport,
            self.catalog.clone(),
            self.log.clone(),
            self.settings.clone(),
        );
        let ctx = Context::new();
        let addr = ctx.address();
        let instance = self.next_instance.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut index = self.index.write();
            let max = self.max_sessions.load(Ordering::Relaxed);
            if index.len() >= max {
                return Err(AtCapacity(max));
            }
            let activity = Arc::new(Activity::default());
            activity.touch();
            let entry = SessionEntry {
                addr: addr.clone(),
                activity,
                transport,
                instance,
                arbiter: actix_rt::Arbiter::current(),
            };
            index.insert(id.clone(), entry);
        }
        ctx.run(SessionActor::new(core, instance, supervisor));
        Ok((id, addr))
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

    fn sweep_idle(&mut self) {
        let now = now_ms();
        let idle_ms = self.sessions.limits.idle_timeout.as_millis() as u64;
        for entry in self.sessions.index.read().values() {
            if entry.activity.idle_for_ms(now) >= idle_ms {
                entry.addr.do_send(ExpireIfIdle);
            }
        }
    }
}

impl Actor for TenantSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = (self.sessions.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(30));
        ctx.run_interval(every, |me, _| me.sweep_idle());
    }
}

/// The session cap was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtCapacity(pub usize);

/// A cryptographically random session id: 128 bits from the OS RNG, as 32 hex characters.
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct SessionEnded {
    pub id: Arc<str>,
    pub instance: u64,
}

impl Handler<SessionEnded> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SessionEnded, _: &mut Context<Self>) {
        let mut index = self.sessions.index.write();
        if index
            .get(&msg.id)
            .is_some_and(|e| e.instance == msg.instance)
        {
            index.remove(&msg.id);
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct SessionCrashed {
    pub id: Arc<str>,
    pub instance: u64,
    pub snapshot: SessionSnapshot,
}

impl Handler<SessionCrashed> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SessionCrashed, ctx: &mut Context<Self>) {
        let sessions = &self.sessions;
        let Some(entry) = sessions.get(&msg.id).filter(|e| e.instance == msg.instance) else {
            return;
        };
        let core = Session::restore(
            &msg.snapshot,
            sessions.catalog.clone(),
            sessions.log.clone(),
            sessions.settings.clone(),
        );
        let instance = sessions.next_instance.fetch_add(1, Ordering::Relaxed) + 1;
        let me = ctx.address();
        let addr = SessionActor::start_in_arbiter(&entry.arbiter, move |_| {
            SessionActor::new(core, instance, me)
        });
        tracing::warn!(tenant = %sessions.tenant, session = %msg.id, "session actor restarted");
        sessions.index.write().insert(
            msg.id,
            SessionEntry {
                addr,
                instance,
                ..entry
            },
        );
    }
}

/// A change every session of the tenant should hear about.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum TenantBroadcast {
    ResourceUpdated(String),
    ListChanged(&'static str),
}

impl Handler<TenantBroadcast> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, msg: TenantBroadcast, _: &mut Context<Self>) {
        for entry in self.sessions.index.read().values() {
            entry.addr.do_send(msg.clone());
        }
    }
}

/// Ends every session of the tenant (shutdown, tenant removal).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAll;

impl Handler<StopAll> for TenantSupervisor {
    type Result = ();
    fn handle(&mut self, _: StopAll, _: &mut Context<Self>) {
        for entry in self.sessions.index.write().drain().map(|(_, e)| e) {
            entry.addr.do_send(Terminate);
        }
    }
}
