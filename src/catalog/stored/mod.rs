//! The catalog a tenant published through the admin API: webhook tools, prompt templates,
//! static resources and resource templates, built from the tenant's stored entries. A webhook
//! tool's signing secret is stored sealed (bound to the tenant and the tool) and opened once, when
//! the catalog is built.
//!
//! Stored entries are read leniently: a field this version does not know (written by a newer
//! one, during a rolling upgrade or after a rollback) is ignored rather than making the entry
//! unreadable. What the admin API takes in is checked against its documented schema first,
//! which admits no unknown field.

mod template;

pub use template::UriTemplate;
use template::{render_prompt_text, render_template_text, too_large, MAX_RENDERED_BYTES};

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{CallFuture, Catalog, RequestContext};
use crate::auth::seal::{purpose, SealError, Sealer};
use crate::protocol::jsonrpc::RpcError;
use crate::protocol::schema::{self, SchemaError};
use crate::store::{CatalogEntry, CatalogKind, PendingInput, PendingInputStore, SqlStore};
use crate::tools::webhook::{self, WebhookCall, WebhookTarget};

/// A published tool (its stored form).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    pub webhook: StoredWebhook,
}

/// Where a published tool's calls go, as stored: the signing secret sealed under the
/// deployment's sealing keys and bound to the tenant and the tool, so a sealed value copied to
/// another tenant's or tool's row does not open. `Debug` shows no secret (nor the sealed value).
#[derive(Clone, Serialize, Deserialize)]
pub struct StoredWebhook {
    pub url: String,
    /// The sealed `whsec_…`; absent only in entries stored before secrets were sealed. During a
    /// rotation it seals the new secret and, on a second line, the one it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_sealed: Option<String>,
    /// During a rotation: until when (unix ms) calls are also signed with the replaced secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<i64>,
    /// The secret in clear, as entries stored before secrets were sealed hold it: still used,
    /// sealed by the re-sealing job (`mcp-harbor admin keys rotate`), never written.
    #[serde(default, rename = "secret", skip_serializing)]
    pub legacy_secret: Option<SecretString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl std::fmt::Debug for StoredWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sealed_under = self
            .secret_sealed
            .as_deref()
            .and_then(crate::auth::seal::key_id);
        f.debug_struct("StoredWebhook")
            .field("url", &self.url)
            .field("sealed_under", &sealed_under)
            .field("in_clear", &self.legacy_secret.is_some())
            .field("previous_secret_until", &self.previous_secret_until)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

/// Where a stored tool body keeps its sealed secret, and where older bodies kept it in clear.
const SEALED_SECRET: &str = "/webhook/secret_sealed";
const LEGACY_SECRET: &str = "/webhook/secret";

/// Why a stored webhook's secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoredSecretError {
    #[error("{0}")]
    Seal(#[from] SealError),
    #[error("the stored webhook has no signing secret")]
    Missing,
    #[error("the opened signing secret is not text")]
    NotText,
}

impl StoredWebhook {
    /// The stored form of a webhook of `tenant`'s tool `tool`, its secret sealed.
    pub fn sealed(
        sealer: &Sealer,
        tenant: &str,
        tool: &str,
        url: String,
        secret: &SecretString,
        timeout_ms: Option<u64>,
    ) -> StoredWebhook {
        let sealed = sealer.seal(
            &purpose::webhook_secret(tenant, tool),
            secret.expose_secret().as_bytes(),
        );
        StoredWebhook {
            url,
            secret_sealed: Some(sealed),
            legacy_secret: None,
            previous_secret_until: None,
            timeout_ms,
        }
    }

    /// [`Self::sealed`], with calls also signed with `previous` (the secret `secret` replaces)
    /// until `until` (unix ms): the endpoint can take the new secret at its own pace. Both are
    /// sealed together (one sealed value per tool, as the re-sealing job expects).
    #[allow(clippy::too_many_arguments)]
    pub fn sealed_rotating(
        sealer: &Sealer,
        tenant: &str,
        tool: &str,
        url: String,
        secret: &SecretString,
        previous: &SecretString,
        until: i64,
        timeout_ms: Option<u64>,
    ) -> StoredWebhook {
        let both = secrecy::zeroize::Zeroizing::new(format!(
            "{}\n{}",
            secret.expose_secret(),
            previous.expose_secret()
        ));
        StoredWebhook {
            url,
            secret_sealed: Some(
                sealer.seal(&purpose::webhook_secret(tenant, tool), both.as_bytes()),
            ),
            legacy_secret: None,
            previous_secret_until: Some(until),
            timeout_ms,
        }
    }

