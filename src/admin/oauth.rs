//! Per-tenant OAuth administration: the tenant's auth mode and settings (as given to
//! `POST/PATCH /tenants`), its users (`/tenants/{slug}/users`), pre-registered clients
//! (`/tenants/{slug}/oauth-clients`) and signing-key rotation (`/tenants/{slug}/signing-keys`).
//! Secrets arrive in clear and are stored hashed (passwords, client secrets, initial access
//! tokens) or sealed (the upstream provider's client secret); they are never shown again.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::precondition::{self, tagged, IfMatch};
use super::{
    page, parse_body, validate_display_name, AdminError, AdminState, AdminTenant, Documented,
    JsonBody, PageQuery,
};
use crate::auth::password::hash_password;
use crate::auth::{hash_secret, random_token, AuthService};
use crate::oauth::clients::{validate_metadata, ClientInput};
use crate::store::{
    default_name_claim, default_oidc_scopes, default_required_scopes, default_subject_claim,
    next_revision, now_millis, ExternalIssuer, LoginMethod, OAuthClient, OAuthSettings, OAuthStore,
    RegistrationPolicy, TenantAuth, UpstreamOidc, UserRecord,
};

/// A tenant's auth settings as the admin API accepts them.
#[derive(Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum AuthInput {
    None,
    Oauth(OAuthInput),
    External(ExternalInput),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OAuthInput {
    registration: Option<RegistrationPolicy>,
    /// Clear text; stored hashed (`registration: token`).
    initial_access_token: Option<String>,
    login: Option<LoginMethod>,
    oidc: Option<OidcInput>,
    required_scopes: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcInput {
    issuer: String,
    client_id: String,
    client_secret: Option<secrecy::SecretString>,
    scopes: Option<Vec<String>>,
    subject_claim: Option<String>,
    name_claim: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalInput {
    issuer: String,
    audience: String,
    jwks_uri: Option<String>,
    #[serde(default)]
    required_scopes: Vec<String>,
}

/// Hashes a password on the blocking pool (argon2 takes tens of milliseconds of CPU, which
/// must not hold the worker that serves other requests), as sign-in checks them.
async fn hash_off_worker(password: String) -> Result<String, AdminError> {
    actix_web::rt::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(internal)?
        .map_err(internal)
}

fn internal(e: impl std::fmt::Display) -> AdminError {
    tracing::error!(error = %e, "admin OAuth operation failed");
    AdminError::internal()
}

/// An outside URL the tenant's auth settings name: refused now for what fetching it would be
/// refused for later (http to a non-loopback host; a private address unless private egress is
/// allowed).
fn valid_url(field: &str, url: &str, auth: &AuthService) -> Result<(), AdminError> {
    auth.check_outside_url(url)
        .map_err(|e| AdminError::invalid(field, e))
}

fn valid_scopes(field: &str, scopes: &[String]) -> Result<(), AdminError> {
    for (i, s) in scopes.iter().enumerate() {
        if s.is_empty()
            || s.len() > 100
            || !s
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            return Err(AdminError::invalid(
                format!("{field}[{i}]"),
                "a scope is 1-100 printable ASCII characters without spaces, quotes or backslashes",
            ));
        }
    }
    Ok(())
}

impl AuthInput {
    /// Validates and converts to the stored form (secrets hashed or sealed). `previous` keeps
    /// secrets an update does not repeat.
    pub fn into_stored(
        self,
        tenant: &str,
        auth: &AuthService,
        previous: Option<&TenantAuth>,
    ) -> Result<TenantAuth, AdminError> {
        Ok(match self {
            AuthInput::None => TenantAuth::None,
            AuthInput::External(e) => {
                valid_url("auth.issuer", &e.issuer, auth)?;
                if let Some(uri) = &e.jwks_uri {
                    valid_url("auth.jwks_uri", uri, auth)?;
                }
                if e.audience.trim().is_empty() {
                    return Err(AdminError::invalid("auth.audience", "must not be empty"));
                }
                valid_scopes("auth.required_scopes", &e.required_scopes)?;
                TenantAuth::External(ExternalIssuer {
                    issuer: e.issuer,
                    audience: e.audience,
                    jwks_uri: e.jwks_uri,
                    required_scopes: e.required_scopes,
                    newer_fields: Default::default(),
                })
            }
            AuthInput::Oauth(o) => {
                let before = match previous {
                    Some(TenantAuth::Oauth(p)) => Some(p),
                    _ => None,
                };
                let registration = o.registration.unwrap_or_default();
                let initial_access_token_hash = match o.initial_access_token {
                    Some(t) if t.chars().count() < 16 => {
                        return Err(AdminError::invalid(
                            "auth.initial_access_token",
                            "must be at least 16 characters",
                        ))
                    }
                    Some(t) => Some(hash_secret(&t)),
                    None => before.and_then(|p| p.initial_access_token_hash.clone()),
                };
                if registration == RegistrationPolicy::Token && initial_access_token_hash.is_none()
                {
                    // On an update it is the tenant's state (no token to keep) that is missing
                    // something, not the request: 409.
                    let message =
                        "is required when registration is \"token\" (this tenant has none to keep)";
                    return Err(match previous {
                        Some(_) => {
                            AdminError::conflict(format!("auth.initial_access_token {message}"))
                        }
                        None => AdminError::invalid("auth.initial_access_token", message),
                    });
                }
                let login = o.login.unwrap_or_default();
                let oidc = match o.oidc {
                    None => None,
                    Some(u) => {
                        valid_url("auth.oidc.issuer", &u.issuer, auth)?;
                        if u.client_id.is_empty() {
                            return Err(AdminError::invalid(
                                "auth.oidc.client_id",
                                "must not be empty",
                            ));
                        }
                        let scopes = u.scopes.unwrap_or_else(default_oidc_scopes);
                        valid_scopes("auth.oidc.scopes", &scopes)?;
                        if !scopes.iter().any(|s| s == "openid") {
                            return Err(AdminError::invalid(
                                "auth.oidc.scopes",
                                "must include \"openid\"",
                            ));
                        }
                        let purpose = crate::auth::seal::purpose::oidc_client_secret(tenant);
                        let kept = before
                            .and_then(|p| p.oidc.as_ref())
                            .filter(|p| p.client_id == u.client_id)
                            .and_then(|p| p.client_secret_sealed.clone());
                        Some(UpstreamOidc {
                            issuer: u.issuer,
                            client_id: u.client_id,
                            client_secret_sealed: u
                                .client_secret
                                .map(|s| {
                                    use secrecy::ExposeSecret;
                                    auth.sealer.seal(&purpose, s.expose_secret().as_bytes())
                                })
                                .or(kept),
                            scopes,
                            subject_claim: u.subject_claim.unwrap_or_else(default_subject_claim),
                            name_claim: u.name_claim.unwrap_or_else(default_name_claim),
                            newer_fields: Default::default(),
                        })
                    }
                };
                if login == LoginMethod::Oidc && oidc.is_none() {
                    return Err(AdminError::invalid(
                        "auth.oidc",
                        "is required when login is \"oidc\"",
                    ));
                }
                let required_scopes = o.required_scopes.unwrap_or_else(default_required_scopes);
                valid_scopes("auth.required_scopes", &required_scopes)?;
                TenantAuth::Oauth(OAuthSettings {
                    registration,
                    initial_access_token_hash,
                    login,
                    oidc,
                    required_scopes,
                    newer_fields: Default::default(),
                })
            }
        })
    }
}

/// The auth of a tenant created without one (`auth.default_mode`).
pub fn default_auth(auth: &AuthService) -> TenantAuth {
    if auth.config.default_mode == "none" {
        TenantAuth::None
    } else {
        TenantAuth::Oauth(OAuthSettings::default())
    }
}

// ---- users ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateUser {
    username: String,
    password: String,
    display_name: Option<String>,
}

