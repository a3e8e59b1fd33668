//! Standard Webhooks signing: the tenant's secret (`whsec_` + base64 key), its checks, a new
//! one, the signature of a delivery and the `webhook-id` of each round.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use secrecy::zeroize::Zeroizing;
use secrecy::SecretString;
use sha2::Sha256;

use super::{BASE64, SECRET_PREFIX};

/// The `webhook-id` of one round of a call: derived from the call's stable identity, so a call
/// re-sent after a failover carries the same id, and unguessable from outside.
pub fn message_id(call_key: &str, round: usize) -> String {
    use sha2::Digest;
    let digest = Sha256::digest(format!("{call_key}\u{0}{round}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{hex}")
}

/// The shortest HMAC key a tenant may set (128 bits; Standard Webhooks suggests 24 to 64 bytes).
pub const MIN_SECRET_BYTES: usize = 16;

/// Checks a signing secret a tenant sets: valid (as [`sign`] takes it) and a key of at least
/// [`MIN_SECRET_BYTES`].
pub fn check_secret(secret: &str) -> Result<(), String> {
    let key = secret_key(secret)?;
    if key.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "the webhook secret's key is {} bytes; at least {MIN_SECRET_BYTES} are needed",
            key.len()
        ));
    }
    Ok(())
}

/// The HMAC key of a signing secret: the base64 after its `whsec_` prefix (a secret without the
/// prefix is taken as plain base64), decoded; not empty.
fn secret_key(secret: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = Zeroizing::new(BASE64.decode(encoded).map_err(|e| {
        format!("the webhook secret is not valid base64 after {SECRET_PREFIX}: {e}")
    })?);
    if key.is_empty() {
        return Err("the webhook secret is empty".to_string());
    }
    Ok(key)
}

/// A new signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> SecretString {
    let key = Zeroizing::new(rand::random::<[u8; 32]>());
    SecretString::from(format!("{SECRET_PREFIX}{}", BASE64.encode(*key)))
}

/// The Standard Webhooks signature header value, `v1,<base64 HMAC-SHA256>` over
/// `"{msg_id}.{timestamp}.{body}"`, keyed with the base64-decoded secret (after its `whsec_`
/// prefix; a secret without the prefix is taken as plain base64).
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, String> {
    let key = secret_key(secret)?;
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key)
        .map_err(|e| format!("the webhook secret cannot key HMAC-SHA256: {e}"))?;
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())))
}