    /// This webhook of `tenant`'s tool `tool` ready to call: its secret opened.
    pub fn open(
        &self,
        sealer: &Sealer,
        tenant: &str,
        tool: &str,
    ) -> Result<WebhookTarget, StoredSecretError> {
        let (secret, previous) = match (&self.secret_sealed, &self.legacy_secret) {
            (Some(sealed), _) => {
                let bytes = sealer.open(&purpose::webhook_secret(tenant, tool), sealed)?;
                let text =
                    secrecy::zeroize::Zeroizing::new(String::from_utf8(bytes).map_err(|e| {
                        secrecy::zeroize::Zeroize::zeroize(&mut e.into_bytes());
                        StoredSecretError::NotText
                    })?);
                // The replaced secret of a rotation, while it lasts.
                let until = self
                    .previous_secret_until
                    .filter(|until| *until > crate::store::now_millis());
                match (text.split_once('\n'), until) {
                    (Some((secret, previous)), Some(until)) => (
                        SecretString::from(secret),
                        Some((SecretString::from(previous), until)),
                    ),
                    (Some((secret, _)), None) => (SecretString::from(secret), None),
                    (None, _) => (SecretString::from(text.as_str()), None),
                }
            }
            (None, Some(clear)) => (clear.clone(), None),
            (None, None) => return Err(StoredSecretError::Missing),
        };
        Ok(WebhookTarget {
            url: self.url.clone(),
            secret,
            previous_secret: previous,
            timeout_ms: self.timeout_ms,
        })
    }
}

/// A stored tool body (`body` of a tool's catalog entry) with its webhook secret sealed under the
/// first sealing key: a secret still in clear is sealed, one sealed under an older key re-sealed.
/// Whether the body changed; an error when the sealed secret does not open.
pub fn reseal_tool_body(
    sealer: &Sealer,
    tenant: &str,
    tool: &str,
    body: &mut Value,
) -> Result<bool, StoredSecretError> {
    let purpose = purpose::webhook_secret(tenant, tool);
    if let Some(sealed) = body.pointer(SEALED_SECRET).and_then(Value::as_str) {
        return match sealer.reseal(&purpose, sealed)? {
            Some(resealed) => {
                body["webhook"]["secret_sealed"] = Value::String(resealed);
                Ok(true)
            }
            None => Ok(false),
        };
    }
    let Some(webhook) = body.get_mut("webhook").and_then(Value::as_object_mut) else {
        return Err(StoredSecretError::Missing);
    };
    let Some(Value::String(clear)) = webhook.remove("secret") else {
        return Err(StoredSecretError::Missing);
    };
    let clear = SecretString::from(clear);
    let sealed = sealer.seal(&purpose, clear.expose_secret().as_bytes());
    webhook.insert("secret_sealed".into(), Value::String(sealed));
    Ok(true)
}

/// The key id a stored tool body's secret is sealed under; `None` for a secret in clear.
pub fn tool_body_key_id(body: &Value) -> Option<&str> {
    body.pointer(SEALED_SECRET)
        .and_then(Value::as_str)
        .and_then(crate::auth::seal::key_id)
}

/// Whether a stored tool body holds its secret in clear (stored before secrets were sealed).
pub fn tool_body_in_clear(body: &Value) -> bool {
    body.pointer(SEALED_SECRET).is_none() && body.pointer(LEGACY_SECRET).is_some()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Text with `{{argument}}` placeholders.
    pub text: String,
}

/// A published prompt template.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PromptDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
    pub messages: Vec<PromptMessage>,
}

/// A published static resource: text, or a base64 blob.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceDef {
    pub name: String,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// A published resource template: an RFC 6570 level-1 URI template bound to a resolver.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceTemplateDef {
    pub name: String,
    pub uri_template: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub mime_type: String,
    pub resolver: TemplateResolver,
}

