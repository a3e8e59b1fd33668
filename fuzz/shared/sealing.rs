//! What the fuzz targets that seal and open (`sealed_value`, `request_state`) share: one fixed
//! key, so a value sealed in a run opens in any other, and the tampered copies of a sealed value.

use std::sync::OnceLock;

use mcp_harbor::auth::seal::Sealer;

/// `fuzz:` + base64 of 32 fixed bytes.
const SPEC: &str = "fuzz:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pub fn sealer() -> &'static Sealer {
    static S: OnceLock<Sealer> = OnceLock::new();
    S.get_or_init(|| Sealer::from_specs(&[SPEC]).expect("the test key"))
}

/// Copies of `sealed` with one byte changed, at each of `positions`, with the position changed:
/// a flipped bit, a shifted byte and a few characters of the encoding's own.
pub fn single_byte_changes(
    sealed: &str,
    positions: impl IntoIterator<Item = usize>,
) -> Vec<(usize, String)> {
    let bytes = sealed.as_bytes();
    let mut changes = Vec::new();
    for i in positions {
        for replacement in [bytes[i] ^ 1, bytes[i].wrapping_add(7), b'A', b'.', b'_'] {
            if replacement == bytes[i] {
                continue;
            }
            let mut changed = bytes.to_vec();
            changed[i] = replacement;
            if let Ok(changed) = String::from_utf8(changed) {
                changes.push((i, changed));
            }
        }
    }
    changes
}
