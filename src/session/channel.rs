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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use parking_lot::Mutex;

use bytes::Bytes;

use crate::cluster::EventId;

/// One item of a response body, typed until the transport frames it.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The whole answer, as a JSON body.
    Json(Bytes),
    /// A logged JSON-RPC message (an SSE event with its id).
    Event { id: EventId, data: Bytes },
    /// The priming event of SSE polling: an id, empty data, and the reconnection delay.
    Priming { id: EventId, retry_ms: u64 },
    /// The legacy transport's first event: where to POST.
    Endpoint(String),
    /// A resumption was accepted (written as nothing; replayed events follow).
    Resumed,
    /// A resumption named an event the log does not know.
    UnknownEvent(EventId),
    /// The server is going away: reconnect after this delay (then the stream ends).
    Reconnect { retry_ms: u64 },
}

/// Shared by the senders and the receiver. A queue that allocates nothing until an item waits in
/// it (an open stream that is idle, such as a standalone GET stream, holds no buffer; a tokio
/// channel allocates a block of 32 slots, ~2 KB, per stream).
struct Shared {
    /// Each item with what it counts against the budget.
    queue: Mutex<VecDeque<(StreamItem, usize)>>,
    waker: AtomicWaker,
    senders: AtomicUsize,
    receiver_gone: AtomicBool,
    queued: AtomicUsize,
    limit: usize,
    overflowed: AtomicBool,
}

/// The session's end: cloned into the outbox for logged events.
pub struct StreamSink {
    shared: Arc<Shared>,
}

/// The body's end.
pub struct StreamReceiver {
    shared: Arc<Shared>,
}

/// The item could not be queued: the body is gone or the stream went over its budget.
#[derive(Debug, PartialEq, Eq)]
pub struct StreamClosed;

/// A stream holding at most `limit` unread bytes (at least one item, whatever its size).
pub fn stream_channel(limit: usize) -> (StreamSink, StreamReceiver) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(VecDeque::new()),
        waker: AtomicWaker::new(),
        senders: AtomicUsize::new(1),
        receiver_gone: AtomicBool::new(false),
        queued: AtomicUsize::new(0),
        limit,
        overflowed: AtomicBool::new(false),
    });
    (
        StreamSink {
            shared: shared.clone(),
        },
        StreamReceiver { shared },
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

impl Clone for StreamSink {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        StreamSink {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for StreamSink {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: the receiver ends once it has taken what is queued.
            self.shared.waker.wake();
        }
    }
}

impl StreamSink {
    pub fn send(&self, item: StreamItem) -> Result<(), StreamClosed> {
        let shared = &self.shared;
        if self.is_closed() {
            return Err(StreamClosed);
        }
        let size = weight(&item);
        let before = shared.queued.fetch_add(size, Ordering::AcqRel);
        if before > 0 && before.saturating_add(size) > shared.limit {
            shared.queued.fetch_sub(size, Ordering::AcqRel);
            shared.overflowed.store(true, Ordering::Release);
            crate::observe::metrics::stream_overflowed();
            shared.waker.wake();
            return Err(StreamClosed);
        }
        self.push(item, size);
        Ok(())
    }

    /// An event of a replay the client asked for: not counted against the budget.
    pub fn send_replayed(&self, item: StreamItem) -> Result<(), StreamClosed> {
        if self.is_closed() {
            return Err(StreamClosed);
        }
        self.push(item, 0);
        Ok(())
    }

    fn push(&self, item: StreamItem, size: usize) {
        self.shared.queue.lock().push_back((item, size));
        self.shared.waker.wake();
    }

    /// The body is gone, or the stream was closed for going over its budget.
    pub fn is_closed(&self) -> bool {
        self.shared.receiver_gone.load(Ordering::Acquire)
            || self.shared.overflowed.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for StreamReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReceiver")
            .field("queued", &self.shared.queued.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for StreamReceiver {
    fn drop(&mut self) {
        self.shared.receiver_gone.store(true, Ordering::Release);
        // What was queued goes now, not with the last sender.
        std::mem::take(&mut *self.shared.queue.lock());
    }
}

impl StreamReceiver {
    /// The next queued item (and a smaller queue once a burst has been taken).
    fn pop(&self) -> Option<StreamItem> {
        let mut queue = self.shared.queue.lock();
        let (item, size) = queue.pop_front()?;
        if queue.is_empty() && queue.capacity() > 16 {
            queue.shrink_to(4);
        }
        drop(queue);
        self.shared.queued.fetch_sub(size, Ordering::AcqRel);
        Some(item)
    }

    fn overflowed(&self) -> bool {
        self.shared.overflowed.load(Ordering::Acquire)
    }

    /// The next item; `None` once every sender is gone and the queue is empty, or once the
    /// stream went over its budget.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<StreamItem>> {
        if self.overflowed() {
            return Poll::Ready(None);
        }
        if let Some(item) = self.pop() {
            return Poll::Ready(Some(item));
        }
        self.shared.waker.register(cx.waker());
        // Checked again after registering, so an item or the last sender's drop in between is
        // not missed.
        if self.overflowed() {
            return Poll::Ready(None);
        }
        if let Some(item) = self.pop() {
            return Poll::Ready(Some(item));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Poll::Ready(self.pop());
        }
        Poll::Pending
    }

    pub async fn recv(&mut self) -> Option<StreamItem> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// An item already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<StreamItem> {
        if self.overflowed() {
            return None;
        }
        self.pop()
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

    #[tokio::test]
    async fn the_receiver_wakes_for_items_and_ends_with_the_last_sender() {
        let (tx, mut rx) = stream_channel(1 << 20);
        let tx2 = tx.clone();
        let sender = tokio::spawn(async move {
            for i in 0..100 {
                tx2.send(json(i)).unwrap();
                tokio::task::yield_now().await;
            }
        });
        for i in 0..100 {
            assert_eq!(rx.recv().await, Some(json(i)));
        }
        sender.await.unwrap();
        assert!(!tx.is_closed());
        drop(tx);
        assert_eq!(rx.recv().await, None, "ends once every sender is gone");
    }

    #[test]
    fn a_dropped_receiver_closes_the_stream_and_frees_what_it_held() {
        let (tx, rx) = stream_channel(1 << 20);
        tx.send(json(10)).unwrap();
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(json(10)), Err(StreamClosed));
        assert!(tx.shared.queue.lock().is_empty());
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
