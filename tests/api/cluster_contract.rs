//! The cluster contract (event log, snapshots, leases, bus, quotas), run against every backend: in-process
//! always, Redis whenever reachable (`MCP_HARBOR_TEST_REDIS_URL`, default
//! `redis://127.0.0.1:6379`). With `MCP_HARBOR_REQUIRE_REDIS=1` (CI) an unreachable Redis fails
//! the Redis tests instead of skipping them. Each Redis test keeps its keys under a fresh prefix
//! and deletes them at the end.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_harbor::cluster::{
    Acquired, BackendError, Backends, BusMessage, EventId, Lease, Quota, RateScope, ReplicaInfo,
    Retention, SessionAdmission, SessionCaps, SessionKey, StoredEvent, StreamId,
};
use tokio::sync::mpsc;

use crate::helpers::redis_proxy::{Mode, Proxy};

const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// No contract may take longer than this (they are designed to take well under 3 s).
const TEST_DEADLINE: Duration = Duration::from_secs(10);
/// How long a message may take to arrive on the bus.
const DELIVERY: Duration = Duration::from_secs(2);
const LONG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Backends under test
// ---------------------------------------------------------------------------------------------

/// Which backend a contract runs against.
#[derive(Clone)]
enum Backend {
    InProcess,
    Redis(String),
}

/// The Redis URL to test against, or `None` when Redis is not reachable and not required.
async fn redis_url() -> Option<String> {
    let url =
        std::env::var("MCP_HARBOR_TEST_REDIS_URL").unwrap_or_else(|_| DEFAULT_REDIS_URL.into());
    let required = std::env::var("MCP_HARBOR_REQUIRE_REDIS").is_ok_and(|v| v == "1" || v == "true");
    match ping(&url).await {
        Ok(()) => Some(url),
        Err(e) if !required => {
            eprintln!("skipping the Redis backend: {url} is not reachable ({e})");
            None
        }
        Err(e) => {
            panic!("Redis is required (MCP_HARBOR_REQUIRE_REDIS) but {url} is not reachable: {e}")
        }
    }
}

async fn ping(url: &str) -> Result<(), String> {
    let attempt = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}

/// One test's backends; on Redis, under a key prefix of its own.
struct Fixture {
    backends: Backends,
    redis: Option<(String, String)>,
}

impl Fixture {
    async fn new(backend: &Backend, retention: Retention) -> Fixture {
        match backend {
            Backend::InProcess => Fixture {
                backends: Backends::in_process(retention),
                redis: None,
            },
            Backend::Redis(url) => {
                let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
                let backends = Backends::redis(url, &prefix, retention)
                    .await
                    .expect("Redis backends connect");
                assert!(backends.shared);
                Fixture {
                    backends,
                    redis: Some((url.clone(), prefix)),
                }
            }
        }
    }

    /// Deletes the test's Redis keys.
    async fn cleanup(self) {
        if let Some((url, prefix)) = self.redis {
            delete_prefix(&url, &prefix).await;
        }
    }
}

async fn delete_prefix(url: &str, prefix: &str) {
    let client = redis::Client::open(url).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection for cleanup");
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("scan");
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(keys)
                .exec_async(&mut conn)
                .await
                .expect("delete test keys");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_DEADLINE, test)
        .await
        .expect("the test finishes in time");
}

/// One `#[actix_rt::test]` per contract and backend.
macro_rules! contract_tests {
    ($($contract:ident => $in_process:ident, $redis:ident;)*) => {$(
        #[actix_rt::test]
        async fn $in_process() {
            bounded($contract(Backend::InProcess)).await;
        }

        #[actix_rt::test]
        async fn $redis() {
            if let Some(url) = redis_url().await {
                bounded($contract(Backend::Redis(url))).await;
            }
        }
    )*};
}

