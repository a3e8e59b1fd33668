//! Test databases: an SQLite file per test, and, when PostgreSQL is reachable, a fresh database
//! per test. With `MCP_HARBOR_REQUIRE_POSTGRES=1` (CI) an unreachable PostgreSQL fails the test
//! instead of skipping it.
#![allow(dead_code)]

use std::str::FromStr;

use sqlx::{ConnectOptions, Connection};

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A fresh SQLite database URL in a temporary directory (kept alive by the returned guard).
pub fn sqlite_url() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("harbor.db").display());
    (url, dir)
}

/// A fresh PostgreSQL database for one test, or `None` when PostgreSQL is not reachable and not
/// required.
pub async fn postgres_url() -> Option<String> {
    let base = std::env::var("MCP_HARBOR_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let required =
        std::env::var("MCP_HARBOR_REQUIRE_POSTGRES").is_ok_and(|v| v == "1" || v == "true");
    let options = match sqlx::postgres::PgConnectOptions::from_str(&base) {
        Ok(o) => o,
        Err(e) => panic!("MCP_HARBOR_TEST_POSTGRES_URL is invalid: {e}"),
    };
    let mut admin = match options.connect().await {
        Ok(c) => c,
        Err(e) if !required => {
            eprintln!("skipping the PostgreSQL backend: {base} is not reachable ({e})");
            return None;
        }
        Err(e) => panic!(
            "PostgreSQL is required (MCP_HARBOR_REQUIRE_POSTGRES) but {base} is not reachable: {e}"
        ),
    };
    let name = format!("harbor_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    let _ = admin.close().await;
    let url = match base.rfind('/') {
        Some(i) if base[..i].contains("://") && i > base.find("://").unwrap_or(0) + 2 => {
            format!("{}/{name}", &base[..i])
        }
        _ => format!("{base}/{name}"),
    };
    Some(url)
}

/// Drops a database made by `postgres_url` (best effort).
pub async fn drop_postgres(url: &str) {
    let Some((base, name)) = url.rsplit_once('/') else {
        return;
    };
    let admin_url = format!("{base}/postgres");
    if let Ok(options) = sqlx::postgres::PgConnectOptions::from_str(&admin_url) {
        if let Ok(mut admin) = options.connect().await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await;
            let _ = admin.close().await;
        }
    }
}
