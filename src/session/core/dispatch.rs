//! A POST's messages: requests dispatched (session-only methods here, the rest through
//! `methods` with the session's scope), batches, `initialize` and the client's notifications.

use super::*;

impl Session {
    /// Handles one POST body. Invocations returned must be run (their outcomes passed to
    /// `complete`), then the answer taken with `finish_post`.
    pub fn handle_post(
        &mut self,
        payload: Payload,
        port: &Arc<dyn SessionPort>,
    ) -> (PostState, Vec<Invocation>) {
        let mut jobs = Vec::new();
        let state = match payload {
            Payload::Single(Message::Request(req)) => {
                let key = self.open_request_stream(1, false);
                self.dispatch(req, key, port, &mut jobs);
                PostState::Claim(key)
            }
            Payload::Single(Message::Notification(n)) => {
                self.on_notification(n);
                PostState::Ready(Reply::Accepted)
            }
            Payload::Single(Message::Response(r)) => {
                self.on_response(r);
                PostState::Ready(Reply::Accepted)
            }
            Payload::Batch(items) => return self.handle_batch(items, port),
        };
        (state, jobs)
    }

    /// Answers the request that opens a Streamable HTTP session (its `initialize`) before the
    /// session has an actor (`TenantSessions::open`): answering it starts no call and asks the
    /// client nothing, so it needs no port. Whether the session is now initialized is
    /// [`Session::version`].
    pub fn open_with(&mut self, initialize: Request) -> Reply {
        let key = self.open_request_stream(1, false);
        let mut jobs = Vec::new();
        self.dispatch(initialize, key, super::super::view::no_port(), &mut jobs);
        // Only a method that runs on (a tool call) leaves a job; this one answers at once.
        debug_assert!(jobs.is_empty(), "an opening request started a call");
        self.save_if_changed();
        self.claim(key, false)
    }

    /// The answer to a POST, once the calls it started were polled: `running` says whether any
    /// is still running (its stream then becomes resumable SSE on revisions with polling).
    pub fn finish_post(&mut self, state: PostState, running: bool) -> Reply {
        match state {
            PostState::Ready(reply) => reply,
            PostState::Claim(key) => self.claim(key, running),
        }
    }

    pub(super) fn handle_batch(
        &mut self,
        items: Vec<Result<Message, RpcError>>,
        port: &Arc<dyn SessionPort>,
    ) -> (PostState, Vec<Invocation>) {
        let mut jobs = Vec::new();
        match self.version {
            Some(v) if v.allows_batches() => {}
            Some(v) => {
                let msg = format!("JSON-RPC batches are not supported in protocol version {v}");
                return (
                    PostState::Ready(Reply::Refused(Refusal::Invalid(RpcError::invalid_request(
                        msg,
                    )))),
                    jobs,
                );
            }
            None => {
                let msg = "JSON-RPC batches are not accepted before initialization (initialize cannot be batched)";
                return (
                    PostState::Ready(Reply::Refused(Refusal::Invalid(RpcError::invalid_request(
                        msg,
                    )))),
                    jobs,
                );
            }
        }
        let owed = items
            .iter()
            .filter(|i| matches!(i, Ok(Message::Request(_)) | Err(_)))
            .count();
        let stream = (owed > 0).then(|| self.open_request_stream(owed, true));
        for item in items {
            match item {
                Ok(Message::Request(req)) => {
                    if let Some(key) = stream {
                        self.dispatch(req, key, port, &mut jobs);
                    }
                }
                Ok(Message::Notification(n)) => self.on_notification(n),
                Ok(Message::Response(r)) => self.on_response(r),
                Err(e) => {
                    if let Some(key) = stream {
                        self.emit(key, to_bytes(&jsonrpc::error_message(None, &e)), true);
                    }
                }
            }
        }
        let state = stream.map_or(PostState::Ready(Reply::Accepted), PostState::Claim);
        (state, jobs)
    }

