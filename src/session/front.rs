//! The front door: the one way into a tenant's sessions from outside `session` (the HTTP edge,
//! the tenant directory, the stateless room). Opening a session with its `initialize`, a POST, a
//! GET stream (new or resumed), a DELETE, the legacy transport's stream and messages, a message
//! another replica put on the bus, and the tenant-wide changes every session and listener hears.
//!
//! A request that names a session finds it held here, held by another live replica (then the
//! request is relayed there by the transport, or an answer or notification goes to the owner
//! over the bus), or gone from a dead owner (then it is taken over here, from its snapshot).
//! What needs nothing of a session's own state is answered without its actor (`direct`); the
//! rest goes through the actor's mailbox. Answers are domain values: the transport maps them to
//! HTTP once.

use std::future::Future;
use std::sync::Arc;

use actix::{Handler, Message};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::actor::{OpenLegacy, OpenStream, Post, SessionActor, TenantBroadcast, Terminate};
use super::core::{Reply, SessionSettings, TransportKind};
use super::direct::{self, Direct};
use super::replica::{Replica, SessionError};
use super::supervisor::{SessionEntry, SessionLimits, TenantSessions, TenantSupervisor};
use super::{StreamItem, StreamReceiver};
use crate::auth::Principal;
use crate::catalog::CatalogHandle;
use crate::cluster::{EventId, Lease, SessionCaps, SessionKey};
use crate::protocol::{jsonrpc, Message as RpcMessage, Payload, Request};

/// Who sends a request: its principal (protected tenants) and whether another replica relayed
/// it here (a relayed request is never relayed again).
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub principal: Option<&'a Arc<Principal>>,
    pub forwarded: bool,
}

impl Caller<'_> {
    /// Whether this caller may use a session bound to `owner` (a session of an open tenant has
    /// none). Another principal is told the session does not exist.
    fn check_owner(&self, owner: Option<&Arc<str>>) -> Result<(), SessionError> {
        let same = match (self.principal, owner) {
            (Some(p), Some(owner)) => p.has_binding(owner),
            (None, None) => true,
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(SessionError::NotFound)
        }
    }

    /// The principal as sessions and webhook calls see it.
    fn principal_value(&self) -> Option<Arc<serde_json::Value>> {
        self.principal.map(|p| Arc::new(p.to_value()))
    }
}

/// How a request reaches the replica that owns its session: the transport passes it on as it
/// came, and gives its body for the bus.
pub trait Relay {
    /// The owner's answer, as the transport hands it back to the client.
    type Answer;
    /// The request's body as the client sent it.
    fn body(&self) -> &Bytes;
    /// Passes the request to the replica at `owner` (its base URL). `let_go` says whether that
    /// owner has let the session go; it is awaited only for a request that went out and got no
    /// answer.
    fn relay(
        &self,
        owner: &str,
        let_go: impl Future<Output = bool>,
    ) -> impl Future<Output = Result<Self::Answer, Unrelayed>>;
}

/// Why a request was not relayed.
pub enum Unrelayed {
    /// The owner did not accept the connection (it is gone), it is draining and handed the
    /// session over, or it dropped the request after letting the session go: take it over.
    Gone,
    /// The owner did not answer and still accepts connections.
    Failed,
}

/// Where a request was answered: by the owner it was relayed to, or here.
pub enum Reached<R, T> {
    Relayed(R),
    Here(T),
}

/// The bus topic of one replica: messages for sessions it owns.
pub fn owner_topic(replica: &str) -> String {
    format!("replica.{replica}")
}

/// A message for a session held by another replica (a client's answer or notification).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OwnerMessage {
    pub tenant: String,
    pub session: String,
    /// The JSON-RPC body as the client sent it.
    pub body: String,
    /// The binding of the sender's principal (protected tenants): the owner checks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A legacy session a message names: held here, or by the live replica holding its stream.
pub enum LegacyTarget {
    Here(Arc<SessionEntry>),
    Elsewhere { url: String, lease: Lease },
}

