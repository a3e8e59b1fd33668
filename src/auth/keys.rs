//! Per-tenant token-signing keys: ES256 (P-256) pairs, the private half sealed in the database,
//! published as a JWKS. The newest key signs; retired keys stay published (and verify) until the
//! tokens they signed have expired, so rotation never breaks a live token. Each replica caches a
//! tenant's keys and reloads them when it meets an unknown `kid` (another replica rotated) or
//! hears of a rotation on the bus.

use std::collections::HashMap;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey};
use p256::ecdsa::SigningKey;
use p256::pkcs8::EncodePrivateKey;
use parking_lot::RwLock;
use serde_json::{json, Value};

use super::seal::purpose::signing_key as purpose;
use super::seal::Sealer;
use super::AuthError;
use crate::store::{now_millis, OAuthStore, SigningKeyRecord};

pub const ALG: &str = "ES256";

pub struct ActiveKey {
    pub kid: String,
    pub encoding: EncodingKey,
}

/// A tenant's keys as this replica knows them.
pub struct TenantKeys {
    pub active: Option<ActiveKey>,
    /// The kid of an unretired key whose private half does not open here (a sealing key this
    /// replica lacks): tokens are still verified, none is signed.
    pub unopened: Option<String>,
    pub verifying: HashMap<String, DecodingKey>,
    /// The published JWKS (`{"keys": […]}`).
    pub jwks: Value,
}

/// How long a replica trusts its copy of a tenant's keys (a rotation elsewhere is picked up
/// within this time, or at once when a token names a new `kid`).
const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Default)]
pub struct KeyRing {
    cache: RwLock<HashMap<String, (std::time::Instant, Arc<TenantKeys>)>>,
}

/// A new ES256 key for `tenant`, its private half sealed.
pub fn generate(tenant: &str, sealer: &Sealer) -> Result<SigningKeyRecord, AuthError> {
    let key = loop {
        // Rejection sampling: almost every 32-byte string is a valid P-256 scalar.
        if let Ok(k) = SigningKey::from_slice(&rand::random::<[u8; 32]>()) {
            break k;
        }
    };
    let der = key
        .to_pkcs8_der()
        .map_err(|e| AuthError::Internal(format!("pkcs8: {e}")))?;
    let point = key.verifying_key().to_encoded_point(false);
    let (Some(x), Some(y)) = (point.x(), point.y()) else {
        return Err(AuthError::Internal(
            "P-256 point without coordinates".into(),
        ));
    };
    let kid = format!(
        "{}-{}",
        now_millis(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    Ok(SigningKeyRecord {
        public_jwk: json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": ALG, "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
        }),
        private_key: sealer.seal(&purpose(tenant, &kid), der.as_bytes()),
        kid,
        alg: ALG.into(),
        created_at: now_millis(),
        retired_at: None,
    })
}

impl KeyRing {
    pub fn forget(&self, tenant: &str) {
        self.cache.write().remove(tenant);
    }

    /// The tenant's keys (loaded once per replica).
    pub async fn get(
        &self,
        store: &impl OAuthStore,
        sealer: &Sealer,
        tenant: &str,
    ) -> Result<Arc<TenantKeys>, AuthError> {
        if let Some((at, keys)) = self.cache.read().get(tenant) {
            if at.elapsed() < CACHE_TTL {
                return Ok(keys.clone());
            }
        }
        self.load(store, sealer, tenant).await
    }

    /// Reloads the tenant's keys from the database.
    pub async fn load(
        &self,
        store: &impl OAuthStore,
        sealer: &Sealer,
        tenant: &str,
    ) -> Result<Arc<TenantKeys>, AuthError> {
        let records = store.signing_keys(tenant).await?;
        let keys = Arc::new(build(tenant, &records, sealer)?);
        self.cache.write().insert(
            tenant.to_string(),
            (std::time::Instant::now(), keys.clone()),
        );
        Ok(keys)
    }

    /// The key that signs now, created on first use.
    pub async fn signing(
        &self,
        store: &impl OAuthStore,
        sealer: &Sealer,
        tenant: &str,
    ) -> Result<Arc<TenantKeys>, AuthError> {
        let keys = self.get(store, sealer, tenant).await?;
        if keys.active.is_some() {
            return Ok(keys);
        }
        if let Some(kid) = &keys.unopened {
            // Not a reason to make another key: every other replica signs with this one.
            return Err(AuthError::Internal(format!(
                "signing key {kid} does not open on this replica: configure every sealing key \
                 (auth.sealing_keys) on every replica"
            )));
        }
        self.rotate(store, sealer, tenant).await?;
        self.load(store, sealer, tenant).await
    }

    /// A new signing key; the previous ones retire (still published until their tokens expire).
    pub async fn rotate(
        &self,
        store: &impl OAuthStore,
        sealer: &Sealer,
        tenant: &str,
    ) -> Result<String, AuthError> {
        let record = generate(tenant, sealer)?;
        store.rotate_signing_key(tenant, &record).await?;
        self.load(store, sealer, tenant).await?;
        Ok(record.kid)
    }
}

fn build(
    tenant: &str,
    records: &[SigningKeyRecord],
    sealer: &Sealer,
) -> Result<TenantKeys, AuthError> {
    let mut verifying = HashMap::new();
    let mut published = Vec::new();
    let mut active = None;
    let mut unopened = None;
    for r in records {
        let (Some(x), Some(y)) = (
            r.public_jwk.get("x").and_then(Value::as_str),
            r.public_jwk.get("y").and_then(Value::as_str),
        ) else {
            tracing::warn!(tenant, kid = %r.kid, "signing key without coordinates skipped");
            continue;
        };
        let Ok(decoding) = DecodingKey::from_ec_components(x, y) else {
            tracing::warn!(tenant, kid = %r.kid, "unreadable public key skipped");
            continue;
        };
        verifying.insert(r.kid.clone(), decoding);
        published.push(r.public_jwk.clone());
        if r.retired_at.is_none() {
            // The newest unretired key signs (records come oldest first). One that does not
            // open here (a replica without the sealing key that sealed it, during a rollout)
            // leaves this replica verifying tokens, not signing them.
            match sealer.open(&purpose(tenant, &r.kid), &r.private_key) {
                Ok(der) => {
                    let der = secrecy::zeroize::Zeroizing::new(der);
                    active = Some(ActiveKey {
                        kid: r.kid.clone(),
                        encoding: EncodingKey::from_ec_der(&der),
                    });
                    unopened = None;
                }
                Err(e) => {
                    tracing::error!(tenant, kid = %r.kid, error = %e, "the tenant's signing key does not open here; tokens are verified, not signed, until every sealing key is configured");
                    active = None;
                    unopened = Some(r.kid.clone());
                }
            }
        }
    }
    Ok(TenantKeys {
        active,
        unopened,
        verifying,
        jwks: json!({ "keys": published }),
    })
}
