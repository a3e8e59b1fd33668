//! `/admin/v1/tenants/{slug}/upstreams`: the upstream MCP servers a tenant federates. A `PUT`
//! creates or replaces one, a `PATCH` changes some of its fields (a JSON merge patch, RFC 7396,
//! of the `PUT` body), a `DELETE` removes it; each reaches the tenant's live sessions at once
//! (its lists fetched, `list_changed` sent) on every replica. A representation shows the
//! definition (credentials by header name only) and, under `state`, how the upstream is doing
//! on the replica that answered.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

use super::catalog::validate_name;
use super::precondition::{self, tagged, IfMatch};
use super::{
    page, parse_body, AdminError, AdminState, AdminTenant, Documented, JsonBody, PageQuery,
};
use crate::store::{next_revision, now_millis, StoreError, UpstreamRecord, UpstreamStore};
use crate::upstream::def::StoredAuth;
use crate::upstream::{UpstreamDef, UpstreamInput};

impl Documented for UpstreamInput {
    const SCHEMA: &'static str = "UpstreamInput";
}

fn def_of(record: &UpstreamRecord) -> Result<UpstreamDef, AdminError> {
    serde_json::from_value(record.body.clone()).map_err(|e| {
        tracing::error!(tenant = %record.tenant, upstream = %record.name, error = %e, "a stored upstream does not read");
        AdminError::internal()
    })
}

/// The representation of an upstream: its definition and its state here.
async fn shown(state: &AdminState, record: &UpstreamRecord) -> Result<Value, AdminError> {
    let def = def_of(record)?;
    let mut shown = def.shown(&record.name);
    // Its state as this replica sees it (the tenant started here if it was not yet).
    let live = match state.directory.resolve(&record.tenant).await {
        Ok(Some(_)) => state.directory.live_upstream(&record.tenant, &record.name),
        _ => None,
    };
    shown["state"] = match live {
        Some(live) if live.revision == record.updated_at => live.state(),
        _ => json!({ "connected": false }),
    };
    // Changed tool definitions held back, each with the pinned one beside it.
    let pins = state
        .directory
        .store
        .tool_pins(&record.tenant, &record.name)
        .await?;
    shown["pending"] = pins
        .into_iter()
        .filter_map(|pin| {
            let (_, offered) = pin.pending?;
            Some(json!({ "tool": pin.tool, "approved": pin.definition, "offered": offered }))
        })
        .collect();
    Ok(shown)
}

/// `POST …/upstreams/{name}/approve`: pins the changed tool definitions the upstream offers,
/// which are served from then on (on every replica).
pub async fn approve(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let store = &state.directory.store;
    let record = store
        .get_upstream(&slug, &name)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no upstream {name:?}")))?;
    let approved = store.approve_tools(&slug, &name).await?;
    super::applied_later(&slug, state.directory.upstream_changed(&slug, &name).await);
    tracing::info!(tenant = %slug, upstream = %name, approved, "changed upstream tool definitions approved");
    let mut body = shown(&state, &record).await?;
    body["approved"] = json!(approved);
    Ok(tagged(HttpResponse::Ok(), record.updated_at).json(body))
}

/// The `PUT` body an existing definition amounts to (header values left out: kept).
fn as_input(name: &str, def: &UpstreamDef) -> Value {
    let mut input = def.shown(name);
    input["auth"] = match def.auth {
        StoredAuth::None => json!({ "type": "none" }),
        StoredAuth::Headers { .. } => json!({ "type": "headers" }),
    };
    input
}

/// RFC 7396: `patch` applied to `target`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Checks a `PUT` body (as a whole) and builds what is stored.
fn validated(
    state: &AdminState,
    slug: &str,
    name: &str,
    body: &[u8],
    existing: Option<&UpstreamDef>,
) -> Result<UpstreamDef, AdminError> {
    checked(state, slug, name, parse_body(body)?, existing)
}

/// Checks what a `PUT` body (or a patched definition) says and builds what is stored.
fn checked(
    state: &AdminState,
    slug: &str,
    name: &str,
    input: UpstreamInput,
    existing: Option<&UpstreamDef>,
) -> Result<UpstreamDef, AdminError> {
    validate_name(&input.name)?;
    if input.name != name {
        return Err(AdminError::invalid(
            "name",
            format!("must match the path ({name:?})"),
        ));
    }
    input
        .into_def(&state.directory.sealer, slug, existing, |url| {
            state.egress.check_url(url)
        })
        .map_err(|(field, message)| AdminError::invalid(field, message))
}

