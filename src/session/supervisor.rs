//! `TenantSupervisor`: one actor per tenant that starts, indexes and stops the tenant's session
//! actors. It enforces the per-tenant session cap and the idle timeout, relays tenant-wide
//! changes to every session, and restarts a crashed session actor from its snapshot.
//!
//! HTTP handlers find sessions through `SessionIndex` (read-only for them; only the supervisor
//! writes it), so a request to a live session costs no extra actor hop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The tenant's live sessions by id.
#[derive(Clone, Default)]
pub struct SessionIndex(Arc<RwLock<HashMap<Arc<str>, SessionEntry>>>);

impl SessionIndex {
    pub fn get(&self, id: &str) -> Option<SessionEntry> {
        self.0.read().get(id).cloned()
    }
    pub fn len(&self) -> usize {
        self.0.read().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Clone)]
pub struct SessionLimits {
    pub max_sessions: usize,
    pub idle_timeout: Duration,
}

pub struct TenantSupervisor {
    tenant: Arc<str>,
    index: SessionIndex,
    catalog: CatalogHandle,
    log: Arc<dyn EventLog>,
    settings: Arc<SessionSettings>,
    limits: SessionLimits,
    next_instance: u64,
}

impl TenantSupervisor {
    pub fn new(
        tenant: Arc<str>,
        index: SessionIndex,
        catalog: CatalogHandle,
        log: Arc<dyn EventLog>,
        settings: Arc<SessionSettings>,
        limits: SessionLimits,
    ) -> Self {
        TenantSupervisor {
            tenant,
            index,
            catalog,
            log,
            settings,
            limits,
            next_instance: 0,
        }
    }

    fn spawn(
        &mut self,
        core: Session,
        arbiter: &ArbiterHandle,
        me: Addr<Self>,
    ) -> (u64, Addr<SessionActor>) {
        self.next_instance += 1;
        let instance = self.next_instance;
        let addr =
            SessionActor::start_in_arbiter(arbiter, move |_| SessionActor::new(core, instance, me));
        (instance, addr)
    }

    fn sweep_idle(&mut self) {
        let now = now_ms();
        let idle_ms = self.limits.idle_timeout.as_millis() as u64;
        for entry in self.index.0.read().values() {
            if entry.activity.idle_for_ms(now) >= idle_ms {
                entry.addr.do_send(ExpireIfIdle);
            }
        }
    }
}

impl Actor for TenantSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = (self.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(30));
        ctx.run_interval(every, |me, _| me.sweep_idle());
    }
}

/// The session cap was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtCapacity(pub usize);

/// Starts a session actor on `arbiter` (the caller's worker thread).
#[derive(Message)]
#[rtype(result = "Result<(Arc<str>, Addr<SessionActor>), AtCapacity>")]
pub struct StartSession {
    pub transport: TransportKind,
    pub arbiter: ArbiterHandle,
}

impl Handler<StartSession> for TenantSupervisor {
    type Result = Result<(Arc<str>, Addr<SessionActor>), AtCapacity>;
    fn handle(&mut self, msg: StartSession, ctx: &mut Context<Self>) -> Self::Result {
        if self.index.len() >= self.limits.max_sessions {
            return Err(AtCapacity(self.limits.max_sessions));
        }
        let id: Arc<str> = new_session_id().into();
        let core = Session::new(
            id.clone(),
            self.tenant.clone(),
            msg.transport,
            self.catalog.clone(),
            self.log.clone(),
            self.settings.clone(),
        );
        let (instance, addr) = self.spawn(core, &msg.arbiter, ctx.address());
        let activity = Arc::new(Activity::default());
        activity.touch();
        self.index.0.write().insert(
            id.clone(),
            SessionEntry {
                addr: addr.clone(),
                activity,
                transport: msg.transport,
                instance,
                arbiter: msg.arbiter,
            },
        );
        Ok((id, addr))
    }
}

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
        let mut index = self.index.0.write();
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
        let Some(entry) = self
            .index
            .get(&msg.id)
            .filter(|e| e.instance == msg.instance)
        else {
            return;
        };
        let core = Session::restore(
            &msg.snapshot,
            self.catalog.clone(),
            self.log.clone(),
            self.settings.clone(),
        );
        let (instance, addr) = self.spawn(core, &entry.arbiter, ctx.address());
        tracing::warn!(tenant = %self.tenant, session = %msg.id, "session actor restarted");
        self.index.0.write().insert(
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
        for entry in self.index.0.read().values() {
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
        for entry in self.index.0.write().drain().map(|(_, e)| e) {
            entry.addr.do_send(Terminate);
        }
    }
}
