//! JSON-RPC framing and batches (`protocol::jsonrpc::parse_payload`, `classify`,
//! `encode_response`): an HTTP body of arbitrary bytes.
//!
//! Invariants:
//! - a body is refused only with -32700 (not JSON) or -32600 (not a message / empty batch), and
//!   a non-JSON body is always -32700;
//! - a batch keeps one entry per element, in order, each as `classify` sees that element alone;
//! - every message that parses re-serialises (as the server would write it) and parses back to
//!   the same value, and again to the same bytes;
//! - a response's outcome survives `encode_response` (the server's own encoder) unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::protocol::jsonrpc::{
    classify, encode_response, parse_payload, INVALID_REQUEST, PARSE_ERROR,
};
use mcp_harbor::protocol::stateless::WireMeta;
use mcp_harbor::protocol::{Message, Payload};
use serde_json::{json, Map, Value};

/// A message's params as the client wrote them: with the stateless revision's `_meta` keys
/// (set apart by the parser) put back.
fn wire_params(params: &Option<Value>, meta: Option<&WireMeta>) -> Option<Value> {
    let Some(meta) = meta else {
        return params.clone();
    };
    let mut params = match params {
        Some(Value::Object(p)) => p.clone(),
        _ => Map::new(),
    };
    meta.restore(&mut params);
    Some(Value::Object(params))
}

/// A message as a client writes it (params omitted when absent).
fn encode(m: &Message) -> Value {
    let mut out = Map::new();
    out.insert("jsonrpc".into(), json!("2.0"));
    match m {
        Message::Request(r) => {
            out.insert("id".into(), r.id.to_value());
            out.insert("method".into(), json!(r.method));
            if let Some(p) = wire_params(&r.params, r.meta.as_deref()) {
                out.insert("params".into(), p);
            }
        }
        Message::Notification(n) => {
            out.insert("method".into(), json!(n.method));
            if let Some(p) = wire_params(&n.params, n.meta.as_deref()) {
                out.insert("params".into(), p);
            }
        }
        Message::Response(r) => match &r.id {
            Some(id) => {
                return serde_json::from_slice(&encode_response(id, &r.outcome))
                    .expect("encode_response writes JSON");
            }
            // An error response whose sender could not read the request's id.
            None => {
                let error = r
                    .outcome
                    .as_ref()
                    .expect_err("only errors go without an id");
                out.insert(
                    "error".into(),
                    serde_json::to_value(error).expect("an error serialises"),
                );
            }
        },
    }
    Value::Object(out)
}

fn round_trip(m: &Message) {
    let text = serde_json::to_vec(&encode(m)).expect("serialises");
    let again = match parse_payload(&text) {
        Ok(Payload::Single(again)) => again,
        other => panic!("{m:?} re-serialised as {text:?} parsed as {other:?}"),
    };
    // Floats may move by one ULP on the first parse (serde_json without float_roundtrip):
    // compare what the re-serialised text parses to, twice.
    let text2 = serde_json::to_vec(&encode(&again)).expect("serialises");
    match parse_payload(&text2) {
        Ok(Payload::Single(third)) => {
            assert_eq!(third, again, "second round trip changed the message");
            assert_eq!(
                serde_json::to_vec(&encode(&third)).unwrap(),
                text2,
                "encoding is not stable"
            );
        }
        other => panic!("second round trip failed: {other:?}"),
    }
    if !has_float(&text) {
        assert_eq!(&again, m, "round trip through {text:?} changed the message");
    }
}

fn has_float(text: &[u8]) -> bool {
    // Conservative: any '.', 'e' or 'E' next to a digit may be a float somewhere.
    text.windows(2).any(|w| {
        (w[0].is_ascii_digit() && matches!(w[1], b'.' | b'e' | b'E'))
            || (matches!(w[0], b'.' | b'e' | b'E') && w[1].is_ascii_digit())
    })
}

fuzz_target!(|body: &[u8]| {
    let as_json = serde_json::from_slice::<Value>(body);
    match parse_payload(body) {
        Err(e) => {
            assert!(
                e.code == PARSE_ERROR || e.code == INVALID_REQUEST,
                "unexpected code {}",
                e.code
            );
            assert_eq!(as_json.is_err(), e.code == PARSE_ERROR);
        }
        Ok(Payload::Single(m)) => {
            let value = as_json.expect("a parsed body is JSON");
            assert!(value.is_object());
            assert_eq!(classify(value.clone()).as_ref(), Ok(&m));
            round_trip(&m);
        }
        Ok(Payload::Batch(items)) => {
            let value = as_json.expect("a parsed body is JSON");
            let elements = value.as_array().expect("a batch is an array");
            assert!(!elements.is_empty());
            assert_eq!(items.len(), elements.len());
            for (item, element) in items.iter().zip(elements) {
                assert_eq!(item, &classify(element.clone()));
                match item {
                    Ok(m) => round_trip(m),
                    Err(e) => assert_eq!(e.code, INVALID_REQUEST),
                }
            }
        }
    }
});