/// How a resource template produces content for a URI.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TemplateResolver {
    /// Text with `{variable}` placeholders, filled from the URI.
    Text { text: String },
}

/// Where a webhook tool's calls go, shared by the tenant's tools.
#[derive(Clone)]
pub struct WebhookRuntime {
    /// The tenant's webhook requests open on this replica (see `WebhookCall::slots`).
    pub slots: Arc<tokio::sync::Semaphore>,
    /// Where the calls go out (and whether endpoints on private addresses may be called).
    pub egress: crate::egress::Egress,
    pub tenant: Arc<str>,
    /// Where calls waiting for the client's input are recorded (so another replica can go on
    /// with them); `None`: not recorded.
    pub store: Option<SqlStore>,
    /// Where tools ask users for secrets (URL-mode elicitation); `None`: they cannot.
    pub elicitations: Option<crate::elicitation::TenantElicitations>,
}

impl WebhookRuntime {
    /// The call's context with the tenant's elicitations (unless its host already set them).
    fn with_elicitations(&self, mut ctx: RequestContext) -> RequestContext {
        if ctx.elicitations.is_none() {
            ctx.elicitations = self.elicitations.clone();
        }
        ctx
    }
}

/// Records a session's webhook call between rounds in the database, keyed by tenant, session
/// and request id.
struct PendingCall {
    store: SqlStore,
    tenant: Arc<str>,
    session: Arc<str>,
    request_id: String,
    tool: String,
}

impl PendingCall {
    fn new(runtime: &WebhookRuntime, tool: &str, ctx: &RequestContext) -> Option<PendingCall> {
        Some(PendingCall {
            store: runtime.store.clone()?,
            tenant: runtime.tenant.clone(),
            session: ctx.session.clone()?,
            request_id: ctx.request_id.to_value().to_string(),
            tool: tool.to_string(),
        })
    }
}

#[async_trait::async_trait]
impl webhook::RoundJournal for PendingCall {
    async fn waiting(&self, round: usize, state: &Value) {
        let input = PendingInput {
            tool: self.tool.clone(),
            round: round as u32,
            state: state.clone(),
        };
        if let Err(e) = self
            .store
            .save_pending_input(&self.tenant, &self.session, &self.request_id, &input)
            .await
        {
            tracing::warn!(error = %e, tool = %self.tool, "could not record a webhook call waiting for input; it cannot move to another replica");
        }
    }
    async fn finished(&self) {
        if let Err(e) = self
            .store
            .delete_pending_input(&self.tenant, &self.session, Some(&self.request_id))
            .await
        {
            tracing::warn!(error = %e, tool = %self.tool, "could not forget a finished webhook call");
        }
    }
}

/// One call of a published tool and where it goes, or the tool error when its endpoint may not
/// be reached (private egress off and a non-public address) or its secret does not open.
fn webhook_call<'a>(
    runtime: &WebhookRuntime,
    live: &'a LiveTool,
    arguments: Map<String, Value>,
    ctx: &RequestContext,
) -> Result<(&'a WebhookTarget, WebhookCall), Result<Value, RpcError>> {
    let tool = &live.def;
    // Checked here, before anything goes to the endpoint (tool inputs are validated by the
    // server): a mismatch is, as for built-in tools, a tool execution error the model can
    // correct from 2025-11-25 on, Invalid Params before.
    let arguments = live
        .check_arguments(arguments)
        .map_err(|refused| super::with_argument_errors(ctx.version, refused))?;
    let target = live.target.as_ref().map_err(|why| {
        Ok(crate::protocol::mcp::tool_error(format!(
            "The `{}` tool failed: its signing secret cannot be opened ({why}); the operator must \
             configure the sealing key it was sealed with, or the tenant publish the tool again",
            tool.name
        )))
    })?;
    if let Err(e) = runtime.egress.check_address(&tool.webhook.url) {
        return Err(Ok(crate::protocol::mcp::tool_error(format!(
            "The `{}` tool failed: its endpoint is not allowed ({e})",
            tool.name
        ))));
    }
    let call = WebhookCall {
        tenant: runtime.tenant.to_string(),
        tool: tool.name.clone(),
        arguments,
        principal: ctx.principal.as_deref().cloned(),
        output_schema: live.output.clone(),
        slots: Some(runtime.slots.clone()),
    };
    Ok((target, call))
}

