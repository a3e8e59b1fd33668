//! The store contract, run against every backend: SQLite always, PostgreSQL whenever reachable
//! (required in CI).

#[path = "common/db.rs"]
mod db;

use mcp_harbor::store::{
    AdminStore, CatalogEntry, CatalogKind, CatalogStore, SqlStore, StoreError, TenantLimits,
    TenantRecord, TenantStatus, TenantStore,
};
use serde_json::json;

fn tenant(slug: &str) -> TenantRecord {
    TenantRecord {
        slug: slug.into(),
        display_name: format!("Tenant {slug}"),
        status: TenantStatus::Active,
        catalogs: vec!["demo".into()],
        limits: TenantLimits {
            max_sessions: Some(5),
            requests_per_minute: None,
            allowed_origins: vec!["https://a.example".into()],
        },
        created_at: 1,
        updated_at: 1,
    }
}

fn entry(tenant: &str, kind: CatalogKind, name: &str) -> CatalogEntry {
    CatalogEntry {
        tenant: tenant.into(),
        kind,
        name: name.into(),
        body: json!({ "name": name, "n": 1 }),
        created_at: 1,
        updated_at: 1,
    }
}

async fn contract(store: SqlStore) {
    store.migrate().await.expect("migrations apply");
    store.migrate().await.expect("migrations are idempotent");
    assert!(store.ping().await);

    // Tenants: insert, conflict, get, list with keyset pagination, update, delete.
    for slug in ["acme", "beta", "core"] {
        store.insert_tenant(&tenant(slug)).await.unwrap();
    }
    assert!(matches!(
        store.insert_tenant(&tenant("acme")).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.get_tenant("acme").await.unwrap(),
        Some(tenant("acme"))
    );
    assert_eq!(store.get_tenant("nope").await.unwrap(), None);
    let page = store.list_tenants(None, 2).await.unwrap();
    assert_eq!(
        page.iter().map(|t| t.slug.as_str()).collect::<Vec<_>>(),
        ["acme", "beta"]
    );
    let page = store.list_tenants(Some("beta"), 2).await.unwrap();
    assert_eq!(
        page.iter().map(|t| t.slug.as_str()).collect::<Vec<_>>(),
        ["core"]
    );
    let mut updated = tenant("beta");
    updated.status = TenantStatus::Suspended;
    updated.display_name = "Beta Corp".into();
    updated.updated_at = 2;
    store.update_tenant(&updated).await.unwrap();
    assert_eq!(store.get_tenant("beta").await.unwrap(), Some(updated));
    assert!(matches!(
        store.update_tenant(&tenant("ghost")).await,
        Err(StoreError::NotFound)
    ));

    // Catalog entries are keyed by tenant: the same name in two tenants is two entries.
    store
        .insert_entry(&entry("acme", CatalogKind::Tool, "lookup"))
        .await
        .unwrap();
    store
        .insert_entry(&entry("beta", CatalogKind::Tool, "lookup"))
        .await
        .unwrap();
    store
        .insert_entry(&entry("acme", CatalogKind::Prompt, "lookup"))
        .await
        .unwrap();
    store
        .insert_entry(&entry("acme", CatalogKind::Tool, "alpha"))
        .await
        .unwrap();
    assert!(matches!(
        store
            .insert_entry(&entry("acme", CatalogKind::Tool, "lookup"))
            .await,
        Err(StoreError::Conflict)
    ));
    let tools = store
        .list_entries("acme", CatalogKind::Tool, None, 10)
        .await
        .unwrap();
    assert_eq!(
        tools.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["alpha", "lookup"]
    );
    let tools = store
        .list_entries("acme", CatalogKind::Tool, Some("alpha"), 10)
        .await
        .unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(store.all_entries("acme").await.unwrap().len(), 3);
    let mut changed = entry("acme", CatalogKind::Tool, "lookup");
    changed.body = json!({ "name": "lookup", "n": 2 });
    changed.updated_at = 5;
    store.replace_entry(&changed).await.unwrap();
    let got = store
        .get_entry("acme", CatalogKind::Tool, "lookup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.body["n"], 2);
    assert_eq!(got.created_at, 1);
    let other = store
        .get_entry("beta", CatalogKind::Tool, "lookup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.body["n"], 1, "another tenant's entry is untouched");
    assert!(matches!(
        store
            .replace_entry(&entry("core", CatalogKind::Tool, "lookup"))
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(store
        .delete_entry("acme", CatalogKind::Tool, "alpha")
        .await
        .unwrap());
    assert!(!store
        .delete_entry("acme", CatalogKind::Tool, "alpha")
        .await
        .unwrap());
    assert!(!store
        .delete_entry("core", CatalogKind::Tool, "lookup")
        .await
        .unwrap());

    // Deleting a tenant removes what it owns, and nothing of others.
    assert!(store.delete_tenant("acme").await.unwrap());
    assert!(!store.delete_tenant("acme").await.unwrap());
    assert_eq!(store.get_tenant("acme").await.unwrap(), None);
    assert!(store.all_entries("acme").await.unwrap().is_empty());
    assert_eq!(store.all_entries("beta").await.unwrap().len(), 1);

    // The admin token hash.
    assert_eq!(store.admin_token_hash().await.unwrap(), None);
    store.set_admin_token_hash("h1").await.unwrap();
    store.set_admin_token_hash("h2").await.unwrap();
    assert_eq!(
        store.admin_token_hash().await.unwrap().as_deref(),
        Some("h2")
    );
    store.close().await;
}

#[actix_rt::test]
async fn sqlite_meets_the_store_contract() {
    let (url, _dir) = db::sqlite_url();
    contract(SqlStore::connect(&url, 4).await.unwrap()).await;
}

#[actix_rt::test]
async fn postgres_meets_the_store_contract() {
    let Some(url) = db::postgres_url().await else {
        return;
    };
    contract(SqlStore::connect(&url, 4).await.unwrap()).await;
    db::drop_postgres(&url).await;
}

#[actix_rt::test]
async fn unsupported_urls_are_refused_clearly() {
    let err = SqlStore::connect("mysql://localhost/x", 1)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("mysql"));
}
