//! Attempts counted per key (a user, a client address, a tenant) in fixed windows, across
//! replicas: failed sign-ins and client registrations.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::memory::Attempts;
use crate::cluster::{BackendError, Backoff, Quota, Quotas};

/// Attempts per key in windows of a fixed length, counted across replicas (the cluster's
/// quotas: Redis when configured, so N replicas do not allow N times the attempts); while those
/// cannot be reached, on this replica alone.
pub struct AttemptLimiter {
    shared: Arc<dyn Quotas>,
    local: Attempts,
    /// After the shared counters failed: left alone for a while.
    shared_backoff: Backoff,
    window: Duration,
}

impl AttemptLimiter {
    pub fn new(shared: Arc<dyn Quotas>, window: Duration) -> Self {
        AttemptLimiter {
            shared,
            local: Attempts::default(),
            shared_backoff: Backoff::new(SHARED_BACKOFF),
            window,
        }
    }

    /// Counts an attempt under each of `keys` unless one of them holds its limit in its current
    /// window (then none is counted; the error is how long until that window ends). Counted
    /// before what it guards runs, so attempts sent at once cannot all pass before any is
    /// counted; one that should not count gives it back ([`Self::forgive`]).
    pub async fn attempt(&self, tenant: &str, keys: &[(&str, u32)]) -> Result<(), Duration> {
        let verdict = |q: Quota| match q {
            Quota::Allowed => Ok(()),
            Quota::Exceeded { retry_after } => Err(retry_after),
        };
        if self.shared_backoff.ready() {
            match self.shared.count_attempt(tenant, keys, self.window).await {
                Ok(q) => return verdict(q),
                Err(e) => self.shared_failed(&e),
            }
        }
        verdict(self.local.count(tenant, keys, self.window))
    }

    fn shared_failed(&self, e: &BackendError) {
        self.shared_backoff.failed();
        if SHARED_UNREACHABLE.ready() {
            tracing::warn!(error = %e, "sign-in and registration attempts counted on this replica only: the shared quotas are unreachable");
        }
    }

    /// An attempt counted under `key` succeeded (or was never checked): it does not count;
    /// `all`: none counted under it does.
    pub async fn forgive(&self, tenant: &str, key: &str, all: bool) {
        if self.shared_backoff.ready() {
            if let Err(e) = self.shared.forgive_attempt(tenant, key, all).await {
                self.shared_failed(&e);
            }
        }
        self.local.forgive(tenant, key, all);
    }
}

/// How long attempts count on this replica alone after the shared counters failed.
const SHARED_BACKOFF: Duration = Duration::from_secs(10);
/// At most one warning per 10 s that the shared counters are unreachable.
static SHARED_UNREACHABLE: crate::observe::telemetry::Throttled =
    crate::observe::telemetry::Throttled::every(10_000);
