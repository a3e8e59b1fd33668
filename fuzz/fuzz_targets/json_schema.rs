//! JSON Schemas a tenant publishes (a tool's `inputSchema`, `outputSchema`) or its endpoint sends
//! (an elicitation's `requested_schema`), compiled by `protocol::schema::compile`, which refuses
//! those whose validation could cost without bound, then used to validate what clients send.
//!
//! Input: a JSON document, the schema.
//!
//! Invariants:
//! - compiling never panics, and ends (libFuzzer's `-timeout` catches one that does not);
//! - a schema it accepts validates any instance within the time limit, and `is_valid` agrees
//!   with `iter_errors` (no error exactly when valid);
//! - a refusal says why in words (its message is not empty).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::protocol::schema::compile;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    match compile(&schema) {
        Ok(validator) => {
            let long = "a".repeat(40) + "!";
            for instance in [
                json!(null),
                json!(true),
                json!(0),
                json!(-1.5),
                json!(""),
                json!(long),
                json!([]),
                json!([1, "a", null, {}]),
                json!({}),
                json!({ "a": 1, "b": "x", "c": [{ "d": {} }] }),
                schema.clone(),
            ] {
                let valid = validator.is_valid(&instance);
                let first_error = validator.iter_errors(&instance).next();
                assert_eq!(
                    valid,
                    first_error.is_none(),
                    "is_valid and iter_errors disagree on {instance}: {first_error:?}"
                );
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