/// The legacy transport's stream of a new session; the session ends when it is dropped.
pub struct LegacyStream {
    pub id: Arc<str>,
    pub rx: StreamReceiver,
    /// Ends the session (call when the stream's connection closes).
    pub on_close: Box<dyn FnOnce() + Send>,
}

/// A tenant's sessions on this replica, through the front door.
#[derive(Clone)]
pub struct Sessions {
    index: Arc<TenantSessions>,
}

/// Where a request naming a session went.
enum Found<R> {
    /// The session is held here (now).
    Here(Arc<SessionEntry>),
    /// Relayed to the owner, who answered.
    Relayed(R),
    /// Put on the owner's bus topic (answers and notifications only): nothing comes back.
    OnBus,
}

/// Where a session is.
enum Located {
    Here(Arc<SessionEntry>),
    Elsewhere { url: String, lease: Lease },
}

impl Sessions {
    pub fn new(
        tenant: Arc<str>,
        catalog: CatalogHandle,
        replica: Arc<Replica>,
        settings: Arc<SessionSettings>,
        limits: SessionLimits,
    ) -> Sessions {
        Sessions {
            index: Arc::new(TenantSessions::new(
                tenant, catalog, replica, settings, limits,
            )),
        }
    }

    /// Starts the tenant's supervisor (once): idle expiry, keeping shared state alive, ending
    /// and handing over every session.
    pub fn start_supervisor(&self) -> actix::Addr<TenantSupervisor> {
        self.index.start_supervisor()
    }

    pub fn replica(&self) -> &Arc<Replica> {
        &self.index.replica
    }

    /// Sessions held here.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Sets the tenant's session caps (counted across replicas).
    pub fn set_caps(&self, caps: SessionCaps) {
        self.index.set_caps(caps);
    }

    /// Where changes a tool makes are announced (every replica); set once.
    pub fn set_announce_hook(&self, hook: super::supervisor::AnnounceHook) {
        self.index.set_announce_hook(hook);
    }

    /// A tool changed a resource: every session and listener of the tenant concerned hears.
    pub fn resource_updated(&self, uri: &str) {
        self.index.resource_updated(uri);
    }

    /// A tool announced a change of one of the tenant's lists.
    pub fn list_changed(&self, list: &'static str) {
        self.index.list_changed(list);
    }

    /// Tells every session and listener of the tenant on this replica.
    pub fn broadcast(&self, change: TenantBroadcast) {
        self.index.broadcast(change);
    }

    /// Changes from now on, for a stateless listener (`subscriptions/listen`).
    pub fn listen(&self) -> tokio::sync::broadcast::Receiver<TenantBroadcast> {
        self.index.listen()
    }

    /// `Err(max)` when this replica holds more of the tenant's listeners than it may hold
    /// sessions.
    pub fn listeners_within_cap(&self) -> Result<(), usize> {
        self.index.listeners_within_cap()
    }

    /// Fault injection for tests and drills: the actor of session `id` panics while handling a
    /// message (and is restarted from its snapshot, or ends, as after a real crash). Which
    /// start of the actor it was (see [`Sessions::actor_start`]).
    pub fn inject_panic(&self, id: &str) -> Option<u64> {
        let entry = self.index.get(id)?;
        entry.addr.do_send(super::actor::InjectPanic);
        Some(entry.start())
    }

    /// Which start of session `id`'s actor runs here (a restart after a crash is another).
    pub fn actor_start(&self, id: &str) -> Option<u64> {
        self.index.get(id).map(|e| e.start())
    }

    /// A weak handle (for hooks the sessions themselves hold).
    pub fn downgrade(&self) -> std::sync::Weak<TenantSessions> {
        Arc::downgrade(&self.index)
    }

    /// Opens a Streamable HTTP session with its `initialize` (answered before the session has
    /// an actor); the session's id when it was opened.
    pub async fn open(
        &self,
        caller: Caller<'_>,
        initialize: Request,
    ) -> Result<(Reply, Option<Arc<str>>), SessionError> {
        self.index.open(caller.principal_value(), initialize).await
    }

