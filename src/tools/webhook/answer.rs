//! Reading an endpoint's answer: a tool result (its content blocks checked, its structured
//! output against the tool's `outputSchema`), a request for the client's input, or an error a
//! model can act on.

use super::*;

/// At least as many as the JSON values and member names in `bytes`: one, plus one per `[`, `{`,
/// `,` or `:` outside strings, since every value or name but the first follows one of them.
pub(super) fn values_at_most(bytes: &[u8]) -> usize {
    let (mut values, mut in_string, mut escaped) = (1, false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' | b',' | b':' => values += 1,
                _ => {}
            }
        }
    }
    values
}

/// Classifies a 2xx JSON answer.
pub(super) fn parse_answer(answer: Value) -> Result<Answer, String> {
    let mut object = match answer {
        Value::Object(object) => object,
        other => {
            return Err(format!(
                "its endpoint returned JSON that is not an object: {}",
                excerpt(other.to_string().as_bytes(), false)
            ))
        }
    };
    if let Some(request) = object.remove("input_request") {
        let state = object.remove("state").unwrap_or(Value::Null);
        let kind = request.get("type").and_then(Value::as_str);
        let request = match kind {
            Some("elicitation") => {
                let message = request.get("message").and_then(Value::as_str);
                // elicitation.mdx: a flat object schema, `{"type": "object", "properties": {…}}`
                // whose properties are schemas (objects), and a JSON Schema the answer can be
                // checked against (before the user is asked, not after).
                let schema = request.get("requested_schema").filter(|s| {
                    s["type"] == "object"
                        && s["properties"]
                            .as_object()
                            .is_some_and(|p| p.values().all(Value::is_object))
                });
                let compiled = schema.map(|s| crate::protocol::schema::compile(s).map(|_| s));
                match (message, compiled) {
                    (Some(message), Some(Ok(schema))) => InputRequest::Elicitation {
                        message: message.to_string(),
                        schema: schema.clone(),
                    },
                    (Some(_), Some(Err(e))) => {
                        return Err(format!(
                            "its endpoint sent an elicitation input request whose \
                             `requested_schema` {e}"
                        ))
                    }
                    _ => {
                        return Err("its endpoint sent an elicitation input request without a \
                                    string `message` and a `requested_schema` of type object \
                                    with `properties`"
                            .to_string())
                    }
                }
            }
            Some("sampling") => match request.get("params").filter(|p| p.is_object()) {
                Some(params) => InputRequest::Sampling {
                    params: params.clone(),
                },
                None => {
                    return Err(
                        "its endpoint sent a sampling input request without an object \
                                `params`"
                            .to_string(),
                    )
                }
            },
            Some("secret") => {
                let name = request.get("name").and_then(Value::as_str);
                let message = request.get("message").and_then(Value::as_str);
                match (name, message) {
                    (Some(name), Some(message))
                        if crate::elicitation::valid_name(name) && !message.trim().is_empty() =>
                    {
                        InputRequest::Secret {
                            name: name.to_string(),
                            message: message.to_string(),
                        }
                    }
                    _ => {
                        return Err("its endpoint sent a secret input request without a `name` \
                                    (1-64 letters, digits, `_`, `-` or `.`) and a non-empty \
                                    string `message`"
                            .to_string())
                    }
                }
            }
            other => {
                return Err(format!(
                    "its endpoint sent an input request of unsupported type {} (expected \
                     \"elicitation\", \"sampling\" or \"secret\")",
                    other.map_or_else(|| "(none)".to_string(), |t| format!("{t:?}"))
                ))
            }
        };
        return Ok(Answer::Input { request, state });
    }
    if object.contains_key("content") || object.contains_key("structuredContent") {
        return tool_result(object).map(Answer::Result);
    }
    let keys: Vec<&str> = object.keys().take(8).map(String::as_str).collect();
    Err(format!(
        "its endpoint's answer is neither a tool result (with a `content` array) nor an input \
         request (with `input_request`); it has the keys [{}]",
        keys.join(", ")
    ))
}

