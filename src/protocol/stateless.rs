//! The request metadata of the stateless revision (2026-07-28) and its HTTP mirror: the `_meta`
//! every request carries (protocol version, client capabilities and identity, log level), the
//! errors that revision defines, and the header rules of Streamable HTTP (`Mcp-Method`,
//! `Mcp-Name`, `Mcp-Param-{Name}` from `x-mcp-header` tool parameters, the Base64 sentinel
//! encoding). Pure: no I/O.

use std::borrow::Cow;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};

use super::jsonrpc::{Request, RpcError};
use super::mcp::LogLevel;
use super::ProtocolVersion;

pub use super::meta::{
    WireMeta, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_SERVER_INFO, META_SUBSCRIPTION_ID,
};

/// The HTTP headers are missing, malformed or do not match the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability the request did not declare.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// The protocol version is not one this server serves.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";

pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
        .with_data(json!({ "supported": ProtocolVersion::SUPPORTED, "requested": requested }))
}

pub fn header_mismatch(message: impl Into<String>) -> RpcError {
    RpcError::new(
        HEADER_MISMATCH,
        format!("Header mismatch: {}", message.into()),
    )
}

pub fn missing_capability(message: impl Into<String>, required: Value) -> RpcError {
    RpcError::new(MISSING_CLIENT_CAPABILITY, message)
        .with_data(json!({ "requiredCapabilities": required }))
}

/// What a stateless request says about itself in `params._meta`.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub version: ProtocolVersion,
    pub client_capabilities: Arc<Value>,
    /// `None`: the client did not opt in to log messages for this request.
    pub log_level: Option<LogLevel>,
    /// `_meta.progressToken` (a string or an integer), when the client wants progress.
    pub progress_token: Option<Value>,
}

/// The client capabilities `{}`, shared.
fn no_capabilities() -> Arc<Value> {
    static NONE: std::sync::OnceLock<Arc<Value>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| Arc::new(Value::Object(Map::new())))
        .clone()
}

/// The protocol version a message's `_meta` names, if any.
pub fn meta_version(meta: Option<&WireMeta>) -> Option<&Value> {
    meta?.protocol_version.as_ref()
}

impl RequestMeta {
    /// Reads a request's `_meta`: this revision's keys (as the parser set them apart) and the
    /// progress token, taken out of the params (moved, not copied). Errors: no or unknown
    /// protocol version (-32022), missing or malformed capabilities or log level (-32602).
    pub fn take(request: &mut Request) -> Result<RequestMeta, RpcError> {
        let Some(wire) = request.meta.take() else {
            return Err(RpcError::invalid_params(format!(
                "params._meta is required and must name {META_PROTOCOL_VERSION} and \
                 {META_CLIENT_CAPABILITIES}"
            )));
        };
        let progress_token = match request.params.as_mut() {
            Some(Value::Object(params)) => match params.get_mut("_meta") {
                Some(Value::Object(meta)) => meta
                    .remove("progressToken")
                    .filter(|t| t.is_string() || t.is_i64() || t.is_u64()),
                _ => None,
            },
            _ => None,
        };
        if let Some(Value::Object(params)) = request.params.as_mut() {
            params.remove("_meta");
        }
        Self::read(*wire, progress_token)
    }

    fn read(wire: WireMeta, progress_token: Option<Value>) -> Result<RequestMeta, RpcError> {
        let requested = match &wire.protocol_version {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {
                return Err(RpcError::invalid_params(format!(
                    "_meta.{META_PROTOCOL_VERSION} must be a string"
                )))
            }
            None => {
                return Err(RpcError::invalid_params(format!(
                    "_meta.{META_PROTOCOL_VERSION} is required"
                )))
            }
        };
        let version = ProtocolVersion::parse_modern(requested)
            .ok_or_else(|| unsupported_version(requested))?;
        let client_capabilities = match wire.client_capabilities {
            // Most clients declare none per request: one shared `{}` (no allocation).
            Some(Value::Object(m)) if m.is_empty() => no_capabilities(),
            Some(v @ Value::Object(_)) => Arc::new(v),
            Some(_) => {
                return Err(RpcError::invalid_params(format!(
                    "_meta.{META_CLIENT_CAPABILITIES} must be an object"
                )))
            }
            None => {
                return Err(RpcError::invalid_params(format!(
                    "_meta.{META_CLIENT_CAPABILITIES} is required (an empty object declares none)"
                )))
            }
        };
        let log_level = match &wire.log_level {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(LogLevel::parse).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "_meta.{META_LOG_LEVEL} must be a logging level (debug … emergency)"
                ))
            })?),
        };
        Ok(RequestMeta {
            version,
            client_capabilities,
            log_level,
            progress_token,
        })
    }
}

