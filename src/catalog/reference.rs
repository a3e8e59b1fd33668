//! The `reference` catalog: exactly the tools, resources and prompts the official MCP conformance
//! suite exercises, with the behaviour its scenarios check. It doubles as a tour of every
//! protocol feature a tool can use (logging, progress, sampling, elicitation, SSE polling).

mod stateless;

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{ready, str_arg, with_argument_errors, CallFuture, Catalog, RequestContext};
use crate::protocol::mcp::{text_content, tool_error, tool_text, LogLevel};
use crate::protocol::RpcError;

pub struct ReferenceCatalog;

/// A 1×1 PNG.
pub const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
/// A WAV header with no samples.
pub const WAV_EMPTY: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": input_schema })
}

fn no_args() -> Value {
    json!({ "type": "object", "properties": {} })
}

async fn pause() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Turns an elicitation outcome into a tool result the model can read.
fn elicitation_result(label: &str, outcome: Result<Value, RpcError>) -> Result<Value, RpcError> {
    Ok(match outcome {
        Ok(answer) => tool_text(format!(
            "{label}: action={}, content={}",
            answer
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
            answer.get("content").cloned().unwrap_or(Value::Null)
        )),
        // A stateless request says which capability it lacks, as a protocol error.
        Err(e) if e.code == crate::protocol::stateless::MISSING_CLIENT_CAPABILITY => return Err(e),
        Err(e) => tool_error(format!("{label} failed: {}", e.message)),
    })
}

