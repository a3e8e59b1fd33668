//! Webhook tools: a tool whose backend is the tenant's own HTTPS endpoint.
//!
//! When an MCP client calls such a tool, the server POSTs the call to the tenant's endpoint and
//! turns the answer into the `CallToolResult`. The endpoint may instead ask for input from the
//! client (a form the user fills in, or a completion from the client's model); the server relays
//! that request to the client and calls the endpoint again with the answer, for at most
//! [`MAX_ROUNDS`] requests per tool call.
//!
//! # Wire protocol (what a tenant's endpoint implements)
//!
//! ## Request
//!
//! Each round is one `POST` to the configured URL (`https://`, or `http://` to a loopback host in
//! development), with these headers ([Standard Webhooks](https://www.standardwebhooks.com/)):
//!
//! | header              | value                                                            |
//! |---------------------|------------------------------------------------------------------|
//! | `content-type`      | `application/json`                                               |
//! | `webhook-id`        | `msg_<32 hex>`, unique per round of a call; the same when a call is re-sent after a failover |
//! | `webhook-timestamp` | the time of sending, in Unix seconds                             |
//! | `webhook-signature` | `v1,<base64 HMAC-SHA256>` (see below); during a secret rotation two, space-separated: `v1,<new> v1,<old>` |
//!
//! The signature is HMAC-SHA256 keyed with the base64-decoded part of the tool's secret after
//! `whsec_`, over `"{webhook-id}.{webhook-timestamp}.{raw body}"`, base64-encoded (standard
//! alphabet, padded). Endpoints should recompute it over the raw body bytes, compare in constant
//! time, reject timestamps more than a few minutes away from their clock, and may use
//! `webhook-id` to drop replays. A round is re-sent only when the replica serving the MCP session
//! died while the call was running: the re-sent request carries the same `webhook-id` (and a new
//! timestamp and signature), so an endpoint that must not act twice de-duplicates on it.
//!
//! The body is a JSON object:
//!
//! ```json
//! {
//!   "type": "tools/call",
//!   "tenant": "acme",
//!   "tool": "create_ticket",
//!   "arguments": { "title": "Printer on fire" },
//!   "request_id": 7,
//!   "principal": null,
//!   "round": 1
//! }
//! ```
//!
//! - `request_id` is the MCP request id of the `tools/call`, with its JSON type (number or
//!   string); it is unique only within one MCP session.
//! - `principal` describes who is calling, when the server knows (`null` otherwise).
//! - `round` counts the requests of this tool call, from 1.
//! - On later rounds (after an input request, below) the body also carries `"state"`, exactly the
//!   value the endpoint returned with its input request (`null` if it sent none), and `"input"`,
//!   the client's answer.
//!
//! ## Response
//!
//! A `2xx` answer with a JSON body (at most 4 MiB), within the tool's timeout (10 s by default;
//! the timeout applies to each round separately and does not include the time the client takes
//! to answer an input request). The body is one of:
//!
//! 1. **A tool result** — a `CallToolResult`:
//!    `{"content": [{"type": "text", "text": "…"}], "structuredContent": {…}, "isError": false}`.
//!    Only `content`, `structuredContent`, `isError` and `_meta` are passed on to the client.
//!    `content` is required (an array of content blocks, each an object whose `type` is one MCP
//!    defines: `text`, `image`, `audio`, `resource`, `resource_link`; a client of a revision
//!    without audio or resource links gets a text block in their place); when it is
//!    missing but `structuredContent` is present, the server adds a text block with the JSON of
//!    `structuredContent`. Set `isError: true` for failures the model should see and may recover
//!    from (bad arguments, a missing record, …). If the tool declares an `outputSchema`, a result
//!    that is not an error must carry `structuredContent` conforming to it.
//! 2. **An input request** — `{"input_request": {…}, "state": <any JSON>}` where `input_request`
//!    is either
//!    - `{"type": "elicitation", "message": "…", "requested_schema": {…}}`: the server sends the
//!      client an `elicitation/create` request (form mode) with that message and schema, or
//!    - `{"type": "sampling", "params": {…}}`: the server sends `sampling/createMessage` with
//!      those params (the MCP `CreateMessageRequest` params: `messages`, `maxTokens`, …), or
//!    - `{"type": "secret", "name": "github_token", "message": "…"}`: a secret the user must
//!      enter on the platform's own page, never through the MCP client (URL-mode elicitation,
//!      see "Secrets" below). `name` is 1–64 letters, digits, `_`, `-` or `.`.
//!
//!    `state` is opaque to the server and is sent back verbatim in the next round, so the
//!    endpoint can stay stateless (sign or encrypt it if it must not be tampered with: it travels
//!    through the server only, but the endpoint should not trust it more than its own data).
//!    The next round's `input` is:
//!    - the client's result, unchanged, when the client answered: for elicitation an
//!      `ElicitResult` (`{"action": "accept", "content": {…}}`, or `{"action": "decline"}` /
//!      `{"action": "cancel"}` when the user refused), for sampling a `CreateMessageResult`
//!      (`{"role": "assistant", "content": {…}, "model": "…", "stopReason": "…"}`);
//!    - `{"error": {"code": <int>, "message": "…"}}` when there is no answer: the client did not
//!      declare the capability (code `-32600`), answered with a JSON-RPC error (its code), or the
//!      session ended. Client results never have an `error` member, so its presence tells the
//!      two apart. The endpoint should then finish with a result (usually `isError: true`
//!      explaining what was missing) rather than ask again.
//!
//!    - for a secret: `{"action": "accept", "name": "github_token", "secret": "…"}` once the
//!      user entered it, `{"action": "decline"}` when the user refused (in the client or on the
//!      page), `{"action": "cancel"}` when it was cancelled or expired, or `{"error": …}` as
//!      above (the client does not take URL-mode elicitation, or the tenant cannot verify who
//!      opens the page).
//!
//!    After [`MAX_ROUNDS`] requests that all asked for input, the call fails.
//!
//! ## Secrets (URL-mode elicitation)
//!
//! When an endpoint answers `{"input_request": {"type": "secret", "name": "github_token",
//! "message": "Paste a GitHub token with repo scope"}, "state": …}`, the platform records an
//! elicitation (tenant, the caller's principal, session, tool, `name`, expiry) and sends the MCP
//! client `elicitation/create` with `mode: "url"`, the message, an `elicitationId` and the URL
//! of its page `/t/{tenant}/elicitations/{id}`. The user opens it, signs in (on `oauth`
//! tenants, as the same user the MCP client acts for) and enters the secret, which is stored
//! sealed. The call waits meanwhile (the round timeout does not run); when the user is done the
//! client gets `notifications/elicitation/complete` and the endpoint gets the next round with
//! `input.secret`. The platform hands a secret over once and keeps no copy: store it on your
//! side (per `principal`) if you need it again.
//!
//! If the same principal's call asks for the same `name` of the same tool while an earlier
//! elicitation is still pending, a session's call fails with the URL-elicitation-required error
//! (-32042, the pending elicitation in its data) instead of asking again; when it is retried
//! after the user completed the page, round 2 carries the secret at once. A 2026-07-28 call is
//! asked for the same page again (that revision has no -32042), and its retry accepting it waits
//! for the page. Only clients that declared `capabilities.elicitation.url` are asked; on a
//! 2026-07-28 request, any input request the client did not declare a capability for fails the
//! call with MissingRequiredClientCapability (-32021) instead of reaching the endpoint.
//!
//! Anything else — no connection, a timeout, a non-`2xx` status (redirects are not followed), a
//! body over 4 MiB or of more than 250,000 JSON values, invalid JSON, a JSON body that is neither
//! of the above — ends the call with a tool result with `isError: true` and a message saying what
//! went wrong, never a protocol error. So does a call that finds the tenant's tools with as many
//! requests open to their endpoints as the replica allows (`webhooks.max_in_flight_per_tenant`)
//! and none of them ending within the tool's timeout.
//!
//! When the MCP client cancels the call (or its session ends), the in-flight request is
//! abandoned: the connection to the endpoint is closed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use base64::engine::general_purpose::STANDARD as BASE64;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Map, Value};

