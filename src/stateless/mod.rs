//! Stateless requests of the 2026-07-28 revision: no `initialize`, no session. Each request
//! carries its protocol version, client capabilities and identity in `_meta` (read by
//! `protocol::stateless`), builds its `RequestScope` from them and is handled by the same
//! `methods` as a session's requests. What differs lives here: `server/discover`, results
//! marked `resultType` with the server's identity and cache hints, multi round-trip requests
//! (`mrtr`: a tool that needs the client's input answers `input_required`, and the client's
//! retry goes on from a round recorded in the database), and `subscriptions/listen` (`listen`).
//! HTTP status codes are chosen by `transport::modern`.

pub mod listen;
pub mod mrtr;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::auth::{AuthService, Principal};
use crate::catalog::BoxFuture;
use crate::methods::{self, Handled, RequestScope};
use crate::protocol::jsonrpc::{self, INVALID_PARAMS, RESOURCE_NOT_FOUND};
use crate::protocol::mcp::server_capabilities;
use crate::protocol::stateless::{RequestMeta, META_SERVER_INFO};
use crate::protocol::{ProtocolVersion, Request, RequestId, RpcError};
use crate::request::SessionPort;
use crate::store::TenantAuth;
use crate::tenant::TenantHandle;

/// Settings of stateless requests (`[modern]` in the configuration).
#[derive(Debug, Clone)]
pub struct StatelessSettings {
    /// How long a client has to retry an `input_required` answer.
    pub request_state_ttl: Duration,
    /// `ttlMs` on list and read results unless the tenant sets its own.
    pub cache_ttl_ms: u64,
    pub page_size: usize,
    pub server_name: String,
    pub server_version: String,
    pub instructions: Option<String>,
    /// `{"name": …, "version": …}` as JSON text, written once (every result carries it).
    pub(crate) server_info_json: OnceLock<Box<serde_json::value::RawValue>>,
    /// The `_meta` of a result that has none of its own: `{"…/serverInfo": {…}}`, written once.
    pub(crate) result_meta_json: OnceLock<Box<serde_json::value::RawValue>>,
    /// `"resultType":"complete","_meta":{…}`: what most results end with, written once.
    pub(crate) result_tail: OnceLock<Box<[u8]>>,
}

impl StatelessSettings {
    fn server_info_json(&self) -> &serde_json::value::RawValue {
        self.server_info_json.get_or_init(|| {
            serde_json::value::to_raw_value(&json!({
                "name": self.server_name,
                "version": self.server_version,
            }))
            .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
        })
    }

    fn result_meta_json(&self) -> &serde_json::value::RawValue {
        self.result_meta_json.get_or_init(|| {
            serde_json::value::to_raw_value(&MetaWithServerInfo {
                meta: None,
                settings: self,
            })
            .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
        })
    }

    fn result_tail(&self) -> &[u8] {
        self.result_tail.get_or_init(|| {
            format!(
                r#""resultType":"complete","_meta":{}"#,
                self.result_meta_json().get()
            )
            .into_bytes()
            .into_boxed_slice()
        })
    }
}

impl Default for StatelessSettings {
    fn default() -> Self {
        StatelessSettings {
            request_state_ttl: Duration::from_secs(600),
            cache_ttl_ms: 60_000,
            page_size: 50,
            server_name: "mcp-harbor".into(),
            server_version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            server_info_json: OnceLock::new(),
            result_meta_json: OnceLock::new(),
            result_tail: OnceLock::new(),
        }
    }
}

/// What a stateless request runs with: its tenant, who is calling, the store and sealing keys
/// (for multi round-trip requests), the settings.
#[derive(Clone)]
pub struct Env {
    pub tenant: TenantHandle,
    /// The tenant's catalog as the request found it (read once per request).
    pub catalog: Arc<crate::catalog::TenantCatalog>,
    pub principal: Option<Arc<Principal>>,
    pub auth: Arc<AuthService>,
    pub settings: Arc<StatelessSettings>,
    /// The request's MCP server span (none unless traces are exported).
    pub span: crate::observe::trace::RequestSpan,
}

