//! What a tenant's status and limits allow, checked on every request at the edge: suspension,
//! the request rate, and the tenant's own allowed origins. Refusals are domain values; the
//! transport picks their HTTP status.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use std::sync::Arc;

use crate::store::{TenantAuth, TenantLimits, TenantRecord, TenantStatus};

/// Why the tenant's policy refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRefusal {
    Suspended,
    RateLimited,
}

/// A token bucket: `capacity` requests, refilled at `capacity` per minute.
struct Bucket {
    capacity: f64,
    tokens: f64,
    last: Instant,
}

pub struct TenantPolicy {
    suspended: AtomicBool,
    /// Whether a rate limit is set (so unlimited tenants take no lock per request).
    rate_limited: AtomicBool,
    allowed_origins: RwLock<Vec<String>>,
    rate: Mutex<Option<Bucket>>,
    /// How requests are authorized (open, own authorization server, external issuer).
    auth: RwLock<Arc<TenantAuth>>,
    /// The tenant's cache hint for stateless results (`u64::MAX`: the server's).
    cache_ttl_ms: AtomicU64,
    /// Largest request body and largest single message (`usize::MAX`: the server's).
    max_body_bytes: AtomicUsize,
    max_message_bytes: AtomicUsize,
}

impl Default for TenantPolicy {
    fn default() -> Self {
        TenantPolicy {
            suspended: AtomicBool::new(false),
            rate_limited: AtomicBool::new(false),
            allowed_origins: RwLock::new(Vec::new()),
            rate: Mutex::new(None),
            auth: RwLock::new(Arc::new(TenantAuth::None)),
            cache_ttl_ms: AtomicU64::new(u64::MAX),
            max_body_bytes: AtomicUsize::new(usize::MAX),
            max_message_bytes: AtomicUsize::new(usize::MAX),
        }
    }
}

impl TenantPolicy {
    pub fn from_record(record: &TenantRecord) -> Self {
        let policy = TenantPolicy::default();
        policy.apply(record);
        policy
    }

    /// The tenant's auth settings.
    pub fn auth(&self) -> Arc<TenantAuth> {
        self.auth.read().clone()
    }

    /// The tenant's own `ttlMs` for stateless list and read results.
    pub fn cache_ttl_ms(&self) -> Option<u64> {
        let ttl = self.cache_ttl_ms.load(Ordering::Relaxed);
        (ttl != u64::MAX).then_some(ttl)
    }

    /// The largest request body this tenant takes, within the server's `limit`.
    pub fn max_body_bytes(&self, limit: usize) -> usize {
        self.max_body_bytes.load(Ordering::Relaxed).min(limit)
    }

    /// The largest single JSON-RPC message this tenant takes (`usize::MAX`: no own limit).
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes.load(Ordering::Relaxed)
    }

    /// Takes a tenant's current status, limits and auth settings.
    pub fn apply(&self, record: &TenantRecord) {
        let size = |limit: Option<u32>| limit.map_or(usize::MAX, |n| n as usize);
        self.max_body_bytes
            .store(size(record.limits.max_body_bytes), Ordering::Relaxed);
        self.max_message_bytes
            .store(size(record.limits.max_message_bytes), Ordering::Relaxed);
        self.cache_ttl_ms.store(
            record.limits.cache_ttl_ms.map_or(u64::MAX, u64::from),
            Ordering::Relaxed,
        );
        if **self.auth.read() != record.auth {
            *self.auth.write() = Arc::new(record.auth.clone());
        }
        self.suspended
            .store(record.status == TenantStatus::Suspended, Ordering::Release);
        let TenantLimits {
            requests_per_minute,
            allowed_origins,
            ..
        } = &record.limits;
        *self.allowed_origins.write() = allowed_origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        self.rate_limited
            .store(requests_per_minute.is_some(), Ordering::Release);
        let mut rate = self.rate.lock();
        *rate = requests_per_minute.map(|rpm| {
            let capacity = f64::from(rpm.max(1));
            let tokens = rate.as_ref().map_or(capacity, |b| b.tokens.min(capacity));
            Bucket {
                capacity,
                tokens,
                last: Instant::now(),
            }
        });
    }

    pub fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Acquire)
    }

    pub fn allows_origin(&self, origin: &str) -> bool {
        // (Only reached when a request carries an Origin the server-wide list does not allow.)
        self.allowed_origins.read().iter().any(|o| o == origin)
    }

    /// Admits one request: refused while suspended or over the rate.
    pub fn admit(&self) -> Result<(), PolicyRefusal> {
        if self.is_suspended() {
            return Err(PolicyRefusal::Suspended);
        }
        if !self.rate_limited.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut rate = self.rate.lock();
        if let Some(bucket) = rate.as_mut() {
            let now = Instant::now();
            let refill = now.duration_since(bucket.last).as_secs_f64() * bucket.capacity / 60.0;
            bucket.tokens = (bucket.tokens + refill).min(bucket.capacity);
            bucket.last = now;
            if bucket.tokens < 1.0 {
                return Err(PolicyRefusal::RateLimited);
            }
            bucket.tokens -= 1.0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: TenantStatus, rpm: Option<u32>) -> TenantRecord {
        TenantRecord {
            slug: "t".into(),
            display_name: "t".into(),
            status,
            catalogs: vec![],
            limits: TenantLimits {
                max_sessions: None,
                requests_per_minute: rpm,
                allowed_origins: vec!["https://App.example/".into()],
                ..TenantLimits::default()
            },
            auth: crate::store::TenantAuth::None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn suspension_rate_and_origins() {
        let p = TenantPolicy::from_record(&record(TenantStatus::Active, Some(2)));
        assert!(p.admit().is_ok() && p.admit().is_ok());
        assert_eq!(p.admit().unwrap_err(), PolicyRefusal::RateLimited);
        assert!(p.allows_origin("https://app.example"));
        p.apply(&record(TenantStatus::Suspended, None));
        assert_eq!(p.admit().unwrap_err(), PolicyRefusal::Suspended);
        p.apply(&record(TenantStatus::Active, None));
        for _ in 0..100 {
            assert!(p.admit().is_ok());
        }
    }
}
