//! Webhook responses: a 2xx body from a tenant's endpoint, parsed as JSON and turned into the
//! `CallToolResult` passed to the client (`tools::webhook::tool_result`). The input-request
//! branch of the classifier (`parse_answer`) is private with private types; its result branch is
//! this function.
//!
//! Input: the response body.
//!
//! Invariants:
//! - acceptance is exactly the documented rule: `content` an array of objects whose `type` is
//!   one MCP defines (text, image, audio, resource, resource_link) with the string fields that
//!   type requires (or `content` absent/null when `structuredContent` is present),
//!   `structuredContent` an object
//!   or absent/null, `isError` a boolean or absent/null;
//! - the result holds only `content`, `isError` (always, a boolean), `structuredContent` (the
//!   endpoint's, unchanged) and `_meta` (the endpoint's, when an object);
//! - `content` is the endpoint's, unchanged, or one text block with exactly the JSON text of
//!   `structuredContent` when it sent none;
//! - sanitising is idempotent: the result, sent again, comes back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::tools::webhook::tool_result;
use serde_json::{Map, Value};

/// The content block types MCP defines (written out here, not taken from the code under test).
fn known(kind: &str) -> bool {
    matches!(
        kind,
        "text" | "image" | "audio" | "resource" | "resource_link"
    )
}

/// A block of a known type with the string fields MCP's schema requires of it.
fn complete(b: &Map<String, Value>) -> bool {
    let has = |o: &Map<String, Value>, k: &str| matches!(o.get(k), Some(Value::String(_)));
    match b.get("type").and_then(Value::as_str) {
        Some("text") => has(b, "text"),
        Some("image" | "audio") => has(b, "data") && has(b, "mimeType"),
        Some("resource_link") => has(b, "uri") && has(b, "name"),
        Some("resource") => match b.get("resource") {
            Some(Value::Object(r)) => has(r, "uri") && (has(r, "text") || has(r, "blob")),
            _ => false,
        },
        _ => false,
    }
}

fn expected_ok(o: &Map<String, Value>) -> bool {
    let structured = match o.get("structuredContent") {
        None | Some(Value::Null) => None,
        Some(s @ Value::Object(_)) => Some(s),
        Some(_) => return false,
    };
    let content_ok = match o.get("content") {
        Some(Value::Array(items)) => items.iter().all(|i| {
            i.as_object().is_some_and(|b| {
                b.get("type").and_then(Value::as_str).is_some_and(known) && complete(b)
            })
        }),
        None | Some(Value::Null) => structured.is_some(),
        Some(_) => false,
    };
    content_ok && matches!(o.get("isError"), None | Some(Value::Null | Value::Bool(_)))
}

fuzz_target!(|body: &[u8]| {
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let outcome = tool_result(answer.clone());
    assert_eq!(
        outcome.is_ok(),
        expected_ok(&answer),
        "{answer:?} → {outcome:?}"
    );
    let result = match outcome {
        Ok(r) => r,
        Err(message) => {
            assert!(message.starts_with("its endpoint returned"), "{message}");
            return;
        }
    };
    let r = result.as_object().expect("a result is an object");
    for key in r.keys() {
        assert!(
            matches!(
                key.as_str(),
                "content" | "structuredContent" | "isError" | "_meta"
            ),
            "{key} passed on"
        );
    }
    assert_eq!(
        r["isError"],
        Value::Bool(
            answer
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        )
    );
    let structured = answer.get("structuredContent").filter(|s| s.is_object());
    assert_eq!(r.get("structuredContent"), structured);
    assert_eq!(
        r.get("_meta"),
        answer.get("_meta").filter(|m| m.is_object())
    );
    match answer.get("content").filter(|c| !c.is_null()) {
        Some(content) => assert_eq!(&r["content"], content),
        None => {
            let blocks = r["content"].as_array().expect("content");
            assert_eq!(blocks.len(), 1);
            assert_eq!(blocks[0]["type"], "text");
            let text = blocks[0]["text"].as_str().expect("text");
            // Compared as text: serde_json (with the `raw_value` feature sqlx turns on) does not
            // read back an object whose sorted keys start with "$serde_json::private::RawValue"
            // (fuzzing found this; the text itself is the right JSON).
            let structured = structured.expect("no content, so structuredContent");
            assert_eq!(
                text,
                serde_json::to_string(structured).unwrap(),
                "the text block is not the JSON of structuredContent"
            );
        }
    }
    assert_eq!(
        tool_result(r.clone()).as_ref(),
        Ok(&result),
        "sanitising again changed it"
    );
});
