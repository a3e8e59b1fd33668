//! The request metadata of the stateless revision (2026-07-28) and its HTTP mirror: the `_meta`
//! every request carries (protocol version, client capabilities and identity, log level), the
//! errors that revision defines, and the header rules of Streamable HTTP (`Mcp-Method`,
//! `Mcp-Name`, `Mcp-Param-{Name}` from `x-mcp-header` tool parameters, the Base64 sentinel
//! encoding). Pure: no I/O.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};

use super::jsonrpc::RpcError;
use super::mcp::LogLevel;
use super::ProtocolVersion;

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

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
    pub client_info: Option<Value>,
    /// `None`: the client did not opt in to log messages for this request.
    pub log_level: Option<LogLevel>,
    /// `_meta.progressToken` (a string or an integer), when the client wants progress.
    pub progress_token: Option<Value>,
}

/// The protocol version a request's `_meta` names, if any.
pub fn meta_version(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get(META_PROTOCOL_VERSION)
}

impl RequestMeta {
    /// Takes the `_meta` out of a request's params (its parts are moved, not copied) and reads
    /// it. Errors: no or unknown protocol version (-32022), missing or malformed capabilities
    /// or log level (-32602).
    pub fn take(params: Option<&mut Value>) -> Result<RequestMeta, RpcError> {
        let meta = match params
            .and_then(Value::as_object_mut)
            .and_then(|p| p.remove("_meta"))
        {
            Some(Value::Object(meta)) => meta,
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "params._meta is required and must name {META_PROTOCOL_VERSION} and \
                     {META_CLIENT_CAPABILITIES}"
                )))
            }
        };
        Self::read(meta)
    }

    fn read(mut meta: Map<String, Value>) -> Result<RequestMeta, RpcError> {
        let requested = match meta.get(META_PROTOCOL_VERSION) {
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
        let client_capabilities = match meta.remove(META_CLIENT_CAPABILITIES) {
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
        let log_level = match meta.get(META_LOG_LEVEL) {
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
            client_info: meta.remove(META_CLIENT_INFO),
            log_level,
            progress_token: meta
                .remove("progressToken")
                .filter(|t| t.is_string() || t.is_i64() || t.is_u64()),
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
/// value holds characters a header value may not carry, or a malformed encoding.
pub fn decode_header_value(raw: &[u8]) -> Option<String> {
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
        Some(encoded) => String::from_utf8(STANDARD.decode(encoded).ok()?).ok(),
        None => Some(text.to_string()),
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
/// property reached through `properties` only, with a primitive type (string, integer, number,
/// boolean), a non-empty name of visible ASCII without ':' and unique case-insensitively;
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
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(name) = property.get("x-mcp-header") {
            let name = name
                .as_str()
                .filter(|n| {
                    !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b':')
                })
                .ok_or_else(|| {
                    format!(
                        "x-mcp-header on {:?} must be a non-empty header-safe name",
                        path.join(".")
                    )
                })?;
            let primitive = matches!(
                property.get("type").and_then(Value::as_str),
                Some("string" | "integer" | "number" | "boolean")
            );
            if !primitive {
                return Err(format!(
                    "x-mcp-header {name:?} must annotate a string, integer, number or boolean"
                ));
            }
            found.push(ParamHeader {
                name: name.to_string(),
                path: path.clone(),
            });
        } else {
            walk_properties(property, path, found)?;
        }
        path.pop();
    }
    Ok(())
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

/// Whether a decoded header value stands for `body` (numbers compare numerically).
pub fn header_matches(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match (header.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => h == b,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_read_and_checked() {
        let params = json!({ "_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: { "elicitation": {} },
            META_LOG_LEVEL: "info",
            "progressToken": 7,
        }, "name": "echo" });
        let mut taken = params.clone();
        let meta = RequestMeta::take(Some(&mut taken)).expect("valid meta");
        assert_eq!(meta.version, ProtocolVersion::V2026_07_28);
        assert_eq!(meta.log_level, Some(LogLevel::Info));
        assert_eq!(meta.progress_token, Some(json!(7)));
        assert_eq!(*meta.client_capabilities, json!({ "elicitation": {} }));
        // The _meta is taken out of the params; the rest stays.
        assert_eq!(taken, json!({ "name": "echo" }));
        let old = json!({ "_meta": { META_PROTOCOL_VERSION: "2025-11-25", META_CLIENT_CAPABILITIES: {} } });
        let e = RequestMeta::take(Some(&mut old.clone())).expect_err("session-era version");
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.as_ref().expect("data")["requested"], "2025-11-25");
        let no_caps = json!({ "_meta": { META_PROTOCOL_VERSION: "2026-07-28" } });
        assert_eq!(
            RequestMeta::take(Some(&mut no_caps.clone()))
                .expect_err("caps")
                .code,
            super::super::jsonrpc::INVALID_PARAMS
        );
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