impl Documented for CreateUser {
    const SCHEMA: &'static str = "CreateUser";
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateUser {
    password: Option<String>,
    display_name: Option<String>,
}

impl Documented for UpdateUser {
    const SCHEMA: &'static str = "UpdateUser";
}

impl Documented for ClientInput {
    const SCHEMA: &'static str = "ClientMetadataInput";
}

fn user_json(u: &UserRecord) -> Value {
    json!({
        "username": u.username, "display_name": u.display_name,
        "created_at": u.created_at, "updated_at": u.updated_at,
    })
}

fn valid_password(password: &str) -> Result<(), AdminError> {
    if !(8..=1024).contains(&password.chars().count()) {
        return Err(AdminError::invalid(
            "password",
            "must be 8 to 1024 characters",
        ));
    }
    Ok(())
}

pub async fn create_user(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let input: CreateUser = parse_body(&body)?;
    let valid_name = !input.username.is_empty()
        && input.username.len() <= 100
        && input
            .username
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@+".contains(&b));
    if !valid_name {
        return Err(AdminError::invalid(
            "username",
            "must be 1-100 characters of letters, digits and . _ - @ +",
        ));
    }
    valid_password(&input.password)?;
    let display_name = input.display_name.unwrap_or_else(|| input.username.clone());
    validate_display_name(&display_name)?;
    let password_hash = hash_off_worker(input.password.clone()).await?;
    let now = now_millis();
    let user = UserRecord {
        username: input.username,
        password_hash,
        display_name,
        created_at: now,
        updated_at: now,
    };
    match state.directory.store.insert_user(slug, &user).await {
        Err(crate::store::StoreError::Conflict) => {
            return Err(AdminError::conflict(format!(
                "user {:?} already exists",
                user.username
            )))
        }
        other => other?,
    }
    tracing::info!(tenant = %slug, username = %user.username, "tenant user created");
    Ok(tagged(HttpResponse::Created(), user.updated_at)
        .insert_header((
            "location",
            format!("/admin/v1/tenants/{slug}/users/{}", user.username),
        ))
        .json(user_json(&user)))
}

pub async fn list_users(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let (limit, after) = query.resolve()?;
    let users = state
        .directory
        .store
        .list_users(slug, after.as_deref(), limit)
        .await?;
    let last = users.last().map(|u| u.username.clone());
    Ok(page(
        users.iter().map(user_json).collect(),
        last.as_deref(),
        limit,
    ))
}

/// A user of a tenant known to exist (404 when it has none of that name).
async fn load_user(state: &AdminState, slug: &str, name: &str) -> Result<UserRecord, AdminError> {
    state
        .directory
        .store
        .get_user(slug, name)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no user {name:?}")))
}

pub async fn get_user(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let user = load_user(&state, &slug, &name).await?;
    Ok(tagged(HttpResponse::Ok(), user.updated_at).json(user_json(&user)))
}

pub async fn update_user(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let if_match = IfMatch::of(&req)?;
    let input: UpdateUser = parse_body(&body)?;
    let password_hash = match &input.password {
        Some(p) => {
            valid_password(p)?;
            Some(hash_off_worker(p.clone()).await?)
        }
        None => None,
    };
    if let Some(d) = &input.display_name {
        validate_display_name(d)?;
    }
    // Read, change, write if unchanged meanwhile; else read again (see `precondition`): a
    // rename never puts back a password changed meanwhile.
    for _ in 0..precondition::ATTEMPTS {
        let mut user = load_user(&state, &slug, &name).await?;
        if_match.check(user.updated_at)?;
        let seen = user.updated_at;
        if let Some(hash) = &password_hash {
            user.password_hash = hash.clone();
        }
        if let Some(d) = &input.display_name {
            user.display_name = d.clone();
        }
        user.updated_at = next_revision(seen);
        if state
            .directory
            .store
            .update_user(&slug, &user, seen)
            .await?
        {
            return Ok(tagged(HttpResponse::Ok(), user.updated_at).json(user_json(&user)));
        }
    }
    Err(AdminError::write_contended())
}

pub async fn delete_user(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, name) = path.into_inner();
    let if_match = IfMatch::of(&req)?;
    let store = &state.directory.store;
    let (tenant, user) = (slug.as_str(), name.as_str());
    let deleted = precondition::delete(
        &if_match,
        || async move { Ok(store.get_user(tenant, user).await?.map(|u| u.updated_at)) },
        |seen| async move { Ok(store.delete_user(tenant, user, seen).await?) },
    )
    .await?;
    if !deleted {
        return Err(AdminError::not_found(format!("no user {name:?}")));
    }
    Ok(HttpResponse::NoContent().finish())
}