/// A published tool ready to call: its definition and its webhook with the secret opened (once,
/// when the catalog is built), or why the secret does not open.
struct LiveTool {
    def: ToolDef,
    target: Result<WebhookTarget, String>,
    /// Its `inputSchema`, compiled once (the admin API checked it compiles, within the bounds
    /// of `protocol::schema`, when it was published; one stored earlier may not).
    input: Result<jsonschema::Validator, SchemaError>,
    /// Its `outputSchema`, compiled once: each result is checked against it.
    output: Option<Arc<Result<jsonschema::Validator, SchemaError>>>,
}

/// At most this many schema errors are quoted in a tool error.
const INPUT_ERRORS_SHOWN: usize = 5;

impl LiveTool {
    fn new(sealer: &Sealer, tenant: &str, def: ToolDef) -> LiveTool {
        let target = def.webhook.open(sealer, tenant, &def.name).map_err(|e| {
            tracing::error!(tenant, tool = %def.name, error = %e, "the webhook tool's signing secret does not open; its calls fail until the tool is published again or the sealing key is configured");
            e.to_string()
        });
        let input = schema::compile(&def.input_schema);
        if let Err(e) = &input {
            tracing::warn!(tenant, tool = %def.name, error = %e, "the webhook tool's inputSchema is not used; its calls fail until the tool is published again");
        }
        let output = def
            .output_schema
            .as_ref()
            .map(|s| Arc::new(schema::compile(s)));
        LiveTool {
            def,
            target,
            input,
            output,
        }
    }

    /// The arguments of a call when they match the tool's `inputSchema`; else Invalid Params
    /// saying where they do not (see `with_argument_errors`), or the tool error that the schema
    /// does not compile (no call goes out unchecked).
    fn check_arguments(
        &self,
        arguments: Map<String, Value>,
    ) -> Result<Map<String, Value>, Result<Value, RpcError>> {
        let name = &self.def.name;
        let validator = self.input.as_ref().map_err(|e| {
            Ok(crate::protocol::mcp::tool_error(format!(
                "The `{name}` tool failed: its inputSchema {e}"
            )))
        })?;
        let arguments = Value::Object(arguments);
        // Valid arguments (the usual case) are told apart without collecting errors.
        let errors: Vec<String> = if validator.is_valid(&arguments) {
            Vec::new()
        } else {
            validator
                .iter_errors(&arguments)
                .take(INPUT_ERRORS_SHOWN + 1)
                .map(|e| {
                    let path = e.instance_path().to_string();
                    let at = if path.is_empty() { "(root)" } else { &path };
                    let what: String = e.to_string().chars().take(200).collect();
                    format!("at {at}: {what}")
                })
                .collect()
        };
        if !errors.is_empty() {
            let more = if errors.len() > INPUT_ERRORS_SHOWN {
                " (and more)"
            } else {
                ""
            };
            return Err(Err(RpcError::invalid_params(format!(
                "Invalid arguments for the `{name}` tool: {}{more}",
                errors[..errors.len().min(INPUT_ERRORS_SHOWN)].join("; ")
            ))));
        }
        // Handed on as they came (wrapped only to be validated).
        match arguments {
            Value::Object(arguments) => Ok(arguments),
            _ => Ok(Map::new()),
        }
    }
}

/// A tenant's published entries, ready to serve.
pub struct StoredCatalog {
    runtime: WebhookRuntime,
    tools: Vec<Arc<LiveTool>>,
    prompts: Vec<PromptDef>,
    resources: Vec<ResourceDef>,
    templates: Vec<(ResourceTemplateDef, UriTemplate)>,
}

