//! What a tenant's status and limits allow, checked on every request at the edge: suspension,
//! the request rates (the tenant's and each principal's, counted across replicas by the cluster
//! quotas), and the tenant's own allowed origins. Refusals are domain values; the transport
//! picks their HTTP status.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use std::sync::Arc;

use crate::cluster::{Backoff, Quota, Quotas, RateScope};
use crate::store::{TenantAuth, TenantLimits, TenantRecord, TenantStatus};

/// Why the tenant's policy refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRefusal {
    Suspended,
    /// Over the tenant's request rate (or, with `principal`, over the caller's own).
    RateLimited {
        retry_after: Duration,
        principal: bool,
    },
}

/// After shared quotas could not be checked, how long the tenant's requests skip them (and
/// use this replica's own bucket) instead of waiting for an unreachable backend each time.
const QUOTA_BACKOFF: Duration = Duration::from_secs(1);
/// At most one "quotas unchecked" warning per 10 s.
static QUOTA_WARNING: crate::observe::telemetry::Throttled =
    crate::observe::telemetry::Throttled::every(10_000);

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
    /// The tenant's and each principal's requests a minute (0: no limit).
    requests_per_minute: AtomicU32,
    requests_per_minute_per_principal: AtomicU32,
    /// After the shared quotas failed: skipped for a while.
    quota_backoff: Backoff,
    allowed_origins: RwLock<Vec<String>>,
    rate: Mutex<Option<Bucket>>,
    /// How requests are authorized (open, own authorization server, external issuer).
    auth: RwLock<Arc<TenantAuth>>,
    /// The tenant's cache hint for stateless results (`u64::MAX`: the server's).
    cache_ttl_ms: AtomicU64,
    /// Largest request body and largest single message (`usize::MAX`: the server's).
    max_body_bytes: AtomicUsize,
    max_message_bytes: AtomicUsize,
    /// The `updated_at` of the record applied last, held while one is applied: an older record
    /// (two updates applied here out of order) is not applied over a newer one.
    applied: Mutex<i64>,
    /// The `created_at` of the tenant the applied record belongs to: a tenant deleted and
    /// created again under its slug is another tenant.
    created_at: AtomicI64,
}

