//! MCP-level helpers shared by the session and the catalogs: log levels, pagination cursors,
//! content constructors and the server's advertised capabilities.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::jsonrpc::RpcError;
use super::version::ProtocolVersion;

/// RFC 5424 severities as MCP names them, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub fn parse(s: &str) -> Option<LogLevel> {
        Some(match s {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            "error" => LogLevel::Error,
            "critical" => LogLevel::Critical,
            "alert" => LogLevel::Alert,
            "emergency" => LogLevel::Emergency,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

/// Opaque pagination: a cursor names the list it belongs to and the offset of the next page.
/// Clients must treat it as opaque; a cursor from another list or a forged one is refused.
pub fn paginate(
    list: &str,
    items: &[Value],
    cursor: Option<&Value>,
    page_size: usize,
) -> Result<(Vec<Value>, Option<String>), RpcError> {
    let start = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => decode_cursor(list, c)
            .filter(|&o| o <= items.len())
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
        Some(_) => return Err(RpcError::invalid_params("Invalid cursor: must be a string")),
    };
    let page_size = page_size.max(1);
    let end = (start + page_size).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(list, end));
    Ok((items[start..end].to_vec(), next))
}

fn encode_cursor(list: &str, offset: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{list}:{offset}"))
}

fn decode_cursor(list: &str, cursor: &str) -> Option<usize> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (name, offset) = text.split_once(':')?;
    (name == list).then(|| offset.parse().ok()).flatten()
}

pub fn text_content(text: impl Into<String>) -> Value {
    // Built directly: `json!` would copy an interpolated value through its serializer.
    let mut item = Map::with_capacity(2);
    item.insert("type".into(), Value::from("text"));
    item.insert("text".into(), Value::String(text.into()));
    Value::Object(item)
}

/// A `CallToolResult` with one text item.
pub fn tool_text(text: impl Into<String>) -> Value {
    tool_result(text_content(text), false)
}

/// A tool execution error: reported in the result so the model can see it and self-correct.
pub fn tool_error(text: impl Into<String>) -> Value {
    tool_result(text_content(text), true)
}

fn tool_result(item: Value, is_error: bool) -> Value {
    let mut result = Map::with_capacity(2);
    result.insert("content".into(), Value::Array(vec![item]));
    result.insert("isError".into(), Value::Bool(is_error));
    Value::Object(result)
}

/// What this server offers, per negotiated revision.
pub fn server_capabilities(version: ProtocolVersion) -> Value {
    let mut caps = json!({
        "logging": {},
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "tools": { "listChanged": true },
    });
    if version >= ProtocolVersion::V2025_03_26 {
        caps["completions"] = json!({});
    }
    caps
}

/// Every request method of the revisions served (metrics label only these; anything else a
/// client sends is "other").
pub const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
];

pub fn is_known_method(method: &str) -> bool {
    known_method_index(method).is_some()
}

/// Where `method` is in `KNOWN_METHODS`.
pub fn known_method_index(method: &str) -> Option<usize> {
    KNOWN_METHODS.iter().position(|m| *m == method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagination_walks_all_items_and_refuses_foreign_cursors() {
        let items: Vec<Value> = (0..5).map(|i| json!(i)).collect();
        let (p1, c1) = paginate("tools", &items, None, 2).unwrap();
        assert_eq!(p1, vec![json!(0), json!(1)]);
        let c1 = Value::String(c1.unwrap());
        let (p2, c2) = paginate("tools", &items, Some(&c1), 2).unwrap();
        assert_eq!(p2, vec![json!(2), json!(3)]);
        let (p3, c3) = paginate("tools", &items, Some(&Value::String(c2.unwrap())), 2).unwrap();
        assert_eq!(p3, vec![json!(4)]);
        assert!(c3.is_none());
        assert!(paginate("prompts", &items, Some(&c1), 2).is_err());
        assert!(paginate("tools", &items, Some(&json!("garbage!")), 2).is_err());
    }

    #[test]
    fn log_levels_order() {
        assert!(LogLevel::Debug < LogLevel::Emergency);
        assert_eq!(LogLevel::parse("warning").unwrap().as_str(), "warning");
        assert!(LogLevel::parse("loud").is_none());
    }
}
