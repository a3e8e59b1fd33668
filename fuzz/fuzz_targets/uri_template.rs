//! URI templates of published resource templates (`catalog::stored::UriTemplate`, RFC 6570
//! level 1): parsing a template and matching URIs against it (with percent-decoding).
//!
//! Input: `template \n uri \n values`, where `values` (split on `\t`) are variable values.
//!
//! Invariants:
//! - a parsed template has at least one variable, each named by letters, digits and `_`, and
//!   its literal text has no `{` or `}`;
//! - a match binds exactly the template's variables, never to an empty value;
//! - a URI matched against `scheme://{v}` binds `v` to the strict percent-decoding of the URI's
//!   tail (`%` must be followed by two hex digits), and to nothing when that is not UTF-8;
//! - expansion and matching agree: expanding the template with percent-encoded values and
//!   matching the result gives back the values (unless the literal that follows a variable
//!   first occurs inside or across the end of its encoded value: such a URI is ambiguous);
//! - whatever a URI matched to, re-expanding those values matches to the same values.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use mcp_harbor::catalog::stored::UriTemplate;

/// RFC 3986 percent-decoding: `%` followed by exactly two hex digits.
fn strict_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hi = (*b.get(i + 1)? as char).to_digit(16)?;
            let lo = (*b.get(i + 2)? as char).to_digit(16)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Simple-string expansion: everything but unreserved characters percent-encoded.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The template's parts, re-read from its text (variables are `{name}`).
fn parts(template: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push((false, rest[..open].to_string()));
        }
        let close = open + rest[open..].find('}').unwrap();
        out.push((true, rest[open + 1..close].to_string()));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push((false, rest.to_string()));
    }
    out
}

/// Expands with encoded values; `None` when the literal after a value would first be found
/// inside (or across the end of) that value.
fn expand(parts: &[(bool, String)], values: &HashMap<String, String>) -> Option<String> {
    let mut out = String::new();
    for (i, (is_var, text)) in parts.iter().enumerate() {
        if *is_var {
            let encoded = encode(&values[text]);
            if let Some((false, next)) = parts.get(i + 1) {
                // The first occurrence of the next literal must be the one after the value.
                if format!("{encoded}{next}").find(next.as_str()) != Some(encoded.len()) {
                    return None;
                }
            }
            out.push_str(&encoded);
        } else {
            out.push_str(text);
        }
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let template = lines.next().unwrap_or_default();
    let uri = lines.next().unwrap_or_default();
    let values = lines.next().unwrap_or_default();

    // Percent-decoding, alone: one variable after a fixed prefix.
    let single = UriTemplate::parse("x://{v}").unwrap();
    let tail = uri;
    let expected = (!tail.is_empty() && !tail.contains('/'))
        .then(|| strict_decode(tail))
        .flatten();
    assert_eq!(
        single
            .matches(&format!("x://{tail}"))
            .map(|m| m["v"].clone()),
        expected,
        "x://{{v}} against x://{tail}"
    );

    let Ok(t) = UriTemplate::parse(template) else {
        return;
    };
    let vars = t.variables();
    assert!(!vars.is_empty());
    for v in &vars {
        assert!(!v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    }
    let parts = parts(template);
    for (is_var, text) in &parts {
        assert!(
            *is_var || !text.contains(['{', '}']),
            "{template:?} parsed with the literal {text:?}"
        );
    }

    if let Some(m) = t.matches(uri) {
        let mut names: Vec<&str> = m.keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut want = vars.clone();
        want.sort_unstable();
        want.dedup();
        assert_eq!(names, want, "{template:?} matched {uri:?} to {m:?}");
        assert!(m.values().all(|v| !v.is_empty()));
        // A template that names a variable twice matches only when both places agree... or
        // keeps the last: re-expansion then needs the values of that match.
        if want.len() == vars.len() {
            if let Some(again) = expand(&parts, &m) {
                assert_eq!(t.matches(&again).as_ref(), Some(&m), "{again:?}");
            }
        }
    }

    // Expansion with fuzzed values (non-empty; `/` is percent-encoded like anything else).
    let mut given: Vec<&str> = values.split('\t').filter(|v| !v.is_empty()).collect();
    if given.is_empty() {
        given.push("x");
    }
    let mut assigned = HashMap::new();
    for (i, v) in vars.iter().enumerate() {
        assigned
            .entry(v.to_string())
            .or_insert_with(|| given[i % given.len()].to_string());
    }
    if let Some(uri) = expand(&parts, &assigned) {
        assert_eq!(
            t.matches(&uri).as_ref(),
            Some(&assigned),
            "{template:?} expanded to {uri:?}"
        );
    }
});