use tracing::Instrument;

mod answer;
mod signature;

pub use answer::tool_result;
use answer::{check_output, parse_answer, values_at_most};
pub use signature::{check_secret, message_id, new_secret, sign, MIN_SECRET_BYTES};

pub use crate::egress::validate_url;
use crate::elicitation::{ElicitationError, Outcome, Prepared, SecretRequest};
use crate::protocol::mcp::{text_content, tool_error, CONTENT_TYPES};
use crate::protocol::schema::SchemaError;
use crate::protocol::RpcError;
use crate::request::RequestContext;
use crate::store::ElicitationStatus;

/// Per-round timeout when the target does not set one.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Largest per-round timeout honoured; longer settings are clamped to it.
pub const MAX_TIMEOUT_MS: u64 = 120_000;
/// Most requests sent to the endpoint for one tool call.
pub const MAX_ROUNDS: usize = 8;
/// Largest response body accepted from an endpoint.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Most JSON values (numbers, strings, array items, members…) a response may hold. Parsed, a
/// value costs tens of bytes however short its text: 4 MiB of `[0,0,0,…]` would take over
/// 60 MiB, so the count is checked on the bytes before anything is parsed.
pub const MAX_RESPONSE_VALUES: usize = 250_000;
/// Prefix of webhook secrets.
pub const SECRET_PREFIX: &str = "whsec_";