impl Default for TenantPolicy {
    fn default() -> Self {
        TenantPolicy {
            suspended: AtomicBool::new(false),
            rate_limited: AtomicBool::new(false),
            requests_per_minute: AtomicU32::new(0),
            requests_per_minute_per_principal: AtomicU32::new(0),
            quota_backoff: Backoff::new(QUOTA_BACKOFF),
            allowed_origins: RwLock::new(Vec::new()),
            rate: Mutex::new(None),
            auth: RwLock::new(Arc::new(TenantAuth::None)),
            cache_ttl_ms: AtomicU64::new(u64::MAX),
            max_body_bytes: AtomicUsize::new(usize::MAX),
            max_message_bytes: AtomicUsize::new(usize::MAX),
            applied: Mutex::new(i64::MIN),
            created_at: AtomicI64::new(0),
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

    /// Whether the edge has nothing to await for this tenant's requests: no authentication and
    /// no request rate to count.
    pub fn is_open_and_unmetered(&self) -> bool {
        self.requests_per_minute.load(Ordering::Relaxed) == 0
            && matches!(**self.auth.read(), TenantAuth::None)
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

    /// When the tenant whose record was applied was created.
    pub fn created_at(&self) -> i64 {
        self.created_at.load(Ordering::Relaxed)
    }

    /// When the record last applied was written (`updated_at`).
    pub fn applied_at(&self) -> i64 {
        *self.applied.lock()
    }

    /// Whether a record newer than one last written at `updated_at` has been applied.
    pub fn has_newer_than(&self, updated_at: i64) -> bool {
        *self.applied.lock() > updated_at
    }

    /// Takes a tenant's current status, limits and auth settings, unless a newer record of the
    /// tenant was applied already.
    pub fn apply(&self, record: &TenantRecord) {
        let mut applied = self.applied.lock();
        if *applied > record.updated_at {
            return;
        }
        *applied = record.updated_at;
        self.created_at.store(record.created_at, Ordering::Relaxed);
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
            requests_per_minute_per_principal,
            allowed_origins,
            ..
        } = &record.limits;
        self.requests_per_minute
            .store(requests_per_minute.unwrap_or(0), Ordering::Relaxed);
        self.requests_per_minute_per_principal.store(
            requests_per_minute_per_principal.unwrap_or(0),
            Ordering::Relaxed,
        );
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

    /// Admits one request: refused while suspended.
    pub fn admit(&self) -> Result<(), PolicyRefusal> {
        if self.is_suspended() {
            return Err(PolicyRefusal::Suspended);
        }
        Ok(())
    }

    /// Whether each principal's request rate is limited.
    pub fn limits_principals(&self) -> bool {
        self.requests_per_minute_per_principal
            .load(Ordering::Relaxed)
            != 0
    }

    /// Counts `cost` requests (a JSON-RPC batch counts its messages) against the tenant's rate
    /// (`principal: None`) or against the rate of one of its principals (`Some`: its
    /// [`crate::auth::quota_id`]), across all replicas.
    /// Without such a limit it returns at once (no shared state is asked). When the shared
    /// quotas cannot be reached the request is let in (MCP traffic goes on through a Redis
    /// outage), counted in `mcp_harbor_quota_unchecked`; the tenant's rate then falls back to
    /// this replica's own bucket.
    pub async fn within_rate(
        &self,
        quotas: &dyn Quotas,
        tenant: &str,
        principal: Option<&str>,
        cost: u32,
    ) -> Result<(), PolicyRefusal> {
        let (limit, scope) = match principal {
            None => (&self.requests_per_minute, RateScope::Tenant),
            Some(p) => (
                &self.requests_per_minute_per_principal,
                RateScope::Principal(p),
            ),
        };
        let per_minute = limit.load(Ordering::Relaxed);
        if per_minute == 0 {
            return Ok(());
        }
        if self.quota_backoff.ready() {
            match quotas.take(tenant, scope, per_minute, cost).await {
                Ok(Quota::Allowed) => return Ok(()),
                Ok(Quota::Exceeded { retry_after }) => {
                    return Err(PolicyRefusal::RateLimited {
                        retry_after,
                        principal: principal.is_some(),
                    })
                }
                Err(e) => {
                    self.quota_backoff.failed();
                    if QUOTA_WARNING.ready() {
                        tracing::warn!(error = %e, "request rates unchecked across replicas: shared state unreachable");
                    }
                }
            }
        }
        crate::observe::metrics::global().quota_unchecked(tenant);
        match principal {
            None => self.admit_locally(cost),
            Some(_) => Ok(()),
        }
    }

    /// [`Self::within_rate`] for `more` messages of a request whose first was counted already (a
    /// JSON-RPC batch): the whole request counts at most the rate's burst, so a batch longer
    /// than the rate is let in once the bucket is full (and its `Retry-After` holds), not never.
    pub async fn within_rate_after_first(
        &self,
        quotas: &dyn Quotas,
        tenant: &str,
        principal: Option<&str>,
        more: u32,
    ) -> Result<(), PolicyRefusal> {
        let limit = match principal {
            None => &self.requests_per_minute,
            Some(_) => &self.requests_per_minute_per_principal,
        };
        let more = more.min(limit.load(Ordering::Relaxed).saturating_sub(1));
        if more == 0 {
            return Ok(());
        }
        self.within_rate(quotas, tenant, principal, more).await
    }

    /// This replica's own token bucket for the tenant's rate (while shared quotas are
    /// unreachable).
    fn admit_locally(&self, cost: u32) -> Result<(), PolicyRefusal> {
        if !self.rate_limited.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut rate = self.rate.lock();
        if let Some(bucket) = rate.as_mut() {
            let now = Instant::now();
            let per_second = bucket.capacity / 60.0;
            let refill = now.duration_since(bucket.last).as_secs_f64() * per_second;
            bucket.tokens = (bucket.tokens + refill).min(bucket.capacity);
            bucket.last = now;
            // As the shared rate: a cost above the burst counts as the whole burst.
            let cost = f64::from(cost.max(1)).min(bucket.capacity);
            if bucket.tokens < cost {
                return Err(PolicyRefusal::RateLimited {
                    retry_after: Duration::from_secs_f64((cost - bucket.tokens) / per_second),
                    principal: false,
                });
            }
            bucket.tokens -= cost;
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
    fn suspension_local_rate_and_origins() {
        let p = TenantPolicy::from_record(&record(TenantStatus::Active, Some(2)));
        assert!(p.admit_locally(1).is_ok() && p.admit_locally(1).is_ok());
        let Err(PolicyRefusal::RateLimited { retry_after, .. }) = p.admit_locally(1) else {
            panic!("the third request of a 2/minute bucket is refused");
        };
        assert!(retry_after > Duration::from_secs(25) && retry_after <= Duration::from_secs(30));
        // A batch's cost at once: two of a fresh 3/minute bucket, then one, then none; a cost
        // above the bucket counts as the whole bucket.
        let p3 = TenantPolicy::from_record(&record(TenantStatus::Active, Some(3)));
        assert!(p3.admit_locally(2).is_ok() && p3.admit_locally(1).is_ok());
        assert!(p3.admit_locally(1).is_err());
        let p3 = TenantPolicy::from_record(&record(TenantStatus::Active, Some(3)));
        assert!(p3.admit_locally(100).is_ok() && p3.admit_locally(1).is_err());
        assert!(p.allows_origin("https://app.example"));
        p.apply(&record(TenantStatus::Suspended, None));
        assert_eq!(p.admit().unwrap_err(), PolicyRefusal::Suspended);
        p.apply(&record(TenantStatus::Active, None));
        for _ in 0..100 {
            assert!(p.admit().is_ok() && p.admit_locally(1).is_ok());
        }
    }

    #[tokio::test]
    async fn rates_are_counted_by_the_shared_quotas_per_tenant_and_per_principal() {
        let quotas = crate::cluster::memory::MemoryCluster::new(crate::cluster::Retention {
            max_events: 1,
            max_age: Duration::from_secs(1),
        });
        let mut r = record(TenantStatus::Active, Some(3));
        r.limits.requests_per_minute_per_principal = Some(1);
        let p = TenantPolicy::from_record(&r);
        for _ in 0..3 {
            assert_eq!(p.within_rate(&*quotas, "t", None, 1).await, Ok(()));
        }
        let refused = p.within_rate(&*quotas, "t", None, 1).await;
        assert!(matches!(
            refused,
            Err(PolicyRefusal::RateLimited { principal: false, retry_after })
                if retry_after <= Duration::from_secs(20)
        ));
        // Each principal has its own rate; another tenant's is untouched.
        assert_eq!(p.within_rate(&*quotas, "t", Some("a"), 1).await, Ok(()));
        assert!(matches!(
            p.within_rate(&*quotas, "t", Some("a"), 1).await,
            Err(PolicyRefusal::RateLimited {
                principal: true,
                ..
            })
        ));
        assert_eq!(p.within_rate(&*quotas, "t", Some("b"), 1).await, Ok(()));
        assert_eq!(p.within_rate(&*quotas, "u", None, 1).await, Ok(()));
        // Without limits nothing is counted.
        p.apply(&record(TenantStatus::Active, None));
        for _ in 0..10 {
            assert_eq!(p.within_rate(&*quotas, "t", Some("a"), 1).await, Ok(()));
        }
    }
}
