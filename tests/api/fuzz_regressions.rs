//! Inputs the fuzz targets (`fuzz/`, `scripts/fuzz.sh`) found to break an invariant, each kept
//! as a test of the behaviour it now has. The input is the one libFuzzer wrote, cut down to the
//! part that mattered; the target and the invariant are named in each test.

use mcp_harbor::catalog::stored::UriTemplate;
use mcp_harbor::protocol::stateless::header_matches;
use serde_json::json;

/// `uri_template`: "a parsed template's literal text has no `{` or `}`". `UriTemplate::parse`
/// refused a `}` after the last variable but took one in the literal text before a variable.
#[test]
fn uri_template_refuses_a_closing_brace_before_a_variable() {
    // The fuzzer's template (first line of its input).
    assert_eq!(
        UriTemplate::parse("xilesa}={b}"),
        Err("unmatched '}'".to_string())
    );
    for template in [
        "docs://}{page}",
        "docs://{space}/}/{page}",
        "docs://{space}}",
    ] {
        assert!(UriTemplate::parse(template).is_err(), "{template}");
    }
    // Well-formed templates still parse.
    let t = UriTemplate::parse("docs://{space}/pages/{page}").unwrap();
    assert_eq!(t.variables(), ["space", "page"]);
}

/// `uri_template`: "a URI matched against `scheme://{v}` binds `v` to the strict
/// percent-decoding of its tail". `%` followed by a sign and one hex digit (`%+0`) was decoded
/// (`u8::from_str_radix` takes a leading `+`), so `1lo%+0wold` bound a NUL byte.
#[test]
fn percent_decoding_needs_two_hex_digits() {
    let t = UriTemplate::parse("x://{v}").unwrap();
    // The fuzzer's URI (second line of its input).
    assert_eq!(t.matches("x://1lo%+0wold"), None);
    for uri in ["x://%+f", "x://%-1", "x://a%2", "x://%zz", "x://%"] {
        assert_eq!(t.matches(uri), None, "{uri}");
    }
    let decoded = |uri: &str| t.matches(uri).map(|m| m["v"].clone());
    assert_eq!(decoded("x://1lo%00wold").as_deref(), Some("1lo\0wold"));
    assert_eq!(decoded("x://a%2Bb%2fc").as_deref(), Some("a+b/c"));
    assert_eq!(decoded("x://caf%C3%A9").as_deref(), Some("café"));
    // Not UTF-8 once decoded: no match.
    assert_eq!(decoded("x://%FF"), None);
}

/// `oauth_request`: "a different presented redirect URI matches only when it is the registered
/// one on another port (RFC 8252 §7.3)". `redirect_matches` compared user names but not
/// passwords, so a loopback URI with a password in it (`http://:pw@127.0.0.1:5555/cb`) matched
/// `http://127.0.0.1/cb`. Found while writing the invariant and confirmed by the target on that
/// input; libFuzzer did not reach it in 9 minutes.
#[test]
fn loopback_redirect_uris_match_on_the_port_only() {
    use mcp_harbor::oauth::clients::redirect_matches;
    let registered = "http://127.0.0.1/cb";
    assert!(!redirect_matches(
        registered,
        "http://:pw@127.0.0.1:5555/cb"
    ));
    assert!(!redirect_matches(
        registered,
        "http://u:pw@127.0.0.1:5555/cb"
    ));
    assert!(!redirect_matches(
        "http://:pw@127.0.0.1/cb",
        "http://127.0.0.1:5555/cb"
    ));
    // What RFC 8252 allows still matches: any port on the registered loopback URI.
    assert!(redirect_matches(registered, "http://127.0.0.1:5555/cb"));
    assert!(redirect_matches(registered, registered));
    assert!(redirect_matches(
        "http://[::1]:8080/cb?x=1",
        "http://[::1]:33418/cb?x=1"
    ));
    assert!(!redirect_matches(registered, "http://127.0.0.1:5555/other"));
}