impl StoredCatalog {
    /// Builds the catalog, opening the tools' signing secrets; entries that no longer parse are
    /// skipped with a warning (the admin API validates them on the way in).
    pub fn new(runtime: WebhookRuntime, sealer: &Sealer, entries: &[CatalogEntry]) -> Self {
        let mut catalog = StoredCatalog {
            runtime,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
        };
        let mut in_clear = 0;
        for e in entries {
            let ok = match e.kind {
                CatalogKind::Tool => serde_json::from_value::<ToolDef>(e.body.clone())
                    .map(|t| {
                        if t.webhook.secret_sealed.is_none() {
                            in_clear += 1;
                        }
                        let tool = LiveTool::new(sealer, &e.tenant, t);
                        catalog.tools.push(Arc::new(tool));
                    })
                    .is_ok(),
                CatalogKind::Prompt => serde_json::from_value(e.body.clone())
                    .map(|p| catalog.prompts.push(p))
                    .is_ok(),
                CatalogKind::Resource => serde_json::from_value(e.body.clone())
                    .map(|r| catalog.resources.push(r))
                    .is_ok(),
                CatalogKind::ResourceTemplate => {
                    match serde_json::from_value::<ResourceTemplateDef>(e.body.clone()) {
                        Ok(t) => match UriTemplate::parse(&t.uri_template) {
                            Ok(parsed) => {
                                catalog.templates.push((t, parsed));
                                true
                            }
                            Err(_) => false,
                        },
                        Err(_) => false,
                    }
                }
            };
            if !ok {
                tracing::warn!(tenant = %e.tenant, kind = e.kind.as_str(), name = %e.name, "stored catalog entry does not parse; skipped");
            }
        }
        if in_clear > 0 {
            tracing::warn!(tenant = %catalog.runtime.tenant, tools = in_clear, "webhook signing secrets stored in clear (before secrets were sealed); `mcp-harbor admin keys rotate` seals them");
        }
        catalog
    }
}

fn with_optional(mut v: Value, key: &str, value: &Option<impl Serialize>) -> Value {
    if let Some(x) = value {
        v[key] = json!(x);
    }
    v
}

/// The name of a tenant's published catalog.
pub const PUBLISHED: &str = "published";

