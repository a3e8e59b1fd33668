//! A warning let through at most once per interval (a dependency down must not flood the log).

use std::sync::atomic::{AtomicU64, Ordering};

/// A warning that repeats while its cause lasts (a dependency down), let through at most once
/// per `every_ms` (so a flood of requests cannot flood the log).
pub struct Throttled {
    last_ms: AtomicU64,
    every_ms: u64,
}

impl Throttled {
    pub const fn every(every_ms: u64) -> Self {
        Throttled {
            last_ms: AtomicU64::new(0),
            every_ms,
        }
    }

    /// Whether to log now (then the next one waits `every_ms`).
    pub fn ready(&self) -> bool {
        let now = crate::store::now_millis().max(1) as u64;
        let last = self.last_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < self.every_ms {
            return false;
        }
        self.last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}
