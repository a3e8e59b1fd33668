//! The context of one MCP request, shared by whoever handles it (built-in catalogs, webhook
//! tools) and whoever hosts it (a session today, a stateless request later): `RequestContext`
//! says who asks and in which revision, and lets a running call log, report progress, ask the
//! client (sampling, elicitation, roots) and wait for the answer, or close its SSE stream for the
//! client to resume. It talks to its host through `SessionPort`, so neither catalogs nor tools
//! depend on the session or the actor runtime. It belongs to neither catalogs nor tools.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::elicitation::{TenantElicitations, UrlElicitation};
use crate::protocol::mcp::LogLevel;
use crate::protocol::{ProtocolVersion, RequestId, RpcError};

/// The session side of a running request. Messages sent through a port for one request arrive in
/// the order they were sent.
pub trait SessionPort: Send + Sync + 'static {
    /// Sends a notification related to request `origin` (on that request's stream).
    fn notify(&self, origin: &RequestId, method: &'static str, params: Value);
    /// Sends a server→client request related to `origin`; the answer arrives on `reply`.
    fn request(
        &self,
        origin: &RequestId,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    );
    /// [`Self::request`], naming the key the question is to have among the `inputRequests` of a
    /// multi round-trip request (2026-07-28); ports that deliver it as a request ignore it.
    fn request_as(
        &self,
        origin: &RequestId,
        _key: &'static str,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        self.request(origin, method, params, reply)
    }
    /// Closes the SSE connection of `origin`'s stream without ending the stream (SSE polling):
    /// later messages wait in the event log for the client to resume.
    fn close_stream(&self, origin: &RequestId);
    /// Tells every session of the tenant subscribed to `uri` that it changed.
    fn resource_updated(&self, uri: &str);
    /// Tells every session and listener of the tenant that its `list` (`tools`, `prompts`,
    /// `resources`) changed.
    fn list_changed(&self, list: &'static str);
}

/// What a call's stable identity is made of. A session's call is named by its tenant, session
/// and request id, written out only when something asks (a webhook tool's message id), not for
/// every call.
#[derive(Debug, Clone)]
pub enum CallKey {
    InSession {
        tenant: Arc<str>,
        session: Arc<str>,
    },
    /// A stateless call's: `{tenant}/mrtr:{round}/{request id}`.
    Round {
        tenant: Arc<str>,
        round: Arc<str>,
    },
    Given(Arc<str>),
}

impl From<String> for CallKey {
    fn from(key: String) -> Self {
        CallKey::Given(key.into())
    }
}

impl From<&str> for CallKey {
    fn from(key: &str) -> Self {
        CallKey::Given(key.into())
    }
}

/// Handed to each tool call.
#[derive(Clone)]
pub struct RequestContext {
    pub request_id: RequestId,
    pub version: ProtocolVersion,
    pub client_capabilities: Arc<Value>,
    pub progress_token: Option<Value>,
    /// Who is calling (issuer, subject, client id) when the endpoint is protected; `None` on
    /// open tenants.
    pub principal: Option<Arc<Value>>,
    /// A stable identity of this call (tenant, session, request id): the same after a failover
    /// re-runs it, so a webhook endpoint can de-duplicate. Read it with [`Self::call_key`].
    pub call_key: CallKey,
    /// The session the request belongs to (`None` for a request outside any session).
    pub session: Option<Arc<str>>,
    /// The tenant's URL-mode elicitations (a tool asking the user for a secret); `None` where
    /// the host offers none.
    pub elicitations: Option<TenantElicitations>,
    port: Arc<dyn SessionPort>,
    /// Set once the call has sent anything through the port (so its result must queue behind).
    used_port: Arc<AtomicBool>,
    /// The key its questions are to have in a multi round-trip request ([`Self::keyed`]).
    input_key: Option<&'static str>,
}

impl RequestContext {
    pub fn new(
        request_id: RequestId,
        version: ProtocolVersion,
        client_capabilities: Arc<Value>,
        progress_token: Option<Value>,
        call_key: CallKey,
        port: Arc<dyn SessionPort>,
    ) -> Self {
        RequestContext {
            request_id,
            version,
            client_capabilities,
            progress_token,
            principal: None,
            call_key,
            session: None,
            elicitations: None,
            port,
            used_port: Arc::new(AtomicBool::new(false)),
            input_key: None,
        }
    }

    /// This context, asking its questions under `key` in the `inputRequests` of a multi
    /// round-trip request (2026-07-28) instead of a key derived from what they ask: for a tool
    /// whose clients expect a given key (the conformance suite's fixtures). The same key asked
    /// again in one call gets `-2`, `-3`... appended.
    pub fn keyed(&self, key: &'static str) -> RequestContext {
        RequestContext {
            input_key: Some(key),
            ..self.clone()
        }
    }

    /// The call's stable identity as text (`{tenant}/{session}/{request id}` for a session's
    /// call).
    pub fn call_key(&self) -> String {
        match &self.call_key {
            CallKey::InSession { tenant, session } => {
                format!("{tenant}/{session}/{}", self.request_id)
            }
            CallKey::Round { tenant, round } => {
                format!("{tenant}/mrtr:{round}/{}", self.request_id)
            }
            CallKey::Given(key) => key.to_string(),
        }
    }

    /// Whether this call has sent anything through its session.
    pub fn used_port(&self) -> bool {
        self.used_port.load(Ordering::Acquire)
    }

    fn port(&self) -> &dyn SessionPort {
        self.used_port.store(true, Ordering::Release);
        self.port.as_ref()
    }

    /// `notifications/message`; the session drops it when below the client's chosen level.
    pub fn log(&self, level: LogLevel, logger: &str, data: Value) {
        self.port().notify(
            &self.request_id,
            "notifications/message",
            json!({ "level": level.as_str(), "logger": logger, "data": data }),
        );
    }

    /// `notifications/progress`, only when the client asked for progress on this request.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        // `message` came with 2025-03-26 (2024-11-05's progress has none).
        if let Some(message) = message.filter(|_| self.version >= ProtocolVersion::V2025_03_26) {
            params["message"] = json!(message);
        }
        self.port()
            .notify(&self.request_id, "notifications/progress", params);
    }

    /// Sends a server→client request and waits for the client's answer.
    pub async fn request(&self, method: &'static str, params: Value) -> Result<Value, RpcError> {
        let (tx, rx) = oneshot::channel();
        match self.input_key {
            Some(key) => self
                .port()
                .request_as(&self.request_id, key, method, params, tx),
            None => self.port().request(&self.request_id, method, params, tx),
        }
        rx.await
            .map_err(|_| RpcError::internal("the session ended before the client answered"))?
    }

    /// Whether this request's client takes the server→client request `method` with `params`;
    /// else the error naming the capability it lacks: MissingRequiredClientCapability in the
    /// stateless revision, Invalid Request in the session era.
    pub fn require(&self, method: &str, params: &Value) -> Result<(), RpcError> {
        require(self.version, &self.client_capabilities, method, params)
    }

    /// `elicitation/create` in form mode. Refused unless the client declared form mode.
    pub async fn elicit_form(
        &self,
        message: &str,
        requested_schema: Value,
    ) -> Result<Value, RpcError> {
        let mut params = json!({ "message": message, "requestedSchema": requested_schema });
        if self.version >= ProtocolVersion::V2025_11_25 {
            params["mode"] = json!("form");
        }
        self.require("elicitation/create", &params)?;
        form_fits(self.version, &params["requestedSchema"])?;
        let answer = self.request("elicitation/create", params.clone()).await?;
        check_elicited(&params["requestedSchema"], &answer)?;
        Ok(answer)
    }

    /// `elicitation/create` in URL mode: asks the user to open `elicitation.url`. Refused unless
    /// the client declared URL mode. An `accept` answer means the user agreed to open it, not
    /// that the interaction is over.
    pub async fn elicit_url(&self, elicitation: &UrlElicitation) -> Result<Value, RpcError> {
        let mut params = elicitation.to_value();
        self.require("elicitation/create", &params)?;
        if self.version.is_modern() {
            // 2026-07-28 dropped the id (the retry of the request is the completion signal).
            if let Some(p) = params.as_object_mut() {
                p.remove("elicitationId");
            }
        }
        self.request("elicitation/create", params).await
    }

    /// `notifications/elicitation/complete`: the URL-mode elicitation this request started is
    /// over (sent only to the client that got the `elicitation/create`).
    pub fn elicitation_complete(&self, elicitation_id: &str) {
        self.port().notify(
            &self.request_id,
            "notifications/elicitation/complete",
            json!({ "elicitationId": elicitation_id }),
        );
    }

    /// `sampling/createMessage`; refused unless the client declared `sampling`.
    pub async fn sample(&self, params: Value) -> Result<Value, RpcError> {
        self.require("sampling/createMessage", &params)?;
        self.request("sampling/createMessage", params).await
    }

    /// `roots/list`; refused unless the client declared `roots`.
    pub async fn list_roots(&self) -> Result<Value, RpcError> {
        self.require("roots/list", &Value::Null)?;
        self.request("roots/list", json!({})).await
    }

    pub fn close_stream(&self) {
        self.port().close_stream(&self.request_id);
    }

    pub fn resource_updated(&self, uri: &str) {
        self.port().resource_updated(uri);
    }

    /// `list` is `tools`, `prompts` or `resources`.
    pub fn list_changed(&self, list: &'static str) {
        self.port().list_changed(list);
    }
}

