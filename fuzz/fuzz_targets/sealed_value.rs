//! Sealed values (`auth::seal::Sealer`, XChaCha20-Poly1305 under a fixed test key, bound to a
//! purpose): signing keys and client secrets at rest, and the sealed `state` of a federated
//! sign-in, which comes back from the browser (`oauth/callback`) and is opened as is. The
//! `requestState` of multi round-trip requests has a target of its own (`request_state`).
//!
//! Input: `purpose \0 plaintext`; the whole input is also opened as if it were a sealed value,
//! and key specs are read from it line by line.
//!
//! Invariants:
//! - a sealed value opens to its plaintext, under its purpose only;
//! - any single-byte change of a sealed value fails to open (malformed, unknown key or forged);
//! - anything not made by `seal` fails to open (the fuzzer cannot forge the tag);
//! - sealing twice never gives the same text (random nonces);
//! - a key spec either configures a 32-byte key or is refused, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::auth::seal::Sealer;

#[path = "../shared/sealing.rs"]
mod sealing;
use sealing::{sealer, single_byte_changes};

fuzz_target!(|data: &[u8]| {
    let s = sealer();
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(s.open("oidc-state:acme", text).is_err(), "opened {text:?}");
        for line in text.lines() {
            let _ = Sealer::from_specs(&[line]);
        }
    }
    let (purpose, plaintext) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"signing-key:acme"[..], data),
    };
    let Ok(purpose) = std::str::from_utf8(purpose) else {
        return;
    };
    let sealed = s.seal(purpose, plaintext);
    assert!(sealed.starts_with("v1.fuzz."));
    assert!(!s.is_stale(&sealed));
    assert_eq!(s.open(purpose, &sealed).expect("opens"), plaintext);
    assert!(s.open(&format!("{purpose}x"), &sealed).is_err());
    assert_ne!(s.seal(purpose, plaintext), sealed, "a nonce was reused");

    // Every single-byte change: a few positions chosen by the input, and every byte of short
    // values.
    let bytes = sealed.as_bytes();
    let positions: Vec<usize> = if bytes.len() <= 96 {
        (0..bytes.len()).collect()
    } else {
        data.iter()
            .take(8)
            .map(|&b| b as usize * bytes.len() / 256)
            .chain([0, 8, bytes.len() - 1])
            .collect()
    };
    for (i, changed) in single_byte_changes(&sealed, positions) {
        assert!(
            s.open(purpose, &changed).is_err(),
            "{changed:?} (byte {i} of {sealed:?} changed) opened"
        );
    }
});