impl Env {
    fn principal_value(&self) -> Option<Arc<Value>> {
        self.principal.as_ref().map(|p| Arc::new(p.to_value()))
    }

    /// Results of an open tenant are the same for everyone; a protected tenant's are cached per
    /// authorization context.
    fn cache_scope(&self) -> &'static str {
        match *self.tenant.policy.auth() {
            TenantAuth::None => "public",
            _ => "private",
        }
    }

    fn server_info(&self) -> Value {
        json!({ "name": self.settings.server_name, "version": self.settings.server_version })
    }
}

/// A JSON-RPC response, serialized, and its error code when it is an error (the transport picks
/// the HTTP status from it).
pub struct Answer {
    pub body: bytes::Bytes,
    pub error: Option<i64>,
}

impl Answer {
    pub fn result(id: &RequestId, result: &Value) -> Answer {
        Answer {
            body: jsonrpc::encode_result(id, result).into(),
            error: None,
        }
    }

    pub fn error(id: Option<&RequestId>, e: &RpcError) -> Answer {
        Answer {
            body: serde_json::to_vec(&jsonrpc::error_message(id, e))
                .unwrap_or_default()
                .into(),
            error: Some(e.code),
        }
    }
}

/// How a stateless request is answered.
pub enum Served {
    /// The JSON-RPC response (result or error), known at once.
    Done(Answer),
    /// A call running on: drive `response` (dropping it cancels the call); notifications related
    /// to the request arrive on `notes` meanwhile.
    Running {
        response: BoxFuture<Answer>,
        notes: Notes,
    },
    /// `subscriptions/listen`: a long-lived stream of change notifications.
    Listen(listen::Listener),
}

/// The notifications of a running request (progress, log messages). A request that asked for
/// neither (no `progressToken`, no log level) can get none, and has no channel.
pub struct Notes(Option<tokio::sync::mpsc::UnboundedReceiver<Value>>);

impl Notes {
    /// The sending end (when notifications are `wanted`) and the receiving one.
    pub fn channel(wanted: bool) -> (Option<tokio::sync::mpsc::UnboundedSender<Value>>, Notes) {
        if !wanted {
            return (None, Notes(None));
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Some(tx), Notes(Some(rx)))
    }

    /// The next notification; never resolves on a request that can have none, `None` once the
    /// call is over and every notification was taken.
    pub async fn recv(&mut self) -> Option<Value> {
        match &mut self.0 {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// A notification already there.
    pub fn try_recv(&mut self) -> Option<Value> {
        self.0.as_mut().and_then(|rx| rx.try_recv().ok())
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|rx| rx.is_empty())
    }
}

/// Methods a session-era client may send that this revision removed.
const REMOVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Serves one stateless request whose `_meta` was read as `meta`.
pub fn serve(env: Env, mut req: Request, mut meta: RequestMeta) -> Served {
    let progress_token = meta.progress_token.take();
    let params = match req.take_params() {
        Ok(p) => p,
        Err(e) => return Served::Done(Answer::error(Some(&req.id), &e)),
    };
    let id = req.id;
    match req.method.as_str() {
        // Discovery is cacheable too (clients require its ttlMs and cacheScope).
        "server/discover" => {
            let started = std::time::Instant::now();
            let outcome = Ok(discover(&env));
            Served::Done(finish(&env, &id, "server/discover", started, outcome, true))
        }
        "subscriptions/listen" => match listen::Listener::open(&env, id.clone(), &params) {
            Ok(listener) => Served::Listen(listener),
            Err(e) => Served::Done(Answer::error(Some(&id), &e)),
        },
        "tools/call" => mrtr::call(env, id, meta, params, progress_token, mrtr::Kind::Tool),
        // A prompt that asks the client something answers `input_required` like a tool.
        "prompts/get"
            if params
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|name| env.catalog.prompt_asks(name)) =>
        {
            mrtr::call(env, id, meta, params, progress_token, mrtr::Kind::Prompt)
        }
        method if REMOVED.contains(&method) => Served::Done(Answer::error(
            Some(&id),
            &RpcError::method_not_found(method).with_data(json!({
                "reason": format!("{method} is not part of protocol version {}", meta.version)
            })),
        )),
        method => {
            let catalog = &env.catalog;
            let principal = env.principal_value();
            let port = null_port();
            let scope = RequestScope {
                version: meta.version,
                client_capabilities: &meta.client_capabilities,
                principal: principal.as_ref(),
                catalog,
                page_size: env.settings.page_size,
                call_key: "".into(),
                session: None,
                port: &port,
            };
            let cacheable = matches!(
                method,
                "tools/list"
                    | "prompts/list"
                    | "resources/list"
                    | "resources/templates/list"
                    | "resources/read"
            );
            let started = std::time::Instant::now();
            let outcome = match methods::handle(&id, method, params, progress_token, &scope) {
                Handled::Done(outcome) => outcome,
                // A read or a completion an upstream server answers: asks the client nothing
                // (this request's port has no client to ask), so it needs no round.
                Handled::Run { future, .. } => {
                    let method = method.to_string();
                    return Served::Running {
                        response: Box::pin(async move {
                            let outcome = future.await;
                            finish(&env, &id, &method, started, outcome, cacheable)
                        }),
                        notes: Notes::channel(false).1,
                    };
                }
                Handled::Unknown => Err(RpcError::method_not_found(method)),
            };
            Served::Done(finish(&env, &id, method, started, outcome, cacheable))
        }
    }
}

