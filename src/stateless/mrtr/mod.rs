//! Multi round-trip requests (2026-07-28 MRTR): a tool call (or `prompts/get` of a prompt that
//! asks, [`Kind`]) that needs the client's input (an elicitation, a sample, its roots) answers
//! `input_required` with the input requests and a `requestState`; the client retries the call
//! with `inputResponses` and that state.
//!
//! The call runs with a [`RoundPort`]: when the tool asks the client something the port has no
//! answer for, the call stops there, its round is recorded in the database (sealed: the client's
//! earlier answers may be what a user typed) and the client gets the questions under keys
//! derived from what they ask (or named by the tool, `RequestContext::keyed`). On the retry:
//! - a built-in tool runs again from the start and its questions are answered from the answers
//!   recorded so far plus the new ones (a tool asks the same questions in the same order);
//! - a webhook tool goes on from the round its endpoint asked in (the endpoint's state was
//!   recorded with it), as after a failover, so the endpoint is not called twice for a round.
//!
//! `requestState` is sealed (XChaCha20-Poly1305 under the deployment's sealing keys, bound to
//! the tenant) and names the recorded round, its number and an expiry. The round itself records
//! who called (the principal), the tool and a digest of its arguments: a state presented by
//! another principal, for another call, at another tenant, after its expiry, or twice (a retry
//! claims its round for [`CLAIM`], renewed while its call runs, and uses it up once answered; a
//! retry that ends unanswered, its client gone or refused, releases it, and one whose replica
//! stopped lets it lapse) is refused with Invalid Params. Any replica can take the retry.

mod port;

use port::{asked_counts, catalog_resumes, check_answer, RoundPort};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot, Notify};

use super::{error, finish, stamp_server_info, Answer, Env, Notes, Served};
use crate::auth::hash_secret;
use crate::auth::seal::purpose::{request_state as purpose, round_state};
use crate::auth::seal::Sealer;
use crate::protocol::mcp::LogLevel;
use crate::protocol::stateless::RequestMeta;
use crate::protocol::{jsonrpc, RequestId, RpcError};
use crate::request::{RequestContext, SessionPort};
use crate::session::Sessions;
use crate::store::{now_millis, RoundRecord, RoundStore};

/// What a retry's `requestState` says, sealed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    /// The round's id in the database.
    pub id: String,
    /// Its number: a state from an earlier round of the same call is stale.
    pub round: u32,
    /// Unix ms after which the state is refused.
    pub exp: i64,
}

impl Token {
    /// The `requestState` a client gets: the token sealed for `tenant`.
    pub fn seal(&self, sealer: &Sealer, tenant: &str) -> Result<String, RpcError> {
        let token = serde_json::to_vec(self).map_err(|e| RpcError::internal(e.to_string()))?;
        Ok(sealer.seal(&purpose(tenant), &token))
    }

    /// A client's `requestState` opened: `None` unless it is a token this deployment sealed
    /// for `tenant` (altered, forged, or issued by another tenant).
    pub fn open(sealer: &Sealer, tenant: &str, state: &str) -> Option<Token> {
        let bytes = sealer.open(&purpose(tenant), state).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// What the database keeps of a call between rounds (sealed into `RoundRecord::state`).
#[derive(Serialize, Deserialize)]
struct Round {
    tool: String,
    /// SHA-256 of the tool name and arguments (canonical JSON).
    digest: String,
    /// The principal's binding (`None` on an open tenant).
    principal: Option<String>,
    /// The id of the request that started the call (the call's identity for webhooks).
    origin: Value,
    /// Every answer the client gave so far, by key.
    answers: Map<String, Value>,
    /// The questions of the last round, by key.
    asked: Map<String, Value>,
    /// The webhook endpoint's round is recorded: the retry goes on from it with this answer.
    resume: Option<String>,
}

/// A new round id: 128 random bits in lower-case hex.
fn new_round_id() -> Arc<str> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = rand::random::<[u8; 16]>();
    let mut hex = [0u8; 32];
    for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0xf)];
    }
    // Always ASCII.
    std::str::from_utf8(&hex).unwrap_or_default().into()
}