/// Whether a form's `requested_schema` is one revision `version` can carry: before 2025-11-25
/// each property is a primitive (string, number, integer or boolean, a plain `enum` of strings
/// included); multi-select (array) and titled (`oneOf`/`anyOf`) enums came with 2025-11-25.
fn form_fits(version: ProtocolVersion, requested_schema: &Value) -> Result<(), RpcError> {
    // 2025-11-25 still asks a flat object of primitives (schema.json's
    // PrimitiveSchemaDefinition): the only array is a multi-select enum, no property an object.
    let current = version >= ProtocolVersion::V2025_11_25;
    let fits = |p: &Value| match p["type"].as_str() {
        Some("string" | "number" | "integer" | "boolean") => {
            current || (p.get("oneOf").is_none() && p.get("anyOf").is_none())
        }
        Some("array") => {
            current && (p["items"].get("enum").is_some() || p["items"].get("anyOf").is_some())
        }
        _ => false,
    };
    let properties = requested_schema["properties"].as_object();
    let Some((name, _)) = properties.into_iter().flatten().find(|(_, p)| !fits(p)) else {
        return Ok(());
    };
    Err(RpcError::invalid_request(if current {
        format!(
            "the form's field {name:?} is not a primitive (string, number, integer, boolean, \
             or a multi-select enum): form elicitations ask for a flat object"
        )
    } else {
        format!(
            "the form's field {name:?} needs protocol version 2025-11-25 (multi-select or \
             titled enums); this session speaks {version}"
        )
    }))
}