    pub(super) fn dispatch(
        &mut self,
        mut req: Request,
        stream: StreamKey,
        port: &Arc<dyn SessionPort>,
        jobs: &mut Vec<Invocation>,
    ) {
        let refused = if self.inflight.contains_key(&req.id) {
            Some(RpcError::invalid_request(format!(
                "Request id {} is already in use by a request in flight",
                req.id
            )))
        } else if self.inflight.len() >= mcp::MAX_IN_FLIGHT {
            Some(
                RpcError::new(
                    jsonrpc::SERVER_REFUSED,
                    format!(
                        "this session has {} requests running, the most it runs at once; send \
                         this one again when one of them has finished",
                        mcp::MAX_IN_FLIGHT
                    ),
                )
                .with_data(json!({ "maxInFlight": mcp::MAX_IN_FLIGHT })),
            )
        } else {
            None
        };
        if let Some(e) = refused {
            self.emit(
                stream,
                to_bytes(&jsonrpc::error_message(Some(&req.id), &e)),
                true,
            );
            return;
        }
        let span = request_span(
            &req,
            &self.id,
            self.version,
            &self.tenant,
            self.principal.as_ref(),
        );
        self.inflight.insert(
            req.id.clone(),
            InFlight {
                stream,
                method: req.method.as_str().into(),
                started: std::time::Instant::now(),
                abort: None,
                record: None,
                replay_bytes: 0,
                span: span.clone(),
            },
        );
        let progress_token = req.progress_token();
        // Tool calls may outlive this replica: keep what it takes to run them again.
        let replay = (req.method == "tools/call").then(|| req.params.clone());
        let params = match req.take_params() {
            Ok(p) => p,
            Err(e) => return self.complete(&req.id, Err(e)),
        };
        if self.version.is_none() && req.method == "initialize" {
            return self.open(&req.id, params);
        }
        match self.route(&req, params, progress_token, port) {
            Handled::Done(outcome) => self.complete(&req.id, outcome),
            Handled::Run {
                future,
                ctx,
                rerunnable,
            } => {
                if let Some(f) = self.inflight.get_mut(&req.id) {
                    let params = replay.flatten().unwrap_or(Value::Null);
                    let bytes = mcp::json_len(&params);
                    let kept = self.replay_bytes.saturating_add(bytes) <= mcp::MAX_REPLAY_BYTES;
                    f.record = Some(if kept {
                        self.replay_bytes += bytes;
                        f.replay_bytes = bytes;
                        (req.method.clone(), params, rerunnable)
                    } else {
                        // Not kept to run again: a failover answers it as interrupted.
                        (req.method.clone(), Value::Null, false)
                    });
                }
                jobs.push(Invocation {
                    id: req.id,
                    future,
                    ctx,
                    span,
                });
            }
            Handled::Unknown => {
                let method = req.method.clone();
                self.complete(&req.id, Err(RpcError::method_not_found(&method)))
            }
        }
    }

    /// Session-only methods here; everything else through `methods` with this session's scope.
    pub(super) fn route(
        &mut self,
        req: &Request,
        params: Map<String, Value>,
        progress_token: Option<Value>,
        port: &Arc<dyn SessionPort>,
    ) -> Handled {
        let Some(version) = self.version else {
            // (`initialize` is answered by `open`.)
            return Handled::Done(match req.method.as_str() {
                "ping" => Ok(json!({})),
                _ => Err(RpcError::invalid_request(
                    "Session not initialized: send initialize first",
                )),
            });
        };
        let uri = || params.get("uri").and_then(Value::as_str);
        match req.method.as_str() {
            "initialize" => {
                return Handled::Done(Err(RpcError::invalid_request(
                    "Session already initialized",
                )))
            }
            "resources/subscribe" => {
                return Handled::Done(match uri() {
                    Some(uri) => {
                        let followed = self.subscriptions.contains(uri);
                        mcp::may_follow(uri, followed, self.subscriptions.len()).map(|()| {
                            if !followed {
                                self.subscriptions.insert(uri.to_string());
                                self.dirty = true;
                                self.catalog.current().subscribe_remote(uri);
                            }
                            json!({})
                        })
                    }
                    None => Err(RpcError::invalid_params(
                        "resources/subscribe needs a string \"uri\"",
                    )),
                })
            }
            "resources/unsubscribe" => {
                return Handled::Done(match uri() {
                    Some(uri) => {
                        self.subscriptions.remove(uri);
                        self.dirty = true;
                        Ok(json!({}))
                    }
                    None => Err(RpcError::invalid_params(
                        "resources/unsubscribe needs a string \"uri\"",
                    )),
                })
            }
            "logging/setLevel" => {
                return Handled::Done(
                    match params
                        .get("level")
                        .and_then(Value::as_str)
                        .and_then(LogLevel::parse)
                    {
                        Some(level) => {
                            self.log_level = level;
                            self.dirty = true;
                            Ok(json!({}))
                        }
                        None => Err(RpcError::invalid_params(
                            "logging/setLevel needs a valid \"level\" (debug … emergency)",
                        )),
                    },
                )
            }
            _ => {}
        }
        let catalog = self.catalog.current();
        let scope = self.scope(version, &catalog, port);
        methods::handle(&req.id, &req.method, params, progress_token, &scope)
    }