/// `parts` joined, in one allocation (what `format!` does, without its machinery: this is on
/// every stateless tool call).
fn concat(parts: &[&str]) -> Arc<str> {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        s.push_str(part);
    }
    s.into()
}

/// How long a retry's claim on its round lasts unless renewed: after a replica stopped while it
/// ran a retry, the client can send the retry again this long after.
pub const CLAIM: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a running retry renews its claim.
const CLAIM_RENEWAL: std::time::Duration = std::time::Duration::from_secs(10);

fn invalid_state(why: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "requestState {why}; call the tool again without requestState and inputResponses"
    ))
}

/// What a multi round-trip request runs: a tool, or a prompt that asks the client something
/// (`Catalog::prompt_asks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Tool => "tools/call",
            Kind::Prompt => "prompts/get",
        }
    }

    fn unknown(self, name: &str) -> RpcError {
        RpcError::invalid_params(match self {
            Kind::Tool => format!("Unknown tool: {name}"),
            Kind::Prompt => format!("Unknown prompt: {name}"),
        })
    }
}

/// `tools/call` (or `prompts/get` of a prompt that asks) in the stateless revision.
pub fn call(
    env: Env,
    id: RequestId,
    meta: RequestMeta,
    params: Map<String, Value>,
    progress_token: Option<Value>,
    kind: Kind,
) -> Served {
    let method = kind.method();
    // One pass over the params, moving out what a call uses (four removals from the map cost
    // more: each searches it and rebalances it).
    let (mut state, mut responses, mut name, mut arguments) = (None, None, None, None);
    for (key, value) in params {
        match key.as_str() {
            "requestState" => state = Some(value),
            "inputResponses" => responses = Some(value),
            "name" => name = Some(value),
            "arguments" => arguments = Some(value),
            _ => {}
        }
    }
    let name = match name {
        Some(Value::String(n)) => n,
        _ => {
            return Served::Done(error(
                &id,
                RpcError::invalid_params(format!("{method} needs a string \"name\"")),
            ))
        }
    };
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Served::Done(error(
                &id,
                RpcError::invalid_params(format!("{method} \"arguments\" must be an object")),
            ))
        }
    };
    let state = match state {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Served::Done(error(
                &id,
                RpcError::invalid_params("requestState must be a string"),
            ))
        }
    };
    let responses = match responses {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Served::Done(error(
                &id,
                RpcError::invalid_params("inputResponses must be an object"),
            ))
        }
    };
    let quiet = progress_token.is_none() && meta.log_level.is_none();
    // (A tool that answers at once is one the catalog has.)
    if kind == Kind::Tool && state.is_none() && quiet && env.catalog.answers_at_once(&name) {
        return at_once(env, id, meta, &name, arguments);
    }
    let known = match kind {
        Kind::Tool => env.catalog.has_tool(&name),
        Kind::Prompt => env.catalog.prompt_asks(&name),
    };
    if !known {
        return Served::Done(error(&id, kind.unknown(&name)));
    }
    let (notes_tx, notes) = Notes::channel(!quiet);
    let response = Box::pin(async move {
        let call = Call {
            env,
            id,
            meta,
            kind,
            name,
            arguments,
            progress_token,
            notes: notes_tx,
        };
        match call.run(state, responses).await {
            Ok(message) => message,
            Err(e) => error(&call.id, e),
        }
    });
    Served::Running { response, notes }
}