/// An accepted form elicitation's `content` checked against the schema it was asked with
/// (elicitation.mdx: servers SHOULD validate that received data matches the requested schema):
/// -32602 saying where it does not.
pub fn check_elicited(requested_schema: &Value, answer: &Value) -> Result<(), RpcError> {
    let content = match answer.get("content") {
        Some(content) if answer["action"] == "accept" && !content.is_null() => content,
        _ => return Ok(()),
    };
    if !requested_schema.is_object() {
        return Ok(());
    }
    let validator = crate::protocol::schema::compile(requested_schema)
        .map_err(|e| RpcError::internal(format!("the requested schema {e}")))?;
    let first = validator.iter_errors(content).next().map(|e| {
        let path = e.instance_path().to_string();
        let at = if path.is_empty() {
            "(root)".to_string()
        } else {
            path
        };
        format!("the elicitation's answer does not match its requested schema at {at}: {e}")
    });
    first.map_or(Ok(()), |message| Err(RpcError::invalid_params(message)))
}

fn declares(capabilities: &Value, capability: &str) -> bool {
    capabilities.get(capability).is_some_and(|c| !c.is_null())
}

fn takes_form_elicitation(version: ProtocolVersion, capabilities: &Value) -> bool {
    version.has_elicitation()
        && capabilities.get("elicitation").is_some_and(|e| {
            e.as_object()
                .is_some_and(|o| o.is_empty() || o.contains_key("form"))
        })
}

fn takes_url_elicitation(version: ProtocolVersion, capabilities: &Value) -> bool {
    version >= ProtocolVersion::V2025_11_25
        && capabilities
            .get("elicitation")
            .and_then(|e| e.get("url"))
            .is_some_and(|u| !u.is_null())
}

