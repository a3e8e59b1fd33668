//! Requests a session answers without a hop through its actor: a lone request whose answer is
//! known at once and touches nothing the session holds — reading the catalog (lists, a resource,
//! a prompt, completion, ping) or calling a tool its catalog says finishes at once without
//! talking to the client (`Catalog::answers_at_once`). It is handled on the HTTP worker with the
//! session's published scope (`SessionView`), exactly as the session would handle it (same
//! `methods::handle`, span, metric and encoding). Anything else — a request while others are running (so an id still in flight
//! is refused by the session), progress, batches, session-only methods — goes to the actor.
//! So does every notification but `notifications/initialized` of an initialized session, whose
//! one effect is a flag the view holds ([`acknowledge`]).

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::Value;

use super::core::request_span;
use super::supervisor::{SessionEntry, TenantSessions};
use super::view::NO_PORT;
use crate::methods::{self, Handled, RequestScope};
use crate::observe::telemetry::record_outcome;
use crate::observe::trace::RequestSpan;
use crate::protocol::jsonrpc;
use crate::protocol::{Message, Payload, Request, RpcError};
use crate::request::CallKey;

/// Takes `notifications/initialized` for an initialized session held here: its one effect, the
/// flag its next snapshot carries, is set on the view, and the POST is answered 202 without the
/// trip through the actor's mailbox (a session opening is an `initialize` and this). `false`:
/// anything else, left to the actor.
pub fn acknowledge(entry: &SessionEntry, payload: &Payload) -> bool {
    let initialized = matches!(
        payload,
        Payload::Single(Message::Notification(n)) if n.method == "notifications/initialized"
    );
    if !initialized || entry.view.scope.get().is_none() {
        return false;
    }
    entry.view.set_initialized();
    true
}

/// How [`answer`] took a payload.
pub enum Direct {
    /// Answered: the JSON-RPC response.
    Done(Bytes),
    /// A call that did not finish when first polled; the response when it does (boxed: the
    /// tools answered here finish at once, and this future would otherwise size the future of
    /// every request).
    Wait(crate::catalog::BoxFuture<Bytes>),
    /// Not for this path: the payload, given back for the actor.
    Actor(Payload),
}

/// Answers `payload` for the session of `entry` here when it is eligible (see the module);
/// otherwise gives it back for the actor. Not `async`: what it answers is known at once, so it
/// adds nothing to the future of the request that calls it.
pub fn answer(sessions: &TenantSessions, entry: &SessionEntry, payload: Payload) -> Direct {
    let Some(scope) = entry.view.scope.get() else {
        return Direct::Actor(payload);
    };
    let catalog = sessions.catalog().current();
    let mut req = match payload {
        Payload::Single(Message::Request(req)) if eligible(&req, &catalog) => req,
        other => return Direct::Actor(other),
    };
    if entry.view.running.load(Ordering::Relaxed) > 0 {
        return Direct::Actor(Payload::Single(Message::Request(req)));
    }
    let id = &scope.session;
    let started = std::time::Instant::now();
    let span = request_span(
        &req,
        id,
        Some(scope.version),
        &sessions.tenant,
        scope.principal.as_ref(),
    );
    // The scope and the handled request end in this block: only a call's own future is kept
    // across the wait below (each request's future is moved whole, so its size matters).
    // Break: the answer is known at once; Continue: a call to wait for.
    let step = {
        let request_scope = RequestScope {
            version: scope.version,
            client_capabilities: &scope.client_capabilities,
            principal: scope.principal.as_ref(),
            catalog: &catalog,
            page_size: sessions.settings().page_size,
            call_key: CallKey::InSession {
                tenant: sessions.tenant.clone(),
                session: id.clone(),
            },
            session: Some(id),
            port: &NO_PORT,
        };
        match req.take_params() {
            Err(e) => ControlFlow::Break(Err(e)),
            Ok(params) => match span
                .in_scope(|| methods::handle(&req.id, &req.method, params, None, &request_scope))
            {
                Handled::Done(outcome) => ControlFlow::Break(outcome),
                Handled::Run { future, .. } => ControlFlow::Continue(future),
                Handled::Unknown => {
                    ControlFlow::Break(Err(RpcError::method_not_found(&req.method)))
                }
            },
        }
    };
    let future = match step {
        ControlFlow::Break(outcome) => {
            return Direct::Done(respond(&req, &sessions.tenant, started, &span, outcome))
        }
        ControlFlow::Continue(future) => future,
    };
    let tenant = sessions.tenant.clone();
    let finish = move |outcome, span: &RequestSpan| respond(&req, &tenant, started, span, outcome);
    match at_once(future, span, finish) {
        Ok(body) => Direct::Done(body),
        Err(rest) => Direct::Wait(rest),
    }
}

