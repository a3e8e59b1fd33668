//! `TenantDirectory`: keeps the live tenants (registry, supervisors, catalogs, policies) in step
//! with the store and with the other replicas. The admin API writes the store, then tells the
//! directory, which rebuilds what changed, tells live sessions (list_changed, resources/updated,
//! streams ended) and announces the change on the bus so every other replica does the same. A
//! request for a tenant this replica has not heard of yet is resolved from the store.

mod upstreams;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::{TenantHandle, TenantPolicy, TenantRegistry};
use crate::auth::Sealer;
use crate::catalog::stored::{StoredCatalog, WebhookRuntime};
use crate::catalog::{Catalog, CatalogHandle, TenantCatalog};
use crate::session::front::owner_topic;
use crate::session::supervisor::{list_named, StopAll, LISTS};
use crate::session::{
    OwnerMessage, Replica, SessionLimits, SessionSettings, Sessions, TenantBroadcast,
};
use crate::store::{
    CatalogFingerprint, CatalogKind, CatalogStore, SqlStore, StoreError, TenantLimits,
    TenantRecord, TenantStore,
};

/// The bus topic every replica listens to for tenant changes.
pub const TENANTS_TOPIC: &str = "tenants";

/// A change to a tenant, announced to every replica.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TenantEvent {
    /// Created, or its status, limits or built-in catalogs changed: reload it from the store.
    Changed {
        origin: String,
        slug: String,
        catalogs_changed: bool,
    },
    /// A published catalog entry changed.
    Catalog {
        origin: String,
        slug: String,
        kind: CatalogKind,
        updated_uri: Option<String>,
    },
    Deleted {
        origin: String,
        slug: String,
    },
    /// A tool changed a resource: its subscribers must hear.
    ResourceUpdated {
        origin: String,
        slug: String,
        uri: String,
    },
    /// A tool announced that one of the tenant's lists (`tools`, `prompts`, `resources`)
    /// changed. A replica of an earlier version logs it as unreadable and goes on.
    ListChanged {
        origin: String,
        slug: String,
        list: String,
    },
    /// An upstream's definition or lists changed: fetch its lists again and rebuild. A replica
    /// of an earlier version logs it as unreadable and goes on.
    Upstream {
        origin: String,
        slug: String,
        name: String,
    },
}

/// How long "no such tenant" is remembered before the store is asked again.
const UNKNOWN_TENANT_TTL: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct TenantDirectory {
    pub store: SqlStore,
    pub registry: TenantRegistry,
    replica: Arc<Replica>,
    settings: Arc<SessionSettings>,
    defaults: SessionLimits,
    /// Where webhook calls go out.
    egress: crate::egress::Egress,
    /// Slugs recently looked up and not found (bounded).
    unknown: Arc<Mutex<HashMap<String, Instant>>>,
    /// Where tools ask users for secrets (URL-mode elicitation).
    elicitations: Option<Arc<crate::elicitation::Elicitations>>,
    /// Opens the webhook tools' signing secrets when a catalog is built.
    pub sealer: Arc<Sealer>,
    /// The tenants' authorization (its per-tenant caches end with a tenant).
    auth: Option<Arc<crate::auth::AuthService>>,
    /// Per tenant: the fingerprint of the entries its live catalog was last built from.
    fingerprints: Arc<Mutex<HashMap<String, CatalogFingerprint>>>,
    /// Per tenant: its webhook requests open here (`webhooks.max_in_flight_per_tenant` permits);
    /// kept across catalog rebuilds, dropped with the tenant.
    webhook_slots: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    webhook_slots_per_tenant: usize,
    /// Per tenant: its live upstream servers (see `upstreams`).
    upstreams: Arc<Mutex<HashMap<String, Vec<Arc<crate::upstream::Upstream>>>>>,
}