/// A call of a tool that finishes on its first poll without talking to the client
/// (`Catalog::answers_at_once`), asked for no progress or log messages and continuing no round:
/// it can never answer `input_required`, so it runs without a round (no round id, no port
/// collecting questions) and is answered as JSON at once.
fn at_once(
    env: Env,
    id: RequestId,
    meta: RequestMeta,
    name: &str,
    arguments: Map<String, Value>,
) -> Served {
    use futures_util::FutureExt;
    let mut ctx = RequestContext::new(
        id.clone(),
        meta.version,
        meta.client_capabilities,
        None,
        // Written out only when a webhook tool asks for it, and this is none.
        crate::request::CallKey::Given("".into()),
        super::null_port(),
    );
    ctx.principal = env.principal_value();
    let started = std::time::Instant::now();
    let Some(mut future) = env.catalog.call_tool(name, arguments, ctx) else {
        return Served::Done(error(
            &id,
            RpcError::invalid_params(format!("Unknown tool: {name}")),
        ));
    };
    match (&mut future).now_or_never() {
        Some(outcome) => Served::Done(finish(&env, &id, "tools/call", started, outcome, false)),
        // Not what the catalog promised, but still answered right.
        None => Served::Running {
            response: Box::pin(async move {
                let outcome = future.await;
                finish(&env, &id, "tools/call", started, outcome, false)
            }),
            notes: Notes::channel(false).1,
        },
    }
}

struct Call {
    env: Env,
    id: RequestId,
    meta: RequestMeta,
    kind: Kind,
    name: String,
    arguments: Map<String, Value>,
    progress_token: Option<Value>,
    notes: Option<mpsc::UnboundedSender<Value>>,
}

impl Call {
    fn binding(&self) -> Option<String> {
        self.env.principal.as_ref().map(|p| p.binding().to_string())
    }

    /// The record of a call's first round (made when it first asks the client something).
    fn first_round(&self) -> Round {
        Round {
            tool: self.name.clone(),
            // Computed when a round is recorded.
            digest: String::new(),
            principal: self.binding(),
            origin: self.id.to_value(),
            answers: Map::new(),
            asked: Map::new(),
            resume: None,
        }
    }

    /// What a round is bound to: the tool (or, marked, the prompt) and its arguments.
    fn digest(&self) -> String {
        let arguments = canonical(&self.arguments);
        match self.kind {
            Kind::Tool => hash_secret(&format!("{}\u{0}{arguments}", self.name)),
            Kind::Prompt => hash_secret(&format!(
                "{}\u{0}{}\u{0}{arguments}",
                self.kind.method(),
                self.name
            )),
        }
    }

    async fn run(
        &self,
        state: Option<String>,
        responses: Map<String, Value>,
    ) -> Result<Answer, RpcError> {
        // The round this call goes on from: none yet (most calls never need one), or the one
        // the state names, claimed by this retry (used up once the retry is answered, released
        // otherwise, so a retry whose connection broke can be sent again).
        let Some(state) = state else {
            // 128 random bits from the thread's CSPRNG (no system call per request).
            return self.go_on(new_round_id(), 0, None, &responses, None).await;
        };
        let (token, round, until) = self.open(&state, &responses).await?;
        let mut claim = Claim {
            claimed: Claimed {
                store: self.env.auth.store.clone(),
                tenant: self.env.tenant.slug.clone(),
                id: token.id.clone(),
                round: token.round,
                until: Arc::new(AtomicI64::new(until)),
                spent: Arc::new(AtomicBool::new(false)),
            },
            held: true,
            renewer: None,
        };
        // Renewed beside the call (not between its polls), until the claim ends (or is dropped
        // with the call); a claim found taken by another retry (this one's lapsed: the store was
        // unreachable for its whole length) stops the call.
        let (lost_tx, lost_rx) = oneshot::channel();
        let renewal = claim.claimed.clone().renew(lost_tx);
        claim.renewer = Some(tokio::spawn(renewal).abort_handle());
        let answer = tokio::select! {
            answer = self.go_on(
                token.id.into(),
                token.round,
                Some(round),
                &responses,
                Some(&mut claim),
            ) => answer,
            Ok(()) = lost_rx => Err(RpcError::internal(
                "this retry's claim on its round lapsed and another retry took it; its outcome is that retry's",
            )),
        };
        claim.end(answer.is_ok()).await;
        answer
    }

