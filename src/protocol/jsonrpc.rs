//! JSON-RPC 2.0 framing: parsing one message or a batch from bytes, classifying it, and building
//! responses and errors. Pure code: no I/O, no MCP semantics.

use serde::Serialize;
use serde_json::{json, Map, Value};
use std::fmt;

use super::meta::WireMeta;
use super::read;
use super::read::holds_raw_value_key;
pub use super::read::RAW_VALUE_KEY;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: the requested resource does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// Implementation-defined server error range (-32000..-32099): the request was refused by policy.
pub const SERVER_REFUSED: i64 = -32000;
/// `URLElicitationRequiredError` (2025-11-25): the request cannot proceed until the URL-mode
/// elicitations in the error's data are completed.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// A JSON-RPC request id: a string or an integer (MCP forbids null). Kept with its JSON type so
/// it is echoed exactly as received.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl RequestId {
    pub fn from_value(v: &Value) -> Option<RequestId> {
        match v {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.clone()),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, message)
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
    /// -32042 with `data.elicitations` (each a URL-mode elicitation: `mode`, `elicitationId`,
    /// `url`, `message`).
    pub fn url_elicitation_required(elicitations: Vec<Value>) -> Self {
        Self::new(
            URL_ELICITATION_REQUIRED,
            "This request requires more information: complete the URL elicitation, then retry.",
        )
        .with_data(serde_json::json!({ "elicitations": elicitations }))
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    fn from_value(v: &Value) -> RpcError {
        RpcError {
            code: v
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR),
            message: v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            data: v.get("data").cloned(),
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    pub params: Option<Value>,
    /// The stateless revision's keys of `params._meta`, set apart from `params` when it was
    /// read (`None`: no `_meta` object).
    pub meta: Option<Box<WireMeta>>,
}

impl Request {
    /// Takes the params out as an object (absent params read as an empty object).
    pub fn take_params(&mut self) -> Result<Map<String, Value>, RpcError> {
        match self.params.take() {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m),
            Some(_) => Err(RpcError::invalid_params("params must be an object")),
        }
    }
    /// `params._meta.progressToken`, with its JSON type preserved.
    pub fn progress_token(&self) -> Option<Value> {
        self.params
            .as_ref()?
            .get("_meta")?
            .get("progressToken")
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Option<Value>,
    /// As [`Request::meta`].
    pub meta: Option<Box<WireMeta>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// `None`: an error response whose sender could not read the request's id.
    pub id: Option<RequestId>,
    pub outcome: Result<Value, RpcError>,
}

/// One JSON-RPC message received from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// What one HTTP body held: one message, or a batch (array) of messages. A batch element that is
/// not a valid message is kept as its error so it can be answered in place.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Single(Message),
    Batch(Vec<Result<Message, RpcError>>),
}

/// Most messages one batch may carry (2025-03-26): each runs at once in the session, and the
/// tenant's request rate counts the HTTP request, so one body of thousands of calls would
/// otherwise start them all for the price of one.
pub const MAX_BATCH_LEN: usize = 100;

fn check_batch_len(len: usize) -> Result<(), RpcError> {
    if len > MAX_BATCH_LEN {
        return Err(RpcError::invalid_request(format!(
            "Invalid Request: a batch of {len} messages (at most {MAX_BATCH_LEN})"
        )));
    }
    Ok(())
}