impl Catalog for StoredCatalog {
    fn name(&self) -> &'static str {
        PUBLISHED
    }

    /// Webhook calls are re-sent with the same `webhook-id`, so the endpoint can de-duplicate.
    fn reruns_safely(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.def.name == tool)
    }

    fn tools(&self) -> Vec<Value> {
        self.tools
            .iter()
            .map(|t| {
                let t = &t.def;
                let v = json!({ "name": t.name, "description": t.description, "inputSchema": t.input_schema });
                let v = with_optional(v, "title", &t.title);
                let v = with_optional(v, "outputSchema", &t.output_schema);
                with_optional(v, "annotations", &t.annotations)
            })
            .collect()
    }

    fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture> {
        let tool = self.tools.iter().find(|t| t.def.name == name)?.clone();
        let runtime = self.runtime.clone();
        Some(Box::pin(async move {
            let (target, call) = match webhook_call(&runtime, &tool, arguments, &ctx) {
                Ok(call) => call,
                Err(refused) => return refused,
            };
            let journal = PendingCall::new(&runtime, &tool.def.name, &ctx);
            let journal = journal.as_ref().map(|j| j as &dyn webhook::RoundJournal);
            let ctx = runtime.with_elicitations(ctx);
            webhook::invoke_with(runtime.egress.client(), target, call, ctx, journal, None).await
        }))
    }

    fn resumes_calls(&self) -> bool {
        self.runtime.store.is_some()
    }

    /// Goes on from the round the call recorded before its replica died, with the client's
    /// answer to that round's input request.
    fn resume_call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
        answer: tokio::sync::oneshot::Receiver<Result<Value, RpcError>>,
    ) -> Option<CallFuture> {
        let tool = self.tools.iter().find(|t| t.def.name == name)?.clone();
        let runtime = self.runtime.clone();
        let journal = PendingCall::new(&runtime, &tool.def.name, &ctx)?;
        Some(Box::pin(async move {
            let recorded = journal
                .store
                .pending_input(&journal.tenant, &journal.session, &journal.request_id)
                .await;
            let pending = match recorded {
                Ok(Some(p)) if p.tool == tool.def.name => p,
                other => {
                    if let Err(e) = other {
                        tracing::warn!(error = %e, "could not read a recorded webhook call");
                    }
                    return Ok(crate::protocol::mcp::tool_error(format!(
                        "The `{}` tool was interrupted by a server failover before it could go on; \
                         call it again",
                        tool.def.name
                    )));
                }
            };
            let outcome = answer.await.unwrap_or_else(|_| {
                Err(RpcError::internal(
                    "the session ended before the client answered",
                ))
            });
            let from = webhook::Resumption {
                round: pending.round as usize,
                state: pending.state,
                input: webhook::input_for(outcome),
            };
            tracing::info!(tenant = %runtime.tenant, tool = %tool.def.name, round = from.round,
                "webhook call goes on from its recorded round after a failover");
            let (target, call) = match webhook_call(&runtime, &tool, arguments, &ctx) {
                Ok(call) => call,
                Err(refused) => return refused,
            };
            let journal = &journal as &dyn webhook::RoundJournal;
            let ctx = runtime.with_elicitations(ctx);
            webhook::invoke_with(
                runtime.egress.client(),
                target,
                call,
                ctx,
                Some(journal),
                Some(from),
            )
            .await
        }))
    }

    fn resources(&self) -> Vec<Value> {
        self.resources
            .iter()
            .map(|r| {
                let v = json!({ "uri": r.uri, "name": r.name, "mimeType": r.mime_type });
                let v = with_optional(v, "title", &r.title);
                with_optional(v, "description", &r.description)
            })
            .collect()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.templates
            .iter()
            .map(|(t, _)| {
                let v = json!({ "uriTemplate": t.uri_template, "name": t.name, "mimeType": t.mime_type });
                let v = with_optional(v, "title", &t.title);
                with_optional(v, "description", &t.description)
            })
            .collect()
    }

    fn read_resource(&self, uri: &str) -> Option<Result<Value, RpcError>> {
        if let Some(r) = self.resources.iter().find(|r| r.uri == uri) {
            let mut content = json!({ "uri": r.uri, "mimeType": r.mime_type });
            match (&r.text, &r.blob) {
                (Some(text), _) => content["text"] = json!(text),
                (None, Some(blob)) => content["blob"] = json!(blob),
                (None, None) => content["text"] = json!(""),
            }
            return Some(Ok(json!({ "contents": [content] })));
        }
        self.templates.iter().find_map(|(t, parsed)| {
            let vars = parsed.matches(uri)?;
            let TemplateResolver::Text { text } = &t.resolver;
            let mut room = MAX_RENDERED_BYTES;
            let Some(text) = render_template_text(text, &vars, &mut room) else {
                return Some(Err(too_large("the resource", uri)));
            };
            Some(Ok(
                json!({ "contents": [{ "uri": uri, "mimeType": t.mime_type, "text": text }] }),
            ))
        })
    }

    fn prompts(&self) -> Vec<Value> {
        self.prompts
            .iter()
            .map(|p| {
                let args: Vec<Value> = p
                    .arguments
                    .iter()
                    .map(|a| {
                        with_optional(
                            json!({ "name": a.name, "required": a.required }),
                            "description",
                            &a.description,
                        )
                    })
                    .collect();
                let v = json!({ "name": p.name, "description": p.description, "arguments": args });
                with_optional(v, "title", &p.title)
            })
            .collect()
    }

    fn get_prompt(&self, name: &str, args: &Map<String, Value>) -> Option<Result<Value, RpcError>> {
        let p = self.prompts.iter().find(|p| p.name == name)?;
        if let Some(missing) = p
            .arguments
            .iter()
            .find(|a| a.required && !args.contains_key(&a.name))
        {
            return Some(Err(RpcError::invalid_params(format!(
                "Missing required argument: {}",
                missing.name
            ))));
        }
        let mut room = MAX_RENDERED_BYTES;
        let mut messages = Vec::with_capacity(p.messages.len());
        for m in &p.messages {
            let Some(text) = render_prompt_text(&m.text, args, &mut room) else {
                return Some(Err(too_large("the prompt", name)));
            };
            messages.push(json!({ "role": m.role, "content": { "type": "text", "text": text } }));
        }
        Some(Ok(
            json!({ "description": p.description, "messages": messages }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_templates_match_and_refuse() {
        let t = UriTemplate::parse("docs://{space}/pages/{page}").unwrap();
        assert_eq!(t.variables(), vec!["space", "page"]);
        let vars = t.matches("docs://eng/pages/hello%20world").unwrap();
        assert_eq!(vars["space"], "eng");
        assert_eq!(vars["page"], "hello world");
        assert!(t.matches("docs://eng/pages/").is_none());
        assert!(t.matches("docs://a/b/pages/c").is_none());
        assert!(t.matches("other://eng/pages/x").is_none());
        assert!(UriTemplate::parse("docs://{a}{b}").is_err());
        assert!(UriTemplate::parse("docs://{+a}").is_err());
        assert!(UriTemplate::parse("docs://plain").is_err());
        assert!(UriTemplate::parse("docs://{open").is_err());
    }

    #[test]
    fn prompt_and_template_rendering() {
        let args: Map<String, Value> =
            serde_json::from_value(json!({ "topic": "rust", "n": 3 })).unwrap();
        let mut room = MAX_RENDERED_BYTES;
        let prompt = |text: &str, room: &mut usize| render_prompt_text(text, &args, room);
        assert_eq!(
            prompt("About {{topic}} x{{n}} {{missing}}", &mut room).as_deref(),
            Some("About rust x3 {{missing}}")
        );
        assert_eq!(room, MAX_RENDERED_BYTES - "About rust x3 {{missing}}".len());
        for (text, rendered) in [
            ("{{{topic}}}", "{rust}"),
            ("{{topic}", "{{topic}"),
            ("{{ {{topic}}", "{{ rust"),
            ("}}{{n}}{{", "}}3{{"),
            ("é{{topic}} ü{{{topic}}}", "érust ü{rust}"),
            ("{{to{pic}}", "{{to{pic}}"),
            ("{{{{{{{{", "{{{{{{{{"),
            ("", ""),
        ] {
            assert_eq!(prompt(text, &mut room).as_deref(), Some(rendered), "{text}");
        }
        let vars = HashMap::from([("id".to_string(), "7".to_string())]);
        assert_eq!(
            render_template_text("item {id} {other}", &vars, &mut room).as_deref(),
            Some("item 7 {other}")
        );
        // Texts that keep opening: what they hold comes back as it was.
        let opens = "{".repeat(10_000) + "}";
        let mut room = MAX_RENDERED_BYTES;
        assert_eq!(
            render_template_text(&opens, &vars, &mut room).as_deref(),
            Some(opens.as_str())
        );
        let nested = "{{x".repeat(5_000) + "}}";
        assert_eq!(
            render_prompt_text(&nested, &args, &mut room).as_deref(),
            Some(nested.as_str())
        );
    }

    #[test]
    fn values_are_not_read_for_placeholders_and_rendering_is_capped() {
        // A value naming another placeholder stays as sent: chained, each argument would
        // multiply the text by the last one's repetitions.
        let args: Map<String, Value> =
            serde_json::from_value(json!({ "a": "{{b}}{{b}}", "b": "{{c}}{{c}}", "c": "x" }))
                .unwrap();
        let mut room = MAX_RENDERED_BYTES;
        assert_eq!(
            render_prompt_text("<{{a}}>", &args, &mut room).as_deref(),
            Some("<{{b}}{{b}}>")
        );
        let vars = HashMap::from([
            ("a".to_string(), "{b}".to_string()),
            ("b".to_string(), "y".to_string()),
        ]);
        assert_eq!(
            render_template_text("{a}{b}", &vars, &mut room).as_deref(),
            Some("{b}y")
        );
        // A text repeating a placeholder fills up to the cap, and not past it.
        let big: Map<String, Value> =
            serde_json::from_value(json!({ "a": "z".repeat(1024 * 1024) })).unwrap();
        let mut room = MAX_RENDERED_BYTES;
        assert!(render_prompt_text(&"{{a}}".repeat(8), &big, &mut room).is_some());
        assert_eq!(room, 0);
        let mut room = MAX_RENDERED_BYTES;
        assert!(render_prompt_text(&"{{a}}".repeat(9), &big, &mut room).is_none());
    }
}
