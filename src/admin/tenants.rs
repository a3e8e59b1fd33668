//! `/admin/v1/tenants`: register, read, list, update (display name, status, limits, built-in
//! catalogs) and delete tenants. A tenant's representations carry its `ETag`; an update takes
//! `If-Match` and never undoes a concurrent one (`precondition`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::oauth::{default_auth, AuthInput};
use super::precondition::{self, tagged, IfMatch};
use super::{
    page_continuing, parse_body, validate_display_name, Admin, AdminError, AdminState, AdminTenant,
    Documented, JsonBody, PageQuery,
};
use crate::auth::AuthService;
use crate::catalog::TenantCatalog;
use crate::config::is_valid_slug;
use crate::store::{
    next_revision, now_millis, CatalogStore, StoreError, TenantLimits, TenantRecord, TenantStatus,
    TenantStore,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    slug: String,
    display_name: Option<String>,
    #[serde(default)]
    catalogs: Vec<String>,
    #[serde(default)]
    limits: TenantLimits,
    /// Default: `auth.default_mode` (`oauth`).
    auth: Option<AuthInput>,
}

impl Documented for CreateTenant {
    const SCHEMA: &'static str = "CreateTenant";
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateTenant {
    display_name: Option<String>,
    status: Option<TenantStatus>,
    catalogs: Option<Vec<String>>,
    limits: Option<TenantLimits>,
    auth: Option<AuthInput>,
}

impl Documented for UpdateTenant {
    const SCHEMA: &'static str = "UpdateTenant";
}

/// The API's view of a tenant.
pub fn tenant_json(t: &TenantRecord) -> Value {
    // Limits a newer version stored are kept in the record but not shown: the document
    // describes this version's limits.
    let limits = TenantLimits {
        newer_fields: Default::default(),
        ..t.limits.clone()
    };
    json!({
        "slug": t.slug,
        "display_name": t.display_name,
        "status": t.status.as_str(),
        "catalogs": t.catalogs,
        "limits": limits,
        "auth": crate::auth::public_view(&t.auth),
        "mcp_path": format!("/t/{}/mcp", t.slug),
        "created_at": t.created_at,
        "updated_at": t.updated_at,
    })
}

fn validate_catalogs(catalogs: &[String]) -> Result<(), AdminError> {
    TenantCatalog::builtin(catalogs)
        .map(|_| ())
        .map_err(|e| AdminError::invalid("catalogs", e))
}

/// Longest cache hint a tenant may set: one day.
const MAX_CACHE_TTL_MS: u32 = 86_400_000;

/// Smallest body or message limit a tenant may set (an `initialize` must fit).
const MIN_SIZE_LIMIT: u32 = 1024;

/// 409 when a built-in catalog about to be enabled has an entry with the name or URI of one
/// the tenant published (as publishing it now would be refused): it would be listed twice.
async fn check_published_free(
    state: &AdminState,
    slug: &str,
    catalogs: &[String],
) -> Result<(), AdminError> {
    for entry in state.directory.store.all_entries(slug).await? {
        if let Some(c) =
            super::catalog::builtin_collision(catalogs, entry.kind, &entry.name, &entry.body)
        {
            return Err(AdminError::conflict(format!(
                "the built-in catalog {:?} has a {} with {} {:?}, as the tenant's published {} {:?} \
                 has: delete or rename that one first",
                c.catalog,
                super::catalog::label(entry.kind),
                c.key,
                c.value,
                super::catalog::label(entry.kind),
                entry.name
            )));
        }
    }
    Ok(())
}

fn validate_limits(limits: &TenantLimits) -> Result<(), AdminError> {
    if limits.cache_ttl_ms.is_some_and(|t| t > MAX_CACHE_TTL_MS) {
        return Err(AdminError::invalid(
            "limits.cache_ttl_ms",
            format!("must be at most {MAX_CACHE_TTL_MS} (one day)"),
        ));
    }
    let counts = [
        ("limits.max_sessions", limits.max_sessions),
        ("limits.requests_per_minute", limits.requests_per_minute),
        (
            "limits.max_sessions_per_principal",
            limits.max_sessions_per_principal,
        ),
        (
            "limits.requests_per_minute_per_principal",
            limits.requests_per_minute_per_principal,
        ),
    ];
    for (field, value) in counts {
        if value == Some(0) {
            return Err(AdminError::invalid(field, "must be at least 1"));
        }
    }
    for (field, limit) in [
        ("limits.max_body_bytes", limits.max_body_bytes),
        ("limits.max_message_bytes", limits.max_message_bytes),
    ] {
        if limit.is_some_and(|n| n < MIN_SIZE_LIMIT) {
            return Err(AdminError::invalid(
                field,
                format!("must be at least {MIN_SIZE_LIMIT}"),
            ));
        }
    }
    for (i, origin) in limits.allowed_origins.iter().enumerate() {
        let ok = (origin.starts_with("http://") || origin.starts_with("https://"))
            && origin
                .split("://")
                .nth(1)
                .is_some_and(|rest| !rest.is_empty() && !rest.trim_end_matches('/').contains('/'));
        if !ok {
            return Err(AdminError::invalid(
                format!("limits.allowed_origins[{i}]"),
                "must be an origin like https://app.example.com (scheme, host, optional port)",
            ));
        }
    }
    Ok(())
}

pub async fn create(
    _: Admin,
    state: web::Data<AdminState>,
    auth: web::Data<AuthService>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let input: CreateTenant = parse_body(&body)?;
    if !is_valid_slug(&input.slug) {
        return Err(AdminError::invalid(
            "slug",
            "must be 1-63 characters of a-z, 0-9 and '-', not starting with '-'",
        ));
    }
    let display_name = input.display_name.unwrap_or_else(|| input.slug.clone());
    validate_display_name(&display_name)?;
    validate_catalogs(&input.catalogs)?;
    validate_limits(&input.limits)?;
    let tenant_auth = match input.auth {
        Some(a) => a.into_stored(&input.slug, &auth, None)?,
        None => default_auth(&auth),
    };
    let now = now_millis();
    let record = TenantRecord {
        slug: input.slug,
        display_name,
        status: TenantStatus::Active,
        catalogs: input.catalogs,
        limits: input.limits,
        auth: tenant_auth,
        created_at: now,
        updated_at: now,
    };
    match state.directory.store.insert_tenant(&record).await {
        Err(StoreError::Conflict) => {
            return Err(AdminError::conflict(format!(
                "tenant {:?} already exists",
                record.slug
            )))
        }
        other => other?,
    }
    super::applied_later(&record.slug, state.directory.activate(&record).await);
    tracing::info!(tenant = %record.slug, "tenant created");
    Ok(tagged(HttpResponse::Created(), record.updated_at)
        .insert_header(("location", format!("/admin/v1/tenants/{}", record.slug)))
        .json(tenant_json(&record)))
}

pub async fn list(
    _: Admin,
    state: web::Data<AdminState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, AdminError> {
    let (limit, after) = query.resolve()?;
    let tenants = state
        .directory
        .store
        .tenants_page(after.as_deref(), limit)
        .await?;
    // A tenant this version cannot read is left out of the listing (the others are listed).
    for (slug, e) in &tenants.unreadable {
        tracing::error!(tenant = %slug, error = %e, "the stored tenant cannot be read by this version; not listed");
    }
    Ok(page_continuing(
        tenants.records.iter().map(tenant_json).collect(),
        tenants.next_after.as_deref(),
    ))
}

/// A tenant's record; 404 when there is none.
pub(super) async fn load(state: &AdminState, slug: &str) -> Result<TenantRecord, AdminError> {
    state
        .directory
        .store
        .get_tenant(slug)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no tenant {slug:?}")))
}

pub async fn get(tenant: AdminTenant) -> Result<HttpResponse, AdminError> {
    let record = tenant.record;
    Ok(tagged(HttpResponse::Ok(), record.updated_at).json(tenant_json(&record)))
}

pub async fn update(
    _: Admin,
    req: HttpRequest,
    state: web::Data<AdminState>,
    auth: web::Data<AuthService>,
    slug: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let if_match = IfMatch::of(&req)?;
    // Read, change, write if unchanged meanwhile; else read again (see `precondition`).
    for _ in 0..precondition::ATTEMPTS {
        let input: UpdateTenant = parse_body(&body)?;
        let mut record = load(&state, &slug).await?;
        if_match.check(record.updated_at)?;
        let seen = record.updated_at;
        if let Some(name) = input.display_name {
            validate_display_name(&name)?;
            record.display_name = name;
        }
        if let Some(limits) = input.limits {
            validate_limits(&limits)?;
            record.limits = limits;
        }
        if let Some(a) = input.auth {
            record.auth = a.into_stored(&record.slug, &auth, Some(&record.auth))?;
        }
        let catalogs_changed = match input.catalogs {
            Some(catalogs) if catalogs != record.catalogs => {
                validate_catalogs(&catalogs)?;
                check_published_free(&state, &record.slug, &catalogs).await?;
                record.catalogs = catalogs;
                true
            }
            _ => false,
        };
        if let Some(status) = input.status {
            record.status = status;
        }
        record.updated_at = next_revision(seen);
        if !state.directory.store.update_tenant(&record, seen).await? {
            continue;
        }
        super::applied_later(
            &record.slug,
            state
                .directory
                .apply_record(&record, catalogs_changed)
                .await,
        );
        tracing::info!(tenant = %record.slug, status = record.status.as_str(), "tenant updated");
        return Ok(tagged(HttpResponse::Ok(), record.updated_at).json(tenant_json(&record)));
    }
    Err(AdminError::write_contended())
}

pub async fn delete(
    _: Admin,
    req: HttpRequest,
    state: web::Data<AdminState>,
    slug: web::Path<String>,
) -> Result<HttpResponse, AdminError> {
    let store = &state.directory.store;
    let slug = slug.as_str();
    let deleted = precondition::delete(
        &IfMatch::of(&req)?,
        || async move { Ok(store.get_tenant(slug).await?.map(|t| t.updated_at)) },
        |seen| async move { Ok(store.delete_tenant(slug, seen).await?) },
    )
    .await?;
    if !deleted {
        return Err(AdminError::not_found(format!("no tenant {slug:?}")));
    }
    state.directory.deactivate(slug).await;
    tracing::info!(tenant = %slug, "tenant deleted");
    Ok(HttpResponse::NoContent().finish())
}
