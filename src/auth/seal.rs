//! Secrets at rest: private signing keys and upstream client secrets are sealed with
//! XChaCha20-Poly1305 under a key from configuration (`auth.sealing_keys`, the first one seals,
//! all of them open, so keys rotate by prepending a new one). A sealed value names its key and is
//! bound to its purpose (associated data), so a value sealed for one column or tenant cannot be
//! replayed into another. Format: `v1.<key id>.<base64url(nonce ‖ ciphertext)>`.

use std::path::Path;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::zeroize::Zeroizing;
use secrecy::{ExposeSecret, SecretSlice};

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("sealing key {0:?} is not configured")]
    UnknownKey(String),
    #[error("sealed value is malformed")]
    Malformed,
    #[error("sealed value failed authentication (tampered, or sealed for another purpose)")]
    Forged,
    #[error("invalid sealing key configuration: {0}")]
    Config(String),
}

pub struct Sealer {
    /// (id, 32-byte key); the first seals.
    keys: Vec<(String, SecretSlice<u8>)>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Sealer").field("keys", &ids).finish()
    }
}

impl Sealer {
    /// Keys written `id:base64(32 bytes)`.
    pub fn from_specs<S: AsRef<str>>(specs: &[S]) -> Result<Sealer, SealError> {
        let mut keys = Vec::new();
        for spec in specs {
            let spec = spec.as_ref().trim();
            let (id, b64) = spec
                .split_once(':')
                .ok_or_else(|| SealError::Config("a key is written id:base64".into()))?;
            if id.is_empty() || id.contains('.') {
                return Err(SealError::Config(format!(
                    "key id {id:?} must be non-empty without '.'"
                )));
            }
            let bytes = STANDARD
                .decode(b64)
                .or_else(|_| URL_SAFE_NO_PAD.decode(b64.trim_end_matches('=')))
                .map_err(|_| SealError::Config(format!("key {id:?} is not base64")))?;
            if bytes.len() != 32 {
                return Err(SealError::Config(format!(
                    "key {id:?} must be 32 bytes, not {}",
                    bytes.len()
                )));
            }
            keys.push((id.to_string(), SecretSlice::from(bytes)));
        }
        if keys.is_empty() {
            return Err(SealError::Config("no sealing key".into()));
        }
        Ok(Sealer { keys })
    }

    /// The configured keys, or (embedded default) a key generated once into
    /// `<data_dir>/sealing.key` (mode 0600).
    pub fn from_config_or_file<S: AsRef<str>>(
        specs: &[S],
        data_dir: &Path,
    ) -> Result<Sealer, SealError> {
        if !specs.is_empty() {
            return Self::from_specs(specs);
        }
        let path = data_dir.join("sealing.key");
        if let Ok(text) = std::fs::read_to_string(&path) {
            return Self::from_specs(&[text.trim()]);
        }
        let spec = format!("local:{}", STANDARD.encode(rand::random::<[u8; 32]>()));
        std::fs::create_dir_all(data_dir)
            .map_err(|e| SealError::Config(format!("{}: {e}", data_dir.display())))?;
        write_private(&path, &spec)
            .map_err(|e| SealError::Config(format!("{}: {e}", path.display())))?;
        tracing::info!(path = %path.display(), "generated a sealing key for secrets at rest; set auth.sealing_keys (the same on every replica) in production");
        Self::from_specs(&[spec])
    }

    /// A fresh random key spec (for `mcp-harbor admin keys generate` and tests).
    pub fn generate_spec(id: &str) -> String {
        format!("{id}:{}", STANDARD.encode(rand::random::<[u8; 32]>()))
    }

    fn cipher(key: &SecretSlice<u8>) -> XChaCha20Poly1305 {
        // A 32-byte key was checked when configured.
        let bytes: [u8; 32] = key.expose_secret().try_into().unwrap_or([0; 32]);
        XChaCha20Poly1305::new(&chacha20poly1305::Key::from(bytes))
    }