/// What is wrong with a content block, if anything: not an object with a `type` MCP defines,
/// or without the fields its type requires (MCP schema: `TextContent.text`,
/// `ImageContent`/`AudioContent` `data` and `mimeType`, `ResourceLink` `uri` and `name`,
/// `EmbeddedResource.resource` with a `uri` and its `text` or `blob`), all strings.
fn block_problem(block: &Value) -> Option<String> {
    let string = |v: &Value, key: &str| v.get(key).is_some_and(Value::is_string);
    let (complete, required) = match block.get("type").and_then(Value::as_str) {
        Some("text") => (string(block, "text"), "a string `text`"),
        Some("image" | "audio") => (
            string(block, "data") && string(block, "mimeType"),
            "string `data` and `mimeType`",
        ),
        Some("resource_link") => (
            string(block, "uri") && string(block, "name"),
            "string `uri` and `name`",
        ),
        Some("resource") => (
            block
                .get("resource")
                .is_some_and(|r| string(r, "uri") && (string(r, "text") || string(r, "blob"))),
            "a `resource` with a string `uri` and a string `text` or `blob`",
        ),
        _ => {
            return Some(format!(
                "that is not an object with a `type` MCP defines ({})",
                CONTENT_TYPES.join(", ")
            ))
        }
    };
    (!complete).then(|| format!("without {required}"))
}

/// The `CallToolResult` passed on to the client: only `content`, `structuredContent`, `isError`
/// and `_meta`, moved out of the endpoint's answer (never copied: an answer may be megabytes).
/// Public for the fuzz targets (`fuzz/fuzz_targets/webhook_response.rs`).
pub fn tool_result(mut object: Map<String, Value>) -> Result<Value, String> {
    let structured = match object.remove("structuredContent") {
        None | Some(Value::Null) => None,
        Some(s @ Value::Object(_)) => Some(s),
        Some(_) => {
            return Err(
                "its endpoint returned a `structuredContent` that is not a JSON object".to_string(),
            )
        }
    };
    let content = match (object.remove("content"), &structured) {
        (Some(Value::Array(items)), _) => {
            if let Some((i, problem)) = items
                .iter()
                .enumerate()
                .find_map(|(i, item)| block_problem(item).map(|p| (i, p)))
            {
                return Err(format!(
                    "its endpoint returned a content block (index {i}) {problem}"
                ));
            }
            Value::Array(items)
        }
        (None | Some(Value::Null), Some(s)) => json!([text_content(s.to_string())]),
        _ => {
            return Err(
                "its endpoint returned a tool result whose `content` is not an array".to_string(),
            )
        }
    };
    let is_error = match object.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(
                "its endpoint returned a tool result whose `isError` is not a boolean".to_string(),
            )
        }
    };
    let mut result = Map::new();
    result.insert("content".into(), content);
    if let Some(structured) = structured {
        result.insert("structuredContent".into(), structured);
    }
    result.insert("isError".into(), Value::Bool(is_error));
    if let Some(meta @ Value::Object(_)) = object.remove("_meta") {
        result.insert("_meta".into(), meta);
    }
    Ok(Value::Object(result))
}

/// Validates `structuredContent` against the tool's output schema.
pub(super) fn check_output(
    schema: &Result<jsonschema::Validator, SchemaError>,
    result: &Value,
) -> Result<(), String> {
    let Some(structured) = result.get("structuredContent") else {
        return Err(
            "its result has no `structuredContent`, but the tool declares an \
                    outputSchema that requires one"
                .to_string(),
        );
    };
    let validator = schema
        .as_ref()
        .map_err(|e| format!("the tool's outputSchema {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(structured)
        .take(100)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "(root)".to_string()
            } else {
                path
            };
            format!("at {path}: {}", excerpt(e.to_string().as_bytes(), false))
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut message = format!(
        "its structuredContent does not match the tool's outputSchema: {}",
        errors[..errors.len().min(SCHEMA_ERRORS_SHOWN)].join("; ")
    );
    if errors.len() > SCHEMA_ERRORS_SHOWN {
        message.push_str(&format!(
            " (and {} more)",
            errors.len() - SCHEMA_ERRORS_SHOWN
        ));
    }
    Err(message)
}
