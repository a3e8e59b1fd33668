//! `mcp-harbor migrate` applies the migrations of the configured backend and exits.

#[path = "common/db.rs"]
mod db;

use mcp_harbor::store::{SqlStore, TenantStore};

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