    /// Runs the call from `round` (its answers so far): its result, or the next round.
    /// `claim`: the round a retry goes on from, kept only until the call asks something new.
    async fn go_on(
        &self,
        round_id: Arc<str>,
        number: u32,
        mut round: Option<Round>,
        responses: &Map<String, Value>,
        claim: Option<&mut Claim>,
    ) -> Result<Answer, RpcError> {
        let tenant = self.env.tenant.slug.clone();
        if let Some(r) = round.as_mut() {
            // Answers to the last round's questions; anything else the client sent is ignored.
            for key in r.asked.keys() {
                if let Some(answer) = responses.get(key) {
                    r.answers.insert(key.clone(), answer.clone());
                }
            }
            let missing: Map<String, Value> = r
                .asked
                .iter()
                .filter(|(k, _)| !r.answers.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !missing.is_empty() {
                // Ask again for what is still missing, in a new round, if this retry's client
                // still takes it.
                for asked in missing.values() {
                    crate::request::check_declared(
                        self.meta.version,
                        &self.meta.client_capabilities,
                        asked,
                    )?;
                }
                let r = round.take().unwrap_or_else(|| self.first_round());
                return self.input_required(&round_id, number + 1, r, missing).await;
            }
        }

        let answers = round
            .as_ref()
            .map(|r| r.answers.clone())
            .unwrap_or_default();
        // A call run again from the start asks its earlier questions again and finds their
        // answers under the same keys. A webhook call resumed at its round does not: what it
        // asks is new even when it repeats an earlier question, so its keys count on from the
        // earlier ones (unique within the request, and never answered by an old answer).
        let resuming = round.as_ref().is_some_and(|r| r.resume.is_some());
        let seen = if resuming {
            asked_counts(&answers)
        } else {
            HashMap::new()
        };
        // Answers a first request offers (no round yet: a client answering what it expects to be
        // asked) are taken for the questions they fit; a webhook call's questions are its
        // endpoint's, answered only from a round.
        let offered = if round.is_none() && !catalog_resumes(&self.env, self.kind, &self.name) {
            responses.clone()
        } else {
            Map::new()
        };
        let port = Arc::new(RoundPort {
            answers,
            offered,
            taken: Mutex::new(Map::new()),
            seen: Mutex::new(seen),
            asked: Mutex::new(Map::new()),
            waiting: Mutex::new(Vec::new()),
            needed: Notify::new(),
            notes: self.notes.clone(),
            log_level: self.meta.log_level,
            sessions: self.env.tenant.sessions.clone(),
        });
        let origin = round
            .as_ref()
            .and_then(|r| RequestId::from_value(&r.origin))
            .unwrap_or_else(|| self.id.clone());
        let mut ctx = RequestContext::new(
            origin.clone(),
            self.meta.version,
            self.meta.client_capabilities.clone(),
            self.progress_token.clone(),
            // The call's stable identity `{tenant}/mrtr:{round}/{origin request id}`, written out
            // only when a webhook tool asks.
            crate::request::CallKey::Round {
                tenant: tenant.clone(),
                round: round_id.clone(),
            },
            port.clone() as Arc<dyn SessionPort>,
        );
        ctx.principal = self.env.principal_value();
        // Webhook calls between rounds are recorded under this key (see `catalog::stored`).
        ctx.session = Some(concat(&["mrtr:", &round_id]));
        let catalog = &self.env.catalog;
        let future = match round.as_mut().and_then(|r| r.resume.take().map(|k| (k, r))) {
            Some((key, r)) => {
                let (tx, rx) = oneshot::channel();
                let _ = tx.send(Ok(r.answers.get(&key).cloned().unwrap_or(Value::Null)));
                catalog.resume_call(&self.name, self.arguments.clone(), ctx, rx)
            }
            None if self.kind == Kind::Prompt => {
                catalog.get_prompt_asking(&self.name, &self.arguments, &ctx)
            }
            None => catalog.call_tool(&self.name, self.arguments.clone(), ctx),
        };
        let Some(future) = future else {
            return Err(self.kind.unknown(&self.name));
        };
        let started = std::time::Instant::now();
        let outcome = tokio::select! {
            biased;
            outcome = future => Some(outcome),
            _ = port.needed.notified() => None,
        };
        match outcome {
            Some(outcome) => Ok(finish(
                &self.env,
                &self.id,
                self.kind.method(),
                started,
                outcome,
                false,
            )),
            None => {
                // It asked something new: a webhook endpoint's step was recorded with the
                // question, so the round it went on from cannot be given back (a retry of it
                // would pair that round's answer with the new step).
                if let Some(claim) = claim {
                    claim.claimed.spent.store(true, Ordering::Release);
                }
                let asked = std::mem::take(&mut *port.asked.lock());
                let mut round = round.unwrap_or_else(|| self.first_round());
                // Offered answers it took are kept like answers given in a round.
                round
                    .answers
                    .extend(std::mem::take(&mut *port.taken.lock()));
                // A webhook endpoint asked (one question per round) and its round is recorded: the
                // retry goes on from it. Not after a URL elicitation: the retry runs the call
                // again, and the endpoint's request for the secret then finds it entered (or,
                // still pending, the retry accepting the page waits for it there).
                let url_mode = asked.values().any(|r| r["params"]["mode"] == "url");
                if catalog_resumes(&self.env, self.kind, &self.name) && !url_mode {
                    round.resume = asked.keys().next_back().cloned();
                }
                self.input_required(&round_id, number + 1, round, asked)
                    .await
            }
        }
    }

    /// Records the round and answers `input_required` with its questions.
    async fn input_required(
        &self,
        round_id: &str,
        number: u32,
        mut round: Round,
        asked: Map<String, Value>,
    ) -> Result<Answer, RpcError> {
        let sealer = &self.env.auth.sealer;
        let tenant = &*self.env.tenant.slug;
        let expires = now_millis()
            + i64::try_from(self.env.settings.request_state_ttl.as_millis())
                .unwrap_or(i64::MAX / 2);
        round.asked = asked.clone();
        if round.digest.is_empty() {
            round.digest = self.digest();
        }
        let sealed_round = serde_json::to_vec(&round)
            .map_err(|e| RpcError::internal(format!("could not record the round: {e}")))?;
        let record = RoundRecord {
            id: round_id.to_string(),
            round: number,
            state: sealer.seal(&round_state(tenant, round_id), &sealed_round),
            expires_at: expires,
        };
        self.env
            .auth
            .store
            .save_round(tenant, &record)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "could not record a multi round-trip request");
                RpcError::internal(
                    "the server could not record this request's round; retry shortly",
                )
            })?;
        let token = Token {
            id: round_id.to_string(),
            round: number,
            exp: expires,
        }
        .seal(sealer, tenant)?;
        let mut result = Map::new();
        result.insert("resultType".into(), json!("input_required"));
        result.insert("inputRequests".into(), Value::Object(asked));
        result.insert("requestState".into(), Value::String(token));
        stamp_server_info(&self.env, &mut result);
        Ok(Answer::result(&self.id, &Value::Object(result)))
    }

    /// Opens the round a retry's `state` names and claims it, once the retry's `responses` to
    /// its questions are known to parse (a malformed one is -32602 and leaves the round for a
    /// corrected retry).
    async fn open(
        &self,
        state: &str,
        responses: &Map<String, Value>,
    ) -> Result<(Token, Round, i64), RpcError> {
        let sealer = &self.env.auth.sealer;
        let tenant = &*self.env.tenant.slug;
        let token = Token::open(sealer, tenant, state).ok_or_else(|| {
            invalid_state("is not valid here (altered, or issued by another tenant)")
        })?;
        let now = now_millis();
        if token.exp <= now {
            return Err(invalid_state("has expired"));
        }
        let store = &self.env.auth.store;
        let record = store.round(tenant, &token.id, now).await.map_err(|e| {
            tracing::warn!(error = %e, "could not read a multi round-trip request");
            RpcError::internal("the server could not read this request's round; retry shortly")
        })?;
        let record = match record {
            Some(r) if r.round == token.round => r,
            _ => return Err(invalid_state("was already used or has expired")),
        };
        let round: Round = sealer
            .open(&round_state(tenant, &token.id), &record.state)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| RpcError::internal("this request's recorded round is unreadable"))?;
        if round.principal != self.binding() {
            return Err(invalid_state("was issued to another client or user"));
        }
        if round.tool != self.name || round.digest != self.digest() {
            return Err(invalid_state(
                "was issued for another call (tool or arguments differ)",
            ));
        }
        for (key, asked) in &round.asked {
            if let Some(answer) = responses.get(key) {
                let method = asked["method"].as_str().unwrap_or("");
                check_answer(key, method, &asked["params"], answer)?;
            }
        }
        // A retry claims its round: another retry of the same state is refused while it runs.
        let until = now_millis() + CLAIM.as_millis() as i64;
        match store
            .claim_round(tenant, &token.id, token.round, now, until)
            .await
        {
            Ok(true) => Ok((token, round, until)),
            Ok(false) => Err(RpcError::invalid_params(format!(
                "requestState is in use by a retry still running (or was used up meanwhile); \
                 send this retry again once that one has ended (a retry whose server stopped \
                 releases it within {} s), or call the tool again without requestState",
                CLAIM.as_secs()
            ))),
            Err(e) => {
                tracing::warn!(error = %e, "could not consume a multi round-trip request");
                Err(RpcError::internal(
                    "the server could not read this request's round; retry shortly",
                ))
            }
        }
    }
}