/// Which body field `Mcp-Name` mirrors for a method (`None`: the header is not used).
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Decodes a header value that may use the Base64 sentinel (`=?base64?…?=`). `None` when the
/// value holds characters a header value may not carry, or a malformed encoding. A plain value
/// is borrowed.
pub fn decode_header_value(raw: &[u8]) -> Option<Cow<'_, str>> {
    if !raw
        .iter()
        .all(|&b| b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b))
    {
        return None;
    }
    let text = std::str::from_utf8(raw).ok()?;
    match text
        .strip_prefix(SENTINEL_START)
        .and_then(|rest| rest.strip_suffix(SENTINEL_END))
    {
        Some(encoded) => String::from_utf8(STANDARD.decode(encoded).ok()?)
            .ok()
            .map(Cow::Owned),
        None => Some(Cow::Borrowed(text)),
    }
}

/// How a client writes a value into a header (the inverse of [`decode_header_value`]).
pub fn encode_header_value(value: &str) -> String {
    let printable = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    if !value.is_empty() && printable && !padded && !looks_encoded {
        value.to_string()
    } else {
        format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value))
    }
}

/// A tool parameter mirrored into a header: `Mcp-Param-{name}` carries the argument at `path`
/// (the chain of `properties` keys leading to it).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

/// The `x-mcp-header` annotations of a tool's `inputSchema`. An annotation is valid on a
/// property reached through `properties` only (an annotation anywhere else makes the schema
/// invalid), with a primitive type (string, integer, boolean; not number), a name of HTTP token
/// characters, unique case-insensitively;
/// `Err` names the first violation.
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    walk_properties(input_schema, &mut Vec::new(), &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for h in &found {
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is declared twice", h.name));
        }
    }
    Ok(found)
}

fn walk_properties(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Ok(());
    };
    for (keyword, value) in object {
        if keyword == "properties" {
            continue;
        }
        // Only a chain of `properties` keys reaches an annotation statically: one under
        // `items`, a composition or conditional keyword, `$defs`, … makes the tool invalid.
        if keyword == HEADER_ANNOTATION || annotated_within(value) {
            let at = if path.is_empty() {
                "the schema root".to_string()
            } else {
                format!("{:?}", path.join("."))
            };
            return Err(format!(
                "x-mcp-header is only allowed on properties reached through `properties` alone \
                 (found under {keyword:?} of {at})"
            ));
        }
    }
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (key, property) in properties {
        path.push(key.clone());
        match property.get(HEADER_ANNOTATION) {
            Some(name) => {
                found.push(annotated(name, property, path)?);
                // Nothing below a primitive property may be annotated.
                if property.as_object().is_some_and(|o| {
                    o.iter()
                        .any(|(k, v)| k != HEADER_ANNOTATION && annotated_within(v))
                }) {
                    return Err(format!(
                        "x-mcp-header is only allowed on properties reached through `properties` \
                         alone (found inside {:?})",
                        path.join(".")
                    ));
                }
            }
            None => walk_properties(property, path, found)?,
        }
        path.pop();
    }
    Ok(())
}

const HEADER_ANNOTATION: &str = "x-mcp-header";

/// Whether an `x-mcp-header` key occurs anywhere in `value`.
fn annotated_within(value: &Value) -> bool {
    match value {
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| k == HEADER_ANNOTATION || annotated_within(v)),
        Value::Array(items) => items.iter().any(annotated_within),
        _ => false,
    }
}

