//! `SessionActor`: one actix actor per MCP session. It is a thin shell around `Session`: messages
//! in, typed stream items out. It runs the futures the session hands back (tool calls), queues a
//! snapshot after every message that changed the session (for the other replicas: in-process,
//! none is saved), and turns a panic into a restart from a snapshot of the live session (same
//! id, same lease) instead of a lost session.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use actix::prelude::*;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::core::{Invocation, Refusal, Reply, Session, SessionSnapshot, StreamReceiver};
use super::outbox::Outbox;
use crate::catalog::SessionPort;
use crate::cluster::{EventId, StreamId};
use crate::protocol::{Payload, RequestId, RpcError};

/// How the actor stopped, which decides what happens to the session's shared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The session ended (DELETE, idle expiry, tenant gone): forget it everywhere.
    Ended,
    /// It lives on elsewhere (handed over, taken over by another replica, or restarted here).
    Moved,
    /// Already ended and its shared state removed.
    Done,
}

/// What a session's actor asks of the index that holds it (the tenant's sessions on this
/// replica).
pub trait SessionHost: Send + Sync {
    /// The actor stopped: forget it, unless a newer instance replaced it.
    fn ended(&self, id: &str, instance: u64);
    /// Restarts a crashed actor from its snapshot, under the same id and lease, in a new actor
    /// registered before the old one's mailbox closes. `false`: the session cannot go on.
    fn restart(
        self: Arc<Self>,
        instance: u64,
        snapshot: SessionSnapshot,
        seqs: HashMap<StreamId, u64>,
        outbox: Outbox,
    ) -> bool;
    /// A tool changed a resource: every session and listener of the tenant concerned hears.
    fn resource_updated(&self, uri: &str);
    /// A tool announced a change of one of the tenant's lists.
    fn list_changed(&self, list: &'static str);
}

/// A change every session of the tenant should hear about.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum TenantBroadcast {
    ResourceUpdated(String),
    /// One of `supervisor::LISTS`.
    ListChanged(&'static str),
}

pub struct SessionActor {
    core: Session,
    /// Which start of this session this is (a restart after a crash gets a new one).
    instance: u64,
    sessions: Arc<dyn SessionHost>,
    port: Option<Arc<dyn SessionPort>>,
    ending: Ending,
}

impl SessionActor {
    pub fn new(core: Session, instance: u64, sessions: Arc<dyn SessionHost>) -> Self {
        SessionActor {
            core,
            instance,
            sessions,
            port: None,
            ending: Ending::Ended,
        }
    }

    /// The port tool calls reach the session through, made on first use (an idle session
    /// holds none: each address of the actor costs an allocation).
    fn port(&mut self, ctx: &Context<Self>) -> Arc<dyn SessionPort> {
        self.port
            .get_or_insert_with(|| {
                Arc::new(ActorPort {
                    addr: ctx.address(),
                    sessions: self.sessions.clone(),
                })
            })
            .clone()
    }

    /// Cancels the request `id` to the client if it is still unanswered after
    /// `client_request_timeout` (`Session::expire_server_request`).
    fn time_out_client_request(&self, id: RequestId, ctx: &mut Context<Self>) {
        let timeout = self.core.settings().client_request_timeout;
        ctx.run_later(timeout, move |me, ctx| {
            me.guarded(ctx, |s| s.expire_server_request(&id));
        });
    }

    /// Runs `f` on the session; a panic stops this actor and restarts the session from its
    /// snapshot in a new actor (registered before this one's mailbox closes).
    fn guarded<R>(
        &mut self,
        ctx: &mut Context<Self>,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.core))) {
            Ok(r) => {
                self.core.save_if_changed();
                Some(r)
            }
            Err(_) => {
                tracing::error!(session = %self.core.id(), "session actor crashed; restarting it from its snapshot");
                let snapshot = self.core.snapshot();
                let seqs = self.core.stream_seqs();
                let outbox = self.core.outbox().fork();
                // Its streams end here (a restarted actor brings them back detached).
                self.core.stop_local();
                let restarted =
                    self.sessions
                        .clone()
                        .restart(self.instance, snapshot, seqs, outbox);
                self.ending = if restarted {
                    Ending::Moved
                } else {
                    tracing::warn!(session = %self.core.id(), "a legacy session ends with its crashed actor");
                    Ending::Ended
                };
                ctx.stop();
                None
            }
        }
    }

    /// Runs tool calls: polled once here (most finish at once and answer with no extra hop),
    /// otherwise spawned; their outcome comes back as `Completed`. Returns whether any is still
    /// running.
    fn run(&mut self, jobs: Vec<Invocation>, ctx: &mut Context<Self>) -> bool {
        let mut running = false;
        for job in jobs {
            let Invocation {
                id,
                mut future,
                ctx: rctx,
                span,
            } = job;
            let polled =
                span.in_scope(|| catch_unwind(AssertUnwindSafe(|| (&mut future).now_or_never())));
            match polled {
                Ok(Some(outcome)) if !rctx.used_port() => self.core.complete(&id, outcome),
                // It sent messages through the mailbox: its response must queue behind them.
                Ok(Some(outcome)) => {
                    running = true;
                    ctx.address().do_send(Completed { id, outcome });
                }
                Ok(None) => {
                    running = true;
                    let addr = ctx.address();
                    let task_id = id.clone();
                    let handle = actix_rt::spawn(span.instrument(async move {
                        let outcome = AssertUnwindSafe(future)
                            .catch_unwind()
                            .await
                            .unwrap_or_else(|_| {
                                Err(RpcError::internal("the tool failed unexpectedly"))
                            });
                        addr.do_send(Completed {
                            id: task_id,
                            outcome,
                        });
                    }));
                    self.core.set_abort(&id, handle.abort_handle());
                }
                Err(_) => self
                    .core
                    .complete(&id, Err(RpcError::internal("the tool failed unexpectedly"))),
            }
        }
        self.core.save_if_changed();
        running
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        // Losing the lease (another replica took the session over) stops this copy.
        self.core
            .outbox()
            .set_on_fenced(Arc::new(move || addr.do_send(Fenced)));
        self.core.save_if_changed();
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        match self.ending {
            Ending::Ended => self.core.shutdown(),
            Ending::Moved => self.core.stop_local(),
            Ending::Done => {}
        }
        self.sessions.ended(self.core.id(), self.instance);
    }
}

