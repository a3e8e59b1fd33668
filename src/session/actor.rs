//! `SessionActor`: one actix actor per MCP session. It is a thin shell around `Session`: messages
//! in, the session's frames out. It runs the futures the session hands back (tool calls) and
//! turns a panic into a restart by the tenant's supervisor instead of a lost session.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use actix::prelude::*;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::core::{FrameReceiver, Invocation, Refusal, Reply, Session, SessionSnapshot};
use super::supervisor::{SessionCrashed, SessionEnded, TenantBroadcast, TenantSupervisor};
use crate::catalog::SessionPort;
use crate::eventlog::EventId;
use crate::protocol::{Payload, RequestId, RpcError};

pub struct SessionActor {
    core: Session,
    /// Which start of this session this is (a restart after a crash gets a new one).
    instance: u64,
    supervisor: Addr<TenantSupervisor>,
    port: Option<Arc<dyn SessionPort>>,
    crashed: bool,
}

impl SessionActor {
    pub fn new(core: Session, instance: u64, supervisor: Addr<TenantSupervisor>) -> Self {
        SessionActor {
            core,
            instance,
            supervisor,
            port: None,
            crashed: false,
        }
    }

    fn port(&self) -> Arc<dyn SessionPort> {
        self.port
            .clone()
            .expect("port is set when the actor starts")
    }

    /// Runs `f` on the session; a panic stops this actor and asks the supervisor for a restart
    /// from the session's snapshot.
    fn guarded<R>(
        &mut self,
        ctx: &mut Context<Self>,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.core))) {
            Ok(r) => Some(r),
            Err(_) => {
                tracing::error!(session = %self.core.id(), "session actor crashed; restarting it from its snapshot");
                self.crashed = true;
                self.supervisor.do_send(SessionCrashed {
                    id: self.core.id().into(),
                    instance: self.instance,
                    snapshot: self.core.snapshot(),
                });
                ctx.stop();
                None
            }
        }
    }

    /// Runs tool calls: polled once here (most finish at once and answer with no extra hop),
    /// otherwise spawned; their outcome comes back as `Completed`.
    fn run(&mut self, jobs: Vec<Invocation>, ctx: &mut Context<Self>) {
        for job in jobs {
            let Invocation {
                id,
                mut future,
                ctx: rctx,
            } = job;
            match catch_unwind(AssertUnwindSafe(|| (&mut future).now_or_never())) {
                Ok(Some(outcome)) if !rctx.used_port() => self.core.complete(&id, outcome),
                // It sent messages through the mailbox: its response must queue behind them.
                Ok(Some(outcome)) => ctx.address().do_send(Completed { id, outcome }),
                Ok(None) => {
                    let addr = ctx.address();
                    let task_id = id.clone();
                    let handle = actix_rt::spawn(async move {
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
                    });
                    self.core.set_abort(&id, handle.abort_handle());
                }
                Err(_) => self
                    .core
                    .complete(&id, Err(RpcError::internal("the tool failed unexpectedly"))),
            }
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.port = Some(Arc::new(ActorPort {
            addr: ctx.address(),
            supervisor: self.supervisor.clone(),
        }));
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        if !self.crashed {
            self.core.shutdown();
        }
        self.supervisor.do_send(SessionEnded {
            id: self.core.id().into(),
            instance: self.instance,
        });
    }
}

/// The session side seen by tool calls: everything goes through the actor's mailbox, in order.
struct ActorPort {
    addr: Addr<SessionActor>,
    supervisor: Addr<TenantSupervisor>,
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
        self.supervisor
            .do_send(TenantBroadcast::ResourceUpdated(uri.to_string()));
    }
}

/// A POST body for this session.
#[derive(Message, Clone)]
#[rtype(result = "Reply")]
pub struct Post(pub Payload);

impl Handler<Post> for SessionActor {
    type Result = MessageResult<Post>;
    fn handle(&mut self, msg: Post, ctx: &mut Context<Self>) -> Self::Result {
        let port = self.port();
        match self.guarded(ctx, |s| s.handle_post(msg.0, &port)) {
            Some((reply, jobs)) => {
                self.run(jobs, ctx);
                MessageResult(reply)
            }
            None => MessageResult(Reply::Refused(Refusal::new(
                500,
                RpcError::internal("The session failed; retry the request"),
            ))),
        }
    }
}

/// A GET: the standalone stream, or the resumption of a stream after `Last-Event-ID`.
#[derive(Message, Clone)]
#[rtype(result = "Result<FrameReceiver, Refusal>")]
pub struct OpenStream {
    pub last_event_id: Option<EventId>,
}

impl Handler<OpenStream> for SessionActor {
    type Result = Result<FrameReceiver, Refusal>;
    fn handle(&mut self, msg: OpenStream, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded(ctx, |s| match msg.last_event_id {
            Some(last) => s.resume(last),
            None => Ok(s.open_standalone()),
        })
        .unwrap_or_else(|| {
            Err(Refusal::new(
                500,
                RpcError::internal("The session failed; retry the request"),
            ))
        })
    }
}

/// Opens the legacy (2024-11-05) SSE stream, announcing where to POST.
#[derive(Message)]
#[rtype(result = "Option<FrameReceiver>")]
pub struct OpenLegacy {
    pub endpoint: String,
}

impl Handler<OpenLegacy> for SessionActor {
    type Result = Option<FrameReceiver>;
    fn handle(&mut self, msg: OpenLegacy, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded(ctx, |s| s.open_legacy_stream(&msg.endpoint))
    }
}

/// Ends the session (DELETE, idle expiry, the legacy stream closing, tenant shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Terminate;

impl Handler<Terminate> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: Terminate, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// Ends the session if it has been doing nothing (asked by the supervisor's idle sweep).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ExpireIfIdle;

impl Handler<ExpireIfIdle> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: ExpireIfIdle, ctx: &mut Context<Self>) {
        if !self.core.is_busy() {
            tracing::info!(session = %self.core.id(), "session expired after being idle");
            ctx.stop();
        }
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
        self.guarded(ctx, |s| {
            s.server_request(&msg.origin, msg.method, msg.params, msg.reply)
        });
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

/// The snapshot, for the supervisor.
#[derive(Message)]
#[rtype(result = "SessionSnapshot")]
pub struct GetSnapshot;

impl Handler<GetSnapshot> for SessionActor {
    type Result = MessageResult<GetSnapshot>;
    fn handle(&mut self, _: GetSnapshot, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.snapshot())
    }
}