contract_tests! {
    contract_event_log => event_log_in_process, event_log_redis;
    contract_retention => retention_in_process, retention_redis;
    contract_fencing => fencing_in_process, fencing_redis;
    contract_leases => leases_in_process, leases_redis;
    contract_replicas => replicas_in_process, replicas_redis;
    contract_snapshots => snapshots_in_process, snapshots_redis;
    contract_bus => bus_in_process, bus_redis;
    contract_rates => rates_in_process, rates_redis;
    contract_live_sessions => live_sessions_in_process, live_sessions_redis;
    contract_sign_in_attempts => sign_in_attempts_in_process, sign_in_attempts_redis;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn retention(max_events: usize, max_age: Duration) -> Retention {
    Retention {
        max_events,
        max_age,
    }
}

fn key(tenant: &str, session: &str) -> SessionKey {
    SessionKey::new(tenant, session)
}

fn event(stream: u64, seq: u64, data: &str) -> StoredEvent {
    StoredEvent {
        id: EventId {
            stream: StreamId(stream),
            seq,
        },
        data: Bytes::copy_from_slice(data.as_bytes()),
    }
}

fn after(stream: u64, seq: u64) -> EventId {
    EventId {
        stream: StreamId(stream),
        seq,
    }
}

fn seqs(events: &[StoredEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.seq).collect()
}

/// Takes a free lease.
async fn take(b: &Backends, key: &SessionKey, replica: &str, ttl: Duration) -> Lease {
    match b.leases.acquire(key, replica, None, ttl).await.unwrap() {
        Acquired::Granted(lease) => {
            assert_eq!(&*lease.replica, replica);
            lease
        }
        other => panic!("expected a free lease for {key:?}, got {other:?}"),
    }
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<BusMessage>) -> BusMessage {
    tokio::time::timeout(DELIVERY, rx.recv())
        .await
        .expect("a bus message arrives in time")
        .expect("the subscription is open")
}

fn message(topic: &str, payload: &[u8]) -> BusMessage {
    BusMessage {
        topic: topic.into(),
        payload: Bytes::copy_from_slice(payload),
    }
}

// ---------------------------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------------------------

async fn contract_event_log(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let a = key("t1", "s1");
    let lease = take(b, &a, "r1", LONG).await;

    // One batch across two streams; a priming event has empty data.
    let batch = vec![
        event(1, 1, ""),
        event(2, 1, "b1"),
        event(1, 2, "a2"),
        event(1, 3, "a3"),
        event(2, 2, "b2"),
        event(1, 4, "a4"),
    ];
    b.events.append(&a, &lease, &batch).await.unwrap();

    let replay = b
        .events
        .replay_after(&a, after(1, 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replay, vec![event(1, 3, "a3"), event(1, 4, "a4")]);
    let replay = b
        .events
        .replay_after(&a, after(1, 0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        replay,
        vec![
            event(1, 1, ""),
            event(1, 2, "a2"),
            event(1, 3, "a3"),
            event(1, 4, "a4")
        ]
    );
    let replay = b
        .events
        .replay_after(&a, after(2, 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replay, vec![event(2, 2, "b2")]);

    // Up to date, beyond the end, unknown stream.
    assert_eq!(
        b.events.replay_after(&a, after(1, 4)).await.unwrap(),
        Some(vec![])
    );
    assert_eq!(b.events.replay_after(&a, after(1, 5)).await.unwrap(), None);
    assert_eq!(b.events.replay_after(&a, after(3, 0)).await.unwrap(), None);
    assert_eq!(b.events.replay_after(&a, after(3, 1)).await.unwrap(), None);

    assert_eq!(b.events.last_seq(&a, StreamId(1)).await.unwrap(), Some(4));
    assert_eq!(b.events.last_seq(&a, StreamId(2)).await.unwrap(), Some(2));
    assert_eq!(b.events.last_seq(&a, StreamId(3)).await.unwrap(), None);

    // Another tenant with the same session id, or another session of the tenant, sees nothing.
    for other in [key("t2", "s1"), key("t1", "s2")] {
        assert_eq!(
            b.events.replay_after(&other, after(1, 0)).await.unwrap(),
            None
        );
        assert_eq!(b.events.last_seq(&other, StreamId(1)).await.unwrap(), None);
    }

    // A later batch continues the stream; a retried event (seq already written) is ignored.
    b.events
        .append(&a, &lease, &[event(1, 3, "retried"), event(1, 5, "a5")])
        .await
        .unwrap();
    let replay = b
        .events
        .replay_after(&a, after(1, 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        replay,
        vec![event(1, 3, "a3"), event(1, 4, "a4"), event(1, 5, "a5")]
    );
    // An empty batch is fine.
    b.events.append(&a, &lease, &[]).await.unwrap();

    // A second session of the same tenant keeps its own log.
    let c = key("t1", "s2");
    let lease_c = take(b, &c, "r1", LONG).await;
    b.events
        .append(&c, &lease_c, &[event(1, 1, "c1")])
        .await
        .unwrap();
    assert_eq!(
        b.events.replay_after(&c, after(1, 0)).await.unwrap(),
        Some(vec![event(1, 1, "c1")])
    );

    // The session ends: all its streams are forgotten, the other session's stay.
    b.events.remove_session(&a).await.unwrap();
    assert_eq!(b.events.replay_after(&a, after(1, 0)).await.unwrap(), None);
    assert_eq!(b.events.replay_after(&a, after(2, 0)).await.unwrap(), None);
    assert_eq!(b.events.last_seq(&a, StreamId(1)).await.unwrap(), None);
    assert_eq!(b.events.last_seq(&c, StreamId(1)).await.unwrap(), Some(1));
    // Removing an unknown session is fine.
    b.events.remove_session(&key("t9", "none")).await.unwrap();

    fx.cleanup().await;
}

async fn contract_retention(backend: Backend) {
    let max_age = Duration::from_millis(400);
    let fx = Fixture::new(&backend, retention(3, max_age)).await;
    let b = &fx.backends;
    let a = key("t1", "s1");
    let lease = take(b, &a, "r1", LONG).await;

    // By count: the last 3 are kept. A resumption from before them would skip events: the log
    // says it does not know that point rather than replaying with a gap.
    let batch: Vec<_> = (1..=5).map(|n| event(1, n, &format!("e{n}"))).collect();
    b.events.append(&a, &lease, &batch).await.unwrap();
    assert_eq!(b.events.replay_after(&a, after(1, 0)).await.unwrap(), None);
    assert_eq!(b.events.replay_after(&a, after(1, 1)).await.unwrap(), None);
    let replay = b
        .events
        .replay_after(&a, after(1, 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seqs(&replay), vec![3, 4, 5]);
    b.events
        .append(&a, &lease, &[event(1, 6, "e6")])
        .await
        .unwrap();
    assert_eq!(b.events.replay_after(&a, after(1, 2)).await.unwrap(), None);
    let replay = b
        .events
        .replay_after(&a, after(1, 3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seqs(&replay), vec![4, 5, 6]);
    assert_eq!(b.events.last_seq(&a, StreamId(1)).await.unwrap(), Some(6));

    // By age: a stream not appended to for max_age is forgotten; one appended to lives on.
    b.events
        .append(&a, &lease, &[event(2, 1, "kept")])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    b.events
        .append(&a, &lease, &[event(2, 2, "kept")])
        .await
        .unwrap();
    let renewed = Instant::now();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(b.events.replay_after(&a, after(1, 5)).await.unwrap(), None);
    assert_eq!(b.events.last_seq(&a, StreamId(1)).await.unwrap(), None);
    let kept = b.events.replay_after(&a, after(2, 0)).await.unwrap();
    if renewed.elapsed() < max_age - Duration::from_millis(20) {
        assert_eq!(kept.map(|e| seqs(&e)), Some(vec![1, 2]));
    }
    tokio::time::sleep(max_age + Duration::from_millis(100)).await;
    assert_eq!(b.events.replay_after(&a, after(2, 0)).await.unwrap(), None);

    // A forgotten stream starts afresh.
    b.events
        .append(&a, &lease, &[event(2, 1, "again")])
        .await
        .unwrap();
    assert_eq!(
        b.events.replay_after(&a, after(2, 0)).await.unwrap(),
        Some(vec![event(2, 1, "again")])
    );

    fx.cleanup().await;
}

async fn contract_fencing(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let a = key("t1", "s1");

    // Without any lease, nothing can be written.
    let nobody = Lease {
        replica: "r1".into(),
        token: 1,
    };
    assert_eq!(
        b.events.append(&a, &nobody, &[event(1, 1, "x")]).await,
        Err(BackendError::Fenced)
    );
    assert_eq!(
        b.snapshots
            .save(&a, &nobody, Bytes::from_static(b"x"), LONG)
            .await,
        Err(BackendError::Fenced)
    );

    let old = take(b, &a, "r1", LONG).await;
    assert_eq!(b.leases.owner(&a).await.unwrap(), Some(old.clone()));
    b.events
        .append(&a, &old, &[event(1, 1, "old")])
        .await
        .unwrap();
    b.snapshots
        .save(&a, &old, Bytes::from_static(b"old"), LONG)
        .await
        .unwrap();

    // r2 takes the session over.
    let new = match b.leases.acquire(&a, "r2", Some(&old), LONG).await.unwrap() {
        Acquired::Granted(lease) => lease,
        other => panic!("the takeover is granted, got {other:?}"),
    };
    assert_eq!(&*new.replica, "r2");
    assert!(new.token > old.token);
    assert_eq!(b.leases.owner(&a).await.unwrap(), Some(new.clone()));

    // The old owner can no longer write.
    assert_eq!(
        b.events.append(&a, &old, &[event(1, 2, "stale")]).await,
        Err(BackendError::Fenced)
    );
    assert_eq!(
        b.snapshots
            .save(&a, &old, Bytes::from_static(b"stale"), LONG)
            .await,
        Err(BackendError::Fenced)
    );
    assert_eq!(
        b.snapshots.load(&a).await.unwrap(),
        Some(Bytes::from_static(b"old"))
    );
    assert_eq!(b.events.last_seq(&a, StreamId(1)).await.unwrap(), Some(1));

    // The new one can, continuing the log.
    b.events
        .append(&a, &new, &[event(1, 2, "new")])
        .await
        .unwrap();
    b.snapshots
        .save(&a, &new, Bytes::from_static(b"new"), LONG)
        .await
        .unwrap();
    assert_eq!(
        b.events.replay_after(&a, after(1, 0)).await.unwrap(),
        Some(vec![event(1, 1, "old"), event(1, 2, "new")])
    );
    assert_eq!(
        b.snapshots.load(&a).await.unwrap(),
        Some(Bytes::from_static(b"new"))
    );

    // A stale takeover, or a grab of a held lease, finds the current holder.
    for expected in [Some(&old), None] {
        assert_eq!(
            b.leases.acquire(&a, "r3", expected, LONG).await.unwrap(),
            Acquired::HeldBy(new.clone())
        );
    }

    // A lease of one session writes nothing to another, even with the same session id under
    // another tenant.
    let other = key("t2", "s1");
    let other_lease = take(b, &other, "r3", LONG).await;
    assert_eq!(
        b.events.append(&other, &new, &[event(1, 1, "x")]).await,
        Err(BackendError::Fenced)
    );
    assert_eq!(
        b.events.append(&a, &other_lease, &[event(1, 3, "x")]).await,
        Err(BackendError::Fenced)
    );
    assert_eq!(
        b.events.replay_after(&other, after(1, 0)).await.unwrap(),
        None
    );

    fx.cleanup().await;
}

async fn contract_leases(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let a = key("t1", "s1");
    assert_eq!(b.leases.owner(&a).await.unwrap(), None);

    // Tokens strictly increase across acquires.
    let mut current = take(b, &a, "r0", LONG).await;
    for n in 1..=5 {
        let replica = format!("r{n}");
        match b
            .leases
            .acquire(&a, &replica, Some(&current), LONG)
            .await
            .unwrap()
        {
            Acquired::Granted(lease) => {
                assert!(lease.token > current.token, "{lease:?} after {current:?}");
                current = lease;
            }
            other => panic!("takeover {n} is granted, got {other:?}"),
        }
    }

    // Only the holder can release.
    let stale = Lease {
        replica: current.replica.clone(),
        token: current.token - 1,
    };
    b.leases.release(&a, &stale).await.unwrap();
    assert_eq!(b.leases.owner(&a).await.unwrap(), Some(current.clone()));
    let impostor = Lease {
        replica: "someone".into(),
        token: current.token,
    };
    b.leases.release(&a, &impostor).await.unwrap();
    assert_eq!(b.leases.owner(&a).await.unwrap(), Some(current.clone()));
    b.leases.release(&a, &current).await.unwrap();
    assert_eq!(b.leases.owner(&a).await.unwrap(), None);
    // Released, the lease is free, and tokens still only grow.
    let after_release = take(b, &a, "r9", LONG).await;
    assert!(after_release.token > current.token);
    // Nobody holding it is as good as the expected holder: a takeover of a lease that lapsed
    // or was released in the meantime is granted.
    b.leases.release(&a, &after_release).await.unwrap();
    match b
        .leases
        .acquire(&a, "r10", Some(&after_release), LONG)
        .await
        .unwrap()
    {
        Acquired::Granted(lease) => assert!(lease.token > after_release.token),
        other => panic!("a takeover of a free lease is granted, got {other:?}"),
    }

    // Racing acquires of a free lease: exactly one wins, the others see the winner.
    let race = key("t1", "race");
    let attempts = (0..8).map(|n| {
        let leases = b.leases.clone();
        let race = race.clone();
        async move {
            leases
                .acquire(&race, &format!("racer{n}"), None, LONG)
                .await
                .unwrap()
        }
    });
    let results = futures_util::future::join_all(attempts).await;
    let winners: Vec<_> = results
        .iter()
        .filter_map(|r| match r {
            Acquired::Granted(lease) => Some(lease.clone()),
            Acquired::HeldBy(_) => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Acquired::HeldBy(holder) = r {
            assert_eq!(holder, &winners[0]);
        }
    }
    assert_eq!(
        b.leases.owner(&race).await.unwrap(),
        Some(winners[0].clone())
    );

    // Two concurrent acquires through separate connections (Redis: two clients).
    if let Backend::Redis(url) = &backend {
        let prefix = fx
            .redis
            .as_ref()
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        let second = Backends::redis(url, &prefix, retention(100, LONG))
            .await
            .unwrap();
        let duel = key("t1", "duel");
        let (x, y) = tokio::join!(
            b.leases.acquire(&duel, "x", None, LONG),
            second.leases.acquire(&duel, "y", None, LONG)
        );
        let granted = [x.unwrap(), y.unwrap()]
            .into_iter()
            .filter(|r| matches!(r, Acquired::Granted(_)))
            .count();
        assert_eq!(granted, 1);
    }

    // A lease lapses after its ttl unless touched.
    let short = key("t1", "short");
    let lapsing = take(b, &short, "r1", Duration::from_millis(300)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(b.leases.owner(&short).await.unwrap(), None);
    assert_eq!(
        b.events.append(&short, &lapsing, &[event(1, 1, "x")]).await,
        Err(BackendError::Fenced)
    );
    let next = take(b, &short, "r2", LONG).await;
    assert!(next.token > lapsing.token);

    fx.cleanup().await;
}

async fn contract_replicas(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let r1 = ReplicaInfo {
        id: "r1".into(),
        url: "http://10.0.0.1:8080".into(),
    };
    let r2 = ReplicaInfo {
        id: "r2".into(),
        url: "http://10.0.0.2:8080".into(),
    };
    assert_eq!(b.leases.replica_url("r1").await.unwrap(), None);
    b.leases
        .heartbeat(&r1, Duration::from_millis(300))
        .await
        .unwrap();
    b.leases.heartbeat(&r2, LONG).await.unwrap();
    assert_eq!(
        b.leases.replica_url("r1").await.unwrap(),
        Some(r1.url.clone())
    );
    assert_eq!(b.leases.replica_url("nobody").await.unwrap(), None);

    // A heartbeat that lapses marks the replica dead; the next one brings it back.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(b.leases.replica_url("r1").await.unwrap(), None);
    assert_eq!(
        b.leases.replica_url("r2").await.unwrap(),
        Some(r2.url.clone())
    );
    let moved = ReplicaInfo {
        id: "r1".into(),
        url: "http://10.0.0.9:8080".into(),
    };
    b.leases.heartbeat(&moved, LONG).await.unwrap();
    assert_eq!(
        b.leases.replica_url("r1").await.unwrap(),
        Some(moved.url.clone())
    );

    // Retiring marks it dead at once.
    b.leases.retire("r1").await.unwrap();
    assert_eq!(b.leases.replica_url("r1").await.unwrap(), None);
    assert_eq!(
        b.leases.replica_url("r2").await.unwrap(),
        Some(r2.url.clone())
    );
    b.leases.retire("never-seen").await.unwrap();

    fx.cleanup().await;
}

async fn contract_snapshots(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let a = key("t1", "s1");
    let lease = take(b, &a, "r1", LONG).await;

    assert_eq!(b.snapshots.load(&a).await.unwrap(), None);
    let binary = Bytes::from_static(&[0, 159, 146, 150, 255]);
    b.snapshots
        .save(&a, &lease, binary.clone(), LONG)
        .await
        .unwrap();
    assert_eq!(b.snapshots.load(&a).await.unwrap(), Some(binary));
    b.snapshots
        .save(&a, &lease, Bytes::from_static(b"two"), LONG)
        .await
        .unwrap();
    assert_eq!(
        b.snapshots.load(&a).await.unwrap(),
        Some(Bytes::from_static(b"two"))
    );
    // Same session id under another tenant: nothing.
    assert_eq!(b.snapshots.load(&key("t2", "s1")).await.unwrap(), None);

    // Expiry, and touch extending both snapshot and lease.
    let expiring = key("t1", "expiring");
    let touched = key("t1", "touched");
    let short = Duration::from_millis(300);
    let lease_e = take(b, &expiring, "r1", LONG).await;
    let lease_t = take(b, &touched, "r1", short).await;
    b.snapshots
        .save(&expiring, &lease_e, Bytes::from_static(b"e"), short)
        .await
        .unwrap();
    b.snapshots
        .save(&touched, &lease_t, Bytes::from_static(b"t"), short)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    b.snapshots
        .touch(
            &[touched.clone(), key("t1", "no-such-session")],
            Duration::from_millis(2000),
        )
        .await
        .unwrap();
    b.snapshots.touch(&[], LONG).await.unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(b.snapshots.load(&expiring).await.unwrap(), None);
    assert_eq!(
        b.snapshots.load(&touched).await.unwrap(),
        Some(Bytes::from_static(b"t"))
    );
    assert_eq!(
        b.leases.owner(&touched).await.unwrap(),
        Some(lease_t.clone())
    );
    b.snapshots
        .save(&touched, &lease_t, Bytes::from_static(b"t2"), LONG)
        .await
        .unwrap();

    // Delete forgets the snapshot and the lease.
    b.snapshots.delete(&a).await.unwrap();
    assert_eq!(b.snapshots.load(&a).await.unwrap(), None);
    assert_eq!(b.leases.owner(&a).await.unwrap(), None);
    assert_eq!(
        b.snapshots
            .save(&a, &lease, Bytes::from_static(b"late"), LONG)
            .await,
        Err(BackendError::Fenced)
    );
    let again = take(b, &a, "r2", LONG).await;
    assert!(again.token > lease.token);
    b.snapshots.delete(&key("t9", "none")).await.unwrap();

    fx.cleanup().await;
}

/// Takes from a rate until it is refused: how many were admitted, and the wait it named.
async fn exhaust(
    b: &Backends,
    tenant: &str,
    scope: RateScope<'_>,
    per_minute: u32,
) -> (u32, Duration) {
    for admitted in 0..per_minute * 2 + 10 {
        if let Quota::Exceeded { retry_after } =
            b.quotas.take(tenant, scope, per_minute, 1).await.unwrap()
        {
            return (admitted, retry_after);
        }
    }
    panic!("{tenant} {scope:?} at {per_minute}/min was never refused");
}

async fn contract_rates(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    // A burst of per_minute, then a wait of at most one interval (12 s at 5 a minute).
    let (admitted, wait) = exhaust(b, "t1", RateScope::Tenant, 5).await;
    assert_eq!(admitted, 5);
    assert!(
        wait > Duration::from_secs(11) && wait <= Duration::from_secs(12),
        "{wait:?}"
    );
    // Principals have rates of their own, and so do other tenants; ids cannot reach into
    // another tenant's keys (`t1` + principal `x` is not tenant `t1:x`).
    assert_eq!(exhaust(b, "t1", RateScope::Principal("x"), 2).await.0, 2);
    assert_eq!(exhaust(b, "t1", RateScope::Principal("y"), 2).await.0, 2);
    assert_eq!(exhaust(b, "t1:x", RateScope::Tenant, 3).await.0, 3);
    assert_eq!(exhaust(b, "t2", RateScope::Tenant, 1).await.0, 1);
    // After the named wait, one more is admitted (120 a minute: one every 500 ms).
    let (admitted, wait) = exhaust(b, "t3", RateScope::Tenant, 120).await;
    assert!((120..=121).contains(&admitted), "{admitted}");
    assert!(wait <= Duration::from_millis(500), "{wait:?}");
    tokio::time::sleep(wait + Duration::from_millis(20)).await;
    assert_eq!(
        b.quotas
            .take("t3", RateScope::Tenant, 120, 1)
            .await
            .unwrap(),
        Quota::Allowed
    );
    assert!(matches!(
        b.quotas
            .take("t3", RateScope::Tenant, 120, 1)
            .await
            .unwrap(),
        Quota::Exceeded { .. }
    ));
    // A cost counts as that many requests (a batch): 4, then 6 of 10, then none; a cost above
    // the burst counts as the burst.
    let take = |tenant: &'static str, cost: u32| b.quotas.take(tenant, RateScope::Tenant, 10, cost);
    assert_eq!(take("t4", 4).await.unwrap(), Quota::Allowed);
    assert_eq!(take("t4", 6).await.unwrap(), Quota::Allowed);
    assert!(matches!(
        take("t4", 1).await.unwrap(),
        Quota::Exceeded { .. }
    ));
    assert_eq!(take("t5", 9).await.unwrap(), Quota::Allowed);
    let Quota::Exceeded { retry_after } = take("t5", 3).await.unwrap() else {
        panic!("3 more than the 1 left");
    };
    assert!(retry_after > Duration::from_secs(11), "{retry_after:?}");
    assert_eq!(take("t6", 500).await.unwrap(), Quota::Allowed);
    assert!(matches!(
        take("t6", 1).await.unwrap(),
        Quota::Exceeded { .. }
    ));
    fx.cleanup().await;
}

async fn contract_sign_in_attempts(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let q = &fx.backends.quotas;
    let count = |tenant: &'static str, keys: [&'static str; 2], window: Duration| async move {
        let keys = keys.map(|k| (k, 2));
        q.count_attempt(tenant, &keys, window).await.unwrap() == Quota::Allowed
    };
    // Two attempts under a user (from two addresses), then the user is full: a third is not
    // counted, not even under its fresh address.
    assert!(count("t1", ["alice", "ip1"], LONG).await);
    assert!(count("t1", ["alice", "ip2"], LONG).await);
    assert!(!count("t1", ["alice", "ip3"], LONG).await);
    assert!(count("t1", ["bob", "ip3"], LONG).await);
    assert!(
        count("t1", ["bob", "ip3"], LONG).await,
        "ip3 was not counted for alice"
    );
    assert!(!count("t1", ["carol", "ip3"], LONG).await, "ip3 is full");
    // Other tenants count on their own; ids cannot reach into another tenant's counters.
    assert!(count("t2", ["alice", "ip1"], LONG).await);
    assert!(count("t1:alice", ["x", "y"], LONG).await);
    // One attempt given back makes room for one more; all of them, for as many as the limit.
    q.forgive_attempt("t1", "alice", false).await.unwrap();
    assert!(count("t1", ["alice", "ip4"], LONG).await);
    assert!(!count("t1", ["alice", "ip5"], LONG).await);
    q.forgive_attempt("t1", "alice", true).await.unwrap();
    assert!(count("t1", ["alice", "ip5"], LONG).await);
    assert!(count("t1", ["alice", "ip6"], LONG).await);
    assert!(!count("t1", ["alice", "ip7"], LONG).await);
    // Giving back never goes below nothing.
    q.forgive_attempt("t3", "nobody", false).await.unwrap();
    q.forgive_attempt("t3", "nobody", false).await.unwrap();
    assert!(count("t3", ["nobody", "ip1"], LONG).await);
    assert!(count("t3", ["nobody", "ip2"], LONG).await);
    assert!(!count("t3", ["nobody", "ip3"], LONG).await);
    // A window starts with its first attempt and ends on its own.
    let short = Duration::from_millis(300);
    assert!(count("t4", ["dave", "ip1"], short).await);
    assert!(count("t4", ["dave", "ip1"], short).await);
    assert!(!count("t4", ["dave", "ip1"], short).await);
    tokio::time::sleep(short + Duration::from_millis(100)).await;
    assert!(count("t4", ["dave", "ip1"], short).await);
    // Each key has its own limit; a refusal says when the full key's window ends.
    let keys = [("ip9", 1), ("everyone", 3)];
    assert_eq!(
        q.count_attempt("t5", &keys, LONG).await.unwrap(),
        Quota::Allowed
    );
    let Quota::Exceeded { retry_after } = q.count_attempt("t5", &keys, LONG).await.unwrap() else {
        panic!("ip9 holds its one attempt");
    };
    assert!(
        retry_after <= LONG && retry_after > LONG - Duration::from_secs(5),
        "{retry_after:?}"
    );
    for ip in ["ip10", "ip11"] {
        let keys = [(ip, 1), ("everyone", 3)];
        assert_eq!(
            q.count_attempt("t5", &keys, LONG).await.unwrap(),
            Quota::Allowed
        );
    }
    assert!(matches!(
        q.count_attempt("t5", &[("ip12", 1), ("everyone", 3)], LONG)
            .await
            .unwrap(),
        Quota::Exceeded { .. }
    ));
    fx.cleanup().await;
}

async fn contract_live_sessions(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let q = &b.quotas;
    let two = SessionCaps {
        per_tenant: Some(2),
        per_principal: None,
    };
    let open = |tenant: &'static str,
                session: &'static str,
                owner: Option<&'static str>,
                caps,
                ttl| async move {
        q.open_session(&key(tenant, session), owner, caps, ttl)
            .await
            .unwrap()
    };
    use SessionAdmission::*;
    assert_eq!(open("t1", "s1", None, two, LONG).await, Opened);
    assert_eq!(open("t1", "s2", None, two, LONG).await, Opened);
    assert_eq!(open("t1", "s3", None, two, LONG).await, TenantFull);
    assert_eq!(open("t2", "s3", None, two, LONG).await, Opened);
    // An ended session (DELETE, idle expiry) frees its place.
    b.snapshots.delete(&key("t1", "s1")).await.unwrap();
    assert_eq!(open("t1", "s3", None, two, LONG).await, Opened);
    assert_eq!(open("t1", "s4", None, two, LONG).await, TenantFull);

    // Sessions nobody keeps alive (their replica died) stop counting; touched ones go on.
    let one = SessionCaps {
        per_tenant: Some(1),
        per_principal: None,
    };
    let short = Duration::from_millis(300);
    assert_eq!(open("t3", "a", None, one, short).await, Opened);
    tokio::time::sleep(Duration::from_millis(150)).await;
    b.snapshots
        .touch(&[key("t3", "a")], Duration::from_millis(600))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(open("t3", "b", None, one, short).await, TenantFull);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(open("t3", "b", None, one, short).await, Opened);

    // Per principal: one each; sessions without a principal are not anyone's.
    let per_principal = SessionCaps {
        per_tenant: None,
        per_principal: Some(1),
    };
    assert_eq!(
        open("t4", "x1", Some("p"), per_principal, LONG).await,
        Opened
    );
    assert_eq!(
        open("t4", "x2", Some("p"), per_principal, LONG).await,
        PrincipalFull
    );
    assert_eq!(
        open("t4", "x3", Some("q"), per_principal, LONG).await,
        Opened
    );
    assert_eq!(open("t4", "x4", None, per_principal, LONG).await, Opened);
    assert_eq!(
        open("t5", "x5", Some("p"), per_principal, LONG).await,
        Opened
    );
    b.snapshots.delete(&key("t4", "x1")).await.unwrap();
    assert_eq!(
        open("t4", "x2", Some("p"), per_principal, LONG).await,
        Opened
    );
    // Without caps a session is still counted (for caps set later).
    let none = SessionCaps::default();
    assert_eq!(open("t6", "y1", None, none, LONG).await, Opened);
    assert_eq!(open("t6", "y2", None, one, LONG).await, TenantFull);
    fx.cleanup().await;
}

async fn contract_bus(backend: Backend) {
    let fx = Fixture::new(&backend, retention(100, LONG)).await;
    let b = &fx.backends;
    let mut ab = b.bus.subscribe(&["a".into(), "b".into()]).await.unwrap();
    let mut a = b.bus.subscribe(&["a".into()]).await.unwrap();
    let mut c = b.bus.subscribe(&["c".into()]).await.unwrap();

    // Published right after subscribe() returned: delivered to every subscriber of the topic,
    // and the publisher learns how many received it.
    let received = b
        .bus
        .publish("a", Bytes::from_static(&[1, 0, 255]))
        .await
        .unwrap();
    assert_eq!(received, 2, "two subscriptions of topic a");
    assert_eq!(recv(&mut ab).await, message("a", &[1, 0, 255]));
    assert_eq!(recv(&mut a).await, message("a", &[1, 0, 255]));

    b.bus.publish("b", Bytes::from_static(b"2")).await.unwrap();
    let received = b
        .bus
        .publish("nobody", Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(received, 0, "a topic nobody listens to");
    assert_eq!(recv(&mut ab).await, message("b", b"2"));

    // Nothing of other topics arrived before these markers.
    b.bus
        .publish("a", Bytes::from_static(b"end"))
        .await
        .unwrap();
    b.bus
        .publish("c", Bytes::from_static(b"end"))
        .await
        .unwrap();
    assert_eq!(recv(&mut a).await, message("a", b"end"));
    assert_eq!(recv(&mut c).await, message("c", b"end"));
    assert_eq!(recv(&mut ab).await, message("a", b"end"));

    // A dropped subscriber does not disturb the others.
    drop(ab);
    b.bus.publish("a", Bytes::from_static(b"3")).await.unwrap();
    assert_eq!(recv(&mut a).await, message("a", b"3"));
    assert!(a.try_recv().is_err());
    assert!(c.try_recv().is_err());

    fx.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// Redis outages
// ---------------------------------------------------------------------------------------------

#[actix_rt::test]
async fn redis_unreachable_at_start_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let result = Backends::redis(
        &format!("redis://127.0.0.1:{port}"),
        "test",
        retention(10, LONG),
    )
    .await;
    assert!(matches!(result, Err(BackendError::Unavailable(_))));
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[actix_rt::test]
async fn redis_outage_fails_fast_and_recovers() {
    let Some(url) = redis_url().await else {
        return;
    };
    bounded(async {
        let proxy = Proxy::start(&url).await;
        let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        let b = Backends::redis(&proxy.url(&url), &prefix, retention(10, LONG))
            .await
            .expect("connects through the proxy");
        let a = key("t1", "s1");
        let lease = take(&b, &a, "r1", LONG).await;

        proxy.set(Mode::Refuse);
        for _ in 0..3 {
            let started = Instant::now();
            let result = b.events.append(&a, &lease, &[event(1, 1, "x")]).await;
            assert!(
                matches!(result, Err(BackendError::Unavailable(_))),
                "{result:?}"
            );
            assert!(started.elapsed() < Duration::from_millis(3500));
        }

        // Back up: the connection manager reconnects by itself.
        proxy.set(Mode::Up);
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match b.leases.owner(&a).await {
                Ok(owner) => {
                    assert_eq!(owner, Some(lease.clone()));
                    break;
                }
                Err(e) => assert!(Instant::now() < deadline, "still failing: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        b.events
            .append(&a, &lease, &[event(1, 1, "x")])
            .await
            .unwrap();
        delete_prefix(&url, &prefix).await;
    })
    .await;
}

#[actix_rt::test]
async fn redis_bus_resubscribes_after_connection_loss() {
    let Some(url) = redis_url().await else {
        return;
    };
    bounded(async {
        let proxy = Proxy::start(&url).await;
        let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        let proxied = Backends::redis(&proxy.url(&url), &prefix, retention(10, LONG))
            .await
            .expect("connects through the proxy");
        let direct = Backends::redis(&url, &prefix, retention(10, LONG))
            .await
            .expect("connects");
        let mut rx = proxied.bus.subscribe(&["t".into()]).await.unwrap();
        direct
            .bus
            .publish("t", Bytes::from_static(b"before"))
            .await
            .unwrap();
        assert_eq!(recv(&mut rx).await, message("t", b"before"));

        // The subscription's connection is lost; it comes back by itself (what is published
        // meanwhile is lost).
        proxy.cut();
        let deadline = Instant::now() + Duration::from_secs(3);
        'resubscribed: loop {
            assert!(
                Instant::now() < deadline,
                "the subscription did not come back"
            );
            direct
                .bus
                .publish("t", Bytes::from_static(b"after"))
                .await
                .unwrap();
            while let Ok(Some(msg)) =
                tokio::time::timeout(Duration::from_millis(100), rx.recv()).await
            {
                if msg == message("t", b"after") {
                    break 'resubscribed;
                }
            }
        }

        // Dropping the receiver ends the subscription and closes its connection.
        let open = proxy.open.load(Ordering::SeqCst);
        drop(rx);
        let deadline = Instant::now() + Duration::from_secs(2);
        while proxy.open.load(Ordering::SeqCst) >= open {
            assert!(Instant::now() < deadline, "the subscription stays open");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        delete_prefix(&url, &prefix).await;
    })
    .await;
}

#[actix_rt::test]
async fn redis_unresponsive_fails_within_the_deadline() {
    let Some(url) = redis_url().await else {
        return;
    };
    bounded(async {
        let proxy = Proxy::start(&url).await;
        let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        let b = Backends::redis(&proxy.url(&url), &prefix, retention(10, LONG))
            .await
            .expect("connects through the proxy");
        let a = key("t1", "s1");
        take(&b, &a, "r1", LONG).await;

        // New connections are accepted and never answered: operations still end, in time.
        proxy.set(Mode::Hang);
        for _ in 0..2 {
            let started = Instant::now();
            let result = b.leases.owner(&a).await;
            assert!(
                matches!(result, Err(BackendError::Unavailable(_))),
                "{result:?}"
            );
            assert!(started.elapsed() < Duration::from_millis(3500));
        }
        proxy.set(Mode::Up);
        delete_prefix(&url, &prefix).await;
    })
    .await;
}
