//! Streamable HTTP for the stateless revision (2026-07-28) on the same `/t/{tenant}/mcp` as the
//! session revisions. A POST is modern when its `MCP-Protocol-Version` header names 2026-07-28
//! or its body's `_meta` names a protocol version; everything else is the session era's.
//!
//! Here: the header rules (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and the
//! `Mcp-Param-{Name}` headers of `x-mcp-header` tool parameters must match the body, Base64
//! sentinel values decoded; else 400 with HeaderMismatch -32020), the status codes of the
//! revision (400 for UnsupportedProtocolVersion -32022, HeaderMismatch and
//! MissingRequiredClientCapability -32021; 404 for an unknown method), and the answer: JSON, or
//! an SSE stream scoped to the request (notifications, then the response; closing it cancels
//! the call), or the long-lived stream of `subscriptions/listen`. `Mcp-Session-Id` and
//! `Last-Event-ID` are ignored, and no session id is ever minted.

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;

use super::{sse, sse_response, Admitted, EdgePolicy, HttpError, VERSION};
use crate::auth::AuthService;
use crate::catalog::TenantCatalog;
use crate::protocol::jsonrpc::METHOD_NOT_FOUND;
use crate::protocol::stateless::{
    self as rules, RequestMeta, HEADER_MISMATCH, METHOD_HEADER, MISSING_CLIENT_CAPABILITY,
    NAME_HEADER, PARAM_HEADER_PREFIX, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::protocol::{Message, Payload, ProtocolVersion, Request, RpcError};
use crate::stateless::listen::Listener;
use crate::stateless::{self, Answer, Env, Notes, Served, StatelessSettings};

/// Whether a POST speaks the stateless revision, by its `MCP-Protocol-Version` header
/// (`version`) or its body.
pub fn is_stateless(version: Option<&HeaderValue>, payload: &Payload) -> bool {
    let header_modern = version
        .and_then(crate::header_text)
        .is_some_and(|v| ProtocolVersion::parse_modern(v).is_some());
    header_modern
        || match payload {
            Payload::Single(Message::Request(r)) => {
                rules::meta_version(r.meta.as_deref()).is_some()
            }
            Payload::Single(Message::Notification(n)) => {
                rules::meta_version(n.meta.as_deref()).is_some()
            }
            _ => false,
        }
}

/// The HTTP status of a JSON-RPC error code in this revision.
fn status_for(code: i64) -> StatusCode {
    match code {
        UNSUPPORTED_PROTOCOL_VERSION | HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY => {
            StatusCode::BAD_REQUEST
        }
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn refuse(
    status: StatusCode,
    id: Option<&crate::protocol::RequestId>,
    e: &RpcError,
) -> HttpResponse {
    HttpResponse::build(status)
        .content_type(super::JSON)
        .body(Answer::error(id, e).body)
}

/// A JSON answer with the status its error (if any) calls for.
fn json_answer(answer: Answer) -> HttpResponse {
    let status = answer.error.map_or(StatusCode::OK, status_for);
    HttpResponse::build(status)
        .content_type(super::JSON)
        .body(answer.body)
}

pub async fn post(
    req: HttpRequest,
    payload: Payload,
    admitted: Admitted,
    edge: web::Data<EdgePolicy>,
) -> Result<HttpResponse, HttpError> {
    // The rest is built by a plain function: what it holds is never part of this future, which
    // every stateless request pays to move (only a call that has to wait keeps a boxed one).
    let answer = match start(&req, payload, admitted, &edge)? {
        Started::Answered(response) => return Ok(response),
        Started::Waiting(answer) => answer,
    };
    Ok(answer.await)
}

/// A stateless request once started: answered, or a call whose answer has to be waited for.
enum Started {
    Answered(HttpResponse),
    Waiting(futures_util::future::LocalBoxFuture<'static, HttpResponse>),
}

/// Everything of a stateless request up to its answer, or up to the call it waits for.
fn start(
    req: &HttpRequest,
    payload: Payload,
    admitted: Admitted,
    edge: &EdgePolicy,
) -> Result<Started, HttpError> {
    let mut request = match payload {
        Payload::Single(Message::Request(r)) => r,
        // This revision defines no client notification over HTTP; accepted and ignored.
        Payload::Single(Message::Notification(_)) => {
            return Ok(Started::Answered(HttpResponse::Accepted().finish()))
        }
        Payload::Single(Message::Response(_)) => {
            return Err(HttpError::bad_request(
                "Bad Request: clients do not send responses in protocol version 2026-07-28 \
                 (input goes in inputResponses on a retry of the request)",
            ))
        }
        Payload::Batch(_) => {
            return Err(HttpError::bad_request(
                "Bad Request: JSON-RPC batches are not part of protocol version 2026-07-28",
            ))
        }
    };
    let catalog = admitted.tenant.catalog.current();
    if let Err(e) = check_headers(req.headers(), &request, &catalog) {
        return Ok(Started::Answered(refuse(
            StatusCode::BAD_REQUEST,
            Some(&request.id),
            &e,
        )));
    }
    // The request's MCP span (when traces are exported), made while `params._meta` still holds
    // a client's trace context; it has no session.
    let span = mcp_span(&request, &admitted);
    let meta = match RequestMeta::take(&mut request) {
        Ok(meta) => meta,
        Err(e) => {
            crate::observe::telemetry::mcp_done(&span, Some(e.code), false, Some(&e.message));
            return Ok(Started::Answered(refuse(
                StatusCode::BAD_REQUEST,
                Some(&request.id),
                &e,
            )));
        }
    };
    let auth = req
        .app_data::<web::Data<AuthService>>()
        .ok_or_else(|| HttpError::unavailable("Service Unavailable: not ready"))?
        .clone()
        .into_inner();
    let settings = req
        .app_data::<web::Data<StatelessSettings>>()
        .map(|s| s.clone().into_inner())
        .unwrap_or_default();
    let env = Env {
        tenant: admitted.tenant,
        catalog,
        principal: admitted.principal,
        auth,
        settings,
        span: span.clone(),
    };
    let sessions = env.tenant.sessions.clone();
    // Taken apart at once: only a running call's own pieces are kept across the wait below.
    let (response, notes) = match span.in_scope(|| stateless::serve(env, request, meta)) {
        Served::Done(message) => {
            record_error(&span, &message);
            return Ok(Started::Answered(json_answer(message)));
        }
        Served::Listen(listener) => {
            if let Err(max) = sessions.listeners_within_cap() {
                let refused = Answer::error(
                    Some(&listener.id),
                    &RpcError::new(
                        crate::protocol::jsonrpc::SERVER_REFUSED,
                        format!("Too Many Requests: this tenant's limit of {max} open subscriptions on this server is reached; close one first"),
                    ),
                );
                drop(listener);
                record_error(&span, &refused);
                return Ok(Started::Answered(
                    HttpResponse::build(StatusCode::TOO_MANY_REQUESTS)
                        .content_type(super::JSON)
                        .body(refused.body),
                ));
            }
            return Ok(Started::Answered(sse_response(
                HttpResponse::Ok(),
                listen_stream(listener, sessions.replica().clone(), edge.keepalive),
            )));
        }
        Served::Running { response, notes } => (response, notes),
    };
    // Plain JSON when the answer comes before any notification; else the request's stream.
    // The call goes on in the request's span (its webhook rounds are children of it).
    let mut response: crate::catalog::BoxFuture<Answer> = if span.is_none() {
        response
    } else {
        Box::pin(span.clone().instrument(response).map(move |answer| {
            record_error(&span, &answer);
            answer
        }))
    };
    // Heartbeats on a request's stream also notice soon that its client went away (a write to
    // a closed connection fails): that is when the call is cancelled.
    let keepalive = edge.keepalive.min(REQUEST_HEARTBEAT);
    Ok(match (&mut response).now_or_never() {
        Some(message) => Started::Answered(respond(Some(Ok(message)), response, notes, keepalive)),
        // Only a call that has to wait pays for a timer.
        None => Started::Waiting(Box::pin(async move {
            let mut notes = notes;
            let lead = first_of(&mut response, &mut notes).await;
            respond(lead, response, notes, keepalive)
        })),
    })
}

/// The answer to a running call given what it gave first (`first_of`; its answer at once): a
/// call still running after a moment answers on a stream, which is what a client closes to
/// cancel it (a handler waiting for a JSON answer would not notice).
fn respond(
    lead: Option<Result<Answer, Value>>,
    response: crate::catalog::BoxFuture<Answer>,
    notes: Notes,
    keepalive: Duration,
) -> HttpResponse {
    match lead {
        Some(Ok(message)) if notes.is_empty() => json_answer(message),
        Some(Ok(message)) => sse_response(
            HttpResponse::Ok(),
            running_stream(None, Some(message), None, notes, keepalive),
        ),
        Some(Err(note)) => sse_response(
            HttpResponse::Ok(),
            running_stream(Some(note), None, Some(response), notes, keepalive),
        ),
        None => sse_response(
            HttpResponse::Ok(),
            running_stream(None, None, Some(response), notes, keepalive),
        ),
    }
}

/// What a call that did not answer at once gives first within `JSON_WAIT`: its answer, or a
/// notification (then it answers on a stream); `None` when it is still silent.
async fn first_of(
    response: &mut crate::catalog::BoxFuture<Answer>,
    notes: &mut Notes,
) -> Option<Result<Answer, Value>> {
    tokio::select! {
        biased;
        message = response => Some(Ok(message)),
        Some(note) = notes.recv() => Some(Err(note)),
        _ = tokio::time::sleep(JSON_WAIT) => None,
    }
}

/// The MCP span of a stateless request (none unless traces are exported).
fn mcp_span(request: &Request, admitted: &Admitted) -> crate::observe::trace::RequestSpan {
    crate::observe::telemetry::request_span(
        request,
        None,
        rules::meta_version(request.meta.as_deref()).and_then(Value::as_str),
        &admitted.tenant.slug,
        admitted.principal.as_deref().map(|p| p.client_id.as_str()),
    )
}

/// An error answer's code on the request's span (a handler's own outcome, tool errors included,
/// is recorded where it is known; this also covers the errors answered before a handler ran).
fn record_error(span: &crate::observe::trace::RequestSpan, answer: &Answer) {
    if answer.error.is_some() {
        crate::observe::telemetry::mcp_done(span, answer.error, false, None);
    }
}

// Looked up without parsing a name per request.
const METHOD: HeaderName = HeaderName::from_static(METHOD_HEADER);
const NAME: HeaderName = HeaderName::from_static(NAME_HEADER);

/// The header rules of the revision: every header present that must be, and each equal to the
/// body value it mirrors.
fn check_headers(
    headers: &HeaderMap,
    request: &Request,
    catalog: &TenantCatalog,
) -> Result<(), RpcError> {
    let header = |name: &HeaderName| -> Result<Option<&[u8]>, RpcError> {
        let mut values = headers.get_all(name);
        let first = values.next();
        if values.next().is_some() {
            return Err(rules::header_mismatch(format!(
                "{name} is sent more than once"
            )));
        }
        Ok(first.map(|v| v.as_bytes()))
    };
    let params = request.params.as_ref();
    let body_version = rules::meta_version(request.meta.as_deref());
    match (header(&VERSION)?, body_version) {
        (None, _) => {
            return Err(rules::header_mismatch(
                "the MCP-Protocol-Version header is required",
            ))
        }
        (Some(h), Some(Value::String(b))) if h == b.as_bytes() => {}
        // No version in `_meta`: a malformed request (-32602 from `RequestMeta::take`), not a
        // header that disagrees with the body.
        (Some(_), None) => {}
        (Some(h), _) => {
            return Err(rules::header_mismatch(format!(
                "MCP-Protocol-Version header {:?} does not match params._meta[\"{}\"]",
                String::from_utf8_lossy(h),
                rules::META_PROTOCOL_VERSION
            )))
        }
    }
    match header(&METHOD)? {
        None => return Err(rules::header_mismatch("the Mcp-Method header is required")),
        Some(h) if h == request.method.as_bytes() => {}
        Some(h) => {
            return Err(rules::header_mismatch(format!(
                "Mcp-Method header {:?} does not match body value {:?}",
                String::from_utf8_lossy(h),
                request.method
            )))
        }
    }
    if let Some(field) = rules::name_field(&request.method) {
        let body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
        match (header(&NAME)?, body) {
            (None, _) => {
                return Err(rules::header_mismatch(format!(
                    "the Mcp-Name header is required for {}",
                    request.method
                )))
            }
            (Some(raw), body) => {
                let value = rules::decode_header_value(raw).ok_or_else(|| {
                    rules::header_mismatch("the Mcp-Name header holds invalid characters")
                })?;
                if Some(value.as_ref()) != body {
                    return Err(rules::header_mismatch(format!(
                        "Mcp-Name header value {value:?} does not match body value {:?}",
                        body.unwrap_or("")
                    )));
                }
            }
        }
    }
    if request.method == "tools/call" {
        check_param_headers(headers, params, catalog)?;
    }
    Ok(())
}

/// `Mcp-Param-{Name}` headers of the called tool's `x-mcp-header` parameters.
fn check_param_headers(
    headers: &HeaderMap,
    params: Option<&Value>,
    catalog: &TenantCatalog,
) -> Result<(), RpcError> {
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return Ok(());
    };
    let declared = catalog.param_headers(name);
    if declared.is_empty() {
        return Ok(());
    }
    let empty = serde_json::Map::new();
    let arguments = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for param in declared {
        let header_name = format!("{PARAM_HEADER_PREFIX}{}", param.name.to_ascii_lowercase());
        let mut values = headers.get_all(header_name.as_str());
        let sent = values.next();
        if values.next().is_some() {
            return Err(rules::header_mismatch(format!(
                "Mcp-Param-{} is sent more than once",
                param.name
            )));
        }
        let argument = rules::argument_at(arguments, &param.path);
        // streamable-http.mdx: an `x-mcp-header` integer MUST be within JavaScript's safe range
        // (an intermediary reading the header as a JavaScript number would change it).
        if let Some(Value::Number(n)) = argument {
            if !rules::within_safe_integer_range(n) {
                return Err(rules::header_mismatch(format!(
                    "argument {:?} ({n}) of Mcp-Param-{} is not an integer within the range a \
                     header carries (-(2^53-1) to 2^53-1)",
                    param.path.join("."),
                    param.name
                )));
            }
        }
        match (sent, argument) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(rules::header_mismatch(format!(
                    "the Mcp-Param-{} header is required: argument {:?} is set",
                    param.name,
                    param.path.join(".")
                )))
            }
            (Some(_), None) => {
                return Err(rules::header_mismatch(format!(
                    "Mcp-Param-{} is sent but argument {:?} is not",
                    param.name,
                    param.path.join(".")
                )))
            }
            (Some(raw), Some(body)) => {
                let value = rules::decode_header_value(raw.as_bytes()).ok_or_else(|| {
                    rules::header_mismatch(format!(
                        "the Mcp-Param-{} header holds invalid characters",
                        param.name
                    ))
                })?;
                if !rules::header_matches(&value, body) {
                    return Err(rules::header_mismatch(format!(
                        "Mcp-Param-{} header value {value:?} does not match argument {:?}",
                        param.name,
                        param.path.join(".")
                    )));
                }
            }
        }
    }
    Ok(())
}

fn answer_event(answer: &Answer) -> Bytes {
    sse::named_event("message", &String::from_utf8_lossy(&answer.body))
}

fn data_event(message: &Value) -> Bytes {
    sse::named_event("message", &message.to_string())
}

/// Heartbeat of a request's own stream (at most; the server's SSE keep-alive when shorter).
const REQUEST_HEARTBEAT: Duration = Duration::from_secs(1);

/// How long a running call may take to be answered as plain JSON.
const JSON_WAIT: Duration = Duration::from_millis(100);

/// A request's own stream: its notifications as they come, then its response. Dropping the
/// stream (the client closed it) drops the call: that is its cancellation.
/// `lead` is a notification already received, `done` the response when it already came.
fn running_stream(
    lead: Option<Value>,
    done: Option<Answer>,
    response: Option<crate::catalog::BoxFuture<Answer>>,
    notes: Notes,
    keepalive: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, actix_web::Error>> {
    struct State {
        lead: Option<Value>,
        done: Option<Answer>,
        response: Option<crate::catalog::BoxFuture<Answer>>,
        notes: Notes,
        tick: tokio::time::Interval,
    }
    let mut tick = tokio::time::interval(keepalive.max(Duration::from_millis(100)));
    tick.reset();
    let state = State {
        lead,
        done,
        response,
        notes,
        tick,
    };
    futures_util::stream::unfold(Some(state), |state| async move {
        let mut st = state?;
        if let Some(note) = st.lead.take() {
            return Some((Ok(data_event(&note)), Some(st)));
        }
        loop {
            // Notifications sent before the answer go first.
            if let Some(note) = st.notes.try_recv() {
                return Some((Ok(data_event(&note)), Some(st)));
            }
            if let Some(done) = st.done.take() {
                return Some((Ok(answer_event(&done)), None));
            }
            let response = st.response.as_mut()?;
            tokio::select! {
                message = response => {
                    st.response = None;
                    st.done = Some(message);
                }
                Some(note) = st.notes.recv() => {
                    return Some((Ok(data_event(&note)), Some(st)));
                }
                _ = st.tick.tick() => {
                    return Some((Ok(Bytes::from_static(sse::HEARTBEAT)), Some(st)));
                }
            }
        }
    })
}

/// The events that end a subscription the server tears down (see `Listener::teardown`).
fn teardown_events(listener: &Listener, reason: &str) -> Bytes {
    let mut out = Vec::new();
    for message in listener.teardown(reason) {
        out.extend_from_slice(&data_event(&message));
    }
    Bytes::from(out)
}

/// `subscriptions/listen`: the acknowledgement, then the changes it opted in to, keep-alives,
/// and `notifications/cancelled` with the closing result when this replica drains.
fn listen_stream(
    listener: Listener,
    replica: Arc<crate::session::Replica>,
    keepalive: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, actix_web::Error>> {
    let ack = data_event(&listener.acknowledgement());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.reset();
    let keepalive_every = keepalive.as_secs().max(1);
    let first = futures_util::stream::once(async move { Ok::<Bytes, actix_web::Error>(ack) });
    let rest = futures_util::stream::unfold(
        Some((listener, tick, 0u64, Vec::<Value>::new())),
        move |state| {
            let replica = replica.clone();
            async move {
                let (mut listener, mut tick, mut idle, mut backlog) = state?;
                loop {
                    if let Some(note) = backlog.pop() {
                        return Some((
                            Ok(data_event(&note)),
                            Some((listener, tick, idle, backlog)),
                        ));
                    }
                    if replica.is_draining() {
                        let end = teardown_events(&listener, "the server is shutting down");
                        return Some((Ok(end), None));
                    }
                    tokio::select! {
                        change = listener.changes.recv() => match change {
                            Ok(change) => {
                                if let Some(note) = listener.deliver(&change) {
                                    idle = 0;
                                    return Some((Ok(data_event(&note)), Some((listener, tick, idle, backlog))));
                                }
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                                backlog = listener.catch_up();
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                let end = teardown_events(&listener, "the tenant is no longer served here");
                                return Some((Ok(end), None));
                            }
                        },
                        _ = tick.tick() => {
                            if listener.token_expired() {
                                let end = teardown_events(&listener, "the access token expired; listen again with a new one");
                                return Some((Ok(end), None));
                            }
                            idle += 1;
                            if idle >= keepalive_every {
                                idle = 0;
                                return Some((Ok(Bytes::from_static(sse::HEARTBEAT)), Some((listener, tick, idle, backlog))));
                            }
                        }
                    }
                }
            }
        },
    );
    first.chain(rest)
}