/// A round a retry claimed to go on from it: used up (deleted) once the retry is answered or the
/// call asked something new (`spent`: a webhook endpoint's next step was recorded with the
/// question, so a retry of this round would pair its answer with that step); released when the
/// retry ends otherwise (an error, or its connection closed and the call dropped), so it can be
/// sent again. Every change is made only while the claim is this retry's (the round claimed
/// until `until`): one that lapsed and was taken by another retry is left to that one.
struct Claim {
    claimed: Claimed,
    /// Still held: released or used up when the claim ends.
    held: bool,
    /// The task renewing the claim, stopped when the claim ends.
    renewer: Option<tokio::task::AbortHandle>,
}

/// The claimed round, as the retry and its renewer share it.
#[derive(Clone)]
struct Claimed {
    store: crate::store::SqlStore,
    tenant: Arc<str>,
    id: String,
    round: u32,
    /// Until when the round is claimed (unix ms), as this retry last wrote it.
    until: Arc<AtomicI64>,
    spent: Arc<AtomicBool>,
}

impl Claim {
    /// The retry ended, `answered` or not. Still held until that is written (a retry dropped
    /// meanwhile ends it from `Drop`).
    async fn end(&mut self, answered: bool) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if self.held {
            self.claimed.end(answered).await;
            self.held = false;
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if !std::mem::take(&mut self.held) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let claimed = self.claimed.clone();
            runtime.spawn(async move { claimed.end(false).await });
        }
    }
}