    /// A POST to Streamable HTTP session `id`. Answers and notifications for a session another
    /// replica holds go over the bus when they need no answer body; everything else is relayed
    /// to the owner, or taken over here when the owner is gone.
    pub async fn post<R: Relay>(
        &self,
        caller: Caller<'_>,
        id: &str,
        payload: Payload,
        relay: &R,
    ) -> Result<Reached<R::Answer, Reply>, SessionError> {
        // Answers and notifications need nothing back: the bus can take one to another owner.
        // Not a batch (refused or taken by the revision the owner knows) nor a principal's
        // message (the owner checks it is the session's): those are relayed, so the client
        // gets the owner's status, not a 202 for something the owner then drops. Nor
        // `notifications/initialized`: the owner must have it before the client's next request
        // (which may be relayed over HTTP and overtake a bus message) asks the client anything.
        let bus_first = matches!(payload, Payload::Single(_))
            && caller.principal.is_none()
            && !has_requests(&payload)
            && !matches!(&payload, Payload::Single(RpcMessage::Notification(n)) if n.method == "notifications/initialized");
        let entry = match self.reach(caller, id, relay, bus_first).await? {
            Found::Relayed(answer) => return Ok(Reached::Relayed(answer)),
            Found::OnBus => return Ok(Reached::Here(Reply::Accepted)),
            Found::Here(entry) => entry,
        };
        // A request that needs nothing of the session's own state is answered here, without
        // the hop through the session actor's mailbox; so is `notifications/initialized`.
        if direct::acknowledge(&entry, &payload) {
            return Ok(Reached::Here(Reply::Accepted));
        }
        let payload = match direct::answer(&self.index, &entry, payload) {
            Direct::Done(body) => return Ok(Reached::Here(Reply::Json(body))),
            Direct::Wait(answer) => return Ok(Reached::Here(Reply::Json(answer.await))),
            Direct::Actor(payload) => payload,
        };
        // Boxed: the common requests are answered above, and this future would otherwise size
        // theirs (each request's future is moved whole).
        let reply = Box::pin(deliver(&self.index, id, entry, Post::new(payload))).await?;
        Ok(Reached::Here(reply))
    }

    /// A GET on Streamable HTTP session `id`: its standalone stream, or the resumption of a
    /// stream after `last_event_id` (an event the log does not know is refused).
    pub async fn stream<R: Relay>(
        &self,
        caller: Caller<'_>,
        id: &str,
        last_event_id: Option<EventId>,
        relay: &R,
    ) -> Result<Reached<R::Answer, (Option<StreamItem>, StreamReceiver)>, SessionError> {
        let entry = match self.reach(caller, id, relay, false).await? {
            Found::Relayed(answer) => return Ok(Reached::Relayed(answer)),
            Found::Here(entry) => entry,
            // (Not asked for: only a POST's answers and notifications go on the bus.)
            Found::OnBus => return Err(SessionError::Unavailable("not a bus message".into())),
        };
        let mut rx = deliver(&self.index, id, entry, OpenStream { last_event_id })
            .await?
            .ok_or_else(|| SessionError::Unavailable("session restarted".into()))?;
        let Some(last) = last_event_id else {
            return Ok(Reached::Here((None, rx)));
        };
        match rx.recv().await {
            Some(StreamItem::Resumed) => Ok(Reached::Here((None, rx))),
            Some(StreamItem::UnknownEvent(_)) | None => Err(SessionError::UnknownEvent(last)),
            Some(other) => Ok(Reached::Here((Some(other), rx))),
        }
    }

