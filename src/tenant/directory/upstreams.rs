//! A tenant's upstream servers as the directory keeps them: one live `Upstream` per stored
//! definition (its client and upstream session, the last good copy of its lists), kept across
//! catalog rebuilds while the definition is unchanged, replaced when it changes, dropped with
//! it. A catalog is never built waiting on an upstream for long: past a bounded first wait it is
//! built without that upstream's entries, which are fetched again in the background and added
//! by a rebuild when they arrive. What an upstream announces (its lists changed, a resource it
//! serves changed) reaches the tenant's sessions here and, through the bus, on every replica.
//! Each tool's definition is pinned when first seen: one that changes is held back (not listed,
//! its calls refused) until an administrator approves the change.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{TenantDirectory, TenantEvent};
use crate::catalog::Catalog;
use crate::session::supervisor::LISTS;
use crate::session::TenantBroadcast;
use crate::store::{StoreError, UpstreamStore};
use crate::upstream::def::Pinning;
use crate::upstream::{definition_hash, Notice, Upstream, UpstreamCatalog, UpstreamDef};

/// How long building a catalog waits for an upstream's first lists.
const FIRST_FETCH: Duration = Duration::from_secs(5);
/// Background fetches of lists that failed back off up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl TenantDirectory {
    /// The catalogs of tenant `slug`'s upstreams, as the store defines them now.
    pub(super) async fn upstream_catalogs(
        &self,
        slug: &str,
    ) -> Result<Vec<Arc<dyn Catalog>>, StoreError> {
        let records = self.store.list_upstreams(slug, None, u32::MAX).await?;
        let mut live = Vec::with_capacity(records.len());
        for record in records {
            let def: UpstreamDef = match serde_json::from_value(record.body.clone()) {
                Ok(def) => def,
                Err(e) => {
                    tracing::warn!(tenant = slug, upstream = %record.name, error = %e, "an upstream's stored definition does not read (written by a newer version?); served without it");
                    continue;
                }
            };
            let upstream = self.upstream_for(slug, &record.name, def, record.updated_at);
            if upstream.lists().is_none() {
                let wait = FIRST_FETCH.min(Duration::from_millis(upstream.def.timeout_ms()));
                let failed = match tokio::time::timeout(wait, upstream.refresh()).await {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some(format!("no lists within {} ms", wait.as_millis())),
                };
                if let Some(error) = failed {
                    tracing::warn!(tenant = slug, upstream = %upstream.name, %error, "the upstream's lists could not be fetched; served without its entries, fetching again in the background");
                    self.fetch_later(slug, &upstream);
                }
            }
            live.push(upstream);
        }
        let mut catalogs: Vec<Arc<dyn Catalog>> = Vec::with_capacity(live.len());
        for upstream in &live {
            let held = self.held_tools(slug, upstream).await?;
            catalogs.push(Arc::new(UpstreamCatalog::new(upstream.clone(), &held)));
        }
        self.upstreams.lock().insert(slug.to_string(), live);
        Ok(catalogs)
    }

    /// The upstream's tools held back: those whose definition differs from the one pinned
    /// when it was first seen (or last approved). Pins what it sees for the first time; worked
    /// out once per fetch of its lists.
    async fn held_tools(
        &self,
        slug: &str,
        upstream: &Arc<Upstream>,
    ) -> Result<Arc<HashSet<String>>, StoreError> {
        let Some(lists) = upstream.lists() else {
            return Ok(Arc::default());
        };
        if upstream.def.pinning == Pinning::Off {
            return Ok(Arc::default());
        }
        if let Some(held) = upstream.held_for(lists.fetched_at) {
            return Ok(held);
        }
        let offered: Vec<(String, String, serde_json::Value)> = lists
            .tools
            .iter()
            .filter_map(|t| {
                let name = t["name"]
                    .as_str()
                    .filter(|n| upstream.def.tools.admits(n))?;
                Some((name.to_string(), definition_hash(t), t.clone()))
            })
            .collect();
        let pins = self.store.see_tools(slug, &upstream.name, &offered).await?;
        let held: Arc<HashSet<String>> = Arc::new(
            pins.into_iter()
                .filter(|p| p.pending.is_some())
                .map(|p| p.tool)
                .collect(),
        );
        if !held.is_empty() {
            tracing::warn!(tenant = slug, upstream = %upstream.name, tools = ?held, "upstream tools whose definition changed are held back until an administrator approves the change");
        }
        upstream.set_held(lists.fetched_at, held.clone());
        Ok(held)
    }

    /// The live upstream of this definition: the one held when its revision is unchanged,
    /// else a new one.
    fn upstream_for(
        &self,
        slug: &str,
        name: &str,
        def: UpstreamDef,
        revision: i64,
    ) -> Arc<Upstream> {
        if let Some(held) = self.live_upstream(slug, name) {
            if held.revision == revision {
                return held;
            }
        }
        let notices = self.clone();
        let (tenant, upstream) = (slug.to_string(), name.to_string());
        Arc::new(Upstream::new(
            slug,
            name,
            def,
            revision,
            self.egress.clone(),
            &self.sealer,
            Arc::new(move |notice| notices.on_upstream_notice(&tenant, &upstream, notice)),
        ))
    }

    /// Tenant `slug`'s live upstream `name`, if it has one here.
    pub fn live_upstream(&self, slug: &str, name: &str) -> Option<Arc<Upstream>> {
        self.upstreams
            .lock()
            .get(slug)?
            .iter()
            .find(|u| u.name == name)
            .cloned()
    }

    /// Fetches the upstream's lists again until they arrive (backing off), then rebuilds the
    /// tenant's catalog with them; stops when the upstream is no longer the live one.
    fn fetch_later(&self, slug: &str, upstream: &Arc<Upstream>) {
        let (directory, slug, upstream) =
            (self.clone(), slug.to_string(), Arc::downgrade(upstream));
        tokio::spawn(async move {
            let mut backoff = Duration::from_secs(1);
            loop {
                tokio::time::sleep(backoff).await;
                let Some(live) = upstream.upgrade() else {
                    return;
                };
                let current = directory
                    .live_upstream(&slug, &live.name)
                    .is_some_and(|held| Arc::ptr_eq(&held, &live));
                if !current {
                    return;
                }
                if live.refresh().await.is_ok() {
                    tracing::info!(tenant = %slug, upstream = %live.name, "the upstream's lists arrived; its entries are served");
                    if let Err(e) = directory.rebuild_catalog(&slug, &LISTS, None).await {
                        tracing::warn!(tenant = %slug, error = %e, "could not rebuild the catalog with an upstream's lists");
                    }
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
    }

    fn on_upstream_notice(&self, slug: &str, name: &str, notice: Notice) {
        match notice {
            Notice::ListChanged(_) => {
                let (directory, slug, name) = (self.clone(), slug.to_string(), name.to_string());
                tokio::spawn(async move {
                    if let Err(e) = directory.upstream_changed(&slug, &name).await {
                        tracing::warn!(tenant = %slug, upstream = %name, error = %e, "could not follow an upstream's list change");
                    }
                });
            }
            Notice::ResourceUpdated(uri) => {
                self.broadcast_here(slug, TenantBroadcast::ResourceUpdated(uri.clone()));
                let event = TenantEvent::ResourceUpdated {
                    origin: self.origin(),
                    slug: slug.to_string(),
                    uri,
                };
                let directory = self.clone();
                tokio::spawn(async move { directory.announce(event).await });
            }
        }
    }

    /// An upstream's definition or lists changed (through the admin API, or it announced it):
    /// its lists are fetched again and the tenant's catalog rebuilt, here and on every replica.
    pub async fn upstream_changed(&self, slug: &str, name: &str) -> Result<(), StoreError> {
        self.upstream_changed_here(slug, name).await?;
        self.announce(TenantEvent::Upstream {
            origin: self.origin(),
            slug: slug.to_string(),
            name: name.to_string(),
        })
        .await;
        Ok(())
    }

    pub(super) async fn upstream_changed_here(
        &self,
        slug: &str,
        name: &str,
    ) -> Result<(), StoreError> {
        if self.registry.get(slug).is_none() {
            return Ok(());
        }
        // Its lists are fetched again only when its definition is the one stored (a changed or
        // deleted definition gets a new live upstream, or none, from the rebuild).
        let stored = self.store.get_upstream(slug, name).await?;
        let unchanged = |live: &Arc<Upstream>| {
            stored
                .as_ref()
                .is_some_and(|r| r.updated_at == live.revision)
        };
        if let Some(live) = self.live_upstream(slug, name).filter(unchanged) {
            if let Err(error) = live.refresh().await {
                tracing::warn!(tenant = slug, upstream = name, %error, "could not fetch an upstream's lists again; its last good copy is served");
            }
        }
        self.rebuild_catalog(slug, &LISTS, None).await
    }
}
