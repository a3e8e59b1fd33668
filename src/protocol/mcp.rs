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

/// Opaque pagination. A cursor names the list it belongs to, the offset of the next page and
/// the key (name, URI or URI template) of that page's first item, so a walk stays on course
/// when the list changes between pages: the next page starts at that item wherever it now is,
/// or (it was removed) at the offset. Clients must treat it as opaque; a cursor from another
/// list or a forged one is refused, and one past the end of a list that shrank gives its end.
pub fn paginate(
    list: &str,
    items: &[Value],
    cursor: Option<&Value>,
    page_size: usize,
) -> Result<(Vec<Value>, Option<String>), RpcError> {
    let start = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => decode_cursor(list, c)
            .map(|(offset, key)| resume_at(list, items, offset, &key))
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
        Some(_) => return Err(RpcError::invalid_params("Invalid cursor: must be a string")),
    };
    let page_size = page_size.max(1);
    let end = (start + page_size).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(list, end, item_key(list, &items[end])));
    Ok((items[start..end].to_vec(), next))
}

/// What identifies an item of a list: tools and prompts by name, resources by URI, templates by
/// URI template ("" for an item without one).
fn item_key<'a>(list: &str, item: &'a Value) -> &'a str {
    let field = match list {
        "resources" => "uri",
        "resourceTemplates" => "uriTemplate",
        _ => "name",
    };
    item[field].as_str().unwrap_or("")
}

/// Where the page a cursor points at starts now.
fn resume_at(list: &str, items: &[Value], offset: usize, key: &str) -> usize {
    if key.is_empty() || items.get(offset).is_some_and(|i| item_key(list, i) == key) {
        return offset.min(items.len());
    }
    items
        .iter()
        .position(|i| item_key(list, i) == key)
        .unwrap_or(offset.min(items.len()))
}

fn encode_cursor(list: &str, offset: usize, key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{list}:{offset}:{key}"))
}

/// The offset and key of a cursor of `list` (a cursor of before keys were added has none).
fn decode_cursor(list: &str, cursor: &str) -> Option<(usize, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (name, rest) = text.split_once(':')?;
    if name != list {
        return None;
    }
    let (offset, key) = rest.split_once(':').unwrap_or((rest, ""));
    Some((offset.parse().ok()?, key.to_string()))
}

/// The most resources one session, or one `subscriptions/listen` stream, follows at once: what
/// a client can make the server keep for as long as it stays connected.
pub const MAX_SUBSCRIPTIONS: usize = 256;
/// The longest resource URI (bytes) a client may follow.
pub const MAX_SUBSCRIBED_URI_BYTES: usize = 4096;

/// The most an `initialize`'s `capabilities` and `clientInfo` may take together (bytes of JSON):
/// a session keeps both for its life. Hosts send a few hundred bytes; an icon given as a
/// `data:` URI fits.
pub const MAX_CLIENT_DESCRIPTION_BYTES: usize = 64 * 1024;

/// The most requests one session has running at once (its tool calls, and any request waiting
/// in it): each holds its arguments, and goes on after its client disconnects.
pub const MAX_IN_FLIGHT: usize = 256;
/// Bytes of tool-call arguments one session keeps to run its calls again on another replica
/// after a failover (every snapshot of the session carries them); a call past it is answered as
/// interrupted instead, should its replica stop.
pub const MAX_REPLAY_BYTES: usize = 1 << 20;

/// The length of `v` as compact JSON, counted without writing it anywhere.
pub fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    match serde_json::to_writer(&mut count, v) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Whether a client may follow `uri` as well as the `following` it follows already
/// (`followed`: whether `uri` is one of them): Invalid Params saying which bound it would pass.
pub fn may_follow(uri: &str, followed: bool, following: usize) -> Result<(), RpcError> {
    if uri.len() > MAX_SUBSCRIBED_URI_BYTES {
        return Err(RpcError::invalid_params(format!(
            "a resource URI to subscribe to is at most {MAX_SUBSCRIBED_URI_BYTES} bytes"
        )));
    }
    if !followed && following >= MAX_SUBSCRIPTIONS {
        return Err(RpcError::invalid_params(format!(
            "at most {MAX_SUBSCRIPTIONS} resources are subscribed to at once; unsubscribe from \
             one first"
        )));
    }
    Ok(())
}

/// The content block types a tool result may hold (those of the newest schema).
pub const CONTENT_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// Whether revision `version`'s schema has content blocks of type `kind`.
pub fn has_content_type(version: ProtocolVersion, kind: &str) -> bool {
    match kind {
        "text" | "image" | "resource" => true,
        "audio" => version >= ProtocolVersion::V2025_03_26,
        "resource_link" => version >= ProtocolVersion::V2025_06_18,
        _ => false,
    }
}