impl Claimed {
    /// Uses the round up (the retry was `answered`, or its call asked something new), or
    /// releases it for the retry to be sent again.
    async fn end(&self, answered: bool) {
        let used = answered || self.spent.load(Ordering::Acquire);
        let until = self.until.load(Ordering::Acquire);
        let (tenant, id, round) = (&*self.tenant, self.id.as_str(), self.round);
        let ended = if used {
            self.store
                .delete_round(tenant, id, round, Some(until))
                .await
        } else {
            self.store.set_claim(tenant, id, round, until, 0).await
        };
        if let Err(e) = ended {
            tracing::warn!(error = %e, used, "could not end a multi round-trip request's claim on its round (it lapses on its own)");
        }
    }

    /// Renews the claim every [`CLAIM_RENEWAL`] until it is aborted, or until the claim turns
    /// out to be another retry's (`lost`). A renewal the store cannot take is tried again at
    /// the next one.
    async fn renew(self, lost: oneshot::Sender<()>) {
        loop {
            tokio::time::sleep(CLAIM_RENEWAL).await;
            let held = self.until.load(Ordering::Acquire);
            let until = now_millis() + CLAIM.as_millis() as i64;
            let renewed = self
                .store
                .set_claim(&self.tenant, &self.id, self.round, held, until)
                .await;
            match renewed {
                Ok(true) => self.until.store(until, Ordering::Release),
                // The call asked something new: its next round replaces this one.
                Ok(false) if self.spent.load(Ordering::Acquire) => return,
                Ok(false) => {
                    let _ = lost.send(());
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not renew a multi round-trip request's claim on its round");
                }
            }
        }
    }
}

