//! `TenantDirectory`: keeps the live tenants (registry, supervisors, catalogs, policies) in step
//! with the store. The admin API writes the store, then tells the directory, which rebuilds what
//! changed and tells live sessions (list_changed, resources/updated, streams ended).

use std::sync::Arc;

use actix::Actor;

use super::{TenantHandle, TenantPolicy, TenantRegistry};
use crate::catalog::stored::{StoredCatalog, WebhookRuntime};
use crate::catalog::{Catalog, CatalogHandle, TenantCatalog};
use crate::eventlog::EventLog;
use crate::session::supervisor::{StopAll, TenantBroadcast};
use crate::session::{SessionLimits, SessionSettings, TenantSessions, TenantSupervisor};
use crate::store::{CatalogKind, CatalogStore, SqlStore, StoreError, TenantRecord, TenantStore};

#[derive(Clone)]
pub struct TenantDirectory {
    pub store: SqlStore,
    pub registry: TenantRegistry,
    log: Arc<dyn EventLog>,
    settings: Arc<SessionSettings>,
    defaults: SessionLimits,
    http: reqwest::Client,
    /// Development: webhook tools may reach loopback and private addresses.
    allow_private_webhooks: bool,
}

impl TenantDirectory {
    pub fn new(
        store: SqlStore,
        registry: TenantRegistry,
        log: Arc<dyn EventLog>,
        settings: Arc<SessionSettings>,
        defaults: SessionLimits,
        http: reqwest::Client,
        allow_private_webhooks: bool,
    ) -> Self {
        TenantDirectory {
            store,
            registry,
            log,
            settings,
            defaults,
            http,
            allow_private_webhooks,
        }
    }

    /// Starts every stored tenant (at boot).
    pub async fn load_all(&self) -> Result<usize, StoreError> {
        let mut after: Option<String> = None;
        let mut count = 0;
        loop {
            let page = self.store.list_tenants(after.as_deref(), 200).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.slug.clone());
            for record in &page {
                self.activate(record).await?;
                count += 1;
            }
        }
        Ok(count)
    }

    /// Fresh instances of the built-in catalogs a tenant enabled.
    fn builtins(record: &TenantRecord) -> Result<Vec<Arc<dyn Catalog>>, StoreError> {
        TenantCatalog::builtin(&record.catalogs).map_err(StoreError::Corrupt)
    }

    /// The tenant's catalog: these built-ins plus what it published.
    async fn build_catalog(
        &self,
        slug: &str,
        mut catalogs: Vec<Arc<dyn Catalog>>,
    ) -> Result<TenantCatalog, StoreError> {
        let entries = self.store.all_entries(slug).await?;
        let runtime = WebhookRuntime {
            client: self.http.clone(),
            tenant: slug.into(),
            allow_private: self.allow_private_webhooks,
        };
        catalogs.push(Arc::new(StoredCatalog::new(runtime, &entries)));
        Ok(TenantCatalog::new(catalogs))
    }

    /// Starts serving a tenant (its supervisor, catalog and policy).
    pub async fn activate(&self, record: &TenantRecord) -> Result<TenantHandle, StoreError> {
        let catalog = CatalogHandle::new(
            self.build_catalog(&record.slug, Self::builtins(record)?)
                .await?,
        );
        let slug: Arc<str> = record.slug.as_str().into();
        let sessions = Arc::new(TenantSessions::new(
            slug.clone(),
            catalog.clone(),
            self.log.clone(),
            self.settings.clone(),
            self.defaults.clone(),
        ));
        sessions.set_max_sessions(record.limits.max_sessions.map(|m| m as usize));
        let supervisor = TenantSupervisor::new(sessions.clone()).start();
        let handle = TenantHandle {
            slug,
            catalog,
            supervisor,
            sessions,
            policy: Arc::new(TenantPolicy::from_record(record)),
        };
        if let Some(old) = self.registry.get(&record.slug) {
            old.supervisor.do_send(StopAll);
        }
        self.registry.insert(handle.clone());
        Ok(handle)
    }

    /// A tenant's record changed: status, limits or enabled built-in catalogs.
    pub async fn apply_record(
        &self,
        record: &TenantRecord,
        catalogs_changed: bool,
    ) -> Result<(), StoreError> {
        let Some(handle) = self.registry.get(&record.slug) else {
            self.activate(record).await?;
            return Ok(());
        };
        let was_suspended = handle.policy.is_suspended();
        handle.policy.apply(record);
        handle
            .sessions
            .set_max_sessions(record.limits.max_sessions.map(|m| m as usize));
        if handle.policy.is_suspended() && !was_suspended {
            // Suspension ends every session, which closes their streams.
            handle.supervisor.do_send(StopAll);
        }
        if catalogs_changed {
            handle.catalog.replace(
                self.build_catalog(&record.slug, Self::builtins(record)?)
                    .await?,
            );
            for list in ["tools", "prompts", "resources"] {
                handle
                    .supervisor
                    .do_send(TenantBroadcast::ListChanged(list));
            }
        }
        Ok(())
    }

    /// A published entry changed: rebuild the tenant's catalog and tell its sessions.
    /// `updated_uri` is a resource whose content changed (subscribers hear about it).
    pub async fn catalog_changed(
        &self,
        slug: &str,
        kind: CatalogKind,
        updated_uri: Option<&str>,
    ) -> Result<(), StoreError> {
        let Some(handle) = self.registry.get(slug) else {
            return Ok(());
        };
        let builtins = handle.catalog.current().builtins();
        handle
            .catalog
            .replace(self.build_catalog(slug, builtins).await?);
        let list = match kind {
            CatalogKind::Tool => "tools",
            CatalogKind::Prompt => "prompts",
            CatalogKind::Resource | CatalogKind::ResourceTemplate => "resources",
        };
        handle
            .supervisor
            .do_send(TenantBroadcast::ListChanged(list));
        if let Some(uri) = updated_uri {
            handle
                .supervisor
                .do_send(TenantBroadcast::ResourceUpdated(uri.to_string()));
        }
        Ok(())
    }

    /// Stops serving a tenant: its sessions end and it is unknown from now on.
    pub fn deactivate(&self, slug: &str) {
        if let Some(handle) = self.registry.remove(slug) {
            handle.supervisor.do_send(StopAll);
        }
    }
}