/// Writes `def` as upstream `name` over the revision `seen` (or as a new one): false when it
/// changed (or appeared) meanwhile.
async fn write(
    state: &AdminState,
    slug: &str,
    name: &str,
    def: &UpstreamDef,
    seen: Option<&UpstreamRecord>,
) -> Result<Option<UpstreamRecord>, AdminError> {
    let now = now_millis();
    let record = UpstreamRecord {
        tenant: slug.to_string(),
        name: name.to_string(),
        body: serde_json::to_value(def).map_err(|_| AdminError::internal())?,
        created_at: seen.map_or(now, |s| s.created_at),
        updated_at: seen.map_or(now, |s| next_revision(s.updated_at)),
    };
    let store = &state.directory.store;
    let written = match seen {
        None => match store.insert_upstream(&record).await {
            Err(StoreError::Conflict) => false,
            other => other.map(|()| true)?,
        },
        Some(seen) => match store.replace_upstream(&record, seen.updated_at).await {
            Err(StoreError::NotFound) => false,
            other => other?,
        },
    };
    Ok(written.then_some(record))
}

async fn applied(
    state: &AdminState,
    record: &UpstreamRecord,
    created: bool,
) -> Result<HttpResponse, AdminError> {
    super::applied_later(
        &record.tenant,
        state
            .directory
            .upstream_changed(&record.tenant, &record.name)
            .await,
    );
    tracing::info!(tenant = %record.tenant, upstream = %record.name, created, "upstream defined");
    let body = shown(state, record).await?;
    let mut response = if created {
        HttpResponse::Created()
    } else {
        HttpResponse::Ok()
    };
    if created {
        response.insert_header((
            "location",
            format!(
                "/admin/v1/tenants/{}/upstreams/{}",
                record.tenant, record.name
            ),
        ));
    }
    Ok(tagged(response, record.updated_at).json(body))
}

pub async fn put(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let if_match = IfMatch::of(&req)?;
    let store = &state.directory.store;
    for _ in 0..precondition::ATTEMPTS {
        let existing = store.get_upstream(&slug, &name).await?;
        match &existing {
            Some(e) => if_match.check(e.updated_at)?,
            None if if_match != IfMatch::Absent => {
                return Err(AdminError::not_found(format!("no upstream {name:?}")))
            }
            None => {}
        }
        let old = existing.as_ref().map(def_of).transpose()?;
        let def = validated(&state, &slug, &name, &body, old.as_ref())?;
        if let Some(record) = write(&state, &slug, &name, &def, existing.as_ref()).await? {
            return applied(&state, &record, existing.is_none()).await;
        }
    }
    Err(AdminError::write_contended())
}

pub async fn patch(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let if_match = IfMatch::of(&req)?;
    let patch: Value = serde_json::from_slice(&body)
        .map_err(|e| AdminError::bad_request(format!("the body is not valid JSON: {e}")))?;
    super::openapi::check_body("UpstreamPatch", &patch)?;
    let store = &state.directory.store;
    for _ in 0..precondition::ATTEMPTS {
        let existing = store
            .get_upstream(&slug, &name)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("no upstream {name:?}")))?;
        if_match.check(existing.updated_at)?;
        let old = def_of(&existing)?;
        let mut input = as_input(&name, &old);
        merge_patch(&mut input, &patch);
        let merged: UpstreamInput = serde_json::from_value(input)
            .map_err(|e| AdminError::invalid("body", e.to_string()))?;
        let def = checked(&state, &slug, &name, merged, Some(&old))?;
        if let Some(record) = write(&state, &slug, &name, &def, Some(&existing)).await? {
            return applied(&state, &record, false).await;
        }
    }
    Err(AdminError::write_contended())
}

pub async fn get(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let record = state
        .directory
        .store
        .get_upstream(&slug, &name)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no upstream {name:?}")))?;
    let body = shown(&state, &record).await?;
    Ok(tagged(HttpResponse::Ok(), record.updated_at).json(body))
}

pub async fn list(
    _: AdminTenant,
    state: web::Data<AdminState>,
    slug: web::Path<String>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, AdminError> {
    let (limit, after) = query.resolve()?;
    let records = state
        .directory
        .store
        .list_upstreams(&slug, after.as_deref(), limit)
        .await?;
    let mut items = Vec::with_capacity(records.len());
    for record in &records {
        items.push(shown(&state, record).await?);
    }
    let last = records.last().map(|r| r.name.clone());
    Ok(page(items, last.as_deref(), limit))
}

pub async fn delete(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let if_match = IfMatch::of(&req)?;
    let store = &state.directory.store;
    let (tenant, upstream) = (slug.as_str(), name.as_str());
    let deleted = precondition::delete(
        &if_match,
        || async move {
            Ok(store
                .get_upstream(tenant, upstream)
                .await?
                .map(|r| r.updated_at))
        },
        |seen| async move { Ok(store.delete_upstream(tenant, upstream, seen).await?) },
    )
    .await?;
    if !deleted {
        return Err(AdminError::not_found(format!("no upstream {name:?}")));
    }
    super::applied_later(&slug, state.directory.upstream_changed(&slug, &name).await);
    tracing::info!(tenant = %slug, upstream = %name, "upstream removed");
    Ok(HttpResponse::NoContent().finish())
}
