//! A tenant's URL-mode elicitations (`/tenants/{slug}/elicitations`): list (pending ones by
//! default), inspect and cancel. Secrets are never shown; an item says only whether a secret is
//! waiting to be handed to its tool.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{page, AdminError, AdminState, AdminTenant, PageQuery};
use crate::elicitation::Elicitations;
use crate::store::{now_millis, ElicitationRecord, ElicitationStatus, ElicitationStore};

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    /// One status, or `all`; default `pending`.
    pub status: Option<String>,
}

/// The admin view of an elicitation (never the secret).
pub fn elicitation_json(slug: &str, e: &ElicitationRecord, service: &Elicitations) -> Value {
    let principal = e.principal.as_deref().map(|b| {
        let mut parts = b.splitn(3, '\n');
        json!({
            "issuer": parts.next().unwrap_or(""),
            "subject": parts.next().unwrap_or(""),
            "client_id": parts.next().unwrap_or(""),
        })
    });
    json!({
        "id": e.id,
        "status": e.status_at(now_millis()).as_str(),
        "tool": e.tool,
        "name": e.name,
        "message": e.message,
        "principal": principal,
        "session": e.session,
        "url": service.url(slug, &e.id),
        "secret_waiting": e.secret_sealed.is_some(),
        "expires_at": e.expires_at,
        "created_at": e.created_at,
        "updated_at": e.updated_at,
    })
}

/// An elicitation of a tenant known to exist (404 when it has none of that id).
async fn load(state: &AdminState, slug: &str, id: &str) -> Result<ElicitationRecord, AdminError> {
    state
        .directory
        .store
        .get_elicitation(slug, id)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no elicitation {id:?}")))
}

pub async fn list(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    service: web::Data<Elicitations>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let query = query.into_inner();
    let (limit, after) = PageQuery {
        limit: query.limit,
        cursor: query.cursor,
    }
    .resolve()?;
    let status = match query.status.as_deref() {
        None => Some(ElicitationStatus::Pending),
        Some("all") => None,
        Some(s) => Some(ElicitationStatus::parse(s).ok_or_else(|| {
            AdminError::invalid(
                "status",
                "must be pending, completed, declined, cancelled, expired or all",
            )
        })?),
    };
    let items = state
        .directory
        .store
        .list_elicitations(slug, status, after.as_deref(), limit)
        .await?;
    let last = items.last().map(|e| e.id.clone());
    Ok(page(
        items
            .iter()
            .map(|e| elicitation_json(slug, e, &service))
            .collect(),
        last.as_deref(),
        limit,
    ))
}

pub async fn get(
    _: AdminTenant,
    state: web::Data<AdminState>,
    service: web::Data<Elicitations>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, id) = path.into_inner();
    let e = load(&state, &slug, &id).await?;
    Ok(HttpResponse::Ok().json(elicitation_json(&slug, &e, &service)))
}

/// Cancels a pending elicitation (its waiting tool call goes on with `{"action": "cancel"}`);
/// the record stays, cancelled, until swept. 409 when it is not pending.
pub async fn cancel(
    _: AdminTenant,
    state: web::Data<AdminState>,
    service: web::Data<Elicitations>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, id) = path.into_inner();
    let e = load(&state, &slug, &id).await?;
    let status = e.status_at(now_millis());
    if status != ElicitationStatus::Pending {
        return Err(AdminError::conflict(format!(
            "the elicitation is {}, not pending",
            status.as_str()
        )));
    }
    let closed = service
        .close(&slug, &id, ElicitationStatus::Cancelled)
        .await
        .map_err(|e| match e {
            crate::elicitation::ElicitationError::Store(s) => AdminError::from(s),
            _ => AdminError::internal(),
        })?;
    if !closed {
        return Err(AdminError::conflict(
            "the elicitation is not pending any more",
        ));
    }
    tracing::info!(tenant = %slug, elicitation = %id, "elicitation cancelled by an administrator");
    let e = load(&state, &slug, &id).await?;
    Ok(HttpResponse::Ok().json(elicitation_json(&slug, &e, &service)))
}
