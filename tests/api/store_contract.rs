//! The store contract, run against every backend: SQLite always, PostgreSQL whenever reachable
//! (required in CI).

use crate::helpers::db;

use mcp_harbor::store::{
    AdminStore, CatalogEntry, CatalogFingerprint, CatalogKind, CatalogStore, ElicitationRecord,
    ElicitationStatus, ElicitationStore, GrantRecord, OAuthClient, OAuthSettings, OAuthStore,
    PendingInputStore, Redeemed, RoundRecord, RoundStore, SigningKeyRecord, SqlStore, StoreError,
    TenantAuth, TenantLimits, TenantRecord, TenantStatus, TenantStore, UserRecord, WantedSecret,
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
            cache_ttl_ms: Some(30_000),
            max_body_bytes: Some(65_536),
            max_message_bytes: None,
            max_sessions_per_principal: Some(2),
            requests_per_minute_per_principal: Some(60),
            ..TenantLimits::default()
        },
        auth: TenantAuth::Oauth(OAuthSettings::default()),
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
    assert_eq!(
        store.tenant_slugs(Some("acme"), 5).await.unwrap(),
        ["beta", "core"]
    );
    assert_eq!(store.tenant_slugs(None, 1).await.unwrap(), ["acme"]);
    let page = store.list_tenants(Some("beta"), 2).await.unwrap();
    assert_eq!(
        page.iter().map(|t| t.slug.as_str()).collect::<Vec<_>>(),
        ["core"]
    );
    let mut updated = tenant("beta");
    updated.status = TenantStatus::Suspended;
    updated.display_name = "Beta Corp".into();
    updated.updated_at = 2;
    assert!(store.update_tenant(&updated, 1).await.unwrap());
    assert_eq!(
        store.get_tenant("beta").await.unwrap(),
        Some(updated.clone())
    );
    // A write over a revision that is no longer the stored one changes nothing.
    let mut stale = tenant("beta");
    stale.display_name = "Stale".into();
    stale.updated_at = 3;
    assert!(!store.update_tenant(&stale, 1).await.unwrap());
    assert_eq!(store.get_tenant("beta").await.unwrap(), Some(updated));
    assert!(matches!(
        store.update_tenant(&tenant("ghost"), 1).await,
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
    assert!(store.replace_entry(&changed, 1).await.unwrap());
    let mut stale = entry("acme", CatalogKind::Tool, "lookup");
    stale.body = json!({ "name": "lookup", "n": 3 });
    stale.updated_at = 6;
    assert!(
        !store.replace_entry(&stale, 1).await.unwrap(),
        "a replace over a revision read before another write changes nothing"
    );
    let got = store
        .get_entry("acme", CatalogKind::Tool, "lookup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.body["n"], 2);
    assert_eq!(got.created_at, 1);
    // Fingerprints: per tenant with entries, how many and the sum of their revisions.
    let fingerprints = store.catalog_fingerprints().await.unwrap();
    assert_eq!(
        fingerprints.get("acme"),
        Some(&CatalogFingerprint {
            entries: 3,
            revisions: 5 + 1 + 1
        })
    );
    assert_eq!(
        fingerprints.get("beta"),
        Some(&CatalogFingerprint {
            entries: 1,
            revisions: 1
        })
    );
    assert_eq!(fingerprints.get("core"), None);
    let other = store
        .get_entry("beta", CatalogKind::Tool, "lookup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.body["n"], 1, "another tenant's entry is untouched");
    assert!(matches!(
        store
            .replace_entry(&entry("core", CatalogKind::Tool, "lookup"), 1)
            .await,
        Err(StoreError::NotFound)
    ));
    // A delete at a revision the entry no longer has deletes nothing; at its own, it deletes.
    let alpha = store
        .get_entry("acme", CatalogKind::Tool, "alpha")
        .await
        .unwrap()
        .unwrap();
    assert!(!store
        .delete_entry(
            "acme",
            CatalogKind::Tool,
            "alpha",
            Some(alpha.updated_at - 1)
        )
        .await
        .unwrap());
    assert!(store
        .get_entry("acme", CatalogKind::Tool, "alpha")
        .await
        .unwrap()
        .is_some());
    assert!(store
        .delete_entry("acme", CatalogKind::Tool, "alpha", Some(alpha.updated_at))
        .await
        .unwrap());
    assert!(!store
        .delete_entry("acme", CatalogKind::Tool, "alpha", None)
        .await
        .unwrap());
    assert!(!store
        .delete_entry("core", CatalogKind::Tool, "lookup", None)
        .await
        .unwrap());

    oauth_contract(&store).await;
    rounds_contract(&store).await;
    elicitation_contract(&store).await;

    // Deleting a tenant removes what it owns, and nothing of others.
    let acme = store.get_tenant("acme").await.unwrap().unwrap();
    assert!(!store
        .delete_tenant("acme", Some(acme.updated_at + 1))
        .await
        .unwrap());
    assert!(store.get_tenant("acme").await.unwrap().is_some());
    assert!(store
        .delete_tenant("acme", Some(acme.updated_at))
        .await
        .unwrap());
    assert!(!store.delete_tenant("acme", None).await.unwrap());
    assert_eq!(store.get_tenant("acme").await.unwrap(), None);
    assert!(store.all_entries("acme").await.unwrap().is_empty());
    assert_eq!(store.all_entries("beta").await.unwrap().len(), 1);
    assert_eq!(store.get_client("acme", "c1").await.unwrap(), None);
    assert_eq!(store.get_user("acme", "alice").await.unwrap(), None);
    assert!(store.signing_keys("acme").await.unwrap().is_empty());
    assert!(store.get_client("beta", "c1").await.unwrap().is_some());
    assert_eq!(store.round("acme", "r-keep", 0).await.unwrap(), None);
    assert!(store.round("beta", "r-keep", 0).await.unwrap().is_some());
    assert_eq!(store.get_elicitation("acme", "e1").await.unwrap(), None);
    assert!(store.get_elicitation("beta", "e1").await.unwrap().is_some());

    // The admin token hash.
    assert_eq!(store.admin_token_hash().await.unwrap(), None);
    store.set_admin_token_hash("h1").await.unwrap();
    store.set_admin_token_hash("h2").await.unwrap();
    assert_eq!(
        store.admin_token_hash().await.unwrap().as_deref(),
        Some("h2")
    );
    // Replicas starting together each set it: none fails.
    let sets =
        futures_util::future::join_all((0..8).map(|_| store.set_admin_token_hash("h3"))).await;
    assert!(sets.iter().all(Result::is_ok), "{sets:?}");
    assert_eq!(
        store.admin_token_hash().await.unwrap().as_deref(),
        Some("h3")
    );
    store.close().await;
}

fn elicitation(id: &str, principal: Option<&str>, expires_at: i64) -> ElicitationRecord {
    ElicitationRecord {
        id: id.into(),
        principal: principal.map(str::to_string),
        session: Some("s1".into()),
        tool: "deploy".into(),
        name: "api_key".into(),
        message: "Your deploy key".into(),
        status: ElicitationStatus::Pending,
        secret_sealed: None,
        expires_at,
        created_at: 10,
        updated_at: 10,
    }
}

/// URL-mode elicitations: tenant-keyed, completed once, the secret taken once, swept.
async fn elicitation_contract(store: &SqlStore) {
    let alice = Some("iss\nalice\nc1");
    for tenant in ["acme", "beta"] {
        store
            .insert_elicitation(tenant, &elicitation("e1", alice, 1000))
            .await
            .unwrap();
    }
    assert!(matches!(
        store
            .insert_elicitation("acme", &elicitation("e1", alice, 1000))
            .await,
        Err(StoreError::Conflict)
    ));
    store
        .insert_elicitation("acme", &elicitation("e2", None, 1000))
        .await
        .unwrap();
    store
        .insert_elicitation("acme", &elicitation("e3", alice, 50))
        .await
        .unwrap();
    assert_eq!(
        store.get_elicitation("acme", "e1").await.unwrap(),
        Some(elicitation("e1", alice, 1000))
    );
    assert_eq!(store.get_elicitation("core", "e1").await.unwrap(), None);

    // Listing: by id, per status, paged.
    let ids = |v: Vec<ElicitationRecord>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .list_elicitations("acme", None, None, 10)
            .await
            .unwrap()),
        ["e1", "e2", "e3"]
    );
    assert_eq!(
        ids(store
            .list_elicitations("acme", Some(ElicitationStatus::Pending), Some("e1"), 1)
            .await
            .unwrap()),
        ["e2"]
    );
    assert!(store
        .list_elicitations("acme", Some(ElicitationStatus::Completed), None, 10)
        .await
        .unwrap()
        .is_empty());

    // Finding the pending one of a principal (an open tenant's have none), not expired.
    let find_in = |principal, session, status, now| async move {
        let wanted = WantedSecret {
            principal,
            session,
            tool: "deploy",
            name: "api_key",
        };
        store.find_elicitation("acme", &wanted, status, now).await
    };
    let find = |principal, status, now| find_in(principal, Some("s1"), status, now);
    let found = find(alice, ElicitationStatus::Pending, 20).await.unwrap();
    assert_eq!(found.map(|e| e.id).as_deref(), Some("e1"));
    let found = find(None, ElicitationStatus::Pending, 20).await.unwrap();
    assert_eq!(found.map(|e| e.id).as_deref(), Some("e2"));
    assert!(find(Some("iss\nbob\nc1"), ElicitationStatus::Pending, 20)
        .await
        .unwrap()
        .is_none());
    // Without a principal, bound to the session that asked: not another session's, not a
    // stateless request's (no session); a principal's are theirs in any session.
    for session in [Some("s2"), None] {
        let other = find_in(None, session, ElicitationStatus::Pending, 20)
            .await
            .unwrap();
        assert!(other.is_none(), "{session:?}: {other:?}");
    }
    let elsewhere = find_in(alice, Some("s2"), ElicitationStatus::Pending, 20)
        .await
        .unwrap();
    assert_eq!(elsewhere.map(|e| e.id).as_deref(), Some("e1"));

    // Completing: only when pending and unexpired; once.
    assert!(!store
        .complete_elicitation("acme", "e3", "sealed-3", 60)
        .await
        .unwrap());
    assert!(!store
        .complete_elicitation("core", "e1", "sealed-x", 20)
        .await
        .unwrap());
    assert!(store
        .complete_elicitation("acme", "e1", "sealed-1", 20)
        .await
        .unwrap());
    assert!(!store
        .complete_elicitation("acme", "e1", "sealed-again", 21)
        .await
        .unwrap());
    let done = store.get_elicitation("acme", "e1").await.unwrap().unwrap();
    assert_eq!(done.status, ElicitationStatus::Completed);
    assert_eq!(done.secret_sealed.as_deref(), Some("sealed-1"));
    assert_eq!(
        find(alice, ElicitationStatus::Completed, 30)
            .await
            .unwrap()
            .map(|e| e.id)
            .as_deref(),
        Some("e1")
    );
    // The other tenant's e1 is untouched.
    let other = store.get_elicitation("beta", "e1").await.unwrap().unwrap();
    assert_eq!(other.status, ElicitationStatus::Pending);

    // The secret is taken once, then gone (and no longer found as waiting).
    assert_eq!(
        store
            .take_elicitation_secret("acme", "e1", 30)
            .await
            .unwrap()
            .as_deref(),
        Some("sealed-1")
    );
    assert_eq!(
        store
            .take_elicitation_secret("acme", "e1", 31)
            .await
            .unwrap(),
        None
    );
    assert!(find(alice, ElicitationStatus::Completed, 32)
        .await
        .unwrap()
        .is_none());

    // Closing: only a pending one.
    assert!(store
        .close_elicitation("acme", "e2", ElicitationStatus::Declined, 40)
        .await
        .unwrap());
    assert!(!store
        .close_elicitation("acme", "e2", ElicitationStatus::Cancelled, 41)
        .await
        .unwrap());
    assert!(!store
        .close_elicitation("acme", "e1", ElicitationStatus::Cancelled, 41)
        .await
        .unwrap());

    // The sweep expires e3 (past its expiry), keeps recent finished ones, forgets old ones.
    let changed = store.sweep_elicitations(100, 0).await.unwrap();
    assert_eq!(changed, 1);
    let e3 = store.get_elicitation("acme", "e3").await.unwrap().unwrap();
    assert_eq!(e3.status, ElicitationStatus::Expired);
    store.sweep_elicitations(100, 35).await.unwrap();
    assert_eq!(store.get_elicitation("acme", "e1").await.unwrap(), None);
    assert!(store.get_elicitation("acme", "e2").await.unwrap().is_some());
    assert!(store.get_elicitation("beta", "e1").await.unwrap().is_some());
}

fn grant(hash: &str, family: &str, expires_at: i64) -> GrantRecord {
    GrantRecord {
        token_hash: hash.into(),
        family: family.into(),
        client_id: "c1".into(),
        grant: json!({ "scope": "mcp", "family": family }),
        expires_at,
        used_at: None,
        revoked_at: None,
    }
}

/// Multi round-trip requests: tenant-keyed, replaced in place, consumed once, hidden and swept
/// once expired.
async fn rounds_contract(store: &SqlStore) {
    let round = |id: &str, n: u32, expires_at: i64| RoundRecord {
        id: id.into(),
        round: n,
        state: format!("sealed-{n}"),
        expires_at,
    };
    store
        .save_round("acme", &round("r1", 1, 5_000))
        .await
        .unwrap();
    store
        .save_round("acme", &round("r1", 2, 6_000))
        .await
        .unwrap();
    assert_eq!(
        store.round("acme", "r1", 1_000).await.unwrap(),
        Some(round("r1", 2, 6_000))
    );
    assert_eq!(store.round("beta", "r1", 1_000).await.unwrap(), None);
    assert_eq!(
        store.round("acme", "r1", 6_000).await.unwrap(),
        None,
        "expired"
    );
    // A retry claims its round until its claim lapses or is released; another retry cannot
    // claim it meanwhile, nor claim a round that was replaced, at another tenant, or expired.
    assert!(store
        .claim_round("acme", "r1", 2, 1_000, 2_000)
        .await
        .unwrap());
    assert!(!store
        .claim_round("acme", "r1", 2, 1_500, 3_000)
        .await
        .unwrap());
    assert!(!store
        .claim_round("acme", "r1", 1, 1_000, 3_000)
        .await
        .unwrap());
    assert!(!store
        .claim_round("beta", "r1", 2, 1_000, 3_000)
        .await
        .unwrap());
    assert!(
        store
            .claim_round("acme", "r1", 2, 2_000, 3_000)
            .await
            .unwrap(),
        "the claim lapsed at 2000"
    );
    // Only the claim that holds the round moves it: renewed, then released.
    assert!(
        !store
            .set_claim("acme", "r1", 2, 2_000, 4_000)
            .await
            .unwrap(),
        "the claim until 2000 lapsed and is another retry's now"
    );
    assert!(store
        .set_claim("acme", "r1", 2, 3_000, 4_000)
        .await
        .unwrap());
    assert!(
        !store
            .claim_round("acme", "r1", 2, 3_500, 5_000)
            .await
            .unwrap(),
        "renewed"
    );
    assert!(store.set_claim("acme", "r1", 2, 4_000, 0).await.unwrap());
    assert!(
        store
            .claim_round("acme", "r1", 2, 3_500, 5_000)
            .await
            .unwrap(),
        "released"
    );
    assert!(
        !store
            .claim_round("acme", "r1", 2, 6_000, 7_000)
            .await
            .unwrap(),
        "expired"
    );
    // A round saved over a claimed one is not claimed; only its claim uses it up.
    store
        .save_round("acme", &round("r1", 2, 6_000))
        .await
        .unwrap();
    assert!(store
        .claim_round("acme", "r1", 2, 1_000, 2_000)
        .await
        .unwrap());
    assert!(!store
        .delete_round("acme", "r1", 2, Some(1_500))
        .await
        .unwrap());
    assert!(!store.delete_round("beta", "r1", 2, None).await.unwrap());
    // Round 1 was replaced by round 2: a retry that read round 1 consumes nothing.
    assert!(!store.delete_round("acme", "r1", 1, None).await.unwrap());
    assert!(store
        .delete_round("acme", "r1", 2, Some(2_000))
        .await
        .unwrap());
    assert!(
        !store.delete_round("acme", "r1", 2, None).await.unwrap(),
        "consumed once"
    );
    store
        .save_round("acme", &round("r-old", 1, 100))
        .await
        .unwrap();
    store
        .save_round("acme", &round("r-keep", 1, i64::MAX / 2))
        .await
        .unwrap();
    store
        .save_round("beta", &round("r-keep", 1, i64::MAX / 2))
        .await
        .unwrap();
    assert_eq!(store.sweep_rounds(1_000).await.unwrap(), 1);
    assert!(store
        .round("acme", "r-keep", 1_000)
        .await
        .unwrap()
        .is_some());

    // A session call's webhook round left behind (its session ended while it waited) goes two
    // days after it was written; one written since stays.
    let input = mcp_harbor::store::PendingInput {
        tool: "hook".into(),
        round: 1,
        state: json!({ "step": 1 }),
    };
    store
        .save_pending_input("acme", "s1", "7", &input)
        .await
        .unwrap();
    let now = mcp_harbor::store::now_millis();
    store.sweep_rounds(now + 86_400_000).await.unwrap();
    assert_eq!(
        store
            .pending_input("acme", "s1", "7")
            .await
            .unwrap()
            .map(|p| p.round),
        Some(1)
    );
    store.sweep_rounds(now + 3 * 86_400_000).await.unwrap();
    assert!(store
        .pending_input("acme", "s1", "7")
        .await
        .unwrap()
        .is_none());
}

/// Clients, codes, refresh families, keys and users: tenant-keyed, single-use redemption.
async fn oauth_contract(store: &SqlStore) {
    let client = |tenant: &str| OAuthClient {
        tenant: tenant.into(),
        client_id: "c1".into(),
        secret_hash: Some("s".into()),
        registration_token_hash: None,
        source: "dcr".into(),
        metadata: json!({ "client_name": format!("client of {tenant}") }),
        created_at: 1,
        confirmed_at: None,
    };
    store.insert_client(&client("acme")).await.unwrap();
    store.insert_client(&client("beta")).await.unwrap();
    assert!(matches!(
        store.insert_client(&client("acme")).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.get_client("beta", "c1").await.unwrap(),
        Some(client("beta"))
    );
    let mut changed = client("acme");
    changed.metadata = json!({ "client_name": "renamed" });
    store.update_client(&changed).await.unwrap();
    assert_eq!(store.get_client("acme", "c1").await.unwrap(), Some(changed));
    assert_eq!(store.list_clients("acme", None, 10).await.unwrap().len(), 1);

    // A code redeems once, and only at its tenant.
    store
        .insert_code("acme", &grant("code-1", "", 10_000))
        .await
        .unwrap();
    assert_eq!(
        store.redeem_code("beta", "code-1", 5).await.unwrap(),
        Redeemed::Unknown
    );
    assert!(
        matches!(store.redeem_code("acme", "code-1", 5).await.unwrap(), Redeemed::Fresh(g) if g.used_at == Some(5))
    );
    assert!(matches!(
        store.redeem_code("acme", "code-1", 6).await.unwrap(),
        Redeemed::Reused(_)
    ));

    // Refresh tokens: redeemed once; a family is revoked as one.
    store
        .insert_refresh("acme", &grant("r1", "fam", 10_000))
        .await
        .unwrap();
    store
        .insert_refresh("acme", &grant("r2", "fam", 10_000))
        .await
        .unwrap();
    store
        .insert_refresh("acme", &grant("r3", "other", 10_000))
        .await
        .unwrap();
    assert!(matches!(
        store.redeem_refresh("acme", "r1", 7).await.unwrap(),
        Redeemed::Fresh(_)
    ));
    assert!(matches!(
        store.redeem_refresh("acme", "r1", 8).await.unwrap(),
        Redeemed::Reused(_)
    ));
    store.revoke_family("acme", "fam", 9).await.unwrap();
    assert!(
        matches!(store.redeem_refresh("acme", "r2", 10).await.unwrap(), Redeemed::Reused(g) if g.revoked_at == Some(9))
    );
    assert!(matches!(
        store.redeem_refresh("acme", "r3", 10).await.unwrap(),
        Redeemed::Fresh(_)
    ));
    assert_eq!(store.get_refresh("beta", "r3").await.unwrap(), None);

    // Signing keys: a rotation retires the previous one.
    let key = |kid: &str, at: i64| SigningKeyRecord {
        kid: kid.into(),
        alg: "ES256".into(),
        public_jwk: json!({ "kid": kid }),
        private_key: "sealed".into(),
        created_at: at,
        retired_at: None,
    };
    store
        .rotate_signing_key("acme", &key("k1", 100))
        .await
        .unwrap();
    store
        .rotate_signing_key("acme", &key("k2", 200))
        .await
        .unwrap();
    let keys = store.signing_keys("acme").await.unwrap();
    assert_eq!(
        keys.iter()
            .map(|k| (k.kid.as_str(), k.retired_at))
            .collect::<Vec<_>>(),
        [("k1", Some(200)), ("k2", None)]
    );
    assert!(store.signing_keys("beta").await.unwrap().is_empty());

    // Users.
    let user = |name: &str| UserRecord {
        username: name.into(),
        password_hash: "$argon2id$x".into(),
        display_name: name.to_uppercase(),
        created_at: 1,
        updated_at: 1,
    };
    store.insert_user("acme", &user("alice")).await.unwrap();
    assert!(matches!(
        store.insert_user("acme", &user("alice")).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.get_user("beta", "alice").await.unwrap(), None);
    let mut renamed = user("alice");
    renamed.display_name = "Alice A".into();
    renamed.updated_at = 2;
    assert!(store.update_user("acme", &renamed, 1).await.unwrap());
    assert_eq!(
        store.get_user("acme", "alice").await.unwrap(),
        Some(renamed.clone())
    );
    let mut stale = user("alice");
    stale.password_hash = "an older password".into();
    assert!(
        !store.update_user("acme", &stale, 1).await.unwrap(),
        "a write over a revision read before another changes nothing"
    );
    assert_eq!(
        store.get_user("acme", "alice").await.unwrap(),
        Some(renamed)
    );
    assert!(matches!(
        store.update_user("acme", &user("nobody"), 1).await,
        Err(StoreError::NotFound)
    ));
    store.insert_user("acme", &user("bob")).await.unwrap();
    let page = store.list_users("acme", Some("alice"), 10).await.unwrap();
    assert_eq!(
        page.iter().map(|u| u.username.as_str()).collect::<Vec<_>>(),
        ["bob"]
    );
    let bob = store.get_user("acme", "bob").await.unwrap().unwrap();
    assert!(!store
        .delete_user("acme", "bob", Some(bob.updated_at - 1))
        .await
        .unwrap());
    assert!(store
        .delete_user("acme", "bob", Some(bob.updated_at))
        .await
        .unwrap());
    assert!(!store.delete_user("acme", "bob", None).await.unwrap());

    // The sweep removes expired grants and long-retired keys only.
    store
        .insert_code("acme", &grant("old-code", "", 50))
        .await
        .unwrap();
    store
        .insert_refresh("acme", &grant("old-r", "f", 50))
        .await
        .unwrap();
    // Clients anyone registered go when never confirmed: beta's c1 is confirmed (once: the
    // first time stays), acme's is not; one pre-registered, one registered after the cutoff.
    assert!(store.confirm_client("beta", "c1", 20).await.unwrap());
    assert!(store.confirm_client("beta", "c1", 30).await.unwrap());
    assert!(
        !store.confirm_client("beta", "gone", 30).await.unwrap(),
        "a client that is not registered is not confirmed"
    );
    let confirmed = store.get_client("beta", "c1").await.unwrap().unwrap();
    assert_eq!(confirmed.confirmed_at, Some(20));
    let kept = [("pre", "admin", 1), ("late", "dcr", 300)];
    for (id, source, created_at) in kept {
        let c = OAuthClient {
            client_id: id.into(),
            source: source.into(),
            created_at,
            ..client("acme")
        };
        store.insert_client(&c).await.unwrap();
    }
    let removed = store.sweep_oauth(60, 250, 100).await.unwrap();
    assert_eq!(
        removed, 4,
        "one code, one refresh token, one key, one unconfirmed client"
    );
    assert_eq!(store.get_client("acme", "c1").await.unwrap(), None);
    assert_eq!(
        store.get_client("beta", "c1").await.unwrap(),
        Some(confirmed)
    );
    for (id, ..) in kept {
        assert!(
            store.get_client("acme", id).await.unwrap().is_some(),
            "{id}"
        );
    }
    assert_eq!(
        store.redeem_code("acme", "old-code", 61).await.unwrap(),
        Redeemed::Unknown
    );
    assert_eq!(store.signing_keys("acme").await.unwrap().len(), 1);
    assert!(store.get_refresh("acme", "r3").await.unwrap().is_some());
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
