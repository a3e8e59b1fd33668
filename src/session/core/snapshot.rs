//! A session's life beyond one process: the snapshot other replicas (or a restarted actor) go
//! on from, restoring it, recovering the requests it was running, and ending it here or
//! everywhere.

use super::*;

/// A request that was running when the snapshot was taken: enough to run it again (or to tell
/// the client it was interrupted) on another replica.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InFlightRecord {
    pub id: RequestId,
    /// The SSE stream its answer goes to (`None`: not an SSE stream yet, nobody can resume it).
    pub stream: Option<u64>,
    pub method: String,
    pub params: Value,
    pub rerunnable: bool,
}

/// A server→client request the client has not answered yet, and the request it serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AwaitingRecord {
    pub id: RequestId,
    pub origin: RequestId,
}

/// What another replica (or a restarted actor) needs to go on serving the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSnapshot {
    pub id: String,
    pub tenant: String,
    pub transport: TransportKind,
    pub version: Option<String>,
    pub initialized: bool,
    /// Shared with the live session (a snapshot is taken after every change that matters).
    pub client_capabilities: Arc<Value>,
    /// As the client sent it, kept as text: nothing reads inside it.
    pub client_info: Box<RawValue>,
    pub log_level: String,
    pub subscriptions: Vec<String>,
    pub standalone_stream: Option<u64>,
    /// Streams opened in the current ownership epoch.
    #[serde(default)]
    pub streams_opened: u64,
    #[serde(default)]
    pub next_server_request: i64,
    #[serde(default)]
    pub inflight: Vec<InFlightRecord>,
    #[serde(default)]
    pub awaiting: Vec<AwaitingRecord>,
    /// Who opened the session (protected tenants): only that principal may use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Arc<Value>>,
}

impl SessionSnapshot {
    /// The streams a restored session continues (whose numbering it must pick up).
    pub fn live_streams(&self) -> Vec<StreamId> {
        let mut streams: Vec<StreamId> = self
            .standalone_stream
            .into_iter()
            .chain(self.inflight.iter().filter_map(|f| f.stream))
            .map(StreamId)
            .collect();
        streams.sort();
        streams.dedup();
        streams
    }
}

/// Where a restored stream whose log holds nothing (it expired, or the stream never had an
/// event) goes on numbering: the current time in milliseconds. A client may have seen events
/// of it before its log expired; restarting at 1 would give new events ids below its
/// `Last-Event-ID`, and its resumption would skip them. A stream numbers one per event, so
/// this is above any id it gave out (unless it averaged more than an event per millisecond
/// since an earlier such restart).
fn renumbered_from() -> u64 {
    u64::try_from(crate::store::now_millis()).unwrap_or(0)
}

impl Session {
    /// Rebuilds a session from its snapshot: after its actor crashed (same lease: `same_epoch`)
    /// or on another replica that took it over (a new lease). `last_seqs` are the last event
    /// seqs the log holds for the streams it continues, so numbering goes on without a gap or a
    /// repeat. Connections are gone; clients resume with `Last-Event-ID`. In-flight requests are
    /// kept for `recover`.
    pub fn restore(
        snapshot: &SessionSnapshot,
        same_epoch: bool,
        last_seqs: &HashMap<StreamId, u64>,
        catalog: CatalogHandle,
        outbox: Outbox,
        settings: Arc<SessionSettings>,
    ) -> Self {
        let mut s = Session::new(
            snapshot.id.as_str().into(),
            snapshot.tenant.as_str().into(),
            snapshot.transport,
            catalog,
            outbox,
            settings,
        );
        s.version = snapshot.version.as_deref().and_then(ProtocolVersion::parse);
        // The flag reaches the snapshot with the session's next save, which a session that
        // only ran quick requests may never have made: a restored session that had answered
        // `initialize` counts as initialized (the client will not send the notification
        // again, and server requests wait for it).
        if snapshot.initialized || s.version.is_some() {
            s.view.set_initialized();
        }
        s.client_capabilities = snapshot.client_capabilities.clone();
        s.client_info = snapshot.client_info.clone();
        s.log_level = LogLevel::parse(&snapshot.log_level).unwrap_or(LogLevel::Info);
        s.subscriptions = snapshot.subscriptions.iter().cloned().collect();
        s.next_server_request = snapshot.next_server_request;
        if same_epoch {
            s.streams_opened = snapshot.streams_opened;
        }
        if let Some(standalone) = snapshot.standalone_stream {
            let key = s.restored_stream(StreamId(standalone), last_seqs, true);
            s.standalone = Some(key);
        }
        s.recovered = snapshot.inflight.clone();
        s.recovered_awaiting = snapshot.awaiting.clone();
        s.principal = snapshot.principal.clone();
        s.publish_view();
        // Saved again under the lease it is restored with.
        s.dirty = true;
        s
    }