/// How much of an unexpected response body is quoted in an error message (characters).
const EXCERPT_CHARS: usize = 200;
/// How much of a non-2xx response body is read at most.
const ERROR_BODY_BYTES: usize = 8 * 1024;
/// Schema validation errors quoted in an error message.
const SCHEMA_ERRORS_SHOWN: usize = 3;

/// Where a webhook tool's calls go (the secret opened: it is stored sealed, see
/// `catalog::stored`). `Debug` shows no secret.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    /// `https://…` (or `http://` to a loopback host in development, see [`validate_url`]).
    pub url: String,
    /// `whsec_` + base64 of the HMAC key (see [`new_secret`]).
    pub secret: SecretString,
    /// During a rotation: the secret `secret` replaced, and until when (unix ms) calls are also
    /// signed with it (`webhook-signature` then carries both signatures).
    pub previous_secret: Option<(SecretString, i64)>,
    /// Per-round timeout; [`DEFAULT_TIMEOUT_MS`] when unset, at most [`MAX_TIMEOUT_MS`].
    pub timeout_ms: Option<u64>,
}

/// One call of a webhook tool.
#[derive(Debug, Clone)]
pub struct WebhookCall {
    pub tenant: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// Who is calling, when known; sent as `principal` (`null` when `None`).
    pub principal: Option<Value>,
    /// The tool's `outputSchema`, compiled once per catalog (`protocol::schema::compile`); when
    /// set, non-error results must carry conforming `structuredContent`.
    pub output_schema: Option<Arc<Result<jsonschema::Validator, SchemaError>>>,
    /// The tenant's webhook requests that may be open at once on this replica: each round holds
    /// a permit while its request is sent and its answer read and parsed (not while the client
    /// is asked for input); none free within the round's timeout, the call ends with a tool
    /// error. `None`: no limit.
    pub slots: Option<Arc<Semaphore>>,
}

/// Where a call's progress between rounds is recorded, so that if the replica running it dies
/// while the MCP client is answering an input request, another replica can go on from that round.
#[async_trait::async_trait]
pub trait RoundJournal: Send + Sync {
    /// Round `round` asked the client for input; `state` is what the endpoint sent with it.
    async fn waiting(&self, round: usize, state: &Value);
    /// The call ended (with a result or an error).
    async fn finished(&self);
}

/// Where a call recorded by a [`RoundJournal`] goes on: the round that asked for input, the
/// endpoint's state, and the client's answer (as [`input_for`] makes it).
#[derive(Debug, Clone)]
pub struct Resumption {
    pub round: usize,
    pub state: Value,
    pub input: Value,
}