/// The session side seen by tool calls: everything goes through the actor's mailbox, in order.
struct ActorPort {
    addr: Addr<SessionActor>,
    sessions: Arc<dyn SessionHost>,
}

impl SessionPort for ActorPort {
    fn notify(&self, origin: &RequestId, method: &'static str, params: Value) {
        self.addr.do_send(Notify {
            origin: origin.clone(),
            method,
            params,
        });
    }
    fn request(
        &self,
        origin: &RequestId,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        self.addr.do_send(ServerRequest {
            origin: origin.clone(),
            method,
            params,
            reply,
        });
    }
    fn close_stream(&self, origin: &RequestId) {
        self.addr.do_send(CloseStream {
            origin: origin.clone(),
        });
    }
    fn resource_updated(&self, uri: &str) {
        self.sessions.resource_updated(uri);
    }
    fn list_changed(&self, list: &'static str) {
        self.sessions.list_changed(list);
    }
}

fn failed() -> Refusal {
    Refusal::Failed(RpcError::internal("The session failed; retry the request"))
}

/// A POST body for this session, with the span of the HTTP request that carried it (so the
/// trace goes on across the mailbox).
#[derive(Message)]
#[rtype(result = "Reply")]
pub struct Post(pub Payload, pub opentelemetry::Context);

impl Post {
    /// A POST handled within the current trace (an empty context when not tracing).
    pub fn new(payload: Payload) -> Post {
        let trace = if crate::observe::telemetry::tracing_enabled() {
            opentelemetry::Context::current()
        } else {
            opentelemetry::Context::new()
        };
        Post(payload, trace)
    }
}

impl Handler<Post> for SessionActor {
    type Result = MessageResult<Post>;
    fn handle(&mut self, msg: Post, ctx: &mut Context<Self>) -> Self::Result {
        let port = self.port(ctx);
        let Post(payload, trace) = msg;
        let _attached = crate::observe::telemetry::tracing_enabled().then(|| trace.attach());
        let Some((state, jobs)) = self.guarded(ctx, |s| s.handle_post(payload, &port)) else {
            return MessageResult(Reply::Refused(failed()));
        };
        // Calls that finish at once answer as plain JSON; only running ones get a stream.
        let running = self.run(jobs, ctx);
        match self.guarded(ctx, |s| s.finish_post(state, running)) {
            Some(reply) => MessageResult(reply),
            None => MessageResult(Reply::Refused(failed())),
        }
    }
}

/// A GET: the standalone stream, or the resumption of a stream after `Last-Event-ID` (whose
/// first item says whether the event was known).
#[derive(Message)]
#[rtype(result = "Option<StreamReceiver>")]
pub struct OpenStream {
    pub last_event_id: Option<EventId>,
}

impl Handler<OpenStream> for SessionActor {
    type Result = Option<StreamReceiver>;
    fn handle(&mut self, msg: OpenStream, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded(ctx, |s| match msg.last_event_id {
            Some(last) => s.resume(last),
            None => s.open_standalone(),
        })
    }
}

/// Opens the legacy (2024-11-05) SSE stream, announcing where to POST.
#[derive(Message)]
#[rtype(result = "Option<StreamReceiver>")]
pub struct OpenLegacy {
    pub endpoint: String,
}

impl Handler<OpenLegacy> for SessionActor {
    type Result = Option<StreamReceiver>;
    fn handle(&mut self, msg: OpenLegacy, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded(ctx, |s| s.open_legacy_stream(&msg.endpoint))
    }
}

/// Ends the session (DELETE, the legacy stream closing, tenant shutdown). Answered once its
/// shared state is gone, so a request that follows cannot find it anywhere.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Terminate;

