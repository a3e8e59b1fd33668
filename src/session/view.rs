//! What a session publishes for requests answered without its actor (`direct`): its scope once
//! initialized (fixed from then on), how many of its requests run, whether the client sent
//! `notifications/initialized`; and the port of a request that never talks to the client.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::protocol::{ProtocolVersion, RequestId, RpcError};
use crate::request::SessionPort;

/// What a session publishes for the transport: its scope once initialized (fixed from then on)
/// and how many of its requests are running.
#[derive(Default)]
pub struct SessionView {
    pub(super) scope: OnceLock<PublishedScope>,
    pub(super) running: AtomicUsize,
    /// The client sent `notifications/initialized` (kept in the session's snapshots). The one
    /// copy of the flag: set by the session, a restored snapshot or [`acknowledge`].
    initialized: AtomicBool,
}

pub(super) struct PublishedScope {
    pub(super) session: Arc<str>,
    pub(super) version: ProtocolVersion,
    pub(super) client_capabilities: Arc<Value>,
    pub(super) principal: Option<Arc<Value>>,
}

impl SessionView {
    /// Called by the session when it is initialized (or restored initialized).
    pub(super) fn publish(
        &self,
        session: &Arc<str>,
        version: ProtocolVersion,
        client_capabilities: &Arc<Value>,
        principal: Option<&Arc<Value>>,
    ) {
        let _ = self.scope.set(PublishedScope {
            session: session.clone(),
            version,
            client_capabilities: client_capabilities.clone(),
            principal: principal.cloned(),
        });
    }

    /// Called by the session after each message it handled.
    pub(super) fn set_running(&self, n: usize) {
        self.running.store(n, Ordering::Relaxed);
    }

    /// Records `notifications/initialized` (from the actor, this module or a restored snapshot).
    pub(super) fn set_initialized(&self) {
        self.initialized.store(true, Ordering::Relaxed);
    }

    pub(super) fn initialized(&self) -> bool {
        self.initialized.load(Ordering::Relaxed)
    }
}

/// The port of a request that never talks to the client (answered without the actor: that is
/// what makes it eligible; or the opening `initialize`): there is nothing to send, and a
/// server→client request is refused.
struct NoPort;

impl SessionPort for NoPort {
    fn notify(&self, _: &RequestId, method: &'static str, _: Value) {
        tracing::debug!(
            method,
            "notification of a directly answered request dropped"
        );
    }
    fn request(
        &self,
        _: &RequestId,
        _: &'static str,
        _: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        let _ = reply.send(Err(RpcError::internal(
            "this request cannot ask the client anything",
        )));
    }
    fn close_stream(&self, _: &RequestId) {}
    fn resource_updated(&self, _: &str) {}
    fn list_changed(&self, _: &'static str) {}
}

pub(super) static NO_PORT: LazyLock<Arc<dyn SessionPort>> = LazyLock::new(|| Arc::new(NoPort));

/// The port of a request that never talks to the client (also the opening `initialize`).
pub(super) fn no_port() -> &'static Arc<dyn SessionPort> {
    &NO_PORT
}
