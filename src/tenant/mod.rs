//! Tenants: each has a slug, a catalog, a policy and a session supervisor. `TenantRegistry` finds
//! the live ones; `TenantDirectory` keeps them in step with the store; the `Tenant` extractor
//! resolves `/t/{tenant}/…` once, so handlers never see a loose slug.

mod directory;
mod policy;

pub use directory::TenantDirectory;
pub use policy::TenantPolicy;

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::{ready, Ready};
use parking_lot::RwLock;

use crate::catalog::CatalogHandle;
use crate::session::{TenantSessions, TenantSupervisor};
use crate::transport::HttpError;

/// A live tenant.
#[derive(Clone)]
pub struct TenantHandle {
    pub slug: Arc<str>,
    pub catalog: CatalogHandle,
    pub supervisor: Addr<TenantSupervisor>,
    pub sessions: Arc<TenantSessions>,
    pub policy: Arc<TenantPolicy>,
}

/// The tenants this replica serves.
#[derive(Clone, Default)]
pub struct TenantRegistry(Arc<RwLock<HashMap<Arc<str>, TenantHandle>>>);

impl TenantRegistry {
    pub fn get(&self, slug: &str) -> Option<TenantHandle> {
        self.0.read().get(slug).cloned()
    }
    pub fn insert(&self, tenant: TenantHandle) {
        self.0.write().insert(tenant.slug.clone(), tenant);
    }
    pub fn remove(&self, slug: &str) -> Option<TenantHandle> {
        self.0.write().remove(slug)
    }
    pub fn slugs(&self) -> Vec<Arc<str>> {
        let mut slugs: Vec<_> = self.0.read().keys().cloned().collect();
        slugs.sort();
        slugs
    }
}

/// Splits `/t/{tenant}/{endpoint}` into its slug and endpoint.
pub fn split_tenant_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/t/")?;
    let (slug, endpoint) = rest.split_once('/')?;
    (!slug.is_empty() && !endpoint.contains('/')).then_some((slug, endpoint))
}

/// The tenant named by the request path (`/t/{tenant}/…`); unknown slugs are 404.
pub struct Tenant(pub TenantHandle);

impl Tenant {
    pub fn resolve(req: &HttpRequest) -> Result<Tenant, HttpError> {
        let slug = split_tenant_path(req.path()).map_or("", |(slug, _)| slug);
        req.app_data::<web::Data<TenantRegistry>>()
            .and_then(|r| r.get(slug))
            .map(Tenant)
            .ok_or_else(|| HttpError::not_found(format!("Unknown tenant: {slug}")))
    }
}

impl FromRequest for Tenant {
    type Error = HttpError;
    type Future = Ready<Result<Tenant, HttpError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Tenant::resolve(req))
    }
}