/// What a `sampling/createMessage` with `params` needs of the client (sampling.mdx): `sampling`;
/// `sampling.tools` for a tool-enabled request (MUST NOT be sent otherwise); from 2025-11-25,
/// whose clients declare it, `sampling.context` for `includeContext` other than "none" (SHOULD
/// NOT be used otherwise). The first the client lacks, or the base one when it lacks none.
fn sampling_requirement(
    version: ProtocolVersion,
    capabilities: &Value,
    params: &Value,
) -> (bool, &'static str, Value) {
    let Some(sampling) = capabilities.get("sampling").filter(|c| !c.is_null()) else {
        return (false, "sampling", json!({ "sampling": {} }));
    };
    let uses = |key: &str| params.get(key).is_some_and(|v| !v.is_null());
    if (uses("tools") || uses("toolChoice")) && !declares(sampling, "tools") {
        return (
            false,
            "sampling.tools",
            json!({ "sampling": { "tools": {} } }),
        );
    }
    let with_context = matches!(
        params["includeContext"].as_str(),
        Some("thisServer" | "allServers")
    );
    if version >= ProtocolVersion::V2025_11_25 && with_context && !declares(sampling, "context") {
        return (
            false,
            "sampling.context",
            json!({ "sampling": { "context": {} } }),
        );
    }
    (true, "sampling", json!({ "sampling": {} }))
}

/// Whether a client with `capabilities` (in `version`) takes the server→client request `method`
/// with `params` (see [`RequestContext::require`]).
fn require(
    version: ProtocolVersion,
    capabilities: &Value,
    method: &str,
    params: &Value,
) -> Result<(), RpcError> {
    let (declared, name, required) = match method {
        "elicitation/create" if params["mode"] == "url" => (
            takes_url_elicitation(version, capabilities),
            "elicitation (url)",
            json!({ "elicitation": { "url": {} } }),
        ),
        "elicitation/create" => (
            takes_form_elicitation(version, capabilities),
            "elicitation (form)",
            json!({ "elicitation": { "form": {} } }),
        ),
        "sampling/createMessage" => sampling_requirement(version, capabilities, params),
        "roots/list" => (
            declares(capabilities, "roots"),
            "roots",
            json!({ "roots": {} }),
        ),
        _ => return Ok(()),
    };
    if declared {
        return Ok(());
    }
    let message = format!("the client did not declare the {name} capability");
    Err(if version.is_modern() {
        crate::protocol::stateless::missing_capability(message, required)
    } else {
        RpcError::invalid_request(message)
    })
}

/// Whether a stateless request's client (its `capabilities` in `version`) takes the
/// server→client `request` (`{"method", "params"}`, as an `input_required` result lists it);
/// else MissingRequiredClientCapability naming what it lacks. Each request's own capabilities
/// count: none are inferred from an earlier request of the same call.
pub fn check_declared(
    version: ProtocolVersion,
    capabilities: &Value,
    request: &Value,
) -> Result<(), RpcError> {
    let method = request["method"].as_str().unwrap_or("");
    require(version, capabilities, method, &request["params"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_needs_the_sub_capabilities_it_uses() {
        let v = ProtocolVersion::V2025_11_25;
        let plain = json!({ "messages": [], "maxTokens": 1 });
        let tools = json!({ "messages": [], "maxTokens": 1, "tools": [] });
        let context = json!({ "messages": [], "maxTokens": 1, "includeContext": "thisServer" });
        let code = |caps: Value, params: &Value, version| {
            require(version, &caps, "sampling/createMessage", params).map_err(|e| e.data)
        };
        assert!(code(json!({ "sampling": {} }), &plain, v).is_ok());
        assert_eq!(
            code(json!({}), &plain, ProtocolVersion::V2026_07_28),
            Err(Some(json!({ "requiredCapabilities": { "sampling": {} } })))
        );
        assert_eq!(
            code(
                json!({ "sampling": {} }),
                &tools,
                ProtocolVersion::V2026_07_28
            ),
            Err(Some(
                json!({ "requiredCapabilities": { "sampling": { "tools": {} } } })
            ))
        );
        assert!(code(json!({ "sampling": { "tools": {} } }), &tools, v).is_ok());
        assert!(code(json!({ "sampling": {} }), &context, v).is_err());
        assert!(code(json!({ "sampling": { "context": {} } }), &context, v).is_ok());
        // Before 2025-11-25 clients had no sampling.context to declare: context is theirs.
        assert!(code(
            json!({ "sampling": {} }),
            &context,
            ProtocolVersion::V2025_06_18
        )
        .is_ok());
    }
}
