//! OAuth request parsing: token-endpoint form bodies (`oauth::token::form_map`), client
//! registration metadata (`ClientInput` + `oauth::clients::validate_metadata`), redirect URIs
//! (`check_redirect_uri`, `redirect_matches`), PKCE S256 (`oauth::token::pkce_ok`) and bearer
//! token headers (`auth::tokens::header_kid`). The authorization request itself is validated
//! against the store (`authorize::validate`, async) and is reached through these pieces.
//!
//! Input: a mode byte, then the mode's text.
//!
//! Invariants:
//! - form: a body is refused only for a repeated parameter; an accepted body re-encodes and
//!   parses back to the same parameters;
//! - metadata: what is stored validates again to itself, and holds only redirect URIs that pass
//!   `check_redirect_uri`, known grant types and methods, and `response_types: ["code"]`;
//! - redirect URIs: a valid registered URI matches itself; a different presented URI matches
//!   only when it is the registered one on another port (RFC 8252 §7.3), and then it passes
//!   `check_redirect_uri` itself;
//! - PKCE: a verifier is accepted with its own S256 challenge exactly when well formed, and
//!   never with any other challenge (one character changed, or the fuzzed one).
#![no_main]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use mcp_harbor::auth::tokens::header_kid;
use mcp_harbor::oauth::clients::{
    check_redirect_uri, redirect_matches, validate_metadata, ClientInput,
};
use mcp_harbor::oauth::token::{form_map, pkce_ok};
use sha2::Digest;

fn form(body: &[u8]) {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    let repeated = keys.windows(2).any(|w| w[0] == w[1]);
    match form_map(body) {
        Ok(map) => {
            assert!(!repeated);
            assert_eq!(map.len(), pairs.len());
            for (k, v) in &pairs {
                assert_eq!(map.get(k), Some(v));
            }
            let mut ser = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &map {
                ser.append_pair(k, v);
            }
            let again = form_map(ser.finish().as_bytes()).expect("re-encoded form");
            assert_eq!(again, map);
        }
        Err(e) => {
            assert!(repeated, "refused without a repeated parameter: {e}");
            assert_eq!(e.error, "invalid_request");
        }
    }
}

fn metadata(body: &[u8]) {
    let Ok(input) = serde_json::from_slice::<ClientInput>(body) else {
        return;
    };
    let Ok(stored) = validate_metadata(input) else {
        return;
    };
    let again: ClientInput = serde_json::from_value(stored.clone()).expect("stored metadata reads");
    assert_eq!(validate_metadata(again).ok().as_ref(), Some(&stored));
    let strings = |key: &str| -> Vec<String> {
        stored[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|v| v.as_str().expect("string").to_string())
            .collect()
    };
    for uri in strings("redirect_uris") {
        assert_eq!(check_redirect_uri(&uri), Ok(()));
    }
    let grants = strings("grant_types");
    for g in &grants {
        assert!(matches!(
            g.as_str(),
            "authorization_code" | "refresh_token" | "client_credentials"
        ));
    }
    assert!(strings("response_types").iter().all(|r| r == "code"));
    let method = stored["token_endpoint_auth_method"]
        .as_str()
        .expect("method");
    assert!(matches!(
        method,
        "none" | "client_secret_basic" | "client_secret_post"
    ));
    assert!(!(method == "none" && grants.iter().any(|g| g == "client_credentials")));
}

fn redirect(text: &str) {
    let (registered, presented) = text.split_once('\n').unwrap_or((text, text));
    if check_redirect_uri(registered).is_err() {
        return;
    }
    assert!(redirect_matches(registered, registered));
    if registered == presented || !redirect_matches(registered, presented) {
        return;
    }
    assert_eq!(
        check_redirect_uri(presented),
        Ok(()),
        "{presented:?} matched {registered:?}"
    );
    let r = url::Url::parse(registered).expect("registered");
    let mut p = url::Url::parse(presented).expect("presented");
    p.set_port(r.port()).expect("an http URL has a port");
    assert_eq!(
        p.as_str(),
        r.as_str(),
        "{presented:?} matched {registered:?} but differs in more than its port"
    );
}

fn pkce(text: &str) {
    let (verifier, other) = text.split_once('\n').unwrap_or((text, ""));
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    assert_eq!(pkce_ok(verifier, &challenge), well_formed);
    assert_eq!(pkce_ok(verifier, other), well_formed && other == challenge);
    let i = verifier.len() % challenge.len();
    let mut changed = challenge.clone().into_bytes();
    changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
    assert!(!pkce_ok(verifier, std::str::from_utf8(&changed).unwrap()));
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 5 {
        0 => form(rest),
        1 => metadata(rest),
        2 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                redirect(text)
            }
        }
        3 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                pkce(text)
            }
        }
        _ => {
            if let Ok(token) = std::str::from_utf8(rest) {
                if header_kid(token).is_ok() {
                    assert!(token.contains('.'), "{token:?} read as a JWT");
                }
            }
        }
    }
});
