//! When a request answered at once gives way to the worker's other connections.
//!
//! A request answered on the HTTP worker (a session request answered directly, a stateless one)
//! first yields, so that the worker's other ready connections are read too: their answers then go
//! out together and a client waiting on several connections is woken once for them instead of
//! once per answer. That pays under load (bench/modern.sh measured 1.3x the CPU per stateless
//! request without it) but costs a lone connection an extra pass through the runtime, a
//! zero-timeout `epoll_wait`, on every request with nothing to gain. So the yield happens only
//! when this worker may have another request to read: each connection holds an [`Open`] in its
//! extensions (`HttpServer::on_connect`) for as long as it lives, on the worker thread that
//! serves it, and an HTTPS connection (HTTP/2 may carry concurrent requests on it) counts as two.
//!
//! Open connections are not busy ones: a replica behind a load balancer holds many kept-alive
//! connections from it, most of them idle at light load. So a yield that found no company (no
//! other request came to `let_others_in` during it, and none was giving way when it began) makes
//! the next requests skip it: 1, then 3, 7 and at most 15 of them, until a yield finds company
//! again. At light load the poll is then paid by one request in 16; under load every request
//! keeps giving way.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static OPEN: Cell<usize> = const { Cell::new(0) };
    /// Requests that came to `let_others_in` on this worker thread.
    static ARRIVED: Cell<u64> = const { Cell::new(0) };
    /// Requests giving way right now.
    static YIELDING: Cell<u32> = const { Cell::new(0) };
    /// Yields in a row that found no company (at most `MAX_IDLE_YIELDS`).
    static IDLE_YIELDS: Cell<u32> = const { Cell::new(0) };
    /// Requests still to let through without yielding.
    static SKIP: Cell<u32> = const { Cell::new(0) };
}

/// After this many idle yields in a row, a request in 2^this yields (one in 16).
const MAX_IDLE_YIELDS: u32 = 4;

/// One open connection of this worker thread, counted from creation to drop (both on the
/// worker's thread: it is neither `Send` nor `Sync`), here and in the replica's
/// `mcp_harbor_http_connections_open` gauge.
pub struct Open {
    weight: usize,
    _here: PhantomData<*const ()>,
}

impl Open {
    /// A connection carrying one request at a time (HTTP/1.1).
    pub fn new() -> Self {
        Self::weighing(1)
    }

    /// A connection that may carry concurrent requests (HTTPS, where ALPN may choose HTTP/2):
    /// counted as two, so that its requests give way even when it is the worker's only one.
    pub fn multiplexed() -> Self {
        Self::weighing(2)
    }

    fn weighing(weight: usize) -> Self {
        OPEN.with(|n| n.set(n.get() + weight));
        crate::metrics::global().http_connections(1);
        Open {
            weight,
            _here: PhantomData,
        }
    }
}

impl Default for Open {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        OPEN.with(|n| n.set(n.get().saturating_sub(self.weight)));
        crate::metrics::global().http_connections(-1);
    }
}

/// Connections open on this worker thread (a multiplexed one counting two).
pub fn open_here() -> usize {
    OPEN.with(Cell::get)
}

/// Yields to the runtime when this worker may have another request to read: another connection
/// open, or this one multiplexed, and the last yields found other requests (see the module).
pub async fn let_others_in() {
    if open_here() <= 1 {
        return;
    }
    let arrived = ARRIVED.with(|a| {
        a.set(a.get() + 1);
        a.get()
    });
    let skip = SKIP.with(Cell::get);
    if skip > 0 {
        SKIP.with(|s| s.set(skip - 1));
        return;
    }
    let others_yielding = YIELDING.with(Cell::get) > 0;
    let giving_way = GivingWay::new();
    tokio::task::yield_now().await;
    drop(giving_way);
    let company = others_yielding || ARRIVED.with(Cell::get) > arrived;
    let idle = if company {
        0
    } else {
        (IDLE_YIELDS.with(Cell::get) + 1).min(MAX_IDLE_YIELDS)
    };
    IDLE_YIELDS.with(|i| i.set(idle));
    SKIP.with(|s| s.set((1 << idle) - 1));
}

/// A request giving way, counted in `YIELDING` until it resumes or is dropped (its client left).
struct GivingWay;

impl GivingWay {
    fn new() -> Self {
        YIELDING.with(|y| y.set(y.get() + 1));
        GivingWay
    }
}

impl Drop for GivingWay {
    fn drop(&mut self) {
        YIELDING.with(|y| y.set(y.get().saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Whether another request, spawned just before `let_others_in`, ran during it.
    async fn others_ran_during_the_wait() -> bool {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let other = tokio::spawn(async move {
            flag.store(true, Ordering::SeqCst);
            let_others_in().await;
        });
        let_others_in().await;
        let during = ran.load(Ordering::SeqCst);
        let _ = other.await;
        during
    }

    /// Whether `let_others_in` yields when nothing else is there to run (a task that would
    /// only note that it ran, not a request).
    async fn yields_alone() -> bool {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let other = tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
        let_others_in().await;
        let during = ran.load(Ordering::SeqCst);
        let _ = other.await;
        during
    }

    /// `n` requests arriving at once on this worker.
    async fn burst(n: usize) {
        let requests: Vec<_> = (0..n).map(|_| tokio::spawn(let_others_in())).collect();
        for r in requests {
            let _ = r.await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn idle_yields_back_off_and_company_restores_them() {
        let _first = Open::new();
        let _second = Open::new();
        // Each yield that finds no company doubles the requests let through before the next
        // one, up to 15.
        let mut yielded = Vec::new();
        for call in 0..47 {
            if yields_alone().await {
                yielded.push(call);
            }
        }
        assert_eq!(yielded, [0, 2, 6, 14, 30, 46]);
        assert!(!yields_alone().await, "backing off");
        // Requests arriving together: the first of them to yield finds the others.
        burst(20).await;
        assert!(yields_alone().await, "busy again: the next request yields");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_gives_way_only_when_another_connection_is_open() {
        // Each test runs on a thread of its own, whose count starts from nothing.
        assert_eq!(open_here(), 0, "a fresh thread has no connection open");
        let first = Open::new();
        assert_eq!(open_here(), 1);
        assert!(
            !others_ran_during_the_wait().await,
            "a lone connection must not yield"
        );
        let second = Open::new();
        assert_eq!(open_here(), 2);
        assert!(
            others_ran_during_the_wait().await,
            "with another connection open the request yields"
        );
        drop(second);
        drop(first);
        assert_eq!(open_here(), 0, "a closed connection is no longer counted");
        let alone = Open::multiplexed();
        assert!(
            others_ran_during_the_wait().await,
            "a request on a multiplexed connection yields even when it is the only one"
        );
        drop(alone);
        assert_eq!(open_here(), 0);
    }

    #[test]
    fn connections_are_counted_per_worker_thread() {
        let _here = Open::new();
        let elsewhere = std::thread::spawn(|| {
            let _there = Open::new();
            open_here()
        })
        .join()
        .expect("thread");
        assert_eq!(elsewhere, 1);
        assert_eq!(
            open_here(),
            1,
            "the other thread's connection is not counted here"
        );
    }
}
