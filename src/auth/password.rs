//! Tenant users' passwords: argon2id PHC strings. Verification takes the same time whether or
//! not the user exists (a dummy hash is checked for unknown users).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use std::sync::LazyLock;

pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

static DUMMY: LazyLock<String> =
    LazyLock::new(|| hash_password("not a password").unwrap_or_default());

/// Checks `password` against `hash` (`None`: an unknown user, checked against a dummy).
pub fn verify_password(password: &str, hash: Option<&str>) -> bool {
    let stored = hash.unwrap_or(DUMMY.as_str());
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
        && hash.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash_password("correct horse").unwrap();
        let b = hash_password("correct horse").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", Some(&a)));
        assert!(!verify_password("wrong", Some(&a)));
        assert!(!verify_password("not a password", None));
    }
}
