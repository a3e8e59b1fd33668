//! The reference catalog's fixtures for the conformance suite's 2026-07-28 scenarios: tools and
//! a prompt that ask the client for input, under the keys the multi round-trip scenarios expect
//! among `inputRequests` (`user_name`, `capital_question`, `client_roots`...), and the diagnostic
//! tools of its stateless and custom-header scenarios. In a session the askers ask over the
//! request's stream like any tool; in 2026-07-28 each question becomes an `input_required`
//! round (`stateless::mrtr`). Two diagnostic hooks announce a change of the tenant's tool or prompt
//! list to its sessions and `subscriptions/listen` streams on every replica, which is what the
//! suite's list-change scenarios listen for; the lists themselves stay as they are (a per-replica
//! change would make replicas disagree about a tenant's list).

use serde_json::{json, Value};

use crate::catalog::{CallFuture, RequestContext};
use crate::protocol::mcp::{text_content, tool_error, tool_text, LogLevel};
use crate::protocol::stateless::MISSING_CLIENT_CAPABILITY;
use crate::protocol::RpcError;

/// The tools that take no arguments: (name, description).
pub const TOOLS: [(&str, &str); 13] = [
    (
        "test_input_required_result_elicitation",
        "Asks the user's name (elicitation, key user_name) and greets them",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the client's LLM for the capital of France (sampling, key capital_question)",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks the client for its roots (key client_roots) and lists them",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation (key confirm); answers state-ok once it has it",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks a name, a greeting from the LLM and the roots at once",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks a name, then a favourite colour: two rounds",
    ),
    (
        "test_input_required_result_tampered_state",
        "Asks for a confirmation (key confirm), for a retry to present its state",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks whatever the client declared it can answer (elicitation, sampling, roots)",
    ),
    (
        "test_missing_capability",
        "Asks the client's LLM (sampling): refused to a request that did not declare sampling",
    ),
    (
        "test_streaming_elicitation",
        "Reports progress, then asks the user a question (elicitation)",
    ),
    (
        "test_logging_tool",
        "Logs two messages (sent only to a request that asked for a log level)",
    ),
    (
        "test_trigger_tool_change",
        "Announces a change of this tenant's tool list to its sessions and listen streams \
         (a diagnostic: the list stays as it is, clients list it again)",
    ),
    (
        "test_trigger_prompt_change",
        "Announces a change of this tenant's prompt list to its sessions and listen streams \
         (a diagnostic: the list stays as it is, clients list it again)",
    ),
];

/// The tool with a parameter mirrored into a header (`x-mcp-header`, SEP-2243).
pub fn custom_header_tool() -> Value {
    json!({
        "name": "test_custom_header",
        "description": "Echoes its region, which clients also send as the Mcp-Param-Region header",
        "inputSchema": { "type": "object", "properties": {
            "region": { "type": "string", "description": "A region name", "x-mcp-header": "Region" }
        }, "required": ["region"] }
    })
}

/// The prompt that asks before it is rendered.
pub const PROMPT: &str = "test_input_required_result_prompt";

fn string_form(field: &str) -> Value {
    json!({ "type": "object", "properties": { field: { "type": "string" } }, "required": [field] })
}

fn confirm_form() -> Value {
    json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] })
}

/// The `field` of an accepted elicitation, or why there is none.
fn accepted(answer: &Value, field: &str) -> Result<String, String> {
    match answer["action"].as_str() {
        Some("accept") => Ok(match &answer["content"][field] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        action => Err(format!(
            "the user did not answer ({})",
            action.unwrap_or("?")
        )),
    }
}

fn sampled_text(answer: &Value) -> String {
    answer
        .pointer("/content/text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn root_uris(answer: &Value) -> String {
    let uris: Vec<&str> = answer["roots"]
        .as_array()
        .map(|roots| roots.iter().filter_map(|r| r["uri"].as_str()).collect())
        .unwrap_or_default();
    uris.join(", ")
}

/// A failed question: a missing capability is a protocol error (what the client must fix), any
/// other failure a tool error the model can read.
fn failed(e: RpcError) -> Result<Value, RpcError> {
    if e.code == MISSING_CLIENT_CAPABILITY {
        return Err(e);
    }
    Ok(tool_error(format!(
        "Asking the client failed: {}",
        e.message
    )))
}

/// The answer of a question, or (returning from the call) what its failure makes: see
/// [`failed`].
macro_rules! asked {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return failed(e),
        }
    };
}