/// The answer of a request that ran to its end, counted in the operation metric and recorded on
/// the request's span.
pub(crate) fn finish(
    env: &Env,
    id: &RequestId,
    method: &str,
    started: std::time::Instant,
    outcome: Result<Value, RpcError>,
    cacheable: bool,
) -> Answer {
    crate::observe::telemetry::record_outcome(
        method,
        &env.tenant.slug,
        started,
        &env.span,
        &outcome,
    );
    match outcome {
        Ok(result) => complete(env, id, result, cacheable),
        Err(e) => error(id, e),
    }
}

fn discover(env: &Env) -> Value {
    let mut result = json!({
        "supportedVersions": ProtocolVersion::SUPPORTED,
        "capabilities": server_capabilities(ProtocolVersion::V2026_07_28),
    });
    if let Some(instructions) = &env.settings.instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

/// A complete result: `resultType`, the server's identity in `_meta`, and for list and read
/// results the cache hints. Serialized straight from the handler's result and these additions
/// (no copy of the result with them inserted).
pub(crate) fn complete(env: &Env, id: &RequestId, result: Value, cacheable: bool) -> Answer {
    let Value::Object(object) = &result else {
        return Answer::result(id, &result);
    };
    // Most results (a tool's): no cache hints and none of the added keys. The object is written
    // as it is and the same tail spliced in before its closing brace, so the serializer does
    // not write `resultType` and `_meta` again for every request.
    if !cacheable && !ADDED.iter().any(|key| object.contains_key(*key)) {
        if let Some(body) = with_tail(
            jsonrpc::encode_result(id, object),
            object.is_empty(),
            env.settings.result_tail(),
        ) {
            return Answer {
                body: body.into(),
                error: None,
            };
        }
    }
    let cache = cacheable.then(|| {
        let ttl = env
            .tenant
            .policy
            .cache_ttl_ms()
            .unwrap_or(env.settings.cache_ttl_ms);
        (ttl, env.cache_scope())
    });
    Answer {
        body: jsonrpc::encode_result(
            id,
            &Completed {
                object,
                settings: &env.settings,
                cache,
            },
        )
        .into(),
        error: None,
    }
}

/// A serialized result response (`{…,"result":{…}}`) with `tail` added as the last members
/// of its result object; `None` when the response is not one (its serialization failed).
fn with_tail(mut response: Vec<u8>, empty: bool, tail: &[u8]) -> Option<Vec<u8>> {
    if !response.ends_with(b"}}") {
        return None;
    }
    response.truncate(response.len() - 2);
    response.reserve(tail.len() + 3);
    if !empty {
        response.push(b',');
    }
    response.extend_from_slice(tail);
    response.extend_from_slice(b"}}");
    Some(response)
}

/// A result object with `resultType: "complete"`, the server's identity added to its `_meta`
/// and the cache hints (`ttlMs`, `cacheScope`); these replace any the handler set.
struct Completed<'a> {
    object: &'a Map<String, Value>,
    settings: &'a StatelessSettings,
    cache: Option<(u64, &'static str)>,
}

const ADDED: &[&str] = &["resultType", "_meta", "ttlMs", "cacheScope"];

impl serde::Serialize for Completed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (key, value) in self.object {
            if !ADDED.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("resultType", "complete")?;
        match self.object.get("_meta").and_then(Value::as_object) {
            // Most results: the same `_meta` every time, as JSON text.
            None => map.serialize_entry("_meta", self.settings.result_meta_json())?,
            meta => map.serialize_entry(
                "_meta",
                &MetaWithServerInfo {
                    meta,
                    settings: self.settings,
                },
            )?,
        }
        if let Some((ttl, scope)) = self.cache {
            map.serialize_entry("ttlMs", &ttl)?;
            map.serialize_entry("cacheScope", scope)?;
        }
        map.end()
    }
}