/// Runs the tool: every failure is a `CallToolResult` with `isError: true` and a message a model
/// can act on; the only protocol errors are the URL-elicitation-required error (-32042, in a
/// session), when the endpoint needs a secret the user is still to enter on the platform's page,
/// and MissingRequiredClientCapability (-32021, on a 2026-07-28 request) when it asks for input
/// the client did not declare it takes.
///
/// Cancel-safe: dropping the future drops the in-flight HTTP request (closing its connection) or
/// the pending client request.
pub async fn invoke(
    client: &reqwest::Client,
    target: &WebhookTarget,
    call: WebhookCall,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    invoke_with(client, target, call, ctx, None, None).await
}

/// [`invoke`], recording rounds that wait for input in `journal`, and starting after a recorded
/// round when `from` is given (the client's answer to that round's input request).
pub async fn invoke_with(
    client: &reqwest::Client,
    target: &WebhookTarget,
    call: WebhookCall,
    ctx: RequestContext,
    journal: Option<&dyn RoundJournal>,
    from: Option<Resumption>,
) -> Result<Value, RpcError> {
    let started = Instant::now();
    let outcome = run(client, target, &call, &ctx, journal, from).await;
    if let Some(journal) = journal {
        journal.finished().await;
    }
    match outcome {
        Err(Stop::Protocol(error)) => {
            tracing::debug!(tenant = %call.tenant, tool = %call.tool, code = error.code, "webhook tool needs a URL elicitation first");
            Err(error)
        }
        Ok(result) => {
            tracing::debug!(
                tenant = %call.tenant,
                tool = %call.tool,
                elapsed_ms = started.elapsed().as_millis() as u64,
                is_error = result["isError"].as_bool().unwrap_or(false),
                "webhook tool finished"
            );
            Ok(result)
        }
        Err(Stop::Problem(problem)) => {
            tracing::warn!(
                tenant = %call.tenant,
                tool = %call.tool,
                elapsed_ms = started.elapsed().as_millis() as u64,
                problem = %problem,
                "webhook tool failed"
            );
            Ok(tool_error(format!(
                "The `{}` tool failed: {problem}",
                call.tool
            )))
        }
    }
}

/// Why a call stopped without a result.
enum Stop {
    /// Becomes a tool result with `isError: true`.
    Problem(String),
    /// Becomes the call's JSON-RPC error.
    Protocol(RpcError),
}

impl From<String> for Stop {
    fn from(problem: String) -> Self {
        Stop::Problem(problem)
    }
}

/// What the endpoint answered in one round.
enum Answer {
    Result(Value),
    Input { request: InputRequest, state: Value },
}

enum InputRequest {
    Elicitation { message: String, schema: Value },
    Sampling { params: Value },
    Secret { name: String, message: String },
}

