//! Finding sessions: the one place the HTTP edge goes to start a session, find the one a request
//! names (here, on another live replica, or restored here from its snapshot when its owner is
//! gone) and hand it a message. Answers are domain values; the transport maps them to HTTP once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::{Handler, Message};

use super::actor::SessionActor;
use super::core::TransportKind;
use super::supervisor::{SessionEntry, TenantSessions};
use crate::cluster::{BackendError, Backends, Lease, ReplicaInfo, SessionKey};

/// This replica: who it is, the shared state it uses, whether it is draining.
pub struct Replica {
    pub info: ReplicaInfo,
    /// Shared by every session's outbox (one pointer each rather than a copy of five).
    pub backends: Arc<Backends>,
    /// How long a replica stays "alive" after its last heartbeat.
    pub liveness_ttl: Duration,
    /// The label new session ids start with (`cluster.session_route`), if any.
    pub session_route: Option<String>,
    draining: AtomicBool,
}

impl Replica {
    pub fn new(
        info: ReplicaInfo,
        backends: Backends,
        liveness_ttl: Duration,
        session_route: Option<String>,
    ) -> Self {
        Replica {
            info,
            backends: Arc::new(backends),
            liveness_ttl,
            session_route,
            draining: AtomicBool::new(false),
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// New sessions (and sessions restored from elsewhere) are refused while draining.
    pub(super) fn admit_new(&self) -> Result<(), SessionError> {
        if self.is_draining() {
            return Err(SessionError::Draining);
        }
        Ok(())
    }
}

/// Why a session could not be found, started or reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// No such session for this tenant and transport (never existed, ended, expired).
    #[error("session not found")]
    NotFound,
    /// The tenant's session cap is reached.
    #[error("this tenant's limit of {0} sessions is reached")]
    AtCapacity(usize),
    /// The principal's session cap (across all replicas) is reached.
    #[error("this principal's limit of {0} sessions is reached")]
    PrincipalAtCapacity(u32),
    /// This replica is shutting down: try another one.
    #[error("this server is shutting down")]
    Draining,
    /// Shared state cannot be reached now (or a race to be retried).
    #[error("session state unavailable: {0}")]
    Unavailable(String),
    /// Another replica took the session while we tried to.
    #[error("the session moved to another server")]
    Moved(Lease),
}

impl From<BackendError> for SessionError {
    fn from(e: BackendError) -> Self {
        SessionError::Unavailable(e.to_string())
    }
}

/// Where a session is.
pub enum Located {
    /// Held by this replica.
    Here(Arc<SessionEntry>),
    /// Held by another live replica, reachable at `url`.
    Elsewhere { url: String, lease: Lease },
}

/// Finds session `id` of `tenant` for `transport`: held here, held by another live replica, or
/// restored here when its owner is dead (or is an earlier process of this replica). A request
/// already forwarded by another replica (`forwarded`) is never forwarded again.
pub async fn locate(
    tenant: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    forwarded: bool,
) -> Result<Located, SessionError> {
    if let Some(entry) = local(tenant, id, transport)? {
        return Ok(Located::Here(entry));
    }
    // Boxed: the lease and restore round trips would otherwise size the future of every
    // request, most of which find their session here (each request's future is moved whole).
    Box::pin(elsewhere(tenant, id, transport, forwarded)).await
}

/// `locate` for a session not held here.
async fn elsewhere(
    tenant: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    forwarded: bool,
) -> Result<Located, SessionError> {
    if tenant.replica.is_draining() {
        return Err(SessionError::Draining);
    }
    let backends = &tenant.replica.backends;
    let key = SessionKey::new(tenant.tenant.clone(), id);
    let owner = backends.leases.owner(&key).await?;
    let expected = match owner {
        Some(lease) if lease.replica != tenant.replica.info.id => {
            match backends.leases.replica_url(&lease.replica).await? {
                Some(url) if !forwarded => return Ok(Located::Elsewhere { url, lease }),
                Some(_) => {
                    return Err(SessionError::Unavailable(
                        "the session is held by another server".into(),
                    ))
                }
                None => Some(lease),
            }
        }
        other => other,
    };
    restored(tenant, id, transport, expected).await
}

/// Whether the owner named by `lease` has let session `id` go: the lease is no longer its
/// (released when it drained, lapsed, or taken by another replica) or it has left the cluster.
/// A request it dropped unanswered can then be taken over even though something (its restarted
/// process) accepts connections at its address. Shared state out of reach: it has not.
pub async fn let_go(tenant: &TenantSessions, id: &str, lease: &Lease) -> bool {
    let leases = &tenant.replica.backends.leases;
    let key = SessionKey::new(tenant.tenant.clone(), id);
    match leases.owner(&key).await {
        Ok(current) if current.as_ref() != Some(lease) => true,
        Ok(_) => matches!(leases.replica_url(&lease.replica).await, Ok(None)),
        Err(_) => false,
    }
}

/// The owner at `lease` could not be reached: take the session over (fencing the old owner).
pub async fn take_over(
    tenant: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    lease: Lease,
) -> Result<Located, SessionError> {
    if let Some(entry) = local(tenant, id, transport)? {
        return Ok(Located::Here(entry));
    }
    tracing::warn!(tenant = %tenant.tenant, session = %id, owner = %lease.replica,
        "the session's owner is unreachable; taking the session over");
    restored(tenant, id, transport, Some(lease)).await
}

fn local(
    tenant: &TenantSessions,
    id: &str,
    transport: TransportKind,
) -> Result<Option<Arc<SessionEntry>>, SessionError> {
    match tenant.get(id) {
        Some(entry) if entry.transport != transport => Err(SessionError::NotFound),
        Some(entry) => {
            entry.activity.touch();
            Ok(Some(entry))
        }
        None => Ok(None),
    }
}

async fn restored(
    tenant: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    expected: Option<Lease>,
) -> Result<Located, SessionError> {
    match tenant.restore(id, expected).await {
        Ok(Some(entry)) if entry.transport == transport => {
            entry.activity.touch();
            Ok(Located::Here(entry))
        }
        Ok(_) => Err(SessionError::NotFound),
        // Another replica restored it first (a race): it is the owner now.
        Err(SessionError::Moved(lease)) => {
            match tenant
                .replica
                .backends
                .leases
                .replica_url(&lease.replica)
                .await?
            {
                Some(url) => Ok(Located::Elsewhere { url, lease }),
                None => Err(SessionError::Moved(lease)),
            }
        }
        Err(e) => Err(e),
    }
}

/// Hands `msg` to a session held here. If its actor just crashed, the restarted one is already
/// registered: the message goes to it (no waiting loop).
pub async fn deliver<M>(
    tenant: &TenantSessions,
    id: &str,
    entry: Arc<SessionEntry>,
    msg: M,
) -> Result<M::Result, SessionError>
where
    M: Message + Send + 'static,
    M::Result: Send,
    SessionActor: Handler<M>,
{
    let entry = if entry.addr.connected() {
        entry
    } else {
        tenant.get(id).ok_or(SessionError::NotFound)?
    };
    entry
        .addr
        .send(msg)
        .await
        .map_err(|_| SessionError::Unavailable("the session restarted; retry".into()))
}