/// A form under `key`.
async fn ask_form(
    ctx: &RequestContext,
    key: &'static str,
    message: &str,
    form: Value,
) -> Result<Value, RpcError> {
    ctx.keyed(key).elicit_form(message, form).await
}

async fn ask_name(
    ctx: &RequestContext,
    key: &'static str,
    message: &str,
) -> Result<Value, RpcError> {
    ask_form(ctx, key, message, string_form("name")).await
}

async fn ask_greeting(
    ctx: &RequestContext,
    key: &'static str,
    text: &str,
    max: u32,
) -> Result<Value, RpcError> {
    let params = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": text } }], "maxTokens": max });
    ctx.keyed(key).sample(params).await
}

async fn ask_roots(ctx: &RequestContext, key: &'static str) -> Result<Value, RpcError> {
    ctx.keyed(key).list_roots().await
}

/// `question`'s answer when `ask`; otherwise it is never asked (an async fn does nothing until
/// polled).
async fn if_asked<T>(ask: bool, question: impl std::future::Future<Output = T>) -> Option<T> {
    if ask {
        Some(question.await)
    } else {
        None
    }
}

/// The greeting of a name elicited under `user_name`.
fn greeting(answer: &Value) -> Value {
    match accepted(answer, "name") {
        Ok(name) => tool_text(format!("Hello, {name}!")),
        Err(why) => tool_text(format!("No greeting: {why}")),
    }
}

/// A list-change hook: tells the tenant its `list` changed.
fn announce(ctx: &RequestContext, list: &'static str) -> CallFuture {
    ctx.list_changed(list);
    Box::pin(std::future::ready(Ok(tool_text(format!(
        "Announced a change of the {list} list"
    )))))
}