// ---- pre-registered clients ----

pub fn client_json(c: &OAuthClient) -> Value {
    let mut v = c.metadata.clone();
    if let Some(o) = v.as_object_mut() {
        o.insert("client_id".into(), json!(c.client_id));
        o.insert("source".into(), json!(c.source));
        o.insert("created_at".into(), json!(c.created_at));
        o.insert("confidential".into(), json!(c.secret_hash.is_some()));
    }
    v
}

pub async fn create_client(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let input: ClientInput = parse_body(&body)?;
    let metadata =
        validate_metadata(input).map_err(|(field, message)| AdminError::invalid(field, message))?;
    let confidential = metadata
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .is_some_and(|m| m != "none");
    let secret = confidential.then(random_token);
    let client = OAuthClient {
        tenant: slug.to_string(),
        client_id: format!("hc_{}", uuid::Uuid::new_v4().simple()),
        secret_hash: secret.as_deref().map(hash_secret),
        registration_token_hash: None,
        source: "admin".into(),
        metadata,
        created_at: now_millis(),
        confirmed_at: Some(now_millis()),
    };
    state.directory.store.insert_client(&client).await?;
    tracing::info!(tenant = %slug, client_id = %client.client_id, "OAuth client pre-registered");
    let mut body = client_json(&client);
    if let (Some(secret), Some(o)) = (secret, body.as_object_mut()) {
        o.insert("client_secret".into(), json!(secret));
    }
    Ok(HttpResponse::Created()
        .insert_header((
            "location",
            format!(
                "/admin/v1/tenants/{slug}/oauth-clients/{}",
                client.client_id
            ),
        ))
        .json(body))
}

