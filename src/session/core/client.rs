//! Talking with the client while requests run: their answers and cancellation, notifications on
//! a request's stream, requests to the client (and their timeouts), and changes announced on
//! the standalone stream.

use super::*;

impl Session {
    pub(super) fn on_response(&mut self, r: Response) {
        let Some(id) = r.id else {
            // Nothing to match it to: which request it answers is what its sender could not read.
            tracing::debug!(session = %self.id, error = ?r.outcome.err(),
                "error response without an id (the client could not read a request)");
            return;
        };
        match self.pending.remove(&id) {
            Some(p) => {
                self.dirty = true;
                let _ = p.reply.send(r.outcome);
            }
            None => {
                tracing::debug!(session = %self.id, id = %id, "response to no pending request")
            }
        }
    }

    /// Stops an in-flight request: its future is dropped and no response is sent.
    pub fn cancel(&mut self, id: &RequestId) {
        let Some(inflight) = self.inflight.remove(id) else {
            return;
        };
        self.replay_bytes -= inflight.replay_bytes;
        if let Some(abort) = inflight.abort {
            abort.abort();
        }
        if inflight.record.is_some() {
            self.dirty = true;
        }
        // What it was asking the client is cancelled too, and the client told so on the
        // request's stream before it ends (cancellation.mdx: the sender of a request it no
        // longer waits for sends notifications/cancelled): an open form or sampling prompt is
        // closed rather than answered into the void.
        let asked: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| &p.origin == id)
            .map(|(asked, _)| asked.clone())
            .collect();
        for asked in asked {
            self.pending.remove(&asked);
            self.dirty = true;
            let cancelled = jsonrpc::notification_message(
                "notifications/cancelled",
                json!({ "requestId": asked, "reason": "the request that asked was cancelled" }),
            );
            self.emit(inflight.stream, to_bytes(&cancelled), false);
        }
        if let Some(stream) = self.streams.get_mut(&inflight.stream) {
            if !stream.standalone {
                stream.owed = stream.owed.saturating_sub(1);
            }
        }
        self.settle(inflight.stream);
        tracing::debug!(session = %self.id, %id, "request cancelled");
    }

    /// Records how to abort an invocation that is now running on its own.
    pub fn set_abort(&mut self, id: &RequestId, abort: AbortHandle) {
        match self.inflight.get_mut(id) {
            Some(f) => {
                f.abort = Some(abort);
                if f.record.is_some() {
                    self.dirty = true;
                }
            }
            None => abort.abort(),
        }
    }

    /// A request finished: send its response on its stream (dropped if it was cancelled).
    pub fn complete(&mut self, id: &RequestId, outcome: Result<Value, RpcError>) {
        if let Some(stream) = self.conclude(id, &outcome) {
            let message = Bytes::from(jsonrpc::encode_response(id, &outcome));
            self.emit(stream, message, true);
        }
    }

    /// Forgets a finished request and records its outcome; the stream its answer goes on
    /// (`None`: it was cancelled, and is not answered).
    pub(super) fn conclude(
        &mut self,
        id: &RequestId,
        outcome: &Result<Value, RpcError>,
    ) -> Option<StreamKey> {
        let inflight = self.inflight.remove(id)?;
        self.replay_bytes -= inflight.replay_bytes;
        if inflight.abort.is_some() {
            self.dirty = true;
        }
        crate::observe::telemetry::record_outcome(
            &inflight.method,
            &self.tenant,
            inflight.started,
            &inflight.span,
            outcome,
        );
        Some(inflight.stream)
    }

    /// A notification from a running request, on that request's stream.
    pub fn notify(&mut self, origin: &RequestId, method: &str, params: Value) {
        if method == "notifications/message" && !self.log_level_allows(&params) {
            return;
        }
        if let Some(stream) = self.inflight.get(origin).map(|f| f.stream) {
            self.emit(
                stream,
                to_bytes(&jsonrpc::notification_message(method, params)),
                false,
            );
        }
    }

    pub(super) fn log_level_allows(&self, params: &Value) -> bool {
        params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .is_some_and(|l| l >= self.log_level)
    }

    /// A server→client request from a running request, on that request's stream.
    /// Sends a request to the client on `origin`'s stream; the id it went out with (the caller
    /// expires it with `expire_server_request` after `client_request_timeout`).
    pub fn server_request(
        &mut self,
        origin: &RequestId,
        method: &str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) -> Option<RequestId> {
        let Some(stream) = self.inflight.get(origin).map(|f| f.stream) else {
            let _ = reply.send(Err(RpcError::internal(
                "the originating request is no longer running",
            )));
            return None;
        };
        // lifecycle.mdx: the server SHOULD NOT send requests other than pings before the
        // client's `notifications/initialized`.
        if method != "ping" && !self.view.initialized() {
            let _ = reply.send(Err(RpcError::invalid_request(format!(
                "{method} cannot be sent yet: the client has not sent notifications/initialized"
            ))));
            return None;
        }
        self.next_server_request += 1;
        self.dirty = true;
        let id = RequestId::Number(self.next_server_request);
        self.pending.insert(
            id.clone(),
            PendingRequest {
                origin: origin.clone(),
                reply,
                _gauge: crate::observe::metrics::PendingGauge::open(&self.tenant, method),
            },
        );
        // Saved before the client can see the request: a replica taking the session over knows
        // which answer to wait for.
        self.save_if_changed();
        self.emit(
            stream,
            to_bytes(&jsonrpc::request_message(&id, method, params)),
            false,
        );
        Some(id)
    }

    /// The requests to the client that calls are waiting on.
    pub fn awaited_client_requests(&self) -> Vec<RequestId> {
        self.pending.keys().cloned().collect()
    }

    /// A request to the client still unanswered after `client_request_timeout`: the client is
    /// told it is cancelled (`notifications/cancelled`, on the stream it went out on) and the
    /// tool that asked gets an error instead of waiting for ever (lifecycle.mdx: timeouts).
    pub fn expire_server_request(&mut self, id: &RequestId) {
        let Some(pending) = self.pending.remove(id) else {
            return;
        };
        self.dirty = true;
        let timeout = self.settings.client_request_timeout.as_secs();
        let reason = format!("the client did not answer within {timeout} s");
        if let Some(stream) = self.inflight.get(&pending.origin).map(|f| f.stream) {
            let cancelled = jsonrpc::notification_message(
                "notifications/cancelled",
                json!({ "requestId": id, "reason": reason }),
            );
            self.emit(stream, to_bytes(&cancelled), false);
        }
        let _ = pending.reply.send(Err(RpcError::internal(reason)));
        tracing::info!(session = %self.id, %id, "request to the client timed out");
    }

    /// A resource changed: tell this session if it subscribed.
    pub fn resource_updated(&mut self, uri: &str) {
        if self.subscriptions.contains(uri) {
            self.send_unrelated(jsonrpc::notification_message(
                "notifications/resources/updated",
                json!({ "uri": uri }),
            ));
        }
    }

    /// A list (`tools`, `prompts`, `resources`) changed.
    pub fn list_changed(&mut self, list: &str) {
        let method = match list {
            "tools" => "notifications/tools/list_changed",
            "prompts" => "notifications/prompts/list_changed",
            "resources" => "notifications/resources/list_changed",
            _ => return,
        };
        self.send_unrelated(jsonrpc::notification_message(method, json!({})));
    }

    /// A message unrelated to any request: on the standalone stream (logged even while no client
    /// is connected to it, so a resuming client gets it).
    pub(super) fn send_unrelated(&mut self, message: Value) {
        if self.version.is_none() {
            return;
        }
        if let Some(key) = self.standalone {
            self.emit(key, to_bytes(&message), false);
        }
    }
}