async fn run(
    client: &reqwest::Client,
    target: &WebhookTarget,
    call: &WebhookCall,
    ctx: &RequestContext,
    journal: Option<&dyn RoundJournal>,
    from: Option<Resumption>,
) -> Result<Value, Stop> {
    // Defence in depth: the URL was validated when the tool was configured, but never send a
    // signed call in clear text to a non-loopback host.
    validate_url(&target.url, true).map_err(|e| {
        format!(
            "its endpoint URL is not usable ({e}); the tenant must fix the tool's configuration"
        )
    })?;
    let url = reqwest::Url::parse(&target.url).map_err(|e| format!("invalid endpoint URL: {e}"))?;
    let host = url.host_str().unwrap_or("?").to_string();
    let timeout_ms = target
        .timeout_ms
        .unwrap_or(DEFAULT_TIMEOUT_MS)
        .clamp(1, MAX_TIMEOUT_MS);

    let (first, mut follow_up) = match from {
        Some(r) => (r.round + 1, Some((r.state, r.input))),
        None => (1, None),
    };
    for round in first..=MAX_ROUNDS {
        let mut body = json!({
            "type": "tools/call",
            "tenant": call.tenant,
            "tool": call.tool,
            "arguments": call.arguments,
            "request_id": ctx.request_id.to_value(),
            "principal": call.principal.clone().unwrap_or(Value::Null),
            "round": round,
        });
        if let Some((state, input)) = follow_up.take() {
            body["state"] = state;
            body["input"] = input;
        }
        let body =
            serde_json::to_vec(&body).map_err(|e| format!("could not encode the call: {e}"))?;

        let slot = match &call.slots {
            None => None,
            Some(slots) => {
                // A place frees up as another call's endpoint answers: waited for as long as
                // this round may take.
                let waited = Instant::now();
                let wait = Duration::from_millis(timeout_ms);
                match tokio::time::timeout(wait, slots.clone().acquire_owned()).await {
                    Ok(Ok(permit)) => Some(permit),
                    _ => {
                        crate::observe::metrics::global().webhook(
                            &call.tenant,
                            "busy",
                            waited.elapsed(),
                        );
                        return Err(Stop::Problem(format!(
                            "this tenant's tools are running as many calls to their endpoints as \
                             this server allows at once, and none ended within {timeout_ms} ms; \
                             try again shortly"
                        )));
                    }
                }
            }
        };
        let msg_id = message_id(&ctx.call_key(), round);
        let started = Instant::now();
        // A client span per round; its trace context goes to the endpoint in `traceparent`.
        let span = crate::observe::telemetry::webhook_span(&call.tool, &host, &url);
        let answer = post(
            client,
            target,
            url.clone(),
            &host,
            body,
            timeout_ms,
            &msg_id,
        )
        .instrument(span.clone())
        .await;
        if answer.is_err() {
            span.record("error.type", "failed");
            span.record("otel.status_code", "error");
        }
        drop(span);
        crate::observe::metrics::global().webhook(
            &call.tenant,
            if answer.is_ok() { "ok" } else { "failed" },
            started.elapsed(),
        );
        let answer = parse_answer(answer?);
        // The endpoint has answered: waiting for the client's input holds no permit.
        drop(slot);
        match answer? {
            Answer::Result(result) => {
                if let Some(schema) = &call.output_schema {
                    if result["isError"] != Value::Bool(true) {
                        check_output(schema, &result)?;
                    }
                }
                return Ok(result);
            }
            Answer::Input { request, state } => {
                if round == MAX_ROUNDS {
                    return Err(Stop::Problem(format!(
                        "its endpoint asked for more input {MAX_ROUNDS} times without returning a \
                         result (at most {MAX_ROUNDS} rounds per call); the tool is misbehaving, \
                         do not retry it with the same arguments"
                    )));
                }
                if let Some(journal) = journal {
                    journal.waiting(round, &state).await;
                }
                let input = ask_client(ctx, call, request, round).await?;
                follow_up = Some((state, input));
            }
        }
    }
    Err(Stop::Problem(format!(
        "its endpoint asked for input {MAX_ROUNDS} times without returning a result"
    )))
}