/// A tool result as a client of `version` can read it: a content block its schema does not have
/// (audio before 2025-03-26, resource links before 2025-06-18) becomes a text block saying what
/// it was, rather than a block the client's schema refuses.
pub fn content_for(version: ProtocolVersion, mut result: Value) -> Value {
    if let Some(Value::Array(blocks)) = result.get_mut("content") {
        for block in blocks.iter_mut() {
            let kind = block["type"].as_str().unwrap_or("");
            if has_content_type(version, kind) {
                continue;
            }
            let field = |k: &str| block[k].as_str().unwrap_or("").to_string();
            let text = match kind {
                "resource_link" => format!("Resource link: {} <{}>", field("name"), field("uri")),
                _ => format!(
                    "[{kind} content ({}) left out: protocol version {version} has no {kind} \
                     content]",
                    block["mimeType"].as_str().unwrap_or("no MIME type")
                ),
            };
            *block = text_content(text);
        }
    }
    result
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
    fn a_walk_stays_on_course_when_the_list_changes_between_pages() {
        let tools =
            |names: &[&str]| -> Vec<Value> { names.iter().map(|n| json!({ "name": n })).collect() };
        let names = |page: &[Value]| -> Vec<String> {
            page.iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        };
        let before = tools(&["a", "b", "c", "d", "e"]);
        let (_, next) = paginate("tools", &before, None, 2).unwrap();
        let next = Value::String(next.unwrap());
        // Two tools added ahead of the cursor: the next page is still c, d.
        let grown = tools(&["0", "1", "a", "b", "c", "d", "e"]);
        let (page, _) = paginate("tools", &grown, Some(&next), 2).unwrap();
        assert_eq!(names(&page), ["c", "d"]);
        // One removed ahead of it: still c, d.
        let shrunk = tools(&["b", "c", "d", "e"]);
        let (page, _) = paginate("tools", &shrunk, Some(&next), 2).unwrap();
        assert_eq!(names(&page), ["c", "d"]);
        // c itself removed: the page starts at its offset, with what followed it.
        let without_c = tools(&["a", "b", "d", "e"]);
        let (page, _) = paginate("tools", &without_c, Some(&next), 2).unwrap();
        assert_eq!(names(&page), ["d", "e"]);
        // Past the end of a list that shrank: its end, not an error.
        let (page, next) = paginate(
            "tools",
            &tools(&["a"]),
            Some(&Value::String(encode_cursor("tools", 4, "e"))),
            2,
        )
        .unwrap();
        assert!(page.is_empty() && next.is_none());
        // Resources are keyed by URI, a cursor of before keys by its offset alone.
        let resources = vec![json!({ "uri": "x://1" }), json!({ "uri": "x://2" })];
        let (_, next) = paginate("resources", &resources, None, 1).unwrap();
        let moved = vec![
            json!({ "uri": "x://0" }),
            resources[0].clone(),
            resources[1].clone(),
        ];
        let (page, _) =
            paginate("resources", &moved, Some(&Value::String(next.unwrap())), 1).unwrap();
        assert_eq!(page[0]["uri"], "x://2");
        let old = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("resources:1");
        let (page, _) = paginate("resources", &moved, Some(&Value::String(old)), 1).unwrap();
        assert_eq!(page[0]["uri"], "x://1");
    }

    #[test]
    fn content_a_revision_lacks_becomes_text() {
        let result = json!({ "content": [
            { "type": "text", "text": "t" },
            { "type": "audio", "data": "AA==", "mimeType": "audio/wav" },
            { "type": "resource_link", "uri": "file:///a.txt", "name": "a.txt" },
        ], "isError": false });
        let old = content_for(ProtocolVersion::V2024_11_05, result.clone());
        assert_eq!(old["content"][0], result["content"][0]);
        assert_eq!(old["content"][1]["type"], "text");
        assert!(old["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("audio/wav"));
        assert_eq!(
            old["content"][2]["text"],
            "Resource link: a.txt <file:///a.txt>"
        );
        let mid = content_for(ProtocolVersion::V2025_03_26, result.clone());
        assert_eq!(mid["content"][1], result["content"][1]);
        assert_eq!(mid["content"][2]["type"], "text");
        assert_eq!(
            content_for(ProtocolVersion::V2025_06_18, result.clone()),
            result
        );
        assert!(CONTENT_TYPES
            .iter()
            .all(|t| has_content_type(ProtocolVersion::V2025_06_18, t)));
    }

    #[test]
    fn log_levels_order() {
        assert!(LogLevel::Debug < LogLevel::Emergency);
        assert_eq!(LogLevel::parse("warning").unwrap().as_str(), "warning");
        assert!(LogLevel::parse("loud").is_none());
    }
}
