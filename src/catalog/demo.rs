//! The `demo` catalog: a few small, genuinely useful tools, a note resource that tools can
//! change (so subscriptions have something to watch) and a prompt with an argument.

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use super::{ready, str_arg, with_argument_errors, CallFuture, Catalog, RequestContext};
use crate::protocol::mcp::{text_content, tool_error, tool_text};
use crate::protocol::RpcError;

pub const NOTE_URI: &str = "demo://note";

/// One instance per tenant: the note it keeps is that tenant's.
#[derive(Default)]
pub struct DemoCatalog {
    note: Mutex<String>,
}

impl Catalog for DemoCatalog {
    fn name(&self) -> &'static str {
        "demo"
    }

    fn tools(&self) -> Vec<Value> {
        vec![
            json!({ "name": "echo", "title": "Echo", "description": "Returns the given text unchanged",
                "inputSchema": { "type": "object", "properties": { "text": { "type": "string", "description": "Text to echo" } }, "required": ["text"] },
                "annotations": { "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false } }),
            json!({ "name": "add", "title": "Add numbers", "description": "Adds a list of numbers and returns the sum",
                "inputSchema": { "type": "object", "properties": { "numbers": { "type": "array", "items": { "type": "number" }, "description": "Numbers to add" } }, "required": ["numbers"] },
                "outputSchema": { "type": "object", "properties": { "sum": { "type": "number" }, "count": { "type": "integer" } }, "required": ["sum", "count"] },
                "annotations": { "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false } }),
            json!({ "name": "word_count", "title": "Count words", "description": "Counts the words, lines and characters of a text",
                "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] },
                "outputSchema": { "type": "object", "properties": { "words": { "type": "integer" }, "lines": { "type": "integer" }, "characters": { "type": "integer" } }, "required": ["words", "lines", "characters"] },
                "annotations": { "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false } }),
            json!({ "name": "new_uuid", "title": "New UUID", "description": "Generates a random (version 4) UUID",
                "inputSchema": { "type": "object", "properties": {} },
                "annotations": { "readOnlyHint": true, "openWorldHint": false } }),
            json!({ "name": "client_roots", "title": "Client roots", "description": "Asks the client which filesystem roots it exposes (roots/list)",
                "inputSchema": { "type": "object", "properties": {} },
                "annotations": { "readOnlyHint": true, "openWorldHint": false } }),
            json!({ "name": "slow_count", "title": "Count slowly", "description": "Counts to `steps`, one step every `interval_ms`, reporting progress; for trying out resumable streams and failover",
                "inputSchema": { "type": "object", "properties": {
                    "steps": { "type": "integer", "minimum": 1, "maximum": 1000 },
                    "interval_ms": { "type": "integer", "minimum": 0, "maximum": 10000 } }, "required": ["steps"] },
                "annotations": { "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false } }),
            json!({ "name": "set_note", "title": "Set the note", "description": "Replaces the text of the demo://note resource; subscribers are notified",
                "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] },
                "annotations": { "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false } }),
        ]
    }

    fn answers_at_once(&self, tool: &str) -> bool {
        matches!(tool, "echo" | "add" | "word_count" | "new_uuid")
    }

    fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture> {
        let outcome = match name {
            "echo" => str_arg(&args, "text").map(tool_text),
            "add" => match args.get("numbers").and_then(Value::as_array) {
                Some(items) => match items.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>() {
                    Some(numbers) => {
                        let sum: f64 = numbers.iter().sum();
                        // An overflow is no number: JSON would carry it as null, which the
                        // output schema (`sum`: a number) does not allow.
                        if sum.is_finite() {
                            let structured = json!({ "sum": sum, "count": numbers.len() });
                            Ok(json!({ "content": [text_content(structured.to_string())], "structuredContent": structured, "isError": false }))
                        } else {
                            Ok(tool_error("the sum is too large for a number"))
                        }
                    }
                    None => Err(RpcError::invalid_params("numbers must all be numbers")),
                },
                None => Err(RpcError::invalid_params("Missing or non-array argument: numbers")),
            },
            "word_count" => str_arg(&args, "text").map(|text| {
                let structured = json!({ "words": text.split_whitespace().count(), "lines": text.lines().count(), "characters": text.chars().count() });
                json!({ "content": [text_content(structured.to_string())], "structuredContent": structured, "isError": false })
            }),
            "new_uuid" => Ok(tool_text(uuid::Uuid::new_v4().to_string())),
            "client_roots" => {
                return Some(Box::pin(async move {
                    Ok(match ctx.list_roots().await {
                        Ok(answer) => {
                            let roots = answer.get("roots").cloned().unwrap_or_else(|| json!([]));
                            json!({ "content": [text_content(roots.to_string())], "structuredContent": { "roots": roots }, "isError": false })
                        }
                        // A stateless request says which capability it lacks, as a protocol error.
                        Err(e) if e.code == crate::protocol::stateless::MISSING_CLIENT_CAPABILITY => return Err(e),
                        Err(e) => crate::protocol::mcp::tool_error(format!("Could not list the client's roots: {}", e.message)),
                    })
                }))
            }
            "slow_count" => {
                let steps = args.get("steps").and_then(Value::as_u64).filter(|n| (1..=1000).contains(n));
                let interval = args.get("interval_ms").and_then(Value::as_u64).unwrap_or(200).min(10_000);
                let Some(steps) = steps else {
                    return Some(ready(with_argument_errors(ctx.version, Err(RpcError::invalid_params("steps must be an integer from 1 to 1000")))));
                };
                return Some(Box::pin(async move {
                    for step in 1..=steps {
                        tokio::time::sleep(std::time::Duration::from_millis(interval)).await;
                        ctx.progress(step as f64, Some(steps as f64), Some(&format!("step {step} of {steps}")));
                    }
                    Ok(tool_text(format!("counted {steps}")))
                }));
            }
            "set_note" => str_arg(&args, "text").map(|text| {
                *self.note.lock() = text.to_string();
                ctx.resource_updated(NOTE_URI);
                tool_text("Note updated")
            }),
            _ => return None,
        };
        Some(ready(with_argument_errors(ctx.version, outcome)))
    }

    fn resources(&self) -> Vec<Value> {
        vec![
            json!({ "uri": NOTE_URI, "name": "note", "title": "Note", "description": "A short note, changed by the set_note tool", "mimeType": "text/plain" }),
        ]
    }

    fn read_resource(&self, uri: &str) -> Option<Result<Value, RpcError>> {
        (uri == NOTE_URI).then(|| Ok(json!({ "contents": [{ "uri": uri, "mimeType": "text/plain", "text": self.note.lock().clone() }] })))
    }

    fn prompts(&self) -> Vec<Value> {
        vec![
            json!({ "name": "summarize", "title": "Summarize", "description": "Asks the model to summarize a text",
            "arguments": [{ "name": "text", "description": "The text to summarize", "required": true },
                          { "name": "style", "description": "brief, detailed or bullet-points", "required": false }] }),
        ]
    }

    fn get_prompt(&self, name: &str, args: &Map<String, Value>) -> Option<Result<Value, RpcError>> {
        if name != "summarize" {
            return None;
        }
        Some(str_arg(args, "text").map(|text| {
            let style = args.get("style").and_then(Value::as_str).unwrap_or("brief");
            json!({ "description": "Summarize a text", "messages": [{ "role": "user",
                "content": text_content(format!("Summarize the following text ({style}):\n\n{text}")) }] })
        }))
    }

    fn complete(&self, reference: &Value, argument: &str, value: &str) -> Option<Vec<String>> {
        if reference["type"] != "ref/prompt"
            || reference["name"] != "summarize"
            || argument != "style"
        {
            return None;
        }
        Some(
            ["brief", "detailed", "bullet-points"]
                .iter()
                .filter(|s| s.starts_with(value))
                .map(|s| s.to_string())
                .collect(),
        )
    }
}