    /// A DELETE: ends session `id` (answered once its shared state is gone).
    pub async fn close<R: Relay>(
        &self,
        caller: Caller<'_>,
        id: &str,
        relay: &R,
    ) -> Result<Reached<R::Answer, ()>, SessionError> {
        match self.reach(caller, id, relay, false).await? {
            Found::Relayed(answer) => Ok(Reached::Relayed(answer)),
            Found::Here(entry) => {
                deliver(&self.index, id, entry, Terminate).await?;
                Ok(Reached::Here(()))
            }
            // (Not asked for: only a POST's answers and notifications go on the bus.)
            Found::OnBus => Err(SessionError::Unavailable("not a bus message".into())),
        }
    }

    /// Opens a legacy (2024-11-05) session and its one SSE stream, whose first event is the
    /// `endpoint` its messages are posted to (made from the session's id).
    pub async fn open_legacy(
        &self,
        caller: Caller<'_>,
        endpoint: impl FnOnce(&str) -> String,
    ) -> Result<LegacyStream, SessionError> {
        let (id, addr) = self
            .index
            .start(TransportKind::Legacy, caller.principal_value())
            .await?;
        let endpoint = endpoint(&id);
        match addr.send(OpenLegacy { endpoint }).await {
            Ok(Some(rx)) => Ok(LegacyStream {
                id,
                rx,
                on_close: Box::new(move || addr.do_send(Terminate)),
            }),
            // Its actor failed while opening the stream (the session ends with it).
            _ => {
                addr.do_send(Terminate);
                Err(SessionError::Unavailable(
                    "the session could not be opened; retry".into(),
                ))
            }
        }
    }

    /// Finds legacy session `id`: held here (and the caller's), or where its stream is.
    pub async fn find_legacy(
        &self,
        caller: Caller<'_>,
        id: &str,
    ) -> Result<LegacyTarget, SessionError> {
        match locate(&self.index, id, TransportKind::Legacy, caller.forwarded).await? {
            Located::Here(entry) => {
                caller.check_owner(entry.owner.as_ref())?;
                Ok(LegacyTarget::Here(entry))
            }
            Located::Elsewhere { url, lease } => Ok(LegacyTarget::Elsewhere { url, lease }),
        }
    }

    /// A message for legacy session `id` (found by [`Sessions::find_legacy`]): answered on its
    /// stream, here or at the replica holding it. A legacy session is its stream: with that
    /// replica gone, so is the session.
    pub async fn post_legacy<R: Relay>(
        &self,
        target: LegacyTarget,
        id: &str,
        payload: Payload,
        relay: &R,
    ) -> Result<Reached<R::Answer, Reply>, SessionError> {
        match target {
            LegacyTarget::Here(entry) => {
                let reply = deliver(&self.index, id, entry, Post::new(payload)).await?;
                Ok(Reached::Here(reply))
            }
            LegacyTarget::Elsewhere { url, lease } => {
                let let_go = let_go(&self.index, id, &lease);
                match relay.relay(&url, let_go).await {
                    Ok(answer) => Ok(Reached::Relayed(answer)),
                    Err(Unrelayed::Failed) => Err(SessionError::OwnerFailed),
                    Err(Unrelayed::Gone) => Err(SessionError::NotFound),
                }
            }
        }
    }

    /// A message another replica put on the bus for a session this one owns. Not held here:
    /// this replica's earlier process held it (restarted under the same id, as a pod or a
    /// compose service is), and the answer was sent here for it: restored from its snapshot as
    /// a relayed request would be, or the call it answers would wait out its timeout.
    pub async fn deliver_from_bus(&self, m: OwnerMessage) {
        let index = &self.index;
        let entry = match index.get(&m.session) {
            Some(entry) => entry,
            None => match locate(index, &m.session, TransportKind::Streamable, true).await {
                Ok(Located::Here(entry)) => entry,
                Ok(Located::Elsewhere { .. }) | Err(_) => {
                    tracing::debug!(session = %m.session, "bus message for a session not held here");
                    return;
                }
            },
        };
        if entry.owner.as_deref() != m.owner.as_deref() {
            tracing::warn!(session = %m.session, "bus message from another principal dropped");
            return;
        }
        let Ok(payload) = jsonrpc::parse_payload(m.body.as_bytes()) else {
            return;
        };
        let _ = deliver(index, &m.session, entry, Post::new(payload)).await;
    }

