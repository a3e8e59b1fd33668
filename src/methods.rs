//! The handling of every MCP method that needs no session: listing and calling tools, reading
//! resources, getting prompts, completion, ping. It takes a `RequestScope` (revision, client
//! capabilities, principal, the tenant's catalog) so a session-era session and, later, a
//! stateless request call the same code. Session-only methods (initialize, subscriptions,
//! logging/setLevel, cancellation) are handled by the session itself.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::catalog::{CallFuture, TenantCatalog};
use crate::protocol::jsonrpc::RESOURCE_NOT_FOUND;
use crate::protocol::mcp::paginate;
use crate::protocol::{ProtocolVersion, RequestId, RpcError};
use crate::request::{CallKey, RequestContext, SessionPort};

/// Everything a method needs to know about the request it handles.
pub struct RequestScope<'a> {
    pub version: ProtocolVersion,
    pub client_capabilities: &'a Arc<Value>,
    pub principal: Option<&'a Arc<Value>>,
    pub catalog: &'a TenantCatalog,
    pub page_size: usize,
    /// A stable identity of the call (see `RequestContext::call_key`).
    pub call_key: CallKey,
    /// The session the request belongs to, if any.
    pub session: Option<&'a Arc<str>>,
    /// Where a running call sends notifications and server→client requests.
    pub port: &'a Arc<dyn SessionPort>,
}

impl RequestScope<'_> {
    /// The context a running call of request `id` gets.
    pub fn context(&self, id: &RequestId, progress_token: Option<Value>) -> RequestContext {
        let mut ctx = RequestContext::new(
            id.clone(),
            self.version,
            self.client_capabilities.clone(),
            progress_token,
            self.call_key.clone(),
            self.port.clone(),
        );
        ctx.principal = self.principal.cloned();
        ctx.session = self.session.cloned();
        ctx
    }
}

/// The outcome of handling a method.
pub enum Handled {
    /// The answer is known at once.
    Done(Result<Value, RpcError>),
    /// A tool call (or a prompt that asks the client something) runs on: its future yields
    /// the answer.
    Run {
        future: CallFuture,
        ctx: RequestContext,
        /// Whether running it again after a failover is safe (read-only or idempotent tool).
        rerunnable: bool,
    },
    /// Not a method this module handles.
    Unknown,
}

/// The methods `handle` answers (everything else is `Handled::Unknown`).
pub const HANDLED: &[&str] = &[
    "ping",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "tools/call",
    "resources/read",
    "prompts/get",
    "completion/complete",
];

/// Handles `method` with `params` (already taken out of the request).
pub fn handle(
    id: &RequestId,
    method: &str,
    mut params: Map<String, Value>,
    progress_token: Option<Value>,
    scope: &RequestScope<'_>,
) -> Handled {
    let catalog = scope.catalog;
    let page = |list: &str, items: &[Value], params: &Map<String, Value>| {
        let (page, next) = paginate(list, items, params.get("cursor"), scope.page_size)?;
        let mut result = json!({ list: page });
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(result)
    };
    Handled::Done(match method {
        "ping" => Ok(json!({})),
        "tools/list" => page("tools", &catalog.tools, &params),
        "resources/list" => page("resources", &catalog.resources, &params),
        "resources/templates/list" => {
            page("resourceTemplates", &catalog.resource_templates, &params)
        }
        "prompts/list" => page("prompts", &catalog.prompts, &params),
        "tools/call" => {
            let arguments = match params.remove("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Handled::Done(Err(RpcError::invalid_params(
                        "tools/call \"arguments\" must be an object",
                    )))
                }
            };
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Handled::Done(Err(RpcError::invalid_params(
                    "tools/call needs a string \"name\"",
                )));
            };
            let ctx = scope.context(id, progress_token);
            match catalog.call_tool(name, arguments, ctx.clone()) {
                Some(future) => {
                    return Handled::Run {
                        future,
                        rerunnable: catalog.is_rerunnable(name),
                        ctx,
                    }
                }
                None => Err(catalog
                    .unlisted_tool_error(name)
                    .unwrap_or_else(|| RpcError::invalid_params(format!("Unknown tool: {name}")))),
            }
        }
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            Some(uri) => match catalog.read_resource(uri) {
                Some(outcome) => outcome,
                None => {
                    let ctx = scope.context(id, progress_token);
                    match catalog.read_resource_remote(uri, &ctx) {
                        // An upstream server's: it runs on like a tool call.
                        Some(future) => {
                            return Handled::Run {
                                future,
                                ctx,
                                rerunnable: true,
                            }
                        }
                        None => Err(RpcError::new(RESOURCE_NOT_FOUND, "Resource not found")
                            .with_data(json!({ "uri": uri }))),
                    }
                }
            },
            None => Err(RpcError::invalid_params(
                "resources/read needs a string \"uri\"",
            )),
        },
        "prompts/get" => match params.get("name").and_then(Value::as_str) {
            Some(name) => {
                let arguments = match params.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(_) => {
                        return Handled::Done(Err(RpcError::invalid_params(
                            "prompts/get \"arguments\" must be an object",
                        )))
                    }
                };
                if let Some(outcome) = catalog.get_prompt(name, &arguments) {
                    outcome
                } else {
                    let ctx = scope.context(id, progress_token);
                    match catalog.get_prompt_asking(name, &arguments, &ctx) {
                        // It runs on like a tool call, asking the client over its stream.
                        Some(future) => {
                            return Handled::Run {
                                future,
                                ctx,
                                rerunnable: false,
                            }
                        }
                        None => Err(RpcError::invalid_params(format!("Unknown prompt: {name}"))),
                    }
                }
            }
            None => Err(RpcError::invalid_params(
                "prompts/get needs a string \"name\"",
            )),
        },
        "completion/complete" => match catalog.complete_remote(&params) {
            Some(future) if check_argument(&params).is_ok() => {
                return Handled::Run {
                    future,
                    ctx: scope.context(id, progress_token),
                    rerunnable: true,
                }
            }
            _ => complete(catalog, &params),
        },
        _ => return Handled::Unknown,
    })
}

