//! The channel between a session and the HTTP body of one of its streams, with a byte budget.
//!
//! A client that stops reading its SSE stream makes the body stop pulling from this channel (the
//! socket is full); without a bound every later message would pile up in server memory. Each
//! stream may hold `limit` bytes not yet taken by its body; the message that would go past it
//! closes the stream instead: the sender sees it closed (the session treats the stream as
//! detached), and the body ends at its next poll, dropping what it still held. Events are in the
//! session's event log before they are sent here, so a client on a resumable revision gets them
//! again by reconnecting with `Last-Event-ID`. A replay is exempt (`send_replayed`): it is a burst
//! the client asked for, bounded by the event log's own capacity.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use super::core::StreamItem;

struct Budget {
    queued: AtomicUsize,
    limit: usize,
    overflowed: AtomicBool,
}

/// The session's end: cloned into the outbox for logged events.
#[derive(Clone)]
pub struct StreamSink {
    /// Each item with what it counts against the budget.
    tx: mpsc::UnboundedSender<(StreamItem, usize)>,
    budget: Arc<Budget>,
}

/// The body's end.
pub struct StreamReceiver {
    rx: mpsc::UnboundedReceiver<(StreamItem, usize)>,
    budget: Arc<Budget>,
}

/// The item could not be queued: the body is gone or the stream went over its budget.
#[derive(Debug, PartialEq, Eq)]
pub struct StreamClosed;

/// A stream holding at most `limit` unread bytes (at least one item, whatever its size).
pub fn stream_channel(limit: usize) -> (StreamSink, StreamReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(Budget {
        queued: AtomicUsize::new(0),
        limit,
        overflowed: AtomicBool::new(false),
    });
    (
        StreamSink {
            tx,
            budget: budget.clone(),
        },
        StreamReceiver { rx, budget },
    )
}

/// A stream that yields `items` and then ends (a whole answer: no budget applies).
pub fn closed_stream(items: impl IntoIterator<Item = StreamItem>) -> StreamReceiver {
    let (tx, rx) = stream_channel(usize::MAX);
    for item in items {
        let _ = tx.send(item);
    }
    rx
}

/// What an item counts against the budget: its payload and a little for its framing.
fn weight(item: &StreamItem) -> usize {
    const FRAME: usize = 48;
    FRAME
        + match item {
            StreamItem::Json(body) => body.len(),
            StreamItem::Event { data, .. } => data.len(),
            StreamItem::Endpoint(url) => url.len(),
            StreamItem::Priming { .. }
            | StreamItem::Resumed
            | StreamItem::UnknownEvent(_)
            | StreamItem::Reconnect { .. } => 0,
        }
}

impl StreamSink {
    pub fn send(&self, item: StreamItem) -> Result<(), StreamClosed> {
        let budget = &self.budget;
        if budget.overflowed.load(Ordering::Acquire) {
            return Err(StreamClosed);
        }
        let size = weight(&item);
        let before = budget.queued.fetch_add(size, Ordering::AcqRel);
        if before > 0 && before.saturating_add(size) > budget.limit {
            budget.queued.fetch_sub(size, Ordering::AcqRel);
            budget.overflowed.store(true, Ordering::Release);
            crate::metrics::stream_overflowed();
            return Err(StreamClosed);
        }
        self.tx.send((item, size)).map_err(|_| {
            budget.queued.fetch_sub(size, Ordering::AcqRel);
            StreamClosed
        })
    }

    /// An event of a replay the client asked for: not counted against the budget.
    pub fn send_replayed(&self, item: StreamItem) -> Result<(), StreamClosed> {
        if self.budget.overflowed.load(Ordering::Acquire) {
            return Err(StreamClosed);
        }
        self.tx.send((item, 0)).map_err(|_| StreamClosed)
    }

    /// The body is gone, or the stream was closed for going over its budget.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed() || self.budget.overflowed.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for StreamReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReceiver")
            .field("queued", &self.budget.queued.load(Ordering::Relaxed))
            .finish()
    }
}

impl StreamReceiver {
    fn taken(&self, item: Option<(StreamItem, usize)>) -> Option<StreamItem> {
        let (item, size) = item?;
        self.budget.queued.fetch_sub(size, Ordering::AcqRel);
        Some(item)
    }

    fn overflowed(&self) -> bool {
        self.budget.overflowed.load(Ordering::Acquire)
    }

    /// The next item; `None` once every sender is gone or the stream went over its budget.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<StreamItem>> {
        if self.overflowed() {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(item) => Poll::Ready(self.taken(item)),
            Poll::Pending => Poll::Pending,
        }
    }

    pub async fn recv(&mut self) -> Option<StreamItem> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// An item already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<StreamItem> {
        if self.overflowed() {
            return None;
        }
        let item = self.rx.try_recv().ok();
        self.taken(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn json(n: usize) -> StreamItem {
        StreamItem::Json(Bytes::from(vec![b' '; n]))
    }

    #[test]
    fn a_reader_keeps_the_stream_open_and_a_stalled_one_closes_it() {
        let (tx, mut rx) = stream_channel(1000);
        for _ in 0..100 {
            tx.send(json(500)).unwrap();
            assert_eq!(rx.try_recv(), Some(json(500)));
        }
        assert!(!tx.is_closed());
        // Nobody reads: the second 500-byte item still fits, the third does not.
        tx.send(json(400)).unwrap();
        tx.send(json(400)).unwrap();
        assert_eq!(tx.send(json(400)), Err(StreamClosed));
        assert!(tx.is_closed());
        assert_eq!(tx.send(json(1)), Err(StreamClosed));
        // The body ends at once, dropping what it held.
        assert_eq!(rx.try_recv(), None);
    }

    #[test]
    fn a_replay_is_not_counted_but_what_follows_it_is() {
        let (tx, mut rx) = stream_channel(1000);
        for _ in 0..100 {
            tx.send_replayed(json(500)).unwrap();
        }
        tx.send(json(500)).unwrap();
        tx.send(json(400)).unwrap();
        assert_eq!(tx.send(json(400)), Err(StreamClosed));
        assert_eq!(rx.try_recv(), None);
    }

    #[test]
    fn one_item_larger_than_the_budget_still_goes_out_alone() {
        let (tx, mut rx) = stream_channel(100);
        tx.send(json(10_000)).unwrap();
        assert_eq!(rx.try_recv(), Some(json(10_000)));
        tx.send(json(10_000)).unwrap();
        assert_eq!(tx.send(json(10)), Err(StreamClosed));
    }

    #[test]
    fn a_whole_answer_is_never_cut() {
        let mut rx = closed_stream((0..100).map(|_| json(1000)));
        let mut n = 0;
        while rx.try_recv().is_some() {
            n += 1;
        }
        assert_eq!(n, 100);
    }
}