    /// A stream of a snapshot, detached until its client resumes it.
    pub(super) fn restored_stream(
        &mut self,
        id: StreamId,
        last_seqs: &HashMap<StreamId, u64>,
        standalone: bool,
    ) -> StreamKey {
        if let Some((key, _)) = self.streams.iter().find(|(_, s)| s.log_id == Some(id)) {
            return *key;
        }
        let key = self.new_stream_key();
        self.streams.insert(
            key,
            Stream {
                outlet: Outlet::Detached,
                log_id: Some(id),
                seq: last_seqs.get(&id).copied().unwrap_or_else(renumbered_from),
                unclaimed_rx: None,
                owed: 0,
                batch: None,
                standalone,
            },
        );
        key
    }

    /// After a restore: a call that was waiting for the client's input goes on from its recorded
    /// round when its catalog can (the client's answer, sent to any replica, completes it); other
    /// interrupted requests that may safely run twice run again (their answers go to their
    /// original streams); the rest are answered with an error saying they were interrupted.
    /// Returns the invocations to run.
    pub fn recover(
        &mut self,
        last_seqs: &HashMap<StreamId, u64>,
        port: &Arc<dyn SessionPort>,
    ) -> Vec<Invocation> {
        let mut jobs = Vec::new();
        let awaiting = std::mem::take(&mut self.recovered_awaiting);
        for record in std::mem::take(&mut self.recovered) {
            let Some(stream) = record.stream else {
                continue; // Never became SSE: no client can receive its answer.
            };
            let key = self.restored_stream(StreamId(stream), last_seqs, false);
            if let Some(s) = self.streams.get_mut(&key) {
                s.owed += 1;
            }
            if let Some(waiting) = awaiting.iter().find(|a| a.origin == record.id) {
                if let Some(job) = self.resume_waiting(&record, waiting, key, port) {
                    jobs.push(job);
                    continue;
                }
            }
            // Not going on from where it waited: what it asked the client is not waited for
            // any more, and the client is told so on the request's stream (an open form or
            // sampling prompt closes instead of being answered into the void).
            for asked in awaiting.iter().filter(|a| a.origin == record.id) {
                let cancelled = jsonrpc::notification_message(
                    "notifications/cancelled",
                    json!({ "requestId": asked.id,
                        "reason": "the request that asked was interrupted (its server stopped)" }),
                );
                self.emit(key, to_bytes(&cancelled), false);
            }
            if record.rerunnable {
                tracing::info!(session = %self.id, id = %record.id, method = %record.method,
                    "re-running a request interrupted by a failover");
                let params = match record.params {
                    Value::Null => None,
                    // Without its progress token: run again from the start, it would report
                    // progress the client already saw, and progress MUST increase. The client
                    // gets the call's answer, with no more progress.
                    mut p => {
                        if let Some(meta) = p.get_mut("_meta").and_then(Value::as_object_mut) {
                            meta.remove("progressToken");
                        }
                        Some(p)
                    }
                };
                let req = Request {
                    id: record.id,
                    method: record.method,
                    params,
                    meta: None,
                };
                self.dispatch(req, key, port, &mut jobs);
            } else {
                self.inflight.insert(
                    record.id.clone(),
                    InFlight {
                        stream: key,
                        method: record.method.as_str().into(),
                        started: std::time::Instant::now(),
                        abort: None,
                        record: None,
                        replay_bytes: 0,
                        span: crate::observe::trace::RequestSpan::none(),
                    },
                );
                let error = RpcError::internal(
                    "The request was interrupted: the server running it stopped before it \
                     finished. It may or may not have taken effect; retry it if that is safe.",
                )
                .with_data(json!({ "interrupted": true }));
                self.complete(&record.id, Err(error));
            }
        }
        self.dirty = true;
        jobs
    }

