//! The admin credential: one bearer token, configured or generated on first start (printed once),
//! stored only as its SHA-256 hash and compared in constant time. A token is 256 random bits,
//! so a fast hash is enough (no password stretching needed).

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use base64::Engine;
use futures_util::future::{ready, LocalBoxFuture, Ready};
use parking_lot::RwLock;
use rand::RngCore;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AdminError, AdminState};
use crate::store::{AdminStore, StoreError, TenantRecord, TenantStore};

/// Hex SHA-256 of a token.
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub struct AdminAuth {
    hash: RwLock<Option<String>>,
}

impl AdminAuth {
    /// Loads the stored hash; a configured token replaces it, and with neither a new token is
    /// generated. Returns the generated token (to show the operator once).
    pub async fn init(
        store: &impl AdminStore,
        configured: &SecretString,
    ) -> Result<(AdminAuth, Option<String>), StoreError> {
        let configured = configured.expose_secret();
        let mut generated = None;
        let hash = if !configured.is_empty() {
            let hash = hash_token(configured);
            if store.admin_token_hash().await?.as_deref() != Some(hash.as_str()) {
                store.set_admin_token_hash(&hash).await?;
            }
            hash
        } else if let Some(hash) = store.admin_token_hash().await? {
            hash
        } else {
            let mut bytes = [0u8; 32];
            rand::rng().fill_bytes(&mut bytes);
            let token = format!(
                "mh_admin_{}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
            );
            let hash = hash_token(&token);
            store.set_admin_token_hash(&hash).await?;
            generated = Some(token);
            hash
        };
        Ok((
            AdminAuth {
                hash: RwLock::new(Some(hash)),
            },
            generated,
        ))
    }

    fn verify(&self, token: &str) -> bool {
        let presented = hash_token(token);
        self.hash
            .read()
            .as_deref()
            .is_some_and(|stored| bool::from(stored.as_bytes().ct_eq(presented.as_bytes())))
    }
}

/// Proof that the request carried the admin token (and no query parameter its operation does not
/// take: see `openapi::check_query`).
pub struct Admin;

impl FromRequest for Admin {
    type Error = AdminError;
    type Future = Ready<Result<Admin, AdminError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = req
            .headers()
            .get("authorization")
            .and_then(|v| crate::auth::operator_token(v.as_bytes()));
        let ok = match (token, req.app_data::<web::Data<AdminAuth>>()) {
            (Some(t), Some(auth)) => auth.verify(t),
            _ => false,
        };
        ready(if !ok {
            Err(AdminError::unauthorized())
        } else {
            // Every authenticated operation refuses query parameters it does not document.
            super::openapi::check_query(req).map(|()| Admin)
        })
    }
}

/// The tenant an admin API path names (`/tenants/{slug}/…`), for the operations on what it
/// owns: the admin credential checked first (as [`Admin`]: an unauthenticated request costs no
/// store read), then the tenant's record read from the store once, 404 when there is none.
pub struct AdminTenant {
    pub record: TenantRecord,
}

impl AdminTenant {
    pub fn slug(&self) -> &str {
        &self.record.slug
    }
}

impl FromRequest for AdminTenant {
    type Error = AdminError;
    type Future = LocalBoxFuture<'static, Result<AdminTenant, AdminError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let admitted = Admin::from_request(req, payload).into_inner();
        let state = req.app_data::<web::Data<AdminState>>().cloned();
        let slug = req.match_info().get("slug").map(str::to_string);
        Box::pin(async move {
            admitted?;
            let (Some(state), Some(slug)) = (state, slug) else {
                return Err(AdminError::internal());
            };
            let record = state
                .directory
                .store
                .get_tenant(&slug)
                .await?
                .ok_or_else(|| AdminError::not_found(format!("no tenant {slug:?}")))?;
            Ok(AdminTenant { record })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_hex_sha256() {
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