impl Handler<Terminate> for SessionActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: Terminate, ctx: &mut Context<Self>) -> Self::Result {
        self.sessions.ended(self.core.id(), self.instance);
        self.core.shutdown();
        self.ending = Ending::Done;
        let removed = self.core.outbox().flush();
        ctx.stop();
        Box::pin(async move {
            let _ = removed.await;
        })
    }
}

/// Ends the session if it has been doing nothing (asked by the supervisor's idle sweep).
/// Answers `true` when it stays (busy: a connected stream, a running call).
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ExpireIfIdle;

impl Handler<ExpireIfIdle> for SessionActor {
    type Result = bool;
    fn handle(&mut self, _: ExpireIfIdle, ctx: &mut Context<Self>) -> bool {
        if self.core.is_busy() {
            return true;
        }
        tracing::info!(session = %self.core.id(), "session expired after being idle");
        ctx.stop();
        false
    }
}

/// Whether requests are running (the drain waits for them).
#[derive(Message)]
#[rtype(result = "bool")]
pub struct IsRunning;

impl Handler<IsRunning> for SessionActor {
    type Result = bool;
    fn handle(&mut self, _: IsRunning, _: &mut Context<Self>) -> bool {
        self.core.has_inflight()
    }
}

/// This replica is draining: tell clients to reconnect, save the session, release its lease
/// and stop. Answered once the shared state is written.
#[derive(Message)]
#[rtype(result = "()")]
pub struct HandOver;

impl Handler<HandOver> for SessionActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: HandOver, ctx: &mut Context<Self>) -> Self::Result {
        self.core.hand_over();
        let flushed = self.core.outbox().flush();
        self.ending = Ending::Moved;
        ctx.stop();
        Box::pin(async move {
            let _ = flushed.await;
        })
    }
}

/// After a restore: re-run or answer the requests the previous owner left running.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Recover {
    pub last_seqs: HashMap<StreamId, u64>,
}

impl Handler<Recover> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: Recover, ctx: &mut Context<Self>) {
        let port = self.port(ctx);
        if let Some(jobs) = self.guarded(ctx, |s| s.recover(&msg.last_seqs, &port)) {
            let _ = self.run(jobs, ctx);
        }
        // The previous owner's timers went with it: the requests to the client that the
        // restored calls wait on get a full timeout from here.
        for id in self.core.awaited_client_requests() {
            self.time_out_client_request(id, ctx);
        }
    }
}

/// Another replica owns the session now: stop this copy without touching shared state.
#[derive(Message)]
#[rtype(result = "()")]
struct Fenced;

impl Handler<Fenced> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: Fenced, ctx: &mut Context<Self>) {
        self.ending = Ending::Moved;
        ctx.stop();
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Completed {
    id: RequestId,
    outcome: Result<Value, RpcError>,
}

impl Handler<Completed> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: Completed, ctx: &mut Context<Self>) {
        self.guarded(ctx, |s| s.complete(&msg.id, msg.outcome));
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Notify {
    origin: RequestId,
    method: &'static str,
    params: Value,
}

impl Handler<Notify> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: Notify, ctx: &mut Context<Self>) {
        self.guarded(ctx, |s| s.notify(&msg.origin, msg.method, msg.params));
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct ServerRequest {
    origin: RequestId,
    method: &'static str,
    params: Value,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

impl Handler<ServerRequest> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: ServerRequest, ctx: &mut Context<Self>) {
        let sent = self.guarded(ctx, |s| {
            s.server_request(&msg.origin, msg.method, msg.params, msg.reply)
        });
        if let Some(Some(id)) = sent {
            self.time_out_client_request(id, ctx);
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct CloseStream {
    origin: RequestId,
}

impl Handler<CloseStream> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: CloseStream, ctx: &mut Context<Self>) {
        self.guarded(ctx, |s| s.close_stream(&msg.origin));
    }
}

/// A tenant-wide change, relayed by the supervisor.
impl Handler<TenantBroadcast> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: TenantBroadcast, ctx: &mut Context<Self>) {
        self.guarded(ctx, |s| match &msg {
            TenantBroadcast::ResourceUpdated(uri) => s.resource_updated(uri),
            TenantBroadcast::ListChanged(list) => s.list_changed(list),
        });
    }
}

/// Fault injection for tests and drills: makes the actor panic while handling a message.
#[derive(Message)]
#[rtype(result = "()")]
pub struct InjectPanic;

impl Handler<InjectPanic> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: InjectPanic, ctx: &mut Context<Self>) {
        self.guarded(ctx, |_| panic!("injected session actor panic"));
    }
}

/// The snapshot, for tests and the supervisor.
#[derive(Message)]
#[rtype(result = "SessionSnapshot")]
pub struct GetSnapshot;

impl Handler<GetSnapshot> for SessionActor {
    type Result = MessageResult<GetSnapshot>;
    fn handle(&mut self, _: GetSnapshot, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.snapshot())
    }
}