    /// Goes on with a tools/call that was waiting for the client's answer to `waiting`.
    pub(super) fn resume_waiting(
        &mut self,
        record: &InFlightRecord,
        waiting: &AwaitingRecord,
        key: StreamKey,
        port: &Arc<dyn SessionPort>,
    ) -> Option<Invocation> {
        if record.method != "tools/call" {
            return None;
        }
        let version = self.version?;
        let name = record.params.get("name").and_then(Value::as_str)?;
        let arguments = match record.params.get("arguments") {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        let request = Request {
            id: record.id.clone(),
            method: record.method.clone(),
            params: Some(record.params.clone()),
            meta: None,
        };
        let catalog = self.catalog.current();
        let ctx = self
            .scope(version, &catalog, port)
            .context(&record.id, request.progress_token());
        let (tx, rx) = oneshot::channel();
        let future = catalog.resume_call(name, arguments, ctx.clone(), rx)?;
        tracing::info!(session = %self.id, id = %record.id, tool = name,
            "a call waiting for the client's input goes on after a failover");
        self.inflight.insert(
            record.id.clone(),
            InFlight {
                stream: key,
                method: record.method.as_str().into(),
                started: std::time::Instant::now(),
                abort: None,
                record: Some((
                    record.method.clone(),
                    record.params.clone(),
                    record.rerunnable,
                )),
                // Restored: counted with the snapshot it came in, not against this budget.
                replay_bytes: 0,
                span: crate::observe::trace::RequestSpan::none(),
            },
        );
        self.pending.insert(
            waiting.id.clone(),
            PendingRequest {
                origin: record.id.clone(),
                reply: tx,
                _gauge: crate::observe::metrics::PendingGauge::open(&self.tenant, "unknown"),
            },
        );
        Some(Invocation {
            id: record.id.clone(),
            future,
            ctx,
            span: crate::observe::trace::RequestSpan::none(),
        })
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        let mut subscriptions: Vec<String> = self.subscriptions.iter().cloned().collect();
        subscriptions.sort();
        let mut inflight: Vec<InFlightRecord> = self
            .inflight
            .iter()
            .filter_map(|(id, f)| {
                let (method, params, rerunnable) = f.record.clone()?;
                Some(InFlightRecord {
                    id: id.clone(),
                    stream: self
                        .streams
                        .get(&f.stream)
                        .and_then(|s| s.log_id)
                        .map(|s| s.0),
                    method,
                    params,
                    rerunnable,
                })
            })
            .collect();
        inflight.extend(self.recovered.iter().cloned());
        SessionSnapshot {
            id: self.id.to_string(),
            tenant: self.tenant.to_string(),
            transport: self.transport,
            version: self.version.map(|v| v.as_str().to_string()),
            initialized: self.view.initialized(),
            client_capabilities: self.client_capabilities.clone(),
            client_info: self.client_info.clone(),
            log_level: self.log_level.as_str().to_string(),
            subscriptions,
            standalone_stream: self
                .standalone
                .and_then(|k| self.streams.get(&k))
                .and_then(|s| s.log_id)
                .map(|s| s.0),
            streams_opened: self.streams_opened,
            next_server_request: self.next_server_request,
            principal: self.principal.clone(),
            inflight,
            awaiting: {
                let mut awaiting: Vec<AwaitingRecord> = self
                    .pending
                    .iter()
                    .map(|(id, p)| AwaitingRecord {
                        id: id.clone(),
                        origin: p.origin.clone(),
                    })
                    .collect();
                awaiting.extend(self.recovered_awaiting.iter().cloned());
                awaiting
            },
        }
    }

    /// Queues a snapshot when something it holds changed (called after each message).
    pub fn save_if_changed(&mut self) {
        self.view.set_running(self.inflight.len());
        self.release_emptied();
        if !self.dirty {
            return;
        }
        self.dirty = false;
        if !self.outbox.keeps_snapshots() {
            return;
        }
        // Room for a typical snapshot up front (`to_vec` starts at 128 bytes and regrows).
        let mut bytes = Vec::with_capacity(1024);
        match serde_json::to_writer(&mut bytes, &self.snapshot()) {
            // Copied to its exact length: the saved snapshot lives as long as the session.
            Ok(()) => self
                .outbox
                .push(OutboxItem::Snapshot(Bytes::copy_from_slice(&bytes))),
            Err(e) => tracing::error!(session = %self.id, error = %e, "snapshot not serializable"),
        }
    }

    /// Gives back the room of request and stream tables that emptied: an idle session would
    /// otherwise keep the room its initialize took (a few hundred bytes each) for good.
    pub(super) fn release_emptied(&mut self) {
        fn release<K, V>(map: &mut FastMap<K, V>) {
            if map.is_empty() && map.capacity() > 0 {
                *map = FastMap::default();
            }
        }
        release(&mut self.inflight);
        release(&mut self.pending);
        release(&mut self.streams);
    }

    /// The last seq given out on each SSE stream (for a restart of this session in place).
    pub fn stream_seqs(&self) -> HashMap<StreamId, u64> {
        self.streams
            .values()
            .filter_map(|s| Some((s.log_id?, s.seq)))
            .collect()
    }

    /// Ends the session: running requests stop, connections close, its shared state (events,
    /// snapshot, lease) is forgotten.
    pub fn shutdown(&mut self) {
        self.stop_local();
        self.outbox.push(OutboxItem::Remove);
    }

    /// Hands the session over (this replica is draining): clients are told to reconnect, the
    /// latest snapshot is queued and then the lease released, so the next replica to see the
    /// session restores it. Running requests stay in the snapshot.
    pub fn hand_over(&mut self) {
        self.dirty = true;
        self.save_if_changed();
        let retry_ms = self.settings.sse_retry_ms;
        for stream in self.streams.values_mut() {
            if let Outlet::Open(sink) = &stream.outlet {
                let _ = sink.send(StreamItem::Reconnect { retry_ms });
            }
            stream.outlet = Outlet::Detached;
        }
        self.outbox.push(OutboxItem::Release);
    }

    /// Stops local work without touching shared state (the session lives on elsewhere).
    pub fn stop_local(&mut self) {
        self.replay_bytes = 0;
        for (_, f) in self.inflight.drain() {
            if let Some(abort) = f.abort {
                abort.abort();
            }
        }
        self.pending.clear();
        self.streams.clear();
        self.standalone = None;
    }
}