    pub fn seal(&self, purpose: &str, plaintext: &[u8]) -> String {
        let (id, key) = &self.keys[0];
        let nonce_bytes: [u8; 24] = rand::random();
        let nonce = XNonce::from(nonce_bytes);
        let sealed = Self::cipher(key)
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: purpose.as_bytes(),
                },
            )
            .unwrap_or_default();
        let mut out = nonce_bytes.to_vec();
        out.extend_from_slice(&sealed);
        format!("v1.{id}.{}", URL_SAFE_NO_PAD.encode(out))
    }

    pub fn open(&self, purpose: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some("v1"), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(SealError::Malformed);
        };
        let (_, key) = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_string()))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Malformed)?;
        if bytes.len() < 24 + 16 {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = bytes.split_at(24);
        let nonce: [u8; 24] = nonce.try_into().map_err(|_| SealError::Malformed)?;
        Self::cipher(key)
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: purpose.as_bytes(),
                },
            )
            .map_err(|_| SealError::Forged)
    }

    /// Whether `sealed` was sealed under an older key (and should be re-sealed).
    pub fn is_stale(&self, sealed: &str) -> bool {
        key_id(sealed) != Some(self.first_key_id())
    }

    /// The id of the key that seals.
    pub fn first_key_id(&self) -> &str {
        &self.keys[0].0
    }

    /// The configured key ids, the sealing one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// `sealed` opened and sealed again under the first key, or `None` when it already is.
    pub fn reseal(&self, purpose: &str, sealed: &str) -> Result<Option<String>, SealError> {
        if !self.is_stale(sealed) {
            // Still authenticated, so a forged value is never reported as current.
            self.open(purpose, sealed)?;
            return Ok(None);
        }
        let plain = Zeroizing::new(self.open(purpose, sealed)?);
        Ok(Some(self.seal(purpose, &plain)))
    }
}

/// The id of the key a sealed value names (`v1.<id>.…`), if it has that form.
pub fn key_id(sealed: &str) -> Option<&str> {
    let mut parts = sealed.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("v1"), Some(id), Some(_)) => Some(id),
        _ => None,
    }
}

/// What each kind of sealed value is bound to (its associated data): one function per kind, so
/// every writer, reader and the re-sealing job agree. A value sealed for one tenant, key, tool
/// or elicitation does not open as another's.
pub mod purpose {
    /// A tenant's private token-signing key.
    pub fn signing_key(tenant: &str, kid: &str) -> String {
        format!("signing-key:{tenant}:{kid}")
    }
    /// The client secret of a tenant's upstream OpenID provider.
    pub fn oidc_client_secret(tenant: &str) -> String {
        format!("oidc-client-secret:{tenant}")
    }
    /// A secret a user entered on an elicitation page.
    pub fn elicitation_secret(tenant: &str, id: &str) -> String {
        format!("elicitation-secret:{tenant}:{id}")
    }
    /// A stateless request's `requestState` token (held by the client, not stored).
    pub fn request_state(tenant: &str) -> String {
        format!("mrtr-request-state:{tenant}")
    }
    /// A stateless request's recorded round.
    pub fn round_state(tenant: &str, id: &str) -> String {
        format!("mrtr-request-state:{tenant}:{id}")
    }
    /// A forwarded request's proof that the forwarding replica counted it against the rates
    /// (held by the request for one hop, not stored).
    pub const COUNTED_REQUEST: &str = "counted-request";
    /// The signing secret of a tenant's webhook tool.
    pub fn webhook_secret(tenant: &str, tool: &str) -> String {
        format!("webhook-secret:{tenant}:tool:{tool}")
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_refuses_tampering_or_another_purpose() {
        let s = Sealer::from_specs(&[Sealer::generate_spec("k1")]).unwrap();
        let sealed = s.seal("signing-key:acme", b"secret");
        assert!(!sealed.contains("secret"));
        assert_eq!(s.open("signing-key:acme", &sealed).unwrap(), b"secret");
        assert!(matches!(
            s.open("signing-key:other", &sealed),
            Err(SealError::Forged)
        ));
        let mut forged = sealed.clone();
        forged.pop();
        forged.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(s.open("signing-key:acme", &forged).is_err());
        // Rotation: a new first key seals; the old one still opens.
        let rotated =
            Sealer::from_specs(&[Sealer::generate_spec("k2"), s.keys_spec_for_test()]).unwrap();
        assert_eq!(
            rotated.open("signing-key:acme", &sealed).unwrap(),
            b"secret"
        );
        assert!(rotated.is_stale(&sealed));
        assert!(Sealer::from_specs(&["k:c2hvcnQ="]).is_err());
    }

    impl Sealer {
        fn keys_spec_for_test(&self) -> String {
            format!(
                "{}:{}",
                self.keys[0].0,
                STANDARD.encode(self.keys[0].1.expose_secret())
            )
        }
    }
}