/// One signed POST; returns the parsed JSON body of a 2xx answer.
async fn post(
    client: &reqwest::Client,
    target: &WebhookTarget,
    url: reqwest::Url,
    host: &str,
    body: Vec<u8>,
    timeout_ms: u64,
    msg_id: &str,
) -> Result<Value, String> {
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let unusable = |e| format!("its signing secret is unusable ({e}); the tenant must rotate it");
    let mut signature =
        sign(target.secret.expose_secret(), msg_id, timestamp, &body).map_err(unusable)?;
    if let Some((previous, until)) = &target.previous_secret {
        if crate::store::now_millis() < *until {
            signature.push(' ');
            signature.push_str(
                &sign(previous.expose_secret(), msg_id, timestamp, &body).map_err(unusable)?,
            );
        }
    }
    tracing::debug!(%host, %msg_id, bytes = body.len(), "calling webhook endpoint");

    let mut request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json")
        .header("webhook-id", msg_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body);
    for (name, value) in crate::observe::telemetry::outgoing_headers() {
        request = request.header(name, value);
    }

    let started = Instant::now();
    let exchange = async {
        let response = request.send().await?;
        let status = response.status();
        if status.is_success()
            && response
                .content_length()
                .is_some_and(|len| len > MAX_RESPONSE_BYTES as u64)
        {
            // Too large: do not even read it.
            return Ok((status, Vec::new(), true));
        }
        let limit = if status.is_success() {
            MAX_RESPONSE_BYTES
        } else {
            ERROR_BODY_BYTES
        };
        let (bytes, truncated) = read_limited(response, limit).await?;
        Ok::<_, reqwest::Error>((status, bytes, truncated))
    };
    let timed_out = || {
        format!(
            "its endpoint ({host}) timed out after {timeout_ms} ms without a complete answer; \
             the service may be slow or down, try again later"
        )
    };
    let (status, bytes, truncated) =
        match tokio::time::timeout(Duration::from_millis(timeout_ms), exchange).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(e)) if e.is_timeout() => return Err(timed_out()),
            Ok(Err(e)) if e.is_connect() => {
                return Err(format!(
                    "could not connect to its endpoint ({host}): {}; the service may be down, \
                     try again later",
                    crate::egress::root_cause(&e)
                ))
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "the request to its endpoint ({host}) failed: {}",
                    crate::egress::root_cause(&e)
                ))
            }
            Ok(Ok(answer)) => answer,
        };
    tracing::Span::current().record("http.response.status_code", status.as_u16());
    tracing::debug!(
        %host,
        %msg_id,
        status = status.as_u16(),
        bytes = bytes.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "webhook endpoint answered"
    );

    if !status.is_success() {
        let excerpt = excerpt(&bytes, truncated);
        return Err(if excerpt.is_empty() {
            format!("its endpoint ({host}) answered HTTP {status}")
        } else {
            format!("its endpoint ({host}) answered HTTP {status}: {excerpt}")
        });
    }
    if truncated {
        return Err(format!(
            "its endpoint ({host}) sent a response larger than the {} MiB limit",
            MAX_RESPONSE_BYTES / (1024 * 1024)
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(format!(
            "its endpoint ({host}) answered HTTP {status} with an empty body instead of JSON"
        ));
    }
    if values_at_most(&bytes) > MAX_RESPONSE_VALUES {
        return Err(format!(
            "its endpoint ({host}) sent a response of more than {MAX_RESPONSE_VALUES} JSON \
             values, more than a tool result may hold"
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "its endpoint ({host}) returned invalid JSON ({e}): {}",
            excerpt(&bytes, false)
        )
    })
}

/// Reads at most `limit` bytes of the body; `true` when there was more.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut buf = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - buf.len();
        if chunk.len() > room {
            buf.extend_from_slice(&chunk[..room]);
            return Ok((buf, true));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok((buf, false))
}

/// Relays an input request to the client; the answer becomes the next round's `input`.
async fn ask_client(
    ctx: &RequestContext,
    call: &WebhookCall,
    request: InputRequest,
    round: usize,
) -> Result<Value, Stop> {
    let (kind, outcome) = match request {
        InputRequest::Elicitation { message, schema } => {
            ("elicitation", ctx.elicit_form(&message, schema).await)
        }
        InputRequest::Sampling { params } => ("sampling", ctx.sample(params).await),
        InputRequest::Secret { name, message } => (
            "secret",
            ask_secret(ctx, call, &name, &message)
                .await
                .map_err(Stop::Protocol)?,
        ),
    };
    match &outcome {
        // A stateless request that needs a capability its client did not declare is refused
        // with MissingRequiredClientCapability (-32021), not handed to the endpoint.
        Err(e) if e.code == crate::protocol::stateless::MISSING_CLIENT_CAPABILITY => {
            return Err(Stop::Protocol(e.clone()))
        }
        Ok(_) => {
            tracing::debug!(tenant = %call.tenant, tool = %call.tool, round, kind, "client answered input request")
        }
        Err(RpcError { code, message, .. }) => {
            tracing::debug!(tenant = %call.tenant, tool = %call.tool, round, kind, code, %message, "input request not answered")
        }
    }
    Ok(input_for(outcome))
}

/// A secret through URL-mode elicitation: the next round's `input` (`Ok(Err(..))` becomes
/// `{"error": …}`), or, in a session, the -32042 error when an earlier elicitation for it is
/// still pending.
async fn ask_secret(
    ctx: &RequestContext,
    call: &WebhookCall,
    name: &str,
    message: &str,
) -> Result<Result<Value, RpcError>, RpcError> {
    let Some(desk) = &ctx.elicitations else {
        return Ok(Err(RpcError::invalid_request(
            "this server cannot ask the user for secrets on this request path",
        )));
    };
    // -32021 on a stateless request (then not handed to the endpoint, see `ask_client`).
    if let Err(e) = ctx.require("elicitation/create", &json!({ "mode": "url" })) {
        return Ok(Err(e));
    }
    let request = SecretRequest {
        principal: ctx.principal.as_deref(),
        session: ctx.session.as_deref(),
        tool: &call.tool,
        name,
        message,
    };
    let accepted = |secret: &SecretString| {
        Ok(Ok(
            json!({ "action": "accept", "name": name, "secret": secret.expose_secret() }),
        ))
    };
    let unavailable = |e: ElicitationError| match e {
        ElicitationError::Unavailable(why) => Ok(Err(RpcError::invalid_request(format!(
            "URL elicitation is not available: {why}"
        )))),
        other => {
            tracing::warn!(tenant = %call.tenant, tool = %call.tool, error = %other, "URL elicitation failed");
            Ok(Err(RpcError::internal(
                "the server could not record the elicitation; try again later",
            )))
        }
    };
    let elicitation = match desk.prepare(&request).await {
        Err(e) => return unavailable(e),
        Ok(Prepared::Ready { secret, .. }) => return accepted(&secret),
        // Session revisions: a request that cannot go on until the user is done gets -32042
        // with the elicitation. 2026-07-28 must not send that code: the client is asked for the
        // same elicitation again (its retry then waits here for the page, as the revision's
        // URL flow does).
        Ok(Prepared::Pending {
            elicitation,
            existing: true,
        }) if !ctx.version.is_modern() => {
            return Err(RpcError::url_elicitation_required(vec![
                elicitation.to_value()
            ]))
        }
        Ok(Prepared::Pending { elicitation, .. }) => elicitation,
    };
    let answer = ctx.elicit_url(&elicitation).await;
    let action = match &answer {
        Ok(result) => result.get("action").and_then(Value::as_str).unwrap_or(""),
        Err(_) => "",
    };
    if action != "accept" {
        let (status, input) = match action {
            "decline" => (ElicitationStatus::Declined, json!({ "action": "decline" })),
            _ => (ElicitationStatus::Cancelled, json!({ "action": "cancel" })),
        };
        if let Err(e) = desk.close(&elicitation.id, status).await {
            tracing::warn!(error = %e, "could not close a refused elicitation");
        }
        return Ok(match answer {
            Err(e) => Err(e),
            Ok(_) => Ok(input),
        });
    }
    match desk.wait(&elicitation.id).await {
        Err(e) => unavailable(e),
        Ok(Outcome::Completed { secret }) => {
            ctx.elicitation_complete(&elicitation.id);
            accepted(&secret)
        }
        Ok(Outcome::Declined) => Ok(Ok(json!({ "action": "decline" }))),
        Ok(Outcome::Cancelled) => Ok(Ok(json!({ "action": "cancel" }))),
        Ok(Outcome::Expired) => Ok(Ok(json!({ "action": "cancel", "reason": "expired" }))),
    }
}

/// The next round's `input`: the client's result unchanged, or `{"error": {code, message}}` when
/// there was no answer.
pub fn input_for(outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(answer) => answer,
        Err(RpcError { code, message, .. }) => {
            json!({ "error": { "code": code, "message": message } })
        }
    }
}

/// A short, single-line quote of a body for error messages.
fn excerpt(bytes: &[u8], truncated: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(EXCERPT_CHARS).collect();
    if truncated || chars.next().is_some() {
        out.push('…');
    }
    out
}