/// Parses a body. `Err` means the whole body is unusable (parse error or an invalid lone message)
/// and carries the JSON-RPC error to answer with `id: null`. Read in one pass (`read`): each
/// message as [`classify`] would see it as a `Value`.
pub fn parse_payload(body: &[u8]) -> Result<Payload, RpcError> {
    // UTF-8 checked once for the whole body (JSON text is UTF-8): read from a `str`, serde_json
    // then checks no string on its own, which costs more per request than one pass here.
    let text = std::str::from_utf8(body).map_err(|e| {
        RpcError::parse(format!(
            "Parse error: the body is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let body: read::Body =
        serde_json::from_str(text).map_err(|e| RpcError::parse(format!("Parse error: {e}")))?;
    match body {
        read::Body::One(element) => element.classify().map(Payload::Single),
        read::Body::Batch(items) => {
            if items.is_empty() {
                return Err(RpcError::invalid_request("Invalid Request: empty batch"));
            }
            check_batch_len(items.len())?;
            Ok(Payload::Batch(
                items.into_iter().map(read::Element::classify).collect(),
            ))
        }
        read::Body::Value(Value::Array(items)) => {
            if items.is_empty() {
                return Err(RpcError::invalid_request("Invalid Request: empty batch"));
            }
            check_batch_len(items.len())?;
            Ok(Payload::Batch(items.into_iter().map(classify).collect()))
        }
        read::Body::Value(other) => classify(other).map(Payload::Single),
    }
}

impl read::Element {
    fn classify(self) -> Result<Message, RpcError> {
        match self {
            read::Element::Object {
                members,
                params,
                meta,
                reserved,
            } => classify_parts(members, params, meta, reserved),
            read::Element::Value(v) => classify(v),
            read::Element::NotObject => Err(not_an_object()),
        }
    }
}

fn not_an_object() -> RpcError {
    RpcError::invalid_request("Invalid Request: a message must be a JSON object")
}

/// Classifies one JSON value as a request, notification or response (taking its parts: the
/// params and results are moved, not copied). The stateless revision's keys of `params._meta`
/// are set apart in the message's `meta`.
pub fn classify(v: Value) -> Result<Message, RpcError> {
    let Value::Object(mut obj) = v else {
        return Err(not_an_object());
    };
    let reserved = obj.contains_key(RAW_VALUE_KEY) || obj.values().any(holds_raw_value_key);
    let mut params = obj.remove("params");
    let meta = match params.as_mut() {
        Some(Value::Object(p)) => WireMeta::split(p).map(Box::new),
        _ => None,
    };
    classify_parts(read::Members::take(&mut obj), params, meta, reserved)
}

/// A message from its members (`params` and its `meta` apart); `reserved`: it holds
/// [`RAW_VALUE_KEY`] somewhere.
fn classify_parts(
    members: read::Members,
    params: Option<Value>,
    meta: Option<Box<WireMeta>>,
    reserved: bool,
) -> Result<Message, RpcError> {
    if reserved {
        return Err(RpcError::invalid_request(format!(
            "Invalid Request: the object key {RAW_VALUE_KEY:?} is reserved"
        )));
    }
    if members.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::invalid_request(
            "Invalid Request: \"jsonrpc\" must be exactly \"2.0\"",
        ));
    }
    let params = match params {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => {
            return Err(RpcError::invalid_request(
                "Invalid Request: \"params\" must be an object or an array",
            ))
        }
    };
    // An error response may have no id (or JSON-RPC's `null`): its sender could not read the
    // id of the request it answers (2025-11-25 schema: `JSONRPCErrorResponse.id` is optional).
    if let (None, None, Some(error @ Value::Object(_)), None | Some(Value::Null)) = (
        &members.method,
        &members.result,
        &members.error,
        &members.id,
    ) {
        return Ok(Message::Response(Response {
            id: None,
            outcome: Err(RpcError::from_value(error)),
        }));
    }
    let id = match &members.id {
        None => None,
        Some(raw) => Some(RequestId::from_value(raw).ok_or_else(|| {
            RpcError::invalid_request("Invalid Request: \"id\" must be a string or an integer")
        })?),
    };
    if let Some(method) = members.method {
        let Value::String(method) = method else {
            return Err(RpcError::invalid_request(
                "Invalid Request: \"method\" must be a string",
            ));
        };
        return Ok(match id {
            Some(id) => Message::Request(Request {
                id,
                method,
                params,
                meta,
            }),
            None => Message::Notification(Notification {
                method,
                params,
                meta,
            }),
        });
    }
    let id = id.ok_or_else(|| {
        RpcError::invalid_request("Invalid Request: a message needs \"method\" or \"id\"")
    })?;
    match (members.result, &members.error) {
        (Some(result), None) => Ok(Message::Response(Response {
            id: Some(id),
            outcome: Ok(result),
        })),
        (None, Some(error)) if error.is_object() => Ok(Message::Response(Response {
            id: Some(id),
            outcome: Err(RpcError::from_value(error)),
        })),
        _ => Err(RpcError::invalid_request(
            "Invalid Request: a response needs exactly one of \"result\" or \"error\"",
        )),
    }
}

/// A success response.
pub fn result_message(id: &RequestId, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response; `id` is `None` when the request's id could not be read.
pub fn error_message(id: Option<&RequestId>, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

pub fn response_message(id: &RequestId, outcome: &Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => result_message(id, result.clone()),
        Err(e) => error_message(Some(id), e),
    }
}

#[derive(Serialize)]
struct EncodedResponse<'a, R: Serialize + ?Sized = Value> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

/// A result response serialized straight from its parts (`result`: any serializable value).
pub fn encode_result<R: Serialize + ?Sized>(id: &RequestId, result: &R) -> Vec<u8> {
    let out = EncodedResponse {
        jsonrpc: "2.0",
        id,
        result: Some(result),
        error: None,
    };
    // Room for a typical result up front (`to_vec` starts at 128 bytes and regrows twice for a
    // 2026-07-28 result with its `_meta`).
    let mut buf = Vec::with_capacity(512);
    match serde_json::to_writer(&mut buf, &out) {
        Ok(()) => buf,
        Err(_) => Vec::new(),
    }
}

/// A response serialized straight from its parts (no intermediate `Value`).
pub fn encode_response(id: &RequestId, outcome: &Result<Value, RpcError>) -> Vec<u8> {
    let (result, error) = match outcome {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let out = EncodedResponse {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    serde_json::to_vec(&out).unwrap_or_default()
}

pub fn notification_message(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

pub fn request_message(id: &RequestId, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        let r = parse_payload(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert!(matches!(
            r,
            Payload::Single(Message::Request(Request {
                id: RequestId::Number(7),
                ..
            }))
        ));
        let n =
            parse_payload(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(n, Payload::Single(Message::Notification(_))));
        let s = parse_payload(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert!(matches!(
            s,
            Payload::Single(Message::Response(Response { outcome: Ok(_), .. }))
        ));
        let e = parse_payload(br#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}"#)
            .unwrap();
        assert!(matches!(
            e,
            Payload::Single(Message::Response(Response {
                outcome: Err(_),
                ..
            }))
        ));
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(parse_payload(b"{nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(parse_payload(b"[]").unwrap_err().code, INVALID_REQUEST);
        assert_eq!(
            parse_payload(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse_payload(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse_payload(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse_payload(br#"{"jsonrpc":"2.0","id":1}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(parse_payload(b"42").unwrap_err().code, INVALID_REQUEST);
    }

    #[test]
    fn a_body_that_is_not_utf8_is_a_parse_error() {
        // Invalid UTF-8 inside a string, and a lone continuation byte outside one.
        for body in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}"[..],
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x80"[..],
        ] {
            let e = parse_payload(body).unwrap_err();
            assert_eq!(e.code, PARSE_ERROR);
            assert!(e.message.contains("not UTF-8"), "{}", e.message);
        }
        // Multi-byte characters, escaped or not, are read as before.
        let r = parse_payload(
            "{\"jsonrpc\":\"2.0\",\"id\":\"é\\u00e9\",\"method\":\"ping\"}".as_bytes(),
        )
        .unwrap();
        match r {
            Payload::Single(Message::Request(req)) => {
                assert_eq!(req.id, RequestId::String("éé".into()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_error_response_may_go_without_an_id() {
        for body in [
            &br#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#[..],
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        ] {
            match parse_payload(body).unwrap() {
                Payload::Single(Message::Response(Response { id: None, outcome })) => {
                    assert_eq!(outcome.unwrap_err().code, PARSE_ERROR)
                }
                other => panic!("{other:?}"),
            }
        }
        // Not a result, not a request or notification with a null id, not an error that is not
        // an object.
        for body in [
            &br#"{"jsonrpc":"2.0","result":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            br#"{"jsonrpc":"2.0","error":"x"}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        ] {
            assert_eq!(parse_payload(body).unwrap_err().code, INVALID_REQUEST);
        }
    }

    #[test]
    fn batch_keeps_invalid_elements_in_place() {
        let b = parse_payload(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5]"#).unwrap();
        match b {
            Payload::Batch(items) => {
                assert!(items[0].is_ok());
                assert_eq!(items[1].as_ref().unwrap_err().code, INVALID_REQUEST);
            }
            _ => panic!("expected a batch"),
        }
    }

    /// The one-pass reader gives what `classify` gives for the body read as a `Value`, and
    /// errors where reading a `Value` errors.
    #[test]
    fn one_pass_reading_equals_classifying_a_value() {
        let pv = "io.modelcontextprotocol/protocolVersion";
        let caps = "io.modelcontextprotocol/clientCapabilities";
        let info = "io.modelcontextprotocol/clientInfo";
        let raw = RAW_VALUE_KEY;
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let bodies = [
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"e","_meta":{{"{pv}":"2026-07-28","{caps}":{{}},"{info}":{{"name":"c","version":"1"}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{pv}":"a","progressToken":3,"{pv}":"b"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{pv}":"a"}},"_meta":5}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":5,"_meta":{{"{caps}":{{"x":[1,2.5]}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{info}":{{"a":{{"{raw}":"1"}}}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{info}":{{"a":{{"b":1,"{raw}":"1"}},"a":2}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{info}":{{"a":{{"b":1,"{raw}":"1"}}}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"{raw}":"{{\"_meta\":{{\"{pv}\":\"x\"}}}}"}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{raw}":"{{\"{pv}\":\"x\"}}"}}}}}}"#
            ),
            format!(r#"{{"{raw}":"[{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}}]"}}"#),
            format!(r#"{{"{raw}":"{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}}"}}"#),
            format!(r#"{{"{raw}":"1","jsonrpc":"2.0"}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{info}":{deep}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{info}":"\ud800"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_me\u0074a":{{"{pv}":"2026-07-28"}}}}}}"#
            ),
            format!(
                r#"[{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"{pv}":"v"}}}}}},[1],{{"{raw}":"2"}},7]"#
            ),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{}}]}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}},"params":{"a":1}}"#
                .to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"x":1e400}}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":"a","result":{"_meta":{}}}"#.to_string(),
            // Members other than params: the last of each counts, others are checked and
            // dropped, a reserved key anywhere in what would be kept refuses the message.
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b","id":"x"}"#.to_string(),
            r#"{"jsonrpc":"1.0","jsonrpc":"2.0","method":"n"}"#.to_string(),
            r#"{"jsonrpc":"2.0","method":7}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"},"extra":[1,{"a":null}]}"#
                .to_string(),
            r#"{"\u006aso\u006erpc":"2.0","\u0069d":2,"meth\u006fd":"p\u0069ng"}"#.to_string(),
            format!(r#"{{"jsonrpc":"2.0","method":"n","x":{{"{raw}":"1"}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"n","x":{{"a":{{"{raw}":"1"}}}},"x":2}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","x":2,"x":{{"a":[{{"b":0,"{raw}":"1"}}]}}}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","method":"n","{raw}":"1"}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":{{"{raw}":"1"}},"method":"n"}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"a":{{"b":1,"{raw}":"[]"}}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"n","x":{{"{raw}":"not json"}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"n","x":{deep}}}"#),
            r#"{"jsonrpc":"2.0","method":"n","x":1e400}"#.to_string(),
            r#"{"jsonrpc":"2.0","method":"n","x":"\ud800"}"#.to_string(),
            // Reserved keys inside params, found as they are read: the last value of a key
            // counts, in params, in `_meta` and in this revision's `_meta` keys.
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"a":{{"b":1,"{raw}":"1"}},"a":2}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"a":2,"a":{{"b":1,"{raw}":"1"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"a":[1,{{"b":[{{"c":1,"{raw}":"1"}}]}}]}}}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","method":"n","params":[{{"b":1,"{raw}":"1"}}]}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"n","params":{{"b":1,"{raw}":"1"}}}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"a":{{"{raw}":"{{\"b\":1,\"{raw}\":2}}"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"p":{{"b":1,"{raw}":"1"}}}},"_meta":3}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":3,"_meta":{{"p":{{"b":1,"{raw}":"1"}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{pv}":{{"b":1,"{raw}":"1"}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{pv}":{{"b":1,"{raw}":"1"}},"{pv}":"x"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{caps}":[{{"b":1,"{raw}":"1"}}]}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"q":1,"{raw}":"1"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":[{{"b":1,"{raw}":"1"}}]}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"{raw}":"{{\"_meta\":{{\"b\":1,\"{raw}\":1}}}}"}}}}"#
            ),
            // A skipped clientInfo inside raw JSON: it counts as in the `Value` read whole.
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"_meta":{{"{raw}":"{{\"{info}\":{{\"b\":1,\"{raw}\":1}}}}"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"{raw}":"{{\"_meta\":{{\"{info}\":{{\"b\":1,\"{raw}\":1}}}}}}"}}}}"#
            ),
        ];
        for body in &bodies {
            assert_reads_as_a_value_does(body.as_bytes());
        }
        // What the first body holds, set apart.
        let Ok(Payload::Single(Message::Request(r))) = parse_payload(bodies[0].as_bytes()) else {
            panic!("a request");
        };
        assert_eq!(r.params, Some(json!({ "name": "e" })));
        let meta = r.meta.expect("meta");
        assert_eq!(meta.protocol_version, Some(json!("2026-07-28")));
        assert_eq!(meta.client_capabilities, Some(json!({})));
    }

    /// `parse_payload` gives what `classify` gives for the body read as a `Value`, and errors
    /// where reading a `Value` errors.
    fn assert_reads_as_a_value_does(body: &[u8]) {
        let expected = match serde_json::from_slice::<Value>(body) {
            Err(_) => None,
            Ok(Value::Array(items)) if items.is_empty() => None,
            Ok(Value::Array(items)) => Some(Ok(Payload::Batch(
                items.into_iter().map(classify).collect(),
            ))),
            Ok(v) => Some(classify(v).map(Payload::Single)),
        };
        let got = parse_payload(body);
        let shown = String::from_utf8_lossy(body);
        match expected {
            None => assert!(got.is_err(), "{shown}: {got:?}"),
            Some(expected) => assert_eq!(got, expected, "{shown}"),
        }
    }

    /// Every body the JSON-RPC fuzz target has kept in its corpus reads as a `Value` does.
    #[test]
    fn the_fuzz_corpus_reads_as_values_do() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/jsonrpc_payload");
        let mut read = 0;
        for entry in std::fs::read_dir(dir).expect("the corpus") {
            let body = std::fs::read(entry.expect("an entry").path()).expect("a file");
            assert_reads_as_a_value_does(&body);
            read += 1;
        }
        assert!(read > 100, "only {read} corpus files");
    }

    #[test]
    fn encoded_responses_match_built_ones() {
        let id = RequestId::String("x".into());
        for outcome in [
            Ok(json!({ "a": [1, 2] })),
            Err(RpcError::invalid_params("bad").with_data(json!(3))),
        ] {
            let encoded: Value = serde_json::from_slice(&encode_response(&id, &outcome)).unwrap();
            assert_eq!(encoded, response_message(&id, &outcome));
        }
    }

    #[test]
    fn ids_keep_their_json_type() {
        let v = error_message(
            Some(&RequestId::String("1".into())),
            &RpcError::internal("x"),
        );
        assert_eq!(v["id"], json!("1"));
        let v = result_message(&RequestId::Number(1), json!({}));
        assert_eq!(v["id"], json!(1));
    }
}
