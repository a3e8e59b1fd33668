//! The header values of protocol version 2026-07-28 (`protocol::stateless`): the Base64 sentinel
//! encoding of `Mcp-Name` / `Mcp-Param-{Name}` values and the comparison of a decoded header with
//! the body value it mirrors (`header_matches`).
//!
//! Input: a selector byte (the case), then the bytes the case reads.
//!
//! Invariants:
//! - decoding never panics; it accepts only visible ASCII, space and tab, and a value that is
//!   not a sentinel decodes to itself;
//! - every string survives encoding and decoding unchanged, and its encoding is a header value
//!   (visible ASCII and inner spaces: nothing for HTTP to trim or refuse);
//! - two integers (i64 or u64) match as header and body exactly when they are equal, whether
//!   the header spells the integer plainly, with a fraction of zeros or with an exponent;
//! - a finite float matches the texts Rust prints for it, and not those of the next float;
//! - a string body matches only itself, a boolean only `true` / `false`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::protocol::stateless::{decode_header_value, encode_header_value, header_matches};
use serde_json::{json, Value};

/// The first 8 bytes of `bytes`, zero-padded.
fn eight(bytes: &[u8]) -> [u8; 8] {
    let mut raw = [0u8; 8];
    let n = bytes.len().min(8);
    raw[..n].copy_from_slice(&bytes[..n]);
    raw
}

/// An integer from 8 bytes and a flag: an i64, or a u64 (the two ranges JSON integers have).
fn integer(bytes: &[u8], unsigned: bool) -> i128 {
    if unsigned {
        i128::from(u64::from_le_bytes(eight(bytes)))
    } else {
        i128::from(i64::from_le_bytes(eight(bytes)))
    }
}

fn body_of(n: i128) -> Value {
    match (i64::try_from(n), u64::try_from(n)) {
        (Ok(i), _) => json!(i),
        (_, Ok(u)) => json!(u),
        _ => Value::Null,
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, rest @ ..] = data else {
        return;
    };
    match selector % 4 {
        0 => {
            if let Some(decoded) = decode_header_value(rest) {
                assert!(rest
                    .iter()
                    .all(|&b| b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b)));
                let text = std::str::from_utf8(rest).expect("ASCII");
                let sentinel = text.starts_with("=?base64?") && text.ends_with("?=");
                assert!(sentinel || decoded == text, "{text:?} -> {decoded:?}");
            }
        }
        1 => {
            let value = String::from_utf8_lossy(rest);
            let encoded = encode_header_value(&value);
            assert!(!encoded.is_empty());
            assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            assert!(!encoded.starts_with(' ') && !encoded.ends_with(' '));
            assert_eq!(
                decode_header_value(encoded.as_bytes()).as_deref(),
                Some(&*value)
            );
            assert!(header_matches(&value, &json!(value)));
            assert!(!header_matches(&format!("{value} "), &json!(value)));
        }
        2 => {
            let [flags, rest @ ..] = rest else {
                return;
            };
            let a = integer(rest, flags & 1 == 1);
            // The second integer: read from the input, or near the first (the cases a float
            // comparison gets wrong are neighbours).
            let b = if flags & 2 == 2 {
                integer(rest.get(8..).unwrap_or(&[]), flags & 4 == 4)
            } else {
                a + i128::from(rest.get(8).map_or(0, |d| *d as i8))
            };
            let body = body_of(b);
            if body.is_null() {
                return;
            }
            for header in [a.to_string(), format!("{a}.000"), format!("{a}e0")] {
                assert_eq!(header_matches(&header, &body), a == b, "{header} vs {body}");
            }
        }
        _ => {
            let f = f64::from_le_bytes(eight(rest));
            let body = json!(f);
            if !f.is_finite() {
                assert!(body.is_null());
                return;
            }
            assert!(header_matches(&f.to_string(), &body), "{f} vs {body}");
            assert!(header_matches(&format!("{f:e}"), &body), "{f:e} vs {body}");
            let next = f64::from_bits(f.to_bits() + 1);
            if next.is_finite() && next != f {
                assert!(
                    !header_matches(&next.to_string(), &body),
                    "{next} vs {body}"
                );
            }
            assert!(!header_matches("true", &body));
        }
    }
});