/// An annotated property's header: a name of HTTP token characters (`1*tchar`, RFC 9110) on
/// a string, integer or boolean property (`number` is not allowed).
fn annotated(name: &Value, property: &Value, path: &[String]) -> Result<ParamHeader, String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let name = name
        .as_str()
        .filter(|n| !n.is_empty() && n.bytes().all(tchar))
        .ok_or_else(|| {
            format!(
                "x-mcp-header on {:?} must be a non-empty HTTP token (letters, digits and \
                 !#$%&'*+-.^_`|~)",
                path.join(".")
            )
        })?;
    let primitive = matches!(
        property.get("type").and_then(Value::as_str),
        Some("string" | "integer" | "boolean")
    );
    if !primitive {
        return Err(format!(
            "x-mcp-header {name:?} must annotate a string, integer or boolean property"
        ));
    }
    Ok(ParamHeader {
        name: name.to_string(),
        path: path.to_vec(),
    })
}

/// The argument at `path` in a call's arguments (`None` when absent or null).
pub fn argument_at<'a>(arguments: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = arguments.get(first)?;
    for key in rest {
        value = value.get(key)?;
    }
    (!value.is_null()).then_some(value)
}

/// Whether a decoded header value stands for `body`. Numbers compare numerically, the header
/// being a decimal number (`42`, `42.0` and `4.2e1` all stand for 42; `inf`, `0x2A` or ` 42`
/// for nothing). An integer compares exactly, never through a float: in `f64`,
/// `9007199254740993` would pass for 9007199254740992, letting a header that a load balancer
/// routes on name another value than the body the server acts on. A float compares as a float:
/// printers differ in the last digit of a float's shortest spelling (`562949953421344.3` and
/// `…344.2` are the same `f64`).
/// Whether a number is an integer JavaScript holds exactly (−(2^53−1) to 2^53−1), as
/// `x-mcp-header` integer values must be; `42.0` counts as the integer it is.
pub fn within_safe_integer_range(n: &serde_json::Number) -> bool {
    const MAX: u64 = (1 << 53) - 1;
    if let Some(i) = n.as_i64() {
        return i.unsigned_abs() <= MAX;
    }
    if n.is_u64() {
        return false;
    }
    n.as_f64()
        .is_some_and(|f| f.fract() == 0.0 && f.abs() <= MAX as f64)
}

pub fn header_matches(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match decimal(header) {
            None => false,
            Some(_) if n.is_f64() => header.parse::<f64>().ok() == n.as_f64(),
            Some(h) => decimal(&n.to_string()) == Some(h),
        },
        _ => false,
    }
}