impl Catalog for ReferenceCatalog {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn tools(&self) -> Vec<Value> {
        vec![
            tool(
                "test_simple_text",
                "Returns a simple text response",
                no_args(),
            ),
            tool("test_image_content", "Returns an image (PNG)", no_args()),
            tool(
                "test_audio_content",
                "Returns an audio clip (WAV)",
                no_args(),
            ),
            tool(
                "test_embedded_resource",
                "Returns an embedded text resource",
                no_args(),
            ),
            tool(
                "test_multiple_content_types",
                "Returns text, an image and an embedded resource",
                no_args(),
            ),
            tool(
                "test_tool_with_logging",
                "Sends three log messages while it runs",
                no_args(),
            ),
            tool(
                "test_error_handling",
                "Always fails, reporting the error in the result",
                no_args(),
            ),
            tool(
                "test_tool_with_progress",
                "Reports progress 0, 50 and 100 of 100",
                no_args(),
            ),
            tool(
                "test_sampling",
                "Asks the client's LLM to complete a prompt (sampling)",
                json!({ "type": "object", "properties": { "prompt": { "type": "string", "description": "The prompt to send" } }, "required": ["prompt"] }),
            ),
            tool(
                "test_elicitation",
                "Asks the user for a username and an email (form elicitation)",
                json!({ "type": "object", "properties": { "message": { "type": "string", "description": "What to ask the user" } }, "required": ["message"] }),
            ),
            tool(
                "test_elicitation_sep1034_defaults",
                "Elicits a form whose fields carry defaults (SEP-1034)",
                no_args(),
            ),
            tool(
                "test_elicitation_sep1330_enums",
                "Elicits a form with every enum shape (SEP-1330)",
                no_args(),
            ),
            tool(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features",
                // With the vocabulary SEP-2106 allows: an $anchor, allOf/anyOf, if/then/else.
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": { "address": { "$anchor": "addressDef", "type": "object", "properties": { "street": { "type": "string" }, "city": { "type": "string" } } } },
                    "properties": {
                        "name": { "type": "string" },
                        "address": { "$ref": "#/$defs/address" },
                        "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                        "phone": { "type": "string" },
                        "email": { "type": "string" }
                    },
                    "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
                    "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
                    "then": { "required": ["phone"] },
                    "else": { "required": ["email"] },
                    "additionalProperties": false
                }),
            ),
            tool(
                "test_reconnection",
                "Closes its SSE stream mid-call; the result arrives when the client resumes",
                no_args(),
            ),
        ]
        .into_iter()
        .chain(
            stateless::TOOLS
                .iter()
                .map(|(name, description)| tool(name, description, no_args())),
        )
        .chain([stateless::custom_header_tool()])
        .collect()
    }

    fn answers_at_once(&self, tool: &str) -> bool {
        matches!(
            tool,
            "test_simple_text"
                | "test_image_content"
                | "test_audio_content"
                | "test_embedded_resource"
                | "test_multiple_content_types"
                | "test_error_handling"
        )
    }

    fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture> {
        Some(match name {
            "test_simple_text" => {
                ready(Ok(tool_text("This is a simple text response for testing.")))
            }
            "test_image_content" => ready(Ok(
                json!({ "content": [{ "type": "image", "data": PNG_1X1, "mimeType": "image/png" }] }),
            )),
            "test_audio_content" => ready(Ok(
                json!({ "content": [{ "type": "audio", "data": WAV_EMPTY, "mimeType": "audio/wav" }] }),
            )),
            "test_embedded_resource" => {
                ready(Ok(json!({ "content": [{ "type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content." } }] })))
            }
            "test_multiple_content_types" => ready(Ok(json!({ "content": [
                text_content("Multiple content types test:"),
                { "type": "image", "data": PNG_1X1, "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}" } }
            ] }))),
            "test_error_handling" => ready(Ok(tool_error(
                "This tool intentionally returns an error for testing",
            ))),
            "test_tool_with_logging" => Box::pin(async move {
                ctx.log(
                    LogLevel::Info,
                    "test_tool_with_logging",
                    json!("Tool execution started"),
                );
                pause().await;
                ctx.log(
                    LogLevel::Info,
                    "test_tool_with_logging",
                    json!("Tool processing data"),
                );
                pause().await;
                ctx.log(
                    LogLevel::Info,
                    "test_tool_with_logging",
                    json!("Tool execution completed"),
                );
                Ok(tool_text("Logging test completed"))
            }),
            "test_tool_with_progress" => Box::pin(async move {
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        pause().await;
                    }
                    ctx.progress(step, Some(100.0), None);
                }
                Ok(tool_text("Progress test completed"))
            }),
            "test_sampling" => {
                let prompt = match str_arg(&args, "prompt") {
                    Ok(p) => p.to_string(),
                    Err(e) => return Some(ready(with_argument_errors(ctx.version, Err(e)))),
                };
                Box::pin(async move {
                    let params = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }], "maxTokens": 100 });
                    Ok(match ctx.sample(params).await {
                        Ok(answer) => tool_text(format!(
                            "LLM response: {}",
                            answer
                                .pointer("/content/text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                        )),
                        // A stateless request says which capability it lacks, as a protocol error.
                        Err(e)
                            if e.code == crate::protocol::stateless::MISSING_CLIENT_CAPABILITY =>
                        {
                            return Err(e)
                        }
                        Err(e) => tool_error(format!("Sampling failed: {}", e.message)),
                    })
                })
            }
            "test_elicitation" => {
                let message = args
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("Please provide your information")
                    .to_string();
                Box::pin(async move {
                    let schema = json!({ "type": "object", "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    }, "required": ["username", "email"] });
                    elicitation_result("User response", ctx.elicit_form(&message, schema).await)
                })
            }
            "test_elicitation_sep1034_defaults" => Box::pin(async move {
                let schema = json!({ "type": "object", "properties": {
                    "name": { "type": "string", "default": "John Doe" },
                    "age": { "type": "integer", "default": 30 },
                    "score": { "type": "number", "default": 95.5 },
                    "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                    "verified": { "type": "boolean", "default": true }
                } });
                elicitation_result(
                    "Elicitation completed",
                    ctx.elicit_form(
                        "Please review and update the form fields with defaults",
                        schema,
                    )
                    .await,
                )
            }),
            "test_elicitation_sep1330_enums" => Box::pin(async move {
                let schema = json!({ "type": "object", "properties": {
                    "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                    "titledSingle": { "type": "string", "oneOf": [
                        { "const": "value1", "title": "First Option" },
                        { "const": "value2", "title": "Second Option" },
                        { "const": "value3", "title": "Third Option" }] },
                    "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"] },
                    "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                    "titledMulti": { "type": "array", "items": { "anyOf": [
                        { "const": "value1", "title": "First Choice" },
                        { "const": "value2", "title": "Second Choice" },
                        { "const": "value3", "title": "Third Choice" }] } }
                } });
                elicitation_result(
                    "Elicitation completed",
                    ctx.elicit_form("Please choose options", schema).await,
                )
            }),
            "json_schema_2020_12_tool" => {
                ready(Ok(tool_text(format!("Received: {}", Value::Object(args)))))
            }
            "test_reconnection" => Box::pin(async move {
                pause().await;
                ctx.close_stream();
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(tool_text("Reconnection test completed successfully"))
            }),
            _ => return stateless::call(name, &args, ctx),
        })
    }

    fn resources(&self) -> Vec<Value> {
        vec![
            json!({ "uri": "test://static-text", "name": "static-text", "title": "Static text", "description": "A static text resource", "mimeType": "text/plain" }),
            json!({ "uri": "test://static-binary", "name": "static-binary", "title": "Static binary", "description": "A static PNG image", "mimeType": "image/png" }),
            json!({ "uri": "test://watched-resource", "name": "watched-resource", "title": "Watched resource", "description": "A resource to subscribe to", "mimeType": "text/plain" }),
        ]
    }

    fn resource_templates(&self) -> Vec<Value> {
        vec![
            json!({ "uriTemplate": "test://template/{id}/data", "name": "template-data", "title": "Templated data", "description": "Data for an id", "mimeType": "application/json" }),
        ]
    }

    fn read_resource(&self, uri: &str) -> Option<Result<Value, RpcError>> {
        let contents = match uri {
            "test://static-text" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
            }
            "test://static-binary" => {
                json!({ "uri": uri, "mimeType": "image/png", "blob": PNG_1X1 })
            }
            "test://watched-resource" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content." })
            }
            _ => {
                let id = uri
                    .strip_prefix("test://template/")?
                    .strip_suffix("/data")?;
                if id.is_empty() || id.contains('/') {
                    return None;
                }
                let text =
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                        .to_string();
                json!({ "uri": uri, "mimeType": "application/json", "text": text })
            }
        };
        Some(Ok(json!({ "contents": [contents] })))
    }

    fn prompts(&self) -> Vec<Value> {
        vec![
            json!({ "name": "test_simple_prompt", "description": "A simple prompt without arguments" }),
            json!({ "name": "test_prompt_with_arguments", "description": "A prompt with two arguments", "arguments": [
                { "name": "arg1", "description": "First argument", "required": true },
                { "name": "arg2", "description": "Second argument", "required": true }] }),
            json!({ "name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource", "arguments": [
                { "name": "resourceUri", "description": "URI of the resource to embed", "required": true }] }),
            json!({ "name": "test_prompt_with_image", "description": "A prompt that includes an image" }),
            stateless::prompt(),
        ]
    }

    fn prompt_asks(&self, name: &str) -> bool {
        name == stateless::PROMPT
    }

    fn get_prompt_asking(
        &self,
        name: &str,
        _arguments: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Option<CallFuture> {
        (name == stateless::PROMPT).then(|| stateless::get_prompt(ctx))
    }

    fn get_prompt(&self, name: &str, args: &Map<String, Value>) -> Option<Result<Value, RpcError>> {
        let user = |content: Value| json!({ "role": "user", "content": content });
        Some(Ok(match name {
            "test_simple_prompt" => {
                json!({ "messages": [user(text_content("This is a simple prompt for testing."))] })
            }
            "test_prompt_with_arguments" => {
                let (a1, a2) = match (str_arg(args, "arg1"), str_arg(args, "arg2")) {
                    (Ok(a1), Ok(a2)) => (a1, a2),
                    (Err(e), _) | (_, Err(e)) => return Some(Err(e)),
                };
                json!({ "messages": [user(text_content(format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'")))] })
            }
            "test_prompt_with_embedded_resource" => {
                let uri = match str_arg(args, "resourceUri") {
                    Ok(u) => u,
                    Err(e) => return Some(Err(e)),
                };
                json!({ "messages": [
                    user(json!({ "type": "resource", "resource": { "uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing." } })),
                    user(text_content("Please process the embedded resource above."))
                ] })
            }
            "test_prompt_with_image" => json!({ "messages": [
                user(json!({ "type": "image", "data": PNG_1X1, "mimeType": "image/png" })),
                user(text_content("Please analyze the image above."))
            ] }),
            _ => return None,
        }))
    }

    fn complete(&self, reference: &Value, argument: &str, value: &str) -> Option<Vec<String>> {
        let candidates: &[&str] = match (reference["type"].as_str()?, argument) {
            ("ref/prompt", "arg1" | "arg2")
                if reference["name"] == "test_prompt_with_arguments" =>
            {
                &["test", "testValue1", "testValue2", "example", "sample"]
            }
            ("ref/resource", "id") if reference["uri"] == "test://template/{id}/data" => {
                &["1", "2", "3", "123"]
            }
            _ => return None,
        };
        Some(
            candidates
                .iter()
                .filter(|c| c.starts_with(value))
                .map(|c| c.to_string())
                .collect(),
        )
    }
}
