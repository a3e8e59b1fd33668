//! Which stream a message goes on: a POST's own stream answered as JSON or made SSE (events
//! logged first, a priming event where the revision polls), the standalone stream, the legacy
//! stream, and the resumption of a stream after `Last-Event-ID`.

use super::*;

impl Outlet {
    /// Hands an item that is not logged (a JSON answer, the legacy `endpoint` event) to the
    /// stream's client: kept for the claim while unclaimed, dropped when nobody is connected.
    pub(super) fn send(&mut self, item: StreamItem) {
        match self {
            Outlet::Unclaimed(items) => items.push(item),
            Outlet::Open(sink) => {
                if sink.send(item).is_err() {
                    *self = Outlet::Detached;
                }
            }
            Outlet::Detached => {}
        }
    }

    pub(super) fn sink(&self) -> Option<StreamSink> {
        match self {
            Outlet::Open(sink) if !sink.is_closed() => Some(sink.clone()),
            _ => None,
        }
    }

    pub(super) fn is_connected(&self) -> bool {
        matches!(self, Outlet::Open(sink) if !sink.is_closed())
    }
}

impl Stream {
    /// The id of this SSE stream's next event, and where the event goes once it is logged.
    pub(super) fn next_event(&mut self) -> Option<(EventId, Option<StreamSink>)> {
        let stream = self.log_id?;
        self.seq += 1;
        Some((
            EventId {
                stream,
                seq: self.seq,
            },
            self.outlet.sink(),
        ))
    }
}

impl Session {
    /// Hands a POST's stream to the transport once the POST is handled: plain JSON when the
    /// whole answer is already there, else a channel that carries what was said so far and what
    /// follows. On revisions with SSE polling, an answer still being computed is made an SSE
    /// stream at once (priming event first), so the client can resume it from any replica if the
    /// connection breaks. (Legacy sessions answer on their one SSE stream: no body here.)
    pub(super) fn claim(&mut self, key: StreamKey, running: bool) -> Reply {
        if self.transport == TransportKind::Legacy && self.standalone == Some(key) {
            return Reply::Accepted;
        }
        if running && self.polling() {
            self.ensure_sse(key);
        }
        let items = match self.streams.get_mut(&key) {
            Some(stream) => {
                if let Some(rx) = stream.unclaimed_rx.take() {
                    return Reply::Stream(rx);
                }
                match std::mem::replace(&mut stream.outlet, Outlet::Detached) {
                    Outlet::Unclaimed(items) => {
                        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
                        for item in items {
                            let _ = tx.send(item);
                        }
                        stream.outlet = Outlet::Open(tx);
                        return Reply::Stream(rx);
                    }
                    other => {
                        stream.outlet = other;
                        return Reply::Accepted;
                    }
                }
            }
            None => self.finished.take().unwrap_or_default(),
        };
        match <[StreamItem; 1]>::try_from(items) {
            Ok([StreamItem::Json(body)]) => Reply::Json(body),
            Ok(items) => Reply::Stream(closed_stream(items)),
            // Nothing is owed any more (its requests were cancelled): still a stream, which ends
            // at once; a POST holding requests is never answered a bare 202.
            Err(items) => Reply::Stream(closed_stream(items)),
        }
    }

    /// Whether streams of this session use SSE polling (priming events, server-side close).
    pub(super) fn polling(&self) -> bool {
        self.transport == TransportKind::Streamable
            && self.version.is_some_and(ProtocolVersion::has_sse_polling)
    }