/// The JSON text of a value with object keys sorted, so equal values digest alike: serde_json's
/// maps are ordered by key (the `preserve_order` feature is off), so its text already is.
fn canonical(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::port::{check_response, question_key};
    use super::*;

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = json!({ "b": 1, "a": { "y": [1, { "d": 2, "c": 3 }], "x": null } });
        let b = json!({ "a": { "x": null, "y": [1, { "c": 3, "d": 2 }] }, "b": 1 });
        assert_eq!(canonical(&a), canonical(&b));
        assert_ne!(canonical(&a), canonical(&json!({ "b": 2 })));
    }

    #[test]
    fn input_responses_must_be_results_of_what_was_asked() {
        let ok = [
            (
                "elicitation/create",
                json!({ "action": "accept", "content": { "a": 1 } }),
            ),
            ("elicitation/create", json!({ "action": "decline" })),
            (
                "sampling/createMessage",
                json!({ "role": "assistant", "content": { "type": "text", "text": "4" }, "model": "m" }),
            ),
            ("roots/list", json!({ "roots": [{ "uri": "file:///x" }] })),
        ];
        for (method, answer) in ok {
            assert_eq!(check_response(method, &answer), Ok(()), "{answer}");
        }
        let bad = [
            ("elicitation/create", json!(null)),
            ("elicitation/create", json!({ "action": "maybe" })),
            (
                "elicitation/create",
                json!({ "action": "accept", "content": "x" }),
            ),
            (
                "elicitation/create",
                json!({ "error": { "code": -32600, "message": "m" } }),
            ),
            (
                "sampling/createMessage",
                json!({ "content": { "type": "text", "text": "4" } }),
            ),
            ("roots/list", json!({ "roots": [{ "name": "no uri" }] })),
        ];
        for (method, answer) in bad {
            assert!(
                check_response(method, &answer).is_err(),
                "{method} {answer}"
            );
        }
    }

    #[test]
    fn a_resumed_call_counts_its_questions_on_from_the_answered_ones() {
        let answers = json!({ "elicitation-0123456789ab": {}, "elicitation-0123456789ab-3": {},
            "sampling-ba9876543210": {}, "odd": {} });
        let counts = asked_counts(answers.as_object().unwrap());
        assert_eq!(counts["elicitation-0123456789ab"], 3);
        assert_eq!(counts["sampling-ba9876543210"], 1);
        assert_eq!(counts.len(), 2);
        assert_eq!(question_key("roots-x".into(), 1), "roots-x");
        assert_eq!(question_key("roots-x".into(), 4), "roots-x-4");
    }

    #[test]
    fn round_ids_are_128_random_bits_in_lower_case_hex() {
        let (a, b) = (new_round_id(), new_round_id());
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.len(), 32, "{id}");
            assert!(
                id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
        }
    }
}