/// `webhook_response`: "the text block added for a result without `content` is the JSON of its
/// `structuredContent`". The fuzzer's input had the key `$serde_json::private::RawValue` in
/// `structuredContent`: serde_json (its `raw_value` feature is on through sqlx) reads an object
/// whose first key is that one as raw JSON, and keys are written sorted, so the text did not
/// parse back with serde_json. The text is right; this pins it (and the value passed on).
#[test]
fn a_structured_result_is_described_by_its_exact_json() {
    use mcp_harbor::tools::webhook::tool_result;
    use serde_json::{json, Value};
    let body = br#"{"structuredContent":{"CErrt":[{}],"$serde_json::private::RawValue":"t"}}"#;
    let Value::Object(answer) = serde_json::from_slice(body).unwrap() else {
        panic!("an object")
    };
    let result = tool_result(answer.clone()).unwrap();
    assert_eq!(result["structuredContent"], answer["structuredContent"]);
    assert_eq!(
        result["content"],
        json!([{ "type": "text", "text": r#"{"$serde_json::private::RawValue":"t","CErrt":[{}]}"# }])
    );
    assert_eq!(result["isError"], json!(false));
}

/// `jsonrpc_payload`: "a parsed message re-serialises and parses to the same value". With
/// `$serde_json::private::RawValue` as a key that is not first, a message parsed, but the same
/// message written out (keys sorted) no longer parsed: a session snapshot holding such params
/// could not be restored on another replica. Such messages are now refused where they arrive.
#[test]
fn messages_with_serde_jsons_raw_value_key_are_refused() {
    use mcp_harbor::protocol::jsonrpc::{parse_payload, INVALID_REQUEST};
    use mcp_harbor::protocol::{Message, Payload};
    let single = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","$serde_json::private::RawValue":"x"}}}"#;
    let refused = parse_payload(single).unwrap_err();
    assert_eq!(refused.code, INVALID_REQUEST);
    assert!(refused.message.contains("reserved"), "{}", refused.message);
    // In a batch it is refused in place; the other messages are served.
    let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x","params":[{"a":1,"$serde_json::private::RawValue":"2"}]}]"#;
    let Payload::Batch(items) = parse_payload(batch).unwrap() else {
        panic!("a batch")
    };
    assert!(matches!(items[0], Ok(Message::Request(_))));
    assert_eq!(items[1].as_ref().unwrap_err().code, INVALID_REQUEST);
    // Every message that is accepted reads back as itself once written out.
    let Payload::Single(Message::Request(r)) = parse_payload(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"$text":"x"}}}"#,
    )
    .unwrap() else {
        panic!("a request")
    };
    let written =
        mcp_harbor::protocol::jsonrpc::request_message(&r.id, &r.method, r.params.clone().unwrap());
    let again = parse_payload(&serde_json::to_vec(&written).unwrap()).unwrap();
    assert_eq!(again, Payload::Single(Message::Request(r)));
}

/// `header_values`: "a finite float matches the texts Rust prints for it". Found in the first
/// version of the exact comparison (before it landed), which compared floats by their decimal
/// text too: two printers give one `f64` different shortest spellings, Rust 562949953421344.3
/// where serde_json writes …344.2. Floats compare as floats; integers exactly (no two integers
/// share a header).
#[test]
fn a_float_matches_every_spelling_of_itself() {
    // The fuzzer's float (bytes 1..9 of its input, little-endian).
    let f = f64::from_le_bytes([0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x43]);
    let body = json!(f);
    assert!(header_matches(&f.to_string(), &body), "{f} vs {body}");
    assert!(header_matches("562949953421344.2", &body));
    assert!(header_matches("562949953421344.3", &body));
    assert!(!header_matches("562949953421344.5", &body));
    assert!(!header_matches(
        "9007199254740992",
        &json!(9_007_199_254_740_993_u64)
    ));
}
