//! `/sealing-keys`: the keys secrets at rest are sealed under (`auth.sealing_keys`), how many
//! stored values each still seals, and the re-sealing job that moves every value under the first
//! key (`POST /sealing-keys/rotate`, what `mcp-harbor admin keys rotate` calls). Key material is
//! never shown, only key ids.

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::{Admin, AdminError, AdminState};

/// `{sealing_key, keys: [{id, configured, sealing, values}], in_clear, unreadable, rotation}`.
pub async fn usage(_: Admin, state: web::Data<AdminState>) -> Result<HttpResponse, AdminError> {
    let rotation = &state.rotation;
    let usage = rotation.usage().await?;
    let sealer = rotation.sealer();
    let mut keys: Vec<Value> = sealer
        .key_ids()
        .map(|id| {
            json!({
                "id": id,
                "configured": true,
                "sealing": id == sealer.first_key_id(),
                "values": usage.sealed.get(id).copied().unwrap_or(0),
            })
        })
        .collect();
    // Values under a key that is no longer configured do not open: shown so they are noticed.
    for (id, count) in &usage.sealed {
        if !sealer.key_ids().any(|k| k == id) {
            keys.push(json!({ "id": id, "configured": false, "sealing": false, "values": count }));
        }
    }
    Ok(HttpResponse::Ok().json(json!({
        "sealing_key": sealer.first_key_id(),
        "keys": keys,
        "in_clear": usage.in_clear,
        "unreadable": usage.unreadable,
        "rotation": rotation.status(),
    })))
}

/// Starts re-sealing every stored value under the first key (in the background, on this
/// replica); 202 with the job's status, also when it was running already.
pub async fn rotate(_: Admin, state: web::Data<AdminState>) -> Result<HttpResponse, AdminError> {
    let status = state.rotation.start();
    tracing::info!(sealing_key = %status.sealing_key, "re-sealing of secrets at rest requested");
    Ok(HttpResponse::Accepted().json(status))
}