    /// The stream a POST's requests are answered on: its own for Streamable HTTP, the one SSE
    /// stream for the legacy transport (then there is no body to return).
    pub(super) fn open_request_stream(&mut self, owed: usize, batch: bool) -> StreamKey {
        if self.transport == TransportKind::Legacy {
            if let Some(key) = self.standalone {
                return key;
            }
        }
        let key = self.new_stream_key();
        let batch = batch.then(Vec::new);
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Unclaimed(Vec::new()),
                log_id: None,
                seq: 0,
                unclaimed_rx: None,
                owed,
                batch,
                standalone: false,
            },
        );
        key
    }

    /// Removes a finished stream; what it said before its POST was claimed is kept for `claim`.
    pub(super) fn finish(&mut self, key: StreamKey) {
        if let Some(stream) = self.streams.remove(&key) {
            if let Outlet::Unclaimed(items) = stream.outlet {
                self.finished = Some(items);
            }
        }
    }

    pub(super) fn new_stream_key(&mut self) -> StreamKey {
        self.next_stream += 1;
        StreamKey(self.next_stream)
    }

    /// SSE polling: ends the HTTP connection of `origin`'s stream but keeps the stream, so what
    /// follows is logged and delivered when the client resumes with `Last-Event-ID`. Only for
    /// revisions that have SSE polling, on Streamable HTTP.
    pub fn close_stream(&mut self, origin: &RequestId) {
        if !self.polling() {
            return;
        }
        let Some(key) = self.inflight.get(origin).map(|f| f.stream) else {
            return;
        };
        self.ensure_sse(key);
        if let Some(stream) = self.streams.get_mut(&key) {
            stream.outlet = Outlet::Detached;
            stream.unclaimed_rx = None;
        }
    }

    /// Opens the standalone stream (GET without `Last-Event-ID`, or the legacy SSE stream). A
    /// new one replaces the previous one, so no message goes to two streams.
    pub fn open_standalone(&mut self) -> StreamReceiver {
        if let Some(old) = self.standalone.take() {
            self.streams.remove(&old);
        }
        let key = self.new_stream_key();
        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Open(tx),
                log_id: None,
                seq: 0,
                unclaimed_rx: None,
                owed: 0,
                batch: None,
                standalone: true,
            },
        );
        self.standalone = Some(key);
        self.ensure_sse(key);
        self.dirty = true;
        rx
    }

    /// Resumes the stream that `last` belongs to: the outbox replays its later events (every one
    /// queued before this call, exactly once), then, if the stream is live here, what follows is
    /// delivered as it is logged. The first item is `Resumed`, or `UnknownEvent` when the log does
    /// not know `last`.
    pub fn resume(&mut self, last: EventId) -> StreamReceiver {
        let (tx, rx) = stream_channel(self.settings.stream_buffer_bytes);
        // A live stream moves to the resuming connection, unless the id is one the stream never
        // sent: that resume is refused (400), and the stream's own connection goes on.
        let live = self
            .streams
            .values_mut()
            .find(|s| s.log_id == Some(last.stream))
            .filter(|s| last.seq <= s.seq);
        let upto = match live {
            Some(stream) => {
                stream.outlet = Outlet::Open(tx.clone());
                stream.unclaimed_rx = None;
                Some(stream.seq)
            }
            None => None,
        };
        self.outbox.push(OutboxItem::Resume {
            after: last,
            upto,
            sink: tx,
        });
        rx
    }

    /// Sends `message` on `key`. A stream whose first message is its (last) response answers
    /// with plain JSON; anything else makes it an SSE stream whose events are logged first.
    pub(super) fn emit(&mut self, key: StreamKey, message: Bytes, is_response: bool) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        if is_response && !stream.standalone {
            stream.owed = stream.owed.saturating_sub(1);
        }
        if stream.log_id.is_none() && is_response && !stream.standalone {
            match &mut stream.batch {
                None => {
                    stream.outlet.send(StreamItem::Json(message));
                    self.finish(key);
                }
                Some(gathered) => {
                    gathered.push(message);
                    if stream.owed == 0 {
                        let all = json_array(&std::mem::take(gathered));
                        stream.outlet.send(StreamItem::Json(all));
                        self.finish(key);
                    }
                }
            }
            return;
        }
        self.ensure_sse(key);
        self.write_event(key, message);
        self.settle(key);
    }

    /// Ends a request stream once it owes nothing more.
    pub(super) fn settle(&mut self, key: StreamKey) {
        if self
            .streams
            .get(&key)
            .is_some_and(|s| !s.standalone && s.owed == 0)
        {
            if let Some(stream) = self.streams.get_mut(&key) {
                if let Some(gathered) = stream
                    .batch
                    .take()
                    .filter(|g| !g.is_empty() && stream.log_id.is_none())
                {
                    stream.outlet.send(StreamItem::Json(json_array(&gathered)));
                }
            }
            self.finish(key);
        }
    }

    /// Turns a stream into an SSE stream: gives it a log id (and, for a POST not claimed yet,
    /// the channel its body will read) and sends the priming event on revisions with SSE
    /// polling; responses gathered for a batch go out first.
    pub(super) fn ensure_sse(&mut self, key: StreamKey) {
        let polling = self.polling();
        if self.streams.get(&key).is_none_or(|s| s.log_id.is_some()) {
            return;
        }
        self.streams_opened += 1;
        let log_id = StreamId::new(self.outbox.epoch(), self.streams_opened);
        let retry_ms = self.settings.sse_retry_ms;
        let stream_buffer_bytes = self.settings.stream_buffer_bytes;
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        stream.log_id = Some(log_id);
        if let Outlet::Unclaimed(items) = &mut stream.outlet {
            let (tx, rx) = stream_channel(stream_buffer_bytes);
            for item in items.drain(..) {
                let _ = tx.send(item);
            }
            stream.outlet = Outlet::Open(tx);
            stream.unclaimed_rx = Some(rx);
        }
        let gathered = stream
            .batch
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        if stream.standalone || !self.inflight.is_empty() {
            self.dirty = true;
        }
        if polling {
            if let Some((id, sink)) = stream.next_event() {
                self.outbox.push(OutboxItem::Event(Box::new(PendingEvent {
                    event: StoredEvent {
                        id,
                        data: Bytes::new(),
                    },
                    item: StreamItem::Priming { id, retry_ms },
                    sink,
                })));
            }
        }
        for message in gathered {
            self.write_event(key, message);
        }
    }

    pub(super) fn write_event(&mut self, key: StreamKey, data: Bytes) {
        let Some((id, sink)) = self.streams.get_mut(&key).and_then(Stream::next_event) else {
            return;
        };
        self.outbox.push(OutboxItem::Event(Box::new(PendingEvent {
            event: StoredEvent {
                id,
                data: data.clone(),
            },
            item: StreamItem::Event { id, data },
            sink,
        })));
    }

    /// The legacy transport's single stream: opened with the `endpoint` event.
    pub fn open_legacy_stream(&mut self, endpoint: &str) -> StreamReceiver {
        let rx = self.open_standalone();
        if let Some(stream) = self.standalone.and_then(|k| self.streams.get_mut(&k)) {
            stream
                .outlet
                .send(StreamItem::Endpoint(endpoint.to_string()));
        }
        rx
    }
}

/// A JSON array of already-serialized messages (a batch answer).
fn json_array(items: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(items.iter().map(|b| b.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    Bytes::from(out)
}
