//! The port a call of a multi round-trip request talks to the client through: what it asks is
//! answered from the request's `inputResponses` when they hold a valid answer, and collected into
//! the round's `inputRequests` otherwise (the call then stops until the retry).

use super::*;

/// The port of a call in a multi round-trip request: questions it has an answer for are
/// answered at once, others are collected and stop the call. A question's key is derived from
/// what it asks (kind, digest of method and params, occurrence), so a call run again finds the
/// answers to the questions it asks again whatever else changed in between.
pub(super) struct RoundPort {
    pub(super) answers: Map<String, Value>,
    /// `inputResponses` of a request that continues no round: taken for a question whose key
    /// they name when they are a valid answer to it (recorded in `taken`), else ignored.
    pub(super) offered: Map<String, Value>,
    pub(super) taken: Mutex<Map<String, Value>>,
    /// How often each question was asked in this run.
    pub(super) seen: Mutex<HashMap<String, usize>>,
    pub(super) asked: Mutex<Map<String, Value>>,
    /// Replies of unanswered questions, kept so the call waits (it is dropped, not failed).
    pub(super) waiting: Mutex<Vec<oneshot::Sender<Result<Value, RpcError>>>>,
    pub(super) needed: Notify,
    /// `None`: the request asked for no notifications.
    pub(super) notes: Option<mpsc::UnboundedSender<Value>>,
    pub(super) log_level: Option<LogLevel>,
    pub(super) sessions: Sessions,
}

/// Whether calls of `name` go on from their endpoint's recorded step (webhook tools).
pub(super) fn catalog_resumes(env: &Env, kind: Kind, name: &str) -> bool {
    kind == Kind::Tool && env.catalog.resumes_calls(name)
}

/// Whether `answer` is the result of the input request `method` (mrtr.mdx: servers SHOULD check
/// the responses parse; a malformed one is a protocol error): an `ElicitResult` (an action, and
/// an object `content` if any), a `CreateMessageResult` (role, content, model) or a
/// `ListRootsResult` (roots with URIs).
pub(super) fn check_response(method: &str, answer: &Value) -> Result<(), &'static str> {
    let Some(answer) = answer.as_object() else {
        return Err("must be an object (the result of the input request)");
    };
    let string = |k: &str| answer.get(k).is_some_and(Value::is_string);
    match method {
        "elicitation/create" => {
            let action = answer.get("action").and_then(Value::as_str);
            if !matches!(action, Some("accept" | "decline" | "cancel")) {
                return Err("must be an ElicitResult: action accept, decline or cancel");
            }
            if answer.get("content").is_some_and(|c| !c.is_object()) {
                return Err("must be an ElicitResult: content, when present, an object");
            }
        }
        "sampling/createMessage" => {
            let content = answer
                .get("content")
                .is_some_and(|c| c.is_object() || c.is_array());
            if !(string("role") && string("model") && content) {
                return Err("must be a CreateMessageResult: role, content and model");
            }
        }
        "roots/list" => {
            let roots = answer.get("roots").and_then(Value::as_array);
            let valid = roots.is_some_and(|r| r.iter().all(|root| root["uri"].is_string()));
            if !valid {
                return Err("must be a ListRootsResult: roots, each with a uri");
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether `answer`, under `key`, answers the input request `method` with `params`: its shape
/// ([`check_response`]) and, for a form, the requested schema (-32602 naming what is wrong).
pub(super) fn check_answer(
    key: &str,
    method: &str,
    params: &Value,
    answer: &Value,
) -> Result<(), RpcError> {
    check_response(method, answer)
        .map_err(|e| RpcError::invalid_params(format!("inputResponses[{key:?}] {e}")))?;
    if method == "elicitation/create" {
        crate::request::check_elicited(&params["requestedSchema"], answer)?;
    }
    Ok(())
}

/// The key of the `n`th time (from 1) a call asks the question whose key base is `base`.
pub(super) fn question_key(base: String, n: usize) -> String {
    if n == 1 {
        base
    } else {
        format!("{base}-{n}")
    }
}

/// How many times each question (by key base) was asked, from the keys of its answers.
pub(super) fn asked_counts(answers: &Map<String, Value>) -> HashMap<String, usize> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for key in answers.keys() {
        // `{kind}-{digest}` or `{kind}-{digest}-{n}` (`question_key`).
        let mut parts = key.splitn(3, '-');
        let (Some(kind), Some(digest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let n = parts.next().map_or(Some(1), |n| n.parse().ok());
        if let Some(n) = n {
            let count = counts.entry(format!("{kind}-{digest}")).or_insert(0);
            *count = (*count).max(n);
        }
    }
    counts
}

impl SessionPort for RoundPort {
    fn notify(&self, _origin: &RequestId, method: &'static str, params: Value) {
        // Not part of this revision: the client learns the outcome by retrying.
        if method == "notifications/elicitation/complete" {
            return;
        }
        if method == "notifications/message" {
            // No notifications/message unless the request asked for a level.
            let Some(min) = self.log_level else { return };
            let level = params["level"].as_str().and_then(LogLevel::parse);
            if level.is_none_or(|l| l < min) {
                return;
            }
        }
        if let Some(notes) = &self.notes {
            let _ = notes.send(jsonrpc::notification_message(method, params));
        }
    }

    fn request(
        &self,
        _origin: &RequestId,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        let kind = method.split('/').next().unwrap_or("input");
        let digest = hash_secret(&format!("{method}\u{0}{}", canonical(&params)));
        self.ask(format!("{kind}-{}", &digest[..12]), method, params, reply);
    }

    fn request_as(
        &self,
        _origin: &RequestId,
        key: &'static str,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        self.ask(key.to_string(), method, params, reply);
    }

    fn close_stream(&self, _origin: &RequestId) {}

    fn resource_updated(&self, uri: &str) {
        self.sessions.resource_updated(uri);
    }

    fn list_changed(&self, list: &'static str) {
        self.sessions.list_changed(list);
    }
}

impl RoundPort {
    /// Answers the question from the answers so far, or collects it under `base` (numbered by
    /// how often this run asked it) and stops the call.
    fn ask(
        &self,
        base: String,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        let key = {
            let mut seen = self.seen.lock();
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            question_key(base, *n)
        };
        if let Some(answer) = self.answers.get(&key) {
            let _ = reply.send(Ok(answer.clone()));
            return;
        }
        if let Some(answer) = self.offered.get(&key) {
            if check_answer(&key, method, &params, answer).is_ok() {
                self.taken.lock().insert(key, answer.clone());
                let _ = reply.send(Ok(answer.clone()));
                return;
            }
        }
        self.asked
            .lock()
            .insert(key, json!({ "method": method, "params": params }));
        self.waiting.lock().push(reply);
        self.needed.notify_one();
    }
}
