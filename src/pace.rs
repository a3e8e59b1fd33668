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

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static OPEN: Cell<usize> = const { Cell::new(0) };
}

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
/// open, or this one multiplexed (see the module).
pub async fn let_others_in() {
    if open_here() > 1 {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Whether a task spawned just before `let_others_in` ran during it.
    async fn others_ran_during_the_wait() -> bool {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let other = tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
        let_others_in().await;
        let during = ran.load(Ordering::SeqCst);
        let _ = other.await;
        during
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