    /// The scope this session gives its requests.
    pub(super) fn scope<'a>(
        &'a self,
        version: ProtocolVersion,
        catalog: &'a TenantCatalog,
        port: &'a Arc<dyn SessionPort>,
    ) -> RequestScope<'a> {
        RequestScope {
            version,
            client_capabilities: &self.client_capabilities,
            principal: self.principal.as_ref(),
            catalog,
            page_size: self.settings.page_size,
            call_key: crate::request::CallKey::InSession {
                tenant: self.tenant.clone(),
                session: self.id.clone(),
            },
            session: Some(&self.id),
            port,
        }
    }

    /// Answers `initialize` with the revision's result as the settings encoded it.
    pub(super) fn open(&mut self, id: &RequestId, params: Map<String, Value>) {
        match self.initialize(params) {
            Ok(version) => {
                if let Some(stream) = self.conclude(id, &Ok(Value::Null)) {
                    let body =
                        jsonrpc::encode_result(id, &*self.settings.initialize_result(version));
                    self.emit(stream, Bytes::from(body), true);
                }
            }
            Err(e) => self.complete(id, Err(e)),
        }
    }

    pub(super) fn initialize(
        &mut self,
        mut params: Map<String, Value>,
    ) -> Result<ProtocolVersion, RpcError> {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        if requested.is_none() {
            return Err(RpcError::invalid_params(
                "initialize needs a string \"protocolVersion\"",
            ));
        }
        let version = ProtocolVersion::negotiate(requested);
        let capabilities = params
            .remove("capabilities")
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let client_info = params
            .get("clientInfo")
            .and_then(|info| serde_json::value::to_raw_value(info).ok())
            .unwrap_or_else(|| RawValue::NULL.to_owned());
        // Both are kept for the session's life (and in each of its snapshots).
        let kept = client_info
            .get()
            .len()
            .saturating_add(mcp::json_len(&capabilities));
        if kept > mcp::MAX_CLIENT_DESCRIPTION_BYTES {
            return Err(RpcError::invalid_params(format!(
                "initialize: \"capabilities\" and \"clientInfo\" take at most {} KiB together",
                mcp::MAX_CLIENT_DESCRIPTION_BYTES / 1024
            )));
        }
        self.version = Some(version);
        self.client_capabilities = Arc::new(capabilities);
        self.client_info = client_info;
        self.publish_view();
        self.dirty = true;
        tracing::debug!(session = %self.id, tenant = %self.tenant, version = %version, "session initialized");
        Ok(version)
    }

    pub(super) fn on_notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "notifications/initialized" => {
                // Not a reason for a snapshot of its own: nothing depends on the flag (requests
                // are gated on the negotiated version), and the next snapshot carries it. The
                // flag lives on the view, where an initialized session's lone one is set by the
                // HTTP worker (`direct::acknowledge`).
                self.view.set_initialized();
            }
            "notifications/cancelled" => {
                let id = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
                if let Some(id) = id {
                    self.cancel(&id);
                }
            }
            other => tracing::debug!(session = %self.id, method = other, "notification ignored"),
        }
    }
}
