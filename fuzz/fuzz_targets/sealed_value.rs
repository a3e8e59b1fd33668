//! Sealed values (`auth::seal::Sealer`, XChaCha20-Poly1305 under a fixed test key, bound to a
//! purpose): signing keys and client secrets at rest, and the sealed `state` of a federated
//! sign-in, which comes back from the browser (`oauth/callback`) and is opened as is. The
//! request-state sealing of issue 9 does not exist yet.
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

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_harbor::auth::seal::Sealer;

/// `fuzz:` + base64 of 32 fixed bytes.
const SPEC: &str = "fuzz:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn sealer() -> &'static Sealer {
    static S: OnceLock<Sealer> = OnceLock::new();
    S.get_or_init(|| Sealer::from_specs(&[SPEC]).expect("the test key"))
}

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
    for i in positions {
        for replacement in [bytes[i] ^ 1, bytes[i].wrapping_add(7), b'A', b'.', b'_'] {
            if replacement == bytes[i] {
                continue;
            }
            let mut changed = bytes.to_vec();
            changed[i] = replacement;
            let Ok(changed) = String::from_utf8(changed) else {
                continue;
            };
            assert!(
                s.open(purpose, &changed).is_err(),
                "{changed:?} (byte {i} of {sealed:?} changed) opened"
            );
        }
    }
});