pub async fn list_clients(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let (limit, after) = query.resolve()?;
    let clients = state
        .directory
        .store
        .list_clients(slug, after.as_deref(), limit)
        .await?;
    let last = clients.last().map(|c| c.client_id.clone());
    Ok(page(
        clients.iter().map(client_json).collect(),
        last.as_deref(),
        limit,
    ))
}

pub async fn get_client(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, id) = path.into_inner();
    let client = state
        .directory
        .store
        .get_client(&slug, &id)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no client {id:?}")))?;
    Ok(HttpResponse::Ok().json(client_json(&client)))
}

pub async fn delete_client(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, id) = path.into_inner();
    if !state.directory.store.delete_client(&slug, &id).await? {
        return Err(AdminError::not_found(format!("no client {id:?}")));
    }
    Ok(HttpResponse::NoContent().finish())
}

// ---- signing keys ----

pub async fn list_keys(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let keys = state.directory.store.signing_keys(slug).await?;
    let items: Vec<Value> = keys
        .iter()
        .map(|k| {
            json!({
                "kid": k.kid, "alg": k.alg, "created_at": k.created_at,
                "retired_at": k.retired_at, "active": k.retired_at.is_none(),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}

pub async fn rotate_key(
    tenant: AdminTenant,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, AdminError> {
    let slug = tenant.slug();
    let kid = auth.keys.rotate(&auth.store, &auth.sealer, slug).await?;
    tracing::info!(tenant = %slug, kid = %kid, "signing key rotated");
    Ok(HttpResponse::Created().json(json!({ "kid": kid, "alg": crate::auth::keys::ALG })))
}
