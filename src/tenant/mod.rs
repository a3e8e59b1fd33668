//! Tenants: each has a slug, a catalog, a policy and a session supervisor. `TenantRegistry` finds
//! the live ones on this replica; `TenantDirectory` keeps them in step with the store and with
//! the other replicas (over the bus), and resolves a tenant another replica just created.

mod directory;
mod policy;

pub use directory::{TenantDirectory, TenantEvent, TENANTS_TOPIC};
pub use policy::{PolicyRefusal, TenantPolicy};

use std::sync::Arc;

use actix::Addr;
use parking_lot::RwLock;

use crate::catalog::CatalogHandle;
use crate::session::{Sessions, TenantSupervisor};

/// A live tenant.
#[derive(Clone)]
pub struct TenantHandle {
    pub slug: Arc<str>,
    pub catalog: CatalogHandle,
    /// Shared: cloning an actix `Addr` allocates (a sender task of its own), and a handle is
    /// cloned on every request.
    pub supervisor: Arc<Addr<TenantSupervisor>>,
    pub sessions: Sessions,
    pub policy: Arc<TenantPolicy>,
}

/// The tenants this replica serves.
#[derive(Clone, Default)]
pub struct TenantRegistry(Arc<RwLock<crate::FastMap<Arc<str>, TenantHandle>>>);

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