/// A decimal number (an optional sign, digits with an optional fraction, an optional exponent)
/// as its sign, significant digits and power of ten, one spelling per value: `-12.50e1` is
/// (true, "125", 0), every zero is (false, "", 0). `None` for anything else (`inf`, `0x10`,
/// ` 1`).
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = || whole.bytes().chain(fraction.bytes());
    if whole.len() + fraction.len() == 0 || !digits().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = digits().map(char::from).collect();
    let leading = digits.trim_start_matches('0');
    if leading.is_empty() {
        return Some((false, String::new(), 0));
    }
    let significant = leading.trim_end_matches('0');
    let exponent = exponent
        .checked_sub(i64::try_from(fraction.len()).ok()?)?
        .checked_add(i64::try_from(leading.len() - significant.len()).ok()?)?;
    Some((negative, significant.to_string(), exponent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_integers_stay_within_javascripts_safe_range() {
        let n = |text: &str| serde_json::from_str::<serde_json::Number>(text).unwrap();
        for safe in [
            "0",
            "42",
            "-7",
            "42.0",
            "9007199254740991",
            "-9007199254740991",
        ] {
            assert!(within_safe_integer_range(&n(safe)), "{safe}");
        }
        for unsafe_ in [
            "9007199254740992",
            "-9007199254740992",
            "18446744073709551615",
            "1.5",
            "1e300",
        ] {
            assert!(!within_safe_integer_range(&n(unsafe_)), "{unsafe_}");
        }
    }

    #[test]
    fn meta_is_read_and_checked() {
        let request = |params: Value| -> Request {
            let body =
                json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
            match super::super::jsonrpc::parse_payload(body.to_string().as_bytes()) {
                Ok(super::super::Payload::Single(super::super::Message::Request(r))) => r,
                other => panic!("not a request: {other:?}"),
            }
        };
        let mut taken = request(json!({ "_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: { "elicitation": {} },
            META_CLIENT_INFO: { "name": "c", "version": "1" },
            META_LOG_LEVEL: "info",
            "progressToken": 7,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        }, "name": "echo" }));
        let meta = RequestMeta::take(&mut taken).expect("valid meta");
        assert_eq!(meta.version, ProtocolVersion::V2026_07_28);
        assert_eq!(meta.log_level, Some(LogLevel::Info));
        assert_eq!(meta.progress_token, Some(json!(7)));
        assert_eq!(*meta.client_capabilities, json!({ "elicitation": {} }));
        // The _meta is taken out of the params; the rest stays.
        assert_eq!(taken.params, Some(json!({ "name": "echo" })));
        let mut old = request(
            json!({ "_meta": { META_PROTOCOL_VERSION: "2025-11-25", META_CLIENT_CAPABILITIES: {} } }),
        );
        let e = RequestMeta::take(&mut old).expect_err("session-era version");
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.as_ref().expect("data")["requested"], "2025-11-25");
        for (params, why) in [
            (
                json!({ "_meta": { META_PROTOCOL_VERSION: "2026-07-28" } }),
                "is required",
            ),
            (
                json!({ "_meta": { META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: [] } }),
                "must be an object",
            ),
            (
                json!({ "_meta": { META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: {} } }),
                "must be a string",
            ),
            (
                json!({ "_meta": { META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, META_LOG_LEVEL: "loud" } }),
                "logging level",
            ),
            (json!({ "_meta": 5 }), "params._meta is required"),
            (json!({ "name": "echo" }), "params._meta is required"),
        ] {
            let e = RequestMeta::take(&mut request(params.clone())).expect_err("invalid");
            assert_eq!(e.code, super::super::jsonrpc::INVALID_PARAMS, "{params}");
            assert!(e.message.contains(why), "{params}: {}", e.message);
        }
    }

    #[test]
    fn split_and_restore_are_inverse() {
        let params = json!({ "name": "x", "_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: { "roots": {} },
            META_LOG_LEVEL: "debug",
            "progressToken": "p",
        }});
        let mut map = params.as_object().expect("object").clone();
        let wire = WireMeta::split(&mut map).expect("a _meta object");
        assert_eq!(wire.protocol_version, Some(json!("2026-07-28")));
        assert_eq!(
            Value::Object(map.clone()),
            json!({ "name": "x", "_meta": { "progressToken": "p" } })
        );
        wire.restore(&mut map);
        assert_eq!(Value::Object(map), params);
        // Nothing else in _meta: it goes.
        let mut only = json!({ "_meta": { META_CLIENT_INFO: { "name": "c" } } });
        let only = only.as_object_mut().expect("object");
        assert_eq!(WireMeta::split(only), Some(WireMeta::default()));
        assert!(only.is_empty());
        assert_eq!(WireMeta::split(&mut Map::new()), None);
    }

    #[test]
    fn header_values_round_trip_through_the_sentinel() {
        for v in [
            "us-west1",
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?literal?=",
        ] {
            let encoded = encode_header_value(v);
            assert_eq!(decode_header_value(encoded.as_bytes()).as_deref(), Some(v));
        }
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(decode_header_value(b"bad\x01value"), None);
        assert_eq!(decode_header_value(b"=?base64?!!!?="), None);
    }

    #[test]
    fn numbers_in_headers_compare_by_exact_value() {
        for (header, body) in [
            ("42", json!(42)),
            ("42.0", json!(42)),
            ("4.2e1", json!(42)),
            ("+42", json!(42)),
            ("042", json!(42)),
            ("-7", json!(-7)),
            ("0", json!(0)),
            ("-0.0", json!(0)),
            ("9007199254740993", json!(9_007_199_254_740_993_u64)),
            ("18446744073709551615", json!(u64::MAX)),
            ("-9223372036854775808", json!(i64::MIN)),
            ("0.1", json!(0.1)),
            ("0.10000000000000001", json!(0.1)),
            ("1.5e-7", json!(1.5e-7)),
            ("100000000000000000000", json!(1e20)),
            ("42", json!(42.0)),
        ] {
            assert!(header_matches(header, &body), "{header} vs {body}");
        }
        for (header, body) in [
            // One apart, beyond what an f64 holds exactly: equal as floats, not as numbers.
            ("9007199254740992", json!(9_007_199_254_740_993_u64)),
            ("18446744073709551614", json!(u64::MAX)),
            ("42.0000000000000001", json!(42)),
            ("-42", json!(42)),
            ("43", json!(42)),
            ("0.2", json!(0.1)),
            ("inf", json!(f64::MAX)),
            ("infinity", json!(f64::MAX)),
            ("NaN", json!(0)),
            ("0x2A", json!(42)),
            (" 42", json!(42)),
            ("42 ", json!(42)),
            ("4_2", json!(42)),
            ("", json!(0)),
            (".", json!(0)),
            ("1e", json!(1)),
            ("--1", json!(-1)),
            ("1e99999999999999999999", json!(1)),
        ] {
            assert!(!header_matches(header, &body), "{header} vs {body}");
        }
        assert!(header_matches("true", &json!(true)));
        assert!(!header_matches("True", &json!(true)));
        assert!(!header_matches("1", &json!(true)));
        assert!(!header_matches("42", &json!("42.0")));
        assert!(!header_matches("", &Value::Null));
    }

    #[test]
    fn x_mcp_header_annotations_are_found_and_validated() {
        let schema = json!({ "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "nested": { "type": "object", "properties": { "n": { "type": "integer", "x-mcp-header": "N" } } },
            "query": { "type": "string" },
        }});
        let found = param_headers(&schema).expect("valid");
        assert!(found.contains(&ParamHeader {
            name: "Region".into(),
            path: vec!["region".into()]
        }));
        assert!(found.contains(&ParamHeader {
            name: "N".into(),
            path: vec!["nested".into(), "n".into()]
        }));
        let bad = json!({ "properties": { "o": { "type": "object", "x-mcp-header": "O" } } });
        assert!(param_headers(&bad).is_err());
        let twice = json!({ "properties": {
            "a": { "type": "string", "x-mcp-header": "X" }, "b": { "type": "string", "x-mcp-header": "x" } } });
        assert!(param_headers(&twice).is_err());
        // The revision's other constraints: tchar names, no `number`, static reachability.
        for bad in [
            json!({ "properties": { "a": { "type": "string", "x-mcp-header": "A/B" } } }),
            json!({ "properties": { "a": { "type": "string", "x-mcp-header": "A B" } } }),
            json!({ "properties": { "a": { "type": "string", "x-mcp-header": "" } } }),
            json!({ "properties": { "a": { "type": "number", "x-mcp-header": "A" } } }),
            json!({ "properties": { "a": { "type": "array", "items": { "type": "string", "x-mcp-header": "A" } } } }),
            json!({ "oneOf": [{ "properties": { "a": { "type": "string", "x-mcp-header": "A" } } }] }),
            json!({ "$defs": { "d": { "type": "string", "x-mcp-header": "A" } }, "properties": {} }),
            json!({ "properties": { "a": { "type": "string", "x-mcp-header": "A",
                "not": { "x-mcp-header": "B" } } } }),
            json!({ "properties": { "o": { "type": "object", "allOf": [{ "properties": {
                "p": { "type": "string", "x-mcp-header": "P" } } }] } } }),
        ] {
            assert!(param_headers(&bad).is_err(), "{bad}");
        }
        let tokens = json!({ "properties": { "a": { "type": "boolean", "x-mcp-header": "Tenant-Id_2.x~!" } } });
        assert_eq!(
            param_headers(&tokens).expect("valid")[0].name,
            "Tenant-Id_2.x~!"
        );
        let args = json!({ "nested": { "n": 42 } });
        let args = args.as_object().expect("object");
        assert!(header_matches(
            "42.0",
            argument_at(args, &found[0].path)
                .or(argument_at(args, &found[1].path))
                .expect("n")
        ));
    }
}
