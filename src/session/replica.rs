//! This replica as sessions see it (who it is, the shared state it uses, whether it is
//! draining), and why a session could not be found, started or reached.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{BackendError, Backends, EventId, Lease, ReplicaInfo};

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
    /// A resumption named an event the session's log does not know.
    #[error("unknown Last-Event-ID {0}: nothing to resume")]
    UnknownEvent(EventId),
    /// The replica holding the session did not answer a relayed request (and still accepts
    /// connections, so it was not taken over).
    #[error("the server holding this session did not answer")]
    OwnerFailed,
}

impl From<BackendError> for SessionError {
    fn from(e: BackendError) -> Self {
        SessionError::Unavailable(e.to_string())
    }
}
