//! Server-Sent Events framing (pure) and the HTTP body that streams a session's typed items as
//! SSE, with heartbeats. The only place stream items become bytes.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::Stream;

use crate::session::{StreamItem, StreamReceiver};

/// A JSON-RPC message as an SSE event with an id. `data` must hold no newline (compact JSON).
pub fn event(id: &str, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + id.len() + 32);
    b.put_slice(b"event: message\nid: ");
    b.put_slice(id.as_bytes());
    b.put_slice(b"\ndata: ");
    b.put_slice(data);
    b.put_slice(b"\n\n");
    b.freeze()
}

/// The priming event of SSE polling: an id and empty data, plus the reconnection delay.
pub fn priming(id: &str, retry_ms: u64) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
}

/// Tells the client to reconnect after `retry_ms` (sent before the server ends a stream while
/// going away).
pub fn reconnect(retry_ms: u64) -> Bytes {
    Bytes::from(format!("retry: {retry_ms}\n\n"))
}

/// One stream item as SSE bytes (`None`: nothing to write).
pub fn frame(item: StreamItem) -> Option<Bytes> {
    match item {
        StreamItem::Json(b) => Some(b),
        StreamItem::Event { id, data } => Some(event(&id.to_string(), &data)),
        StreamItem::Priming { id, retry_ms } => Some(priming(&id.to_string(), retry_ms)),
        StreamItem::Endpoint(url) => Some(named_event("endpoint", &url)),
        StreamItem::Reconnect { retry_ms } => Some(reconnect(retry_ms)),
        StreamItem::Resumed | StreamItem::UnknownEvent(_) => None,
    }
}

/// A named event without id (the legacy transport's `endpoint`).
pub fn named_event(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// An SSE comment that keeps an idle stream open (and finds out when its client left).
pub const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// The body of an SSE response: the session's items, a comment every `heartbeat` so idle
/// connections stay open and dead ones are noticed, and a hook run when the client goes away.
/// A `Reconnect` item ends the body after it is written.
pub struct SseBody {
    rx: StreamReceiver,
    first: Option<StreamItem>,
    ending: bool,
    heartbeat: tokio::time::Interval,
    on_close: Option<Box<dyn FnOnce() + Send>>,
    /// Counts the stream as open while it lives.
    _open: crate::observe::metrics::StreamGauge,
}

impl SseBody {
    pub fn new(
        first: Option<StreamItem>,
        rx: StreamReceiver,
        heartbeat: Duration,
        on_close: Option<Box<dyn FnOnce() + Send>>,
        tenant: &str,
    ) -> Self {
        let mut interval =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        SseBody {
            rx,
            first,
            ending: false,
            heartbeat: interval,
            on_close,
            _open: crate::observe::metrics::StreamGauge::open(tenant),
        }
    }
}

impl Stream for SseBody {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ending {
            return Poll::Ready(None);
        }
        loop {
            let item = match self.first.take() {
                Some(first) => first,
                None => match self.rx.poll_recv(cx) {
                    Poll::Ready(Some(item)) => item,
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => break,
                },
            };
            if matches!(item, StreamItem::Reconnect { .. }) {
                self.ending = true;
            }
            if let Some(bytes) = frame(item) {
                return Poll::Ready(Some(Ok(bytes)));
            }
        }
        match self.heartbeat.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Bytes::from_static(HEARTBEAT)))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        if let Some(f) = self.on_close.take() {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_well_formed() {
        assert_eq!(
            &event("3-1", b"{}")[..],
            b"event: message\nid: 3-1\ndata: {}\n\n"
        );
        assert_eq!(&priming("3-0", 500)[..], b"id: 3-0\nretry: 500\ndata: \n\n");
        assert_eq!(
            &named_event("endpoint", "/x")[..],
            b"event: endpoint\ndata: /x\n\n"
        );
    }
}