/// A result's `_meta` (if any) with the server's identity.
struct MetaWithServerInfo<'a> {
    meta: Option<&'a Map<String, Value>>,
    settings: &'a StatelessSettings,
}

impl serde::Serialize for MetaWithServerInfo<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (key, value) in self.meta.into_iter().flatten() {
            if key != META_SERVER_INFO {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry(META_SERVER_INFO, self.settings.server_info_json())?;
        map.end()
    }
}

pub(crate) fn stamp_server_info(env: &Env, object: &mut Map<String, Value>) {
    let meta = object
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(META_SERVER_INFO.into(), env.server_info());
    }
}

/// An error answer; "resource not found" is Invalid Params in this revision.
pub(crate) fn error(id: &RequestId, mut e: RpcError) -> Answer {
    if e.code == RESOURCE_NOT_FOUND {
        e.code = INVALID_PARAMS;
    }
    Answer::error(Some(id), &e)
}

/// A port for methods that never use one (lists, reads, prompts).
pub(crate) fn null_port() -> Arc<dyn SessionPort> {
    static PORT: OnceLock<Arc<dyn SessionPort>> = OnceLock::new();
    PORT.get_or_init(|| Arc::new(NullPort)).clone()
}

struct NullPort;

impl SessionPort for NullPort {
    fn notify(&self, _: &RequestId, _: &'static str, _: Value) {}
    fn request(
        &self,
        _: &RequestId,
        _: &'static str,
        _: Value,
        reply: tokio::sync::oneshot::Sender<Result<Value, RpcError>>,
    ) {
        let _ = reply.send(Err(RpcError::internal("no client to ask")));
    }
    fn close_stream(&self, _: &RequestId) {}
    fn resource_updated(&self, _: &str) {}
    fn list_changed(&self, _: &'static str) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spliced tail gives the bytes the general serialization gives.
    #[test]
    fn a_result_with_the_tail_spliced_in_is_written_as_completed_writes_it() {
        let settings = StatelessSettings::default();
        let id = RequestId::Number(7);
        for result in [
            json!({}),
            json!({"content": [{"type": "text", "text": "}}"}], "isError": false}),
            json!({"structuredContent": {"a": {"b": {}}}}),
        ] {
            let Value::Object(object) = &result else {
                unreachable!()
            };
            let general = jsonrpc::encode_result(
                &id,
                &Completed {
                    object,
                    settings: &settings,
                    cache: None,
                },
            );
            let spliced = with_tail(
                jsonrpc::encode_result(&id, object),
                object.is_empty(),
                settings.result_tail(),
            )
            .expect("a result response");
            assert_eq!(
                String::from_utf8_lossy(&spliced),
                String::from_utf8_lossy(&general)
            );
            let read: Value = serde_json::from_slice(&spliced).expect("JSON");
            assert_eq!(read["result"]["resultType"], "complete");
            assert_eq!(
                read["result"]["_meta"][META_SERVER_INFO]["name"],
                "mcp-harbor"
            );
        }
        assert_eq!(with_tail(Vec::new(), true, b"x"), None);
    }
}