    /// Finds the Streamable HTTP session a request names: held here, or reached at its owner —
    /// over the bus for a body of answers and notifications only (`bus_first`), else by
    /// relaying the request — or taken over here when the owner cannot be reached or has let it
    /// go. Another replica that took it over first is relayed to in turn.
    async fn reach<R: Relay>(
        &self,
        caller: Caller<'_>,
        id: &str,
        relay: &R,
        bus_first: bool,
    ) -> Result<Found<R::Answer>, SessionError> {
        let index = &self.index;
        let (url, lease) =
            match locate(index, id, TransportKind::Streamable, caller.forwarded).await? {
                Located::Here(entry) => {
                    caller.check_owner(entry.owner.as_ref())?;
                    return Ok(Found::Here(entry));
                }
                Located::Elsewhere { url, lease } => (url, lease),
            };
        // Boxed, as `locate`'s own slow path: most requests find their session here, and this
        // would otherwise size the future of every request (each request's future is moved
        // whole).
        Box::pin(async move {
            if bus_first
                && self
                    .publish_to_owner(caller, id, relay.body(), &lease)
                    .await
            {
                return Ok(Found::OnBus);
            }
            let (mut url, mut lease) = (url, lease);
            // A second owner is tried once: another replica took the session over first.
            for attempt in 0..2 {
                let let_go = let_go(index, id, &lease);
                match relay.relay(&url, let_go).await {
                    Ok(answer) => return Ok(Found::Relayed(answer)),
                    Err(Unrelayed::Failed) => return Err(SessionError::OwnerFailed),
                    Err(Unrelayed::Gone) => {}
                }
                match take_over(index, id, TransportKind::Streamable, lease).await? {
                    Located::Here(entry) => {
                        caller.check_owner(entry.owner.as_ref())?;
                        return Ok(Found::Here(entry));
                    }
                    Located::Elsewhere {
                        url: next,
                        lease: held,
                    } if attempt == 0 => {
                        (url, lease) = (next, held);
                    }
                    Located::Elsewhere { .. } => break,
                }
            }
            Err(SessionError::NotFound)
        })
        .await
    }

    /// Puts a body of answers and notifications on the owner's bus topic; `false` when nobody
    /// listens there (the owner died: relaying fails and the session is taken over).
    async fn publish_to_owner(
        &self,
        caller: Caller<'_>,
        id: &str,
        body: &Bytes,
        lease: &Lease,
    ) -> bool {
        let message = OwnerMessage {
            tenant: self.index.tenant.to_string(),
            session: id.to_string(),
            body: String::from_utf8_lossy(body).into_owned(),
            owner: caller.principal.map(|p| p.binding().to_string()),
        };
        let Ok(bytes) = serde_json::to_vec(&message) else {
            return false;
        };
        let bus = &self.index.replica.backends.bus;
        let topic = owner_topic(&lease.replica);
        bus.publish(&topic, Bytes::from(bytes)).await.unwrap_or(0) > 0
    }
}

/// Whether a body holds requests (which need an answer body) or only answers/notifications.
fn has_requests(payload: &Payload) -> bool {
    match payload {
        Payload::Single(RpcMessage::Request(_)) => true,
        Payload::Single(_) => false,
        Payload::Batch(items) => items
            .iter()
            .any(|m| matches!(m, Ok(RpcMessage::Request(_)) | Err(_))),
    }
}

/// Finds session `id` of the tenant for `transport`: held here, held by another live replica,
/// or restored here when its owner is dead (or is an earlier process of this replica). A
/// request already relayed by another replica (`forwarded`) is never relayed again.
async fn locate(
    index: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    forwarded: bool,
) -> Result<Located, SessionError> {
    if let Some(entry) = local(index, id, transport)? {
        return Ok(Located::Here(entry));
    }
    // Boxed: the lease and restore round trips would otherwise size the future of every
    // request, most of which find their session here (each request's future is moved whole).
    Box::pin(elsewhere(index, id, transport, forwarded)).await
}

