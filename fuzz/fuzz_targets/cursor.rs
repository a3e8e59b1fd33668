//! Pagination cursors: MCP list cursors (`protocol::mcp::paginate`, opaque base64url of
//! `<list>:<offset>:<key of the next page's first item>`) and the admin API's `cursor` query
//! parameter (`admin::PageQuery`).
//!
//! Input: the list length, the page size, then the cursor text.
//!
//! Invariants:
//! - walking a list from no cursor through each `nextCursor` yields every item once, in order;
//! - any accepted cursor yields the slice of the list where it resumes (a page of the page size,
//!   or the rest; the end for an offset past it), and a `nextCursor` exactly when items remain
//!   after it;
//! - an accepted cursor names its own list: the same text is refused for another list;
//! - a refused cursor is a -32602 error, and a cursor that is not a string is always refused;
//! - an admin cursor that resolves re-encodes to exactly the text given (one spelling per key);
//!   the cursors of printable ASCII keys (every key the API has) resolve, others are refused.
#![no_main]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use mcp_harbor::admin::{cursor_after, PageQuery};
use mcp_harbor::protocol::jsonrpc::INVALID_PARAMS;
use mcp_harbor::protocol::mcp::paginate;
use serde_json::{json, Value};

const LISTS: [&str; 4] = ["tools", "resources", "resourceTemplates", "prompts"];

fuzz_target!(|data: &[u8]| {
    let [n, size, list, rest @ ..] = data else {
        return;
    };
    let items: Vec<Value> = (0..(*n as usize % 40)).map(|i| json!(i)).collect();
    let page_size = *size as usize % 9; // 0 is read as 1
    let which = *list as usize % LISTS.len();
    let (list, other) = (LISTS[which], LISTS[(which + 1) % LISTS.len()]);

    // The walk.
    let mut seen = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let (page, next) = paginate(list, &items, cursor.as_ref(), page_size).expect("walk");
        assert!(page.len() <= page_size.max(1));
        seen.extend(page);
        match next {
            Some(c) => {
                assert!(
                    paginate(other, &items, Some(&json!(c)), page_size).is_err(),
                    "{list} cursor accepted by {other}"
                );
                cursor = Some(json!(c));
            }
            None => break,
        }
        assert!(seen.len() <= items.len(), "the walk does not end");
    }
    assert_eq!(seen, items, "the walk skipped or repeated items");

    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // A fuzzed MCP cursor.
    match paginate(list, &items, Some(&json!(text)), page_size) {
        Ok((page, next)) => {
            let offset = match page.first() {
                Some(first) => first.as_u64().expect("an item") as usize,
                None => items.len(),
            };
            let end = (offset + page_size.max(1)).min(items.len());
            assert_eq!(
                page,
                items[offset..end],
                "the page is not the slice at its offset"
            );
            assert_eq!(next.is_some(), end < items.len());
            if let Some(next) = next {
                let (after, _) = paginate(list, &items, Some(&json!(next)), page_size).unwrap();
                assert_eq!(after.first(), items.get(end));
            }
            assert!(
                paginate(other, &items, Some(&json!(text)), page_size).is_err(),
                "a {list} cursor {text:?} is accepted for {other}"
            );
            let decoded = URL_SAFE_NO_PAD
                .decode(text)
                .expect("an accepted cursor is base64url");
            let decoded = String::from_utf8(decoded).expect("an accepted cursor is text");
            assert_eq!(decoded.split_once(':').map(|(l, _)| l), Some(list));
        }
        Err(e) => assert_eq!(e.code, INVALID_PARAMS),
    }
    for not_a_string in [json!(1), json!([text]), json!({ "c": text }), json!(true)] {
        assert!(paginate(list, &items, Some(&not_a_string), page_size).is_err());
    }

    // The admin API's cursor.
    let query = PageQuery {
        limit: Some(*size as u32),
        cursor: Some(text.to_string()),
    };
    if let Ok((limit, after)) = query.resolve() {
        assert!((1..=200).contains(&limit));
        let after = after.expect("a cursor was given");
        assert_eq!(
            cursor_after(&after),
            text,
            "two spellings of one admin cursor"
        );
    }
    // And the cursors it hands out (for its keys, which are printable ASCII) resolve to their
    // key; a cursor for any other text is refused.
    let key = text;
    let given = cursor_after(key);
    let back = PageQuery {
        limit: None,
        cursor: Some(given),
    }
    .resolve();
    if key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        assert_eq!(
            back.expect("a cursor the API made"),
            (50, Some(key.to_string()))
        );
    } else {
        assert!(back.is_err(), "a cursor for a non-ASCII key");
    }
});