impl TenantDirectory {
    /// Called once, at start-up, with what every tenant's live parts share.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: SqlStore,
        registry: TenantRegistry,
        replica: Arc<Replica>,
        settings: Arc<SessionSettings>,
        defaults: SessionLimits,
        egress: crate::egress::Egress,
        sealer: Arc<Sealer>,
    ) -> Self {
        TenantDirectory {
            store,
            registry,
            replica,
            settings,
            defaults,
            egress,
            unknown: Arc::new(Mutex::new(HashMap::new())),
            elicitations: None,
            sealer,
            auth: None,
            fingerprints: Arc::new(Mutex::new(HashMap::new())),
            upstreams: Arc::new(Mutex::new(HashMap::new())),
            webhook_slots: Arc::new(Mutex::new(HashMap::new())),
            webhook_slots_per_tenant: crate::config::DEFAULT_WEBHOOKS_IN_FLIGHT,
        }
    }

    /// How many webhook requests each tenant may have open at once on this replica.
    pub fn with_webhook_slots(mut self, per_tenant: usize) -> Self {
        self.webhook_slots_per_tenant = per_tenant.max(1);
        self
    }

    /// Forgets what the tenants' authorization caches of a tenant when it stops being served.
    pub fn with_auth(mut self, auth: Arc<crate::auth::AuthService>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Lets the tenants' tools ask users for secrets (URL-mode elicitation).
    pub fn with_elicitations(
        mut self,
        elicitations: Arc<crate::elicitation::Elicitations>,
    ) -> Self {
        self.elicitations = Some(elicitations);
        self
    }

    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// Starts every stored tenant (at boot); how many started. A tenant whose record this
    /// version cannot read (a value only a newer version knows, say) is left out with an error
    /// in the log rather than keeping the replica from starting: requests for it are answered
    /// 503 while every other tenant is served. The database being unreachable still fails.
    pub async fn load_all(&self) -> Result<usize, StoreError> {
        let (records, unreadable) = self.stored_tenants().await?;
        for (slug, e) in &unreadable {
            tracing::error!(tenant = %slug, error = %e, "the stored tenant cannot be read by this version; not served here");
        }
        for record in &records {
            self.start_tenant(record).await?;
        }
        Ok(records.len())
    }

    /// Every stored tenant, read page by page: the records, and the slugs of those that do not
    /// read (`StoreError::Corrupt`) with why.
    async fn stored_tenants(
        &self,
    ) -> Result<(Vec<TenantRecord>, Vec<(String, StoreError)>), StoreError> {
        let mut records = Vec::new();
        let mut unreadable = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.tenants_page(after.as_deref(), 200).await?;
            records.extend(page.records);
            unreadable.extend(page.unreadable);
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok((records, unreadable)),
            }
        }
    }

    /// The live tenant of this slug: known here, or just created through another replica (read
    /// from the store). `Ok(None)` for unknown slugs (remembered briefly, so unknown slugs cannot
    /// make every request a database query).
    pub async fn resolve(&self, slug: &str) -> Result<Option<TenantHandle>, StoreError> {
        if let Some(handle) = self.registry.get(slug) {
            return Ok(Some(handle));
        }
        if !crate::config::is_valid_slug(slug) {
            return Ok(None);
        }
        {
            let unknown = self.unknown.lock();
            if unknown
                .get(slug)
                .is_some_and(|at| at.elapsed() < UNKNOWN_TENANT_TTL)
            {
                return Ok(None);
            }
        }
        match self.store.get_tenant(slug).await? {
            Some(record) => {
                self.unknown.lock().remove(slug);
                Ok(Some(self.start_tenant(&record).await?))
            }
            None => {
                let mut unknown = self.unknown.lock();
                if unknown.len() >= 10_000 {
                    unknown.retain(|_, at| at.elapsed() < UNKNOWN_TENANT_TTL);
                    if unknown.len() >= 10_000 {
                        unknown.clear();
                    }
                }
                unknown.insert(slug.to_string(), Instant::now());
                Ok(None)
            }
        }
    }

    /// Fresh instances of the built-in catalogs a tenant enabled.
    fn builtins(record: &TenantRecord) -> Vec<Arc<dyn Catalog>> {
        let (catalogs, unknown) = TenantCatalog::stored_builtin(&record.catalogs);
        if !unknown.is_empty() {
            tracing::warn!(tenant = %record.slug, catalogs = ?unknown, "the tenant enables built-in catalogs this version does not have (enabled through a newer one?); served without them");
        }
        catalogs
    }

    /// The tenant's catalog: these built-ins plus what it published.
    async fn build_catalog(
        &self,
        slug: &str,
        mut catalogs: Vec<Arc<dyn Catalog>>,
    ) -> Result<TenantCatalog, StoreError> {
        let entries = self.store.all_entries(slug).await?;
        // What it is built from, for `reconcile` to notice a later change the bus did not bring.
        self.fingerprints
            .lock()
            .insert(slug.to_string(), CatalogFingerprint::of(&entries));
        let slots = self
            .webhook_slots
            .lock()
            .entry(slug.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.webhook_slots_per_tenant)))
            .clone();
        let runtime = WebhookRuntime {
            slots,
            egress: self.egress.clone(),
            tenant: slug.into(),
            store: Some(self.store.clone()),
            elicitations: self.elicitations.as_ref().map(|e| e.for_tenant(slug)),
        };
        catalogs.push(Arc::new(StoredCatalog::new(
            runtime,
            &self.sealer,
            &entries,
        )));
        catalogs.extend(self.upstream_catalogs(slug).await?);
        Ok(TenantCatalog::new(catalogs))
    }

    /// Starts serving a tenant here (its supervisor, catalog and policy).
    async fn start_tenant(&self, record: &TenantRecord) -> Result<TenantHandle, StoreError> {
        let catalog = CatalogHandle::new(
            self.build_catalog(&record.slug, Self::builtins(record))
                .await?,
        );
        let slug: Arc<str> = record.slug.as_str().into();
        let sessions = Sessions::new(
            slug.clone(),
            catalog.clone(),
            self.replica.clone(),
            self.settings.clone(),
            self.defaults.clone(),
        );
        sessions.set_caps(session_caps(&record.limits));
        let supervisor = sessions.start_supervisor();
        // A tool changed a resource or a list: sessions and listeners here hear at once, other
        // replicas via the bus.
        let hook_sessions = sessions.downgrade();
        let bus = self.replica.backends.bus.clone();
        let origin = self.replica.info.id.to_string();
        let hook_slug = record.slug.clone();
        sessions.set_announce_hook(Arc::new(move |change: TenantBroadcast| {
            let (origin, slug) = (origin.clone(), hook_slug.clone());
            let event = match &change {
                TenantBroadcast::ResourceUpdated(uri) => TenantEvent::ResourceUpdated {
                    origin,
                    slug,
                    uri: uri.clone(),
                },
                TenantBroadcast::ListChanged(list) => TenantEvent::ListChanged {
                    origin,
                    slug,
                    list: list.to_string(),
                },
            };
            if let Some(sessions) = hook_sessions.upgrade() {
                sessions.broadcast(change);
            }
            let bus = bus.clone();
            if let Ok(bytes) = serde_json::to_vec(&event) {
                tokio::spawn(async move {
                    let _ = bus.publish(TENANTS_TOPIC, Bytes::from(bytes)).await;
                });
            }
        }));
        let handle = TenantHandle {
            slug,
            catalog,
            supervisor: Arc::new(supervisor),
            sessions,
            policy: Arc::new(TenantPolicy::from_record(record)),
        };
        if let Some(old) = self.registry.get(&record.slug) {
            old.supervisor.do_send(StopAll);
            if old.policy.created_at() != record.created_at {
                // Another tenant under the slug (the first one's deletion never reached this
                // replica): nothing cached of the first is used for it.
                self.forget_auth(&record.slug);
            }
        }
        self.registry.insert(handle.clone());
        Ok(handle)
    }

    /// Forgets the tenant's signing keys this replica cached: they went with the tenant, and a
    /// tenant created again under the slug must not be served (nor sign) with them.
    fn forget_auth(&self, slug: &str) {
        if let Some(auth) = &self.auth {
            auth.keys.forget(slug);
        }
    }

    /// Tells the other replicas (failures are logged: they also read the store on a miss).
    async fn announce(&self, event: TenantEvent) {
        let Ok(bytes) = serde_json::to_vec(&event) else {
            return;
        };
        if let Err(e) = self
            .replica
            .backends
            .bus
            .publish(TENANTS_TOPIC, Bytes::from(bytes))
            .await
        {
            tracing::warn!(error = %e, "could not announce a tenant change to other replicas");
        }
    }

    fn origin(&self) -> String {
        self.replica.info.id.to_string()
    }

    /// A tenant was created: serve it here and on every replica.
    pub async fn activate(&self, record: &TenantRecord) -> Result<TenantHandle, StoreError> {
        self.unknown.lock().remove(&record.slug);
        let handle = self.start_tenant(record).await?;
        self.announce(TenantEvent::Changed {
            origin: self.origin(),
            slug: record.slug.clone(),
            catalogs_changed: true,
        })
        .await;
        Ok(handle)
    }

    /// A tenant's record changed: status, limits or enabled built-in catalogs.
    pub async fn apply_record(
        &self,
        record: &TenantRecord,
        catalogs_changed: bool,
    ) -> Result<(), StoreError> {
        self.apply_record_here(record, catalogs_changed).await?;
        self.announce(TenantEvent::Changed {
            origin: self.origin(),
            slug: record.slug.clone(),
            catalogs_changed,
        })
        .await;
        Ok(())
    }

    async fn apply_record_here(
        &self,
        record: &TenantRecord,
        catalogs_changed: bool,
    ) -> Result<(), StoreError> {
        let Some(handle) = self.registry.get(&record.slug) else {
            self.start_tenant(record).await?;
            return Ok(());
        };
        if handle.policy.created_at() != record.created_at {
            // The tenant served here was deleted and another created under its slug (the bus
            // did not bring the deletion): started afresh, replacing the first one's handle.
            tracing::info!(tenant = %record.slug, "a tenant created again under its slug replaces the one served here");
            self.start_tenant(record).await?;
            return Ok(());
        }
        // Two updates applied here out of order: the older one applies the tenant as it is now
        // (its policy, session caps and, when it changed them, catalogs), never its own record.
        let newest;
        let record = if handle.policy.has_newer_than(record.updated_at) {
            match self.store.get_tenant(&record.slug).await? {
                Some(r) => {
                    newest = r;
                    &newest
                }
                None => return Ok(()),
            }
        } else {
            record
        };
        // Built before the record counts as applied: a failed read leaves it unapplied, for the
        // resync to try again.
        let catalog = match catalogs_changed {
            true => Some(
                self.build_catalog(&record.slug, Self::builtins(record))
                    .await?,
            ),
            false => None,
        };
        let was_suspended = handle.policy.is_suspended();
        handle.policy.apply(record);
        handle.sessions.set_caps(session_caps(&record.limits));
        if handle.policy.is_suspended() && !was_suspended {
            // Suspension ends every session, which closes their streams.
            handle.supervisor.do_send(StopAll);
        }
        if let Some(catalog) = catalog {
            handle.catalog.replace(catalog);
            for list in LISTS {
                handle
                    .supervisor
                    .do_send(TenantBroadcast::ListChanged(list));
            }
        }
        Ok(())
    }

    /// A published entry changed: rebuild the tenant's catalog and tell its sessions, here and
    /// on every replica. `updated_uri` is a resource whose content changed.
    pub async fn catalog_changed(
        &self,
        slug: &str,
        kind: CatalogKind,
        updated_uri: Option<&str>,
    ) -> Result<(), StoreError> {
        self.catalog_changed_here(slug, kind, updated_uri).await?;
        self.announce(TenantEvent::Catalog {
            origin: self.origin(),
            slug: slug.to_string(),
            kind,
            updated_uri: updated_uri.map(str::to_string),
        })
        .await;
        Ok(())
    }

    async fn catalog_changed_here(
        &self,
        slug: &str,
        kind: CatalogKind,
        updated_uri: Option<&str>,
    ) -> Result<(), StoreError> {
        let list = match kind {
            CatalogKind::Tool => "tools",
            CatalogKind::Prompt => "prompts",
            CatalogKind::Resource | CatalogKind::ResourceTemplate => "resources",
        };
        self.rebuild_catalog(slug, &[list], updated_uri).await
    }

    /// Rebuilds a live tenant's catalog from the store and tells its sessions which `lists`
    /// changed (and that `updated_uri`'s content did).
    async fn rebuild_catalog(
        &self,
        slug: &str,
        lists: &[&'static str],
        updated_uri: Option<&str>,
    ) -> Result<(), StoreError> {
        let Some(handle) = self.registry.get(slug) else {
            return Ok(());
        };
        let builtins = handle.catalog.current().builtins();
        handle
            .catalog
            .replace(self.build_catalog(slug, builtins).await?);
        for list in lists {
            handle
                .supervisor
                .do_send(TenantBroadcast::ListChanged(list));
        }
        if let Some(uri) = updated_uri {
            handle
                .supervisor
                .do_send(TenantBroadcast::ResourceUpdated(uri.to_string()));
        }
        Ok(())
    }

    /// Stops serving a tenant here and on every replica: its sessions end and it is unknown
    /// from now on.
    pub async fn deactivate(&self, slug: &str) {
        self.deactivate_here(slug);
        self.announce(TenantEvent::Deleted {
            origin: self.origin(),
            slug: slug.to_string(),
        })
        .await;
    }

    fn deactivate_here(&self, slug: &str) {
        self.fingerprints.lock().remove(slug);
        self.webhook_slots.lock().remove(slug);
        self.upstreams.lock().remove(slug);
        self.forget_auth(slug);
        if let Some(handle) = self.registry.remove(slug) {
            handle.supervisor.do_send(StopAll);
        }
    }

    /// Every `every`: [`Self::reconcile`] (errors are logged and tried again next time).
    pub async fn reconcile_every(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "could not compare the tenants served here with the store; trying again");
            }
        }
    }

    /// Catches up with tenant changes the bus did not bring here (a message published while
    /// Redis or this replica's subscription was down, a store read that failed when it came):
    /// a live tenant whose record is newer than the one applied is applied again (catalogs
    /// included), one no longer stored stops being served, and one whose catalog changed in
    /// the store since it was built here is rebuilt (its sessions told every list changed).
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        // Only tenants live before the store is read: one started meanwhile (just created here)
        // is not in what was read, and was built from the store as it is.
        let live = self.registry.slugs();
        // A tenant whose record does not read any more goes on as it was applied here.
        let (records, unreadable) = self.stored_tenants().await?;
        for record in &records {
            let Some(handle) = self.registry.get(&record.slug) else {
                continue;
            };
            if record.updated_at > handle.policy.applied_at() {
                tracing::info!(tenant = %record.slug, "applying a tenant change this replica missed");
                self.apply_record_here(record, true).await?;
            }
        }
        let stored: std::collections::HashSet<&str> = records
            .iter()
            .map(|r| r.slug.as_str())
            .chain(unreadable.iter().map(|(slug, _)| slug.as_str()))
            .collect();
        let fingerprints = self.store.catalog_fingerprints().await?;
        for slug in live {
            if self.registry.get(&slug).is_none() {
                continue;
            }
            if !stored.contains(&*slug) {
                tracing::info!(tenant = %slug, "a tenant deleted elsewhere stops being served here");
                self.deactivate_here(&slug);
                continue;
            }
            let now = fingerprints.get(&*slug).copied().unwrap_or_default();
            let built = self.fingerprints.lock().get(&*slug).copied();
            if built.is_some_and(|built| built != now) {
                tracing::info!(tenant = %slug, "rebuilding a catalog changed in a way this replica missed");
                self.rebuild_catalog(&slug, &LISTS, None).await?;
            }
        }
        Ok(())
    }

    /// Listens to the bus: tenant changes made through other replicas, and messages for the
    /// sessions this replica owns. Runs until the bus subscription ends.
    pub async fn listen(self) {
        let topics = vec![
            TENANTS_TOPIC.to_string(),
            owner_topic(&self.replica.info.id),
        ];
        let mut rx = match self.replica.backends.bus.subscribe(&topics).await {
            Ok(rx) => rx,
            Err(e) => {
                tracing::error!(error = %e, "could not subscribe to the bus; tenant changes made elsewhere are read from the store on demand");
                return;
            }
        };
        while let Some(message) = rx.recv().await {
            if message.topic == TENANTS_TOPIC {
                match serde_json::from_slice::<TenantEvent>(&message.payload) {
                    Ok(event) => self.on_event(event).await,
                    Err(e) => tracing::warn!(error = %e, "unreadable tenant event on the bus"),
                }
            } else {
                match serde_json::from_slice::<OwnerMessage>(&message.payload) {
                    Ok(m) => self.on_owner_message(m).await,
                    Err(e) => tracing::warn!(error = %e, "unreadable session message on the bus"),
                }
            }
        }
    }

    async fn on_event(&self, event: TenantEvent) {
        let me = self.origin();
        let result = match event {
            TenantEvent::Changed { origin, .. }
            | TenantEvent::Catalog { origin, .. }
            | TenantEvent::Deleted { origin, .. }
            | TenantEvent::ResourceUpdated { origin, .. }
            | TenantEvent::ListChanged { origin, .. }
            | TenantEvent::Upstream { origin, .. }
                if origin == me =>
            {
                Ok(())
            }
            TenantEvent::Changed {
                slug,
                catalogs_changed,
                ..
            } => match self.store.get_tenant(&slug).await {
                Ok(Some(record)) => {
                    self.unknown.lock().remove(&slug);
                    self.apply_record_here(&record, catalogs_changed).await
                }
                Ok(None) => {
                    self.deactivate_here(&slug);
                    Ok(())
                }
                Err(e) => Err(e),
            },
            TenantEvent::Catalog {
                slug,
                kind,
                updated_uri,
                ..
            } => {
                self.catalog_changed_here(&slug, kind, updated_uri.as_deref())
                    .await
            }
            TenantEvent::Deleted { slug, .. } => {
                self.deactivate_here(&slug);
                Ok(())
            }
            TenantEvent::Upstream { slug, name, .. } => {
                self.upstream_changed_here(&slug, &name).await
            }
            TenantEvent::ResourceUpdated { slug, uri, .. } => {
                self.broadcast_here(&slug, TenantBroadcast::ResourceUpdated(uri));
                Ok(())
            }
            TenantEvent::ListChanged { slug, list, .. } => {
                match list_named(&list) {
                    Some(list) => self.broadcast_here(&slug, TenantBroadcast::ListChanged(list)),
                    None => tracing::warn!(%list, "a change of an unknown list announced"),
                }
                Ok(())
            }
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not apply a tenant change announced by another replica");
        }
    }

    /// Tells the sessions and listeners of tenant `slug` held here, if it is served here.
    fn broadcast_here(&self, slug: &str, change: TenantBroadcast) {
        if let Some(handle) = self.registry.get(slug) {
            handle.sessions.broadcast(change);
        }
    }

    async fn on_owner_message(&self, m: OwnerMessage) {
        let Some(handle) = self.registry.get(m.tenant.as_str()) else {
            return;
        };
        // On its own task: the bus's other messages (tenant changes, other sessions' answers)
        // do not wait for a restore.
        let sessions = handle.sessions.clone();
        actix_rt::spawn(async move { sessions.deliver_from_bus(m).await });
    }
}

/// The session caps of a tenant's limits (counted across replicas).
fn session_caps(limits: &TenantLimits) -> crate::cluster::SessionCaps {
    crate::cluster::SessionCaps {
        per_tenant: limits.max_sessions,
        per_principal: limits.max_sessions_per_principal,
    }
}
