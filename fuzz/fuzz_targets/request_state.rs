//! `requestState` of multi round-trip requests (2026-07-28, `stateless::mrtr::Token`): the text a
//! client sends back on a retry, opened as is under the tenant its request is addressed to (a
//! fixed test key).
//!
//! Input: `tenant \0 other tenant \0 round id \0` and eight bytes of round number and expiry;
//! the whole input is also opened as if a client had sent it.
//!
//! Invariants:
//! - text the deployment did not seal opens to nothing, and never panics (the fuzzer cannot
//!   forge a tag);
//! - a sealed token opens to itself under its tenant, and under no other tenant;
//! - any single-byte change of a sealed state fails to open;
//! - a state never opens as a recorded round (`round_state`) of any tenant and round id, nor a
//!   round as a state: a valid slug holds no `:`, so the two purposes never meet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::auth::seal::purpose::round_state;
use mcp_harbor::config::is_valid_slug;
use mcp_harbor::stateless::mrtr::Token;

#[path = "../shared/sealing.rs"]
mod sealing;
use sealing::{sealer, single_byte_changes};

fuzz_target!(|data: &[u8]| {
    let s = sealer();
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(Token::open(s, "acme", text), None, "opened {text:?}");
    }
    let mut fields = data.splitn(4, |&b| b == 0);
    let (Some(tenant), Some(other), Some(id), Some(numbers)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return;
    };
    let (Ok(tenant), Ok(other), Ok(id)) = (
        std::str::from_utf8(tenant),
        std::str::from_utf8(other),
        std::str::from_utf8(id),
    ) else {
        return;
    };
    if !is_valid_slug(tenant) {
        return;
    }
    let mut raw = [0u8; 12];
    raw[..numbers.len().min(12)].copy_from_slice(&numbers[..numbers.len().min(12)]);
    let token = Token {
        id: id.to_string(),
        round: u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
        exp: i64::from_le_bytes([
            raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11],
        ]),
    };
    let state = token.seal(s, tenant).expect("seals");
    assert_eq!(Token::open(s, tenant, &state).as_ref(), Some(&token));
    if other != tenant {
        assert_eq!(
            Token::open(s, other, &state),
            None,
            "opened under {other:?}"
        );
    }
    // The recorded round and the client's state are sealed under purposes that never meet.
    if is_valid_slug(other) {
        assert!(s.open(&round_state(other, id), &state).is_err());
        // The token itself sealed as a round: only the purpose differs from a state.
        let token_bytes = serde_json::to_vec(&token).expect("serialises");
        let round = s.seal(&round_state(other, id), &token_bytes);
        assert_eq!(Token::open(s, tenant, &round), None);
        assert_eq!(Token::open(s, other, &round), None);
    }

    // Single-byte changes at positions the input chooses, and at both ends.
    let bytes = state.as_bytes();
    let positions = numbers
        .iter()
        .take(6)
        .map(|&b| b as usize * bytes.len() / 256)
        .chain([0, bytes.len() - 1]);
    for (i, changed) in single_byte_changes(&state, positions) {
        assert_eq!(
            Token::open(s, tenant, &changed),
            None,
            "{changed:?} (byte {i} of {state:?} changed) opened"
        );
    }
});