/// schema.json: `argument` needs `name` and `value` (strings); `context.arguments`, when sent,
/// maps names to strings (completion.mdx: validate all inputs). The value, when they do.
fn check_argument(params: &Map<String, Value>) -> Result<&str, RpcError> {
    let argument = params.get("argument");
    if argument.and_then(|a| a["name"].as_str()).is_none() {
        return Err(RpcError::invalid_params(
            "completion/complete needs \"ref\" (ref/prompt or ref/resource) and \"argument.name\"",
        ));
    }
    let Some(value) = argument.and_then(|a| a["value"].as_str()) else {
        return Err(RpcError::invalid_params(
            "completion/complete: argument needs a string \"value\"",
        ));
    };
    if let Some(context) = params.get("context") {
        let arguments_ok = match context.get("arguments") {
            None => context.is_object(),
            Some(Value::Object(a)) => a.values().all(Value::is_string),
            Some(_) => false,
        };
        if !arguments_ok {
            return Err(RpcError::invalid_params(
                "completion/complete: context.arguments must map argument names to strings",
            ));
        }
    }
    Ok(value)
}

fn complete(catalog: &TenantCatalog, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let argument = params.get("argument");
    match (
        reference.get("type").and_then(Value::as_str),
        argument.and_then(|a| a["name"].as_str()),
    ) {
        (Some(kind @ ("ref/prompt" | "ref/resource")), Some(name)) => {
            // completion.mdx: an unknown prompt (or template) is Invalid params.
            let (field, list, key) = if kind == "ref/prompt" {
                ("name", &catalog.prompts, "name")
            } else {
                ("uri", &catalog.resource_templates, "uriTemplate")
            };
            let Some(target) = reference.get(field).and_then(Value::as_str) else {
                return Err(RpcError::invalid_params(format!(
                    "completion/complete: {kind} needs a string \"{field}\""
                )));
            };
            let known = list.iter().any(|entry| entry[key] == target)
                || (kind == "ref/resource" && catalog.resources.iter().any(|r| r["uri"] == target));
            if !known {
                return Err(RpcError::invalid_params(if kind == "ref/prompt" {
                    format!("Unknown prompt: {target}")
                } else {
                    format!("Unknown resource or resource template: {target}")
                }));
            }
            let value = check_argument(params)?;
            let mut values = catalog
                .complete(&reference, name, value)
                .unwrap_or_default();
            let total = values.len();
            values.truncate(100);
            Ok(
                json!({ "completion": { "values": values, "total": total, "hasMore": total > 100 } }),
            )
        }
        _ => Err(RpcError::invalid_params(
            "completion/complete needs \"ref\" (ref/prompt or ref/resource) and \"argument.name\"",
        )),
    }
}
