//! `mcp-harbor migrate` applies the migrations of the configured backend and exits.

use crate::helpers::db;

use mcp_harbor::store::{SqlStore, TenantStore};

/// A migration only a newer mcp-harbor knows (its version later than any this one embeds).
const NEWER: i64 = 29_991_231_000_001;

fn migrate(env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-harbor"));
    cmd.arg("migrate").env_remove("MCP_HARBOR_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

async fn check_migrated(url: &str) {
    let store = SqlStore::connect(url, 1).await.unwrap();
    assert!(
        store.list_tenants(None, 10).await.unwrap().is_empty(),
        "the tables exist and are empty"
    );
    store.close().await;
}

#[actix_rt::test]
async fn migrate_prepares_an_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("nested");
    let out = migrate(&[("MCP_HARBOR__STORAGE__DATA_DIR", data_dir.to_str().unwrap())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrations applied"));
    check_migrated(&format!("sqlite://{}/mcp-harbor.db", data_dir.display())).await;
}

#[actix_rt::test]
async fn migrate_prepares_a_postgres_database() {
    let Some(url) = db::postgres_url().await else {
        return;
    };
    let out = migrate(&[("MCP_HARBOR__STORAGE__DATABASE_URL", &url)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_migrated(&url).await;
    db::drop_postgres(&url).await;
}

#[actix_rt::test]
async fn migrate_refuses_a_bad_url_clearly() {
    let out = migrate(&[("MCP_HARBOR__STORAGE__DATABASE_URL", "mysql://localhost/x")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("storage.database_url"));
}

/// What a newer version leaves behind (during a rolling upgrade, or before a rollback): a
/// migration this one does not know. `migrate` and the server go on (warning about it), leaving
/// it as it is.
async fn newer_migrations_are_left_as_they_are(url: &str, env: (&str, &str)) {
    assert!(migrate(&[env]).status.success());
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(NEWER)
    .bind("added by a newer version")
    .bind(true)
    .bind(vec![7u8; 48])
    .bind(1_i64)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let out = migrate(&[env]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&NEWER.to_string()), "names it: {said}");
    let store = SqlStore::connect(url, 1).await.unwrap();
    assert_eq!(store.migrate().await.unwrap(), [NEWER]);
    store.close().await;
    check_migrated(url).await;
}

#[actix_rt::test]
async fn newer_migrations_are_left_as_they_are_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().display().to_string();
    let url = format!("sqlite://{data_dir}/mcp-harbor.db");
    newer_migrations_are_left_as_they_are(&url, ("MCP_HARBOR__STORAGE__DATA_DIR", &data_dir)).await;
}

#[actix_rt::test]
async fn newer_migrations_are_left_as_they_are_postgres() {
    let Some(url) = db::postgres_url().await else {
        return;
    };
    newer_migrations_are_left_as_they_are(&url, ("MCP_HARBOR__STORAGE__DATABASE_URL", &url)).await;
    db::drop_postgres(&url).await;
}

/// The version that added `oauth_clients.confirmed_at`.
const CONFIRMED_AT: &str = "20261129000001";

/// Clients registered before `oauth_clients.confirmed_at` existed count as confirmed: the sweep
/// of clients nobody used never takes one an older version registered (it may be in use).
async fn clients_an_older_version_registered_are_kept(url: &str, connect_url: &str, backend: &str) {
    use mcp_harbor::store::{OAuthClient, OAuthStore};
    let older = tempfile::tempdir().unwrap();
    let dir = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < CONFIRMED_AT {
            std::fs::copy(&path, older.path().join(&name)).unwrap();
        }
    }
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(connect_url).await.unwrap();
    sqlx::migrate::Migrator::new(older.path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO tenants (slug, display_name, status, catalogs, limits, created_at, \
         updated_at) VALUES ('acme', 'Acme', 'active', '[]', '{}', 1, 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO oauth_clients (tenant, client_id, source, metadata, created_at) \
         VALUES ('acme', 'hc_older', 'dcr', '{}', 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = SqlStore::connect(url, 1).await.unwrap();
    store.migrate().await.unwrap();
    let kept = store.get_client("acme", "hc_older").await.unwrap().unwrap();
    assert_eq!(kept.confirmed_at, Some(1));
    // One registered now and never used goes; the older one stays.
    let unused = OAuthClient {
        client_id: "hc_unused".into(),
        confirmed_at: None,
        ..kept
    };
    store.insert_client(&unused).await.unwrap();
    assert_eq!(store.sweep_oauth(0, 0, i64::MAX).await.unwrap(), 1);
    assert!(store
        .get_client("acme", "hc_older")
        .await
        .unwrap()
        .is_some());
    store.close().await;
}

#[actix_rt::test]
async fn clients_an_older_version_registered_are_kept_sqlite() {
    let (url, _dir) = db::sqlite_url();
    let connect = format!("{url}?mode=rwc");
    clients_an_older_version_registered_are_kept(&url, &connect, "sqlite").await;
}

#[actix_rt::test]
async fn clients_an_older_version_registered_are_kept_postgres() {
    let Some(url) = db::postgres_url().await else {
        return;
    };
    clients_an_older_version_registered_are_kept(&url, &url, "postgres").await;
    db::drop_postgres(&url).await;
}