/// `future` polled once, in `span` (as the actor runs its calls): `finish` of its outcome when
/// it is ready (a tool that answers at once), else the rest of it, boxed, polled in the span.
fn at_once<T: Send + 'static>(
    mut future: crate::catalog::CallFuture,
    span: RequestSpan,
    finish: impl FnOnce(Result<Value, RpcError>, &RequestSpan) -> T + Send + 'static,
) -> Result<T, crate::catalog::BoxFuture<T>> {
    use futures_util::FutureExt;
    match span.in_scope(|| (&mut future).now_or_never()) {
        Some(outcome) => Ok(finish(outcome, &span)),
        None => Err(Box::pin(async move {
            // Polled again with its task's waker (`now_or_never`'s wakes nothing).
            let outcome = span.clone().instrument(future).await;
            finish(outcome, &span)
        })),
    }
}

/// The response to `req`, its outcome counted and recorded on its span.
fn respond(
    req: &Request,
    tenant: &str,
    started: std::time::Instant,
    span: &RequestSpan,
    outcome: Result<Value, RpcError>,
) -> Bytes {
    record_outcome(&req.method, tenant, started, span, &outcome);
    Bytes::from(jsonrpc::encode_response(&req.id, &outcome))
}

/// Whether a request can be answered here: a method `methods` handles, asking no progress, for
/// `tools/call` a tool that answers at once, and for `prompts/get` one that asks nothing.
fn eligible(req: &Request, catalog: &crate::catalog::TenantCatalog) -> bool {
    let name = || {
        req.params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
    };
    methods::HANDLED.contains(&req.method.as_str())
        && req.progress_token().is_none()
        && (req.method != "tools/call" || name().is_some_and(|n| catalog.answers_at_once(n)))
        && (req.method != "prompts/get" || !name().is_some_and(|n| catalog.prompt_asks(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TenantCatalog;
    use crate::protocol::{ProtocolVersion, RequestId};
    use std::sync::Arc;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_call_not_done_when_first_polled_goes_on_with_its_tasks_waker() {
        let finish = |outcome: Result<Value, RpcError>, _: &RequestSpan| outcome.ok();
        let ready: crate::catalog::CallFuture = Box::pin(async { Ok(Value::from(1)) });
        assert!(matches!(
            at_once(ready, RequestSpan::none(), finish),
            Ok(Some(v)) if v == 1
        ));
        // Pending when first polled (with a waker that wakes nothing), then woken by a send.
        let (tx, rx) = oneshot::channel::<Value>();
        let later: crate::catalog::CallFuture =
            Box::pin(async move { rx.await.map_err(|_| RpcError::internal("dropped")) });
        let Err(rest) = at_once(later, RequestSpan::none(), finish) else {
            panic!("the call was not ready yet");
        };
        let task = tokio::spawn(rest);
        tokio::task::yield_now().await;
        tx.send(Value::from(2)).unwrap();
        let answered = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        assert!(
            matches!(&answered, Ok(Ok(Some(v))) if *v == 2),
            "{answered:?}"
        );
    }

    #[test]
    fn the_methods_answered_here_are_those_methods_handles() {
        let catalog = TenantCatalog::new(Vec::new());
        let capabilities = Arc::new(serde_json::json!({}));
        let scope = RequestScope {
            version: ProtocolVersion::V2025_06_18,
            client_capabilities: &capabilities,
            principal: None,
            catalog: &catalog,
            page_size: 10,
            call_key: CallKey::from("t/s"),
            session: None,
            port: &NO_PORT,
        };
        let id = RequestId::Number(1);
        for method in crate::protocol::mcp::KNOWN_METHODS {
            let handled = methods::handle(&id, method, serde_json::Map::new(), None, &scope);
            assert_eq!(
                !matches!(handled, Handled::Unknown),
                methods::HANDLED.contains(method),
                "{method}"
            );
        }
    }
}