/// `locate` for a session not held here.
async fn elsewhere(
    index: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    forwarded: bool,
) -> Result<Located, SessionError> {
    if index.replica.is_draining() {
        return Err(SessionError::Draining);
    }
    let backends = &index.replica.backends;
    let key = SessionKey::new(index.tenant.clone(), id);
    let owner = backends.leases.owner(&key).await?;
    let expected = match owner {
        Some(lease) if lease.replica != index.replica.info.id => {
            match backends.leases.replica_url(&lease.replica).await? {
                Some(url) if !forwarded => return Ok(Located::Elsewhere { url, lease }),
                Some(_) => {
                    return Err(SessionError::Unavailable(
                        "the session is held by another server".into(),
                    ))
                }
                None => Some(lease),
            }
        }
        other => other,
    };
    restored(index, id, transport, expected).await
}

/// Whether the owner named by `lease` has let session `id` go: the lease is no longer its
/// (released when it drained, lapsed, or taken by another replica) or it has left the cluster.
/// A request it dropped unanswered can then be taken over even though something (its restarted
/// process) accepts connections at its address. Shared state out of reach: it has not.
async fn let_go(index: &TenantSessions, id: &str, lease: &Lease) -> bool {
    let leases = &index.replica.backends.leases;
    let key = SessionKey::new(index.tenant.clone(), id);
    match leases.owner(&key).await {
        Ok(current) if current.as_ref() != Some(lease) => true,
        Ok(_) => matches!(leases.replica_url(&lease.replica).await, Ok(None)),
        Err(_) => false,
    }
}

/// The owner at `lease` could not be reached: take the session over (fencing the old owner).
async fn take_over(
    index: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    lease: Lease,
) -> Result<Located, SessionError> {
    if let Some(entry) = local(index, id, transport)? {
        return Ok(Located::Here(entry));
    }
    tracing::warn!(tenant = %index.tenant, session = %id, owner = %lease.replica,
        "the session's owner is unreachable; taking the session over");
    restored(index, id, transport, Some(lease)).await
}

fn local(
    index: &TenantSessions,
    id: &str,
    transport: TransportKind,
) -> Result<Option<Arc<SessionEntry>>, SessionError> {
    match index.get(id) {
        Some(entry) if entry.transport != transport => Err(SessionError::NotFound),
        Some(entry) => {
            entry.activity.touch();
            Ok(Some(entry))
        }
        None => Ok(None),
    }
}

async fn restored(
    index: &Arc<TenantSessions>,
    id: &str,
    transport: TransportKind,
    expected: Option<Lease>,
) -> Result<Located, SessionError> {
    match index.restore(id, expected).await {
        Ok(Some(entry)) if entry.transport == transport => {
            entry.activity.touch();
            Ok(Located::Here(entry))
        }
        Ok(_) => Err(SessionError::NotFound),
        // Another replica restored it first (a race): it is the owner now.
        Err(SessionError::Moved(lease)) => {
            match index
                .replica
                .backends
                .leases
                .replica_url(&lease.replica)
                .await?
            {
                Some(url) => Ok(Located::Elsewhere { url, lease }),
                None => Err(SessionError::Moved(lease)),
            }
        }
        Err(e) => Err(e),
    }
}

/// Hands `msg` to a session held here. If its actor just crashed, the restarted one is already
/// registered: the message goes to it (no waiting loop).
async fn deliver<M>(
    index: &TenantSessions,
    id: &str,
    entry: Arc<SessionEntry>,
    msg: M,
) -> Result<M::Result, SessionError>
where
    M: Message + Send + 'static,
    M::Result: Send,
    SessionActor: Handler<M>,
{
    let entry = if entry.addr.connected() {
        entry
    } else {
        index.get(id).ok_or(SessionError::NotFound)?
    };
    entry
        .addr
        .send(msg)
        .await
        .map_err(|_| SessionError::Unavailable("the session restarted; retry".into()))
}