/// Starts tool `name` of [`TOOLS`] or the custom-header tool; `None` when it is none of them.
pub fn call(
    name: &str,
    args: &serde_json::Map<String, Value>,
    ctx: RequestContext,
) -> Option<CallFuture> {
    let future: CallFuture = match name {
        "test_custom_header" => {
            let region = args.get("region").cloned().unwrap_or(Value::Null);
            Box::pin(async move { Ok(tool_text(format!("Region: {region}"))) })
        }
        "test_missing_capability" => Box::pin(async move {
            let answer = asked!(ask_greeting(&ctx, "greeting", "Say hello", 20).await);
            Ok(tool_text(format!(
                "LLM response: {}",
                sampled_text(&answer)
            )))
        }),
        "test_streaming_elicitation" => Box::pin(async move {
            ctx.progress(0.0, Some(1.0), Some("about to ask"));
            let answer = asked!(ask_name(&ctx, "user_name", "What is your name?").await);
            ctx.progress(1.0, Some(1.0), Some("answered"));
            Ok(greeting(&answer))
        }),
        "test_trigger_tool_change" => announce(&ctx, "tools"),
        "test_trigger_prompt_change" => announce(&ctx, "prompts"),
        "test_logging_tool" => Box::pin(async move {
            ctx.log(LogLevel::Info, "test_logging_tool", json!("started"));
            ctx.log(LogLevel::Info, "test_logging_tool", json!("done"));
            Ok(tool_text("Logged two messages"))
        }),
        "test_input_required_result_elicitation" => Box::pin(async move {
            let answer = asked!(ask_name(&ctx, "user_name", "What is your name?").await);
            Ok(greeting(&answer))
        }),
        "test_input_required_result_sampling" => Box::pin(async move {
            let answer = asked!(
                ask_greeting(
                    &ctx,
                    "capital_question",
                    "What is the capital of France?",
                    100
                )
                .await
            );
            Ok(tool_text(format!(
                "LLM response: {}",
                sampled_text(&answer)
            )))
        }),
        "test_input_required_result_list_roots" => Box::pin(async move {
            let answer = asked!(ask_roots(&ctx, "client_roots").await);
            Ok(tool_text(format!("Client roots: {}", root_uris(&answer))))
        }),
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => Box::pin(async move {
            let answer = asked!(ask_form(&ctx, "confirm", "Please confirm", confirm_form()).await);
            Ok(match accepted(&answer, "ok") {
                Ok(ok) => tool_text(format!("state-ok: confirmed={ok}")),
                Err(why) => tool_text(format!("state-ok, not confirmed: {why}")),
            })
        }),
        "test_input_required_result_multiple_inputs" => Box::pin(async move {
            // Asked together: one round carries all three.
            let (name, sampled, roots) = tokio::join!(
                ask_name(&ctx, "user_name", "What is your name?"),
                ask_greeting(&ctx, "greeting", "Generate a greeting", 50),
                ask_roots(&ctx, "client_roots"),
            );
            let (name, sampled, roots) = (asked!(name), asked!(sampled), asked!(roots));
            let name = accepted(&name, "name").unwrap_or_else(|why| format!("({why})"));
            Ok(tool_text(format!(
                "name: {name}; greeting: {}; roots: {}",
                sampled_text(&sampled),
                root_uris(&roots)
            )))
        }),
        "test_input_required_result_multi_round" => Box::pin(async move {
            let first = asked!(ask_name(&ctx, "step1", "Step 1: What is your name?").await);
            let name = match accepted(&first, "name") {
                Ok(name) => name,
                Err(why) => return Ok(tool_text(format!("Stopped after step 1: {why}"))),
            };
            let question = "Step 2: What is your favorite color?";
            let second = asked!(ask_form(&ctx, "step2", question, string_form("color")).await);
            Ok(match accepted(&second, "color") {
                Ok(color) => tool_text(format!("{name}'s favorite color is {color}")),
                Err(why) => tool_text(format!("Stopped after step 2: {why}")),
            })
        }),
        "test_input_required_result_capabilities" => Box::pin(async move {
            // Only what the client declared it answers (a question it cannot take is never
            // sent, MUST of mrtr.mdx).
            let can = |method: &str, params: Value| ctx.require(method, &params).is_ok();
            let elicit = can("elicitation/create", json!({ "mode": "form" }));
            let sample = can("sampling/createMessage", json!({}));
            let roots = can("roots/list", Value::Null);
            let (name, sampled, listed) = tokio::join!(
                if_asked(elicit, ask_name(&ctx, "user_name", "What is your name?")),
                if_asked(
                    sample,
                    ask_greeting(&ctx, "greeting", "Generate a greeting", 50)
                ),
                if_asked(roots, ask_roots(&ctx, "client_roots")),
            );
            let mut parts = Vec::new();
            if let Some(name) = name {
                let name = asked!(name);
                parts.push(format!(
                    "name: {}",
                    accepted(&name, "name").unwrap_or_else(|why| why)
                ));
            }
            if let Some(sampled) = sampled {
                parts.push(format!("greeting: {}", sampled_text(&asked!(sampled))));
            }
            if let Some(listed) = listed {
                parts.push(format!("roots: {}", root_uris(&asked!(listed))));
            }
            if parts.is_empty() {
                parts.push("the client declared nothing it can be asked".into());
            }
            Ok(tool_text(parts.join("; ")))
        }),
        _ => return None,
    };
    Some(future)
}

/// `prompts/get` of [`PROMPT`]: asks what context to use (key `user_context`).
pub fn get_prompt(ctx: &RequestContext) -> CallFuture {
    let ctx = ctx.keyed("user_context");
    Box::pin(async move {
        let form = string_form("context");
        let answer = ctx
            .elicit_form("What context should the prompt use?", form)
            .await?;
        let text = match accepted(&answer, "context") {
            Ok(context) => format!("Answer with this context in mind: {context}"),
            Err(why) => format!("No context was given ({why}); answer in general terms."),
        };
        Ok(json!({ "messages": [{ "role": "user", "content": text_content(text) }] }))
    })
}

/// The prompt's listing entry.
pub fn prompt() -> Value {
    json!({ "name": PROMPT, "description": "Asks what context to use before it is rendered (elicitation, key user_context)" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_accepted_elicitations_only() {
        let yes = json!({ "action": "accept", "content": { "name": "Alice", "ok": true } });
        assert_eq!(accepted(&yes, "name").as_deref(), Ok("Alice"));
        assert_eq!(accepted(&yes, "ok").as_deref(), Ok("true"));
        assert!(accepted(&json!({ "action": "decline" }), "name").is_err());
        let roots = json!({ "roots": [{ "uri": "file:///a" }, { "uri": "file:///b" }] });
        assert_eq!(root_uris(&roots), "file:///a, file:///b");
        let sample = json!({ "role": "assistant", "content": { "type": "text", "text": "Paris" } });
        assert_eq!(sampled_text(&sample), "Paris");
    }
}
