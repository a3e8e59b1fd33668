//! `/admin/v1/tenants/{slug}/{tools|prompts|resources|resource-templates}`: a tenant's published
//! catalog. Changes reach the tenant's live sessions at once (list_changed, resources/updated).
//! An entry's representations carry its `ETag`; a replace takes `If-Match` (`precondition`).

use std::collections::HashSet;

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{json, Value};

use super::precondition::{self, tagged, IfMatch};
// The tenant must exist (404 otherwise, for every tenant-owned route): its record.
use super::{
    page, parse_body, AdminError, AdminState, AdminTenant, Documented, JsonBody, PageQuery,
};
use crate::catalog::stored::{
    PromptArgument, PromptDef, PromptMessage, ResourceDef, ResourceTemplateDef, StoredWebhook,
    TemplateResolver, ToolDef, UriTemplate,
};
use crate::store::{
    next_revision, now_millis, CatalogEntry, CatalogKind, CatalogStore, StoreError, TenantRecord,
};
use crate::tools::webhook;

/// A blob's decoded size limit, and a text's (or resolver text's) length limit in characters.
const MAX_RESOURCE_BYTES: usize = 1024 * 1024;
const MAX_RESOURCE_CHARS: usize = 1024 * 1024;

fn kind_of(segment: &str) -> Result<CatalogKind, AdminError> {
    match segment {
        "tools" => Ok(CatalogKind::Tool),
        "prompts" => Ok(CatalogKind::Prompt),
        "resources" => Ok(CatalogKind::Resource),
        "resource-templates" => Ok(CatalogKind::ResourceTemplate),
        other => Err(AdminError::not_found(format!(
            "no catalog collection {other:?} (tools, prompts, resources, resource-templates)"
        ))),
    }
}

pub(super) fn label(kind: CatalogKind) -> &'static str {
    match kind {
        CatalogKind::Tool => "tool",
        CatalogKind::Prompt => "prompt",
        CatalogKind::Resource => "resource",
        CatalogKind::ResourceTemplate => "resource template",
    }
}

/// Tool, prompt and template names: 1-128 of A-Z a-z 0-9 _ - . (MCP's tool-name guidance).
pub(super) fn validate_name(name: &str) -> Result<(), AdminError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(AdminError::invalid(
            "name",
            "must be 1-128 characters of A-Z, a-z, 0-9, '_', '-' and '.'",
        ))
    }
}

fn validate_text(field: &str, value: &str, max: usize) -> Result<(), AdminError> {
    if value.trim().is_empty() || value.chars().count() > max {
        return Err(AdminError::invalid(
            field,
            format!("must be 1 to {max} characters"),
        ));
    }
    Ok(())
}

fn validate_object_schema(field: &str, schema: &Value) -> Result<(), AdminError> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(AdminError::invalid(
            field,
            "must be a JSON Schema object with \"type\": \"object\"",
        ));
    }
    crate::protocol::schema::compile(schema)
        .map_err(|e| AdminError::invalid(field, e.to_string()))?;
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookInput {
    url: String,
    secret: Option<SecretString>,
    timeout_ms: Option<u64>,
    /// When `secret` replaces the tool's secret (ignored otherwise): how long calls are also
    /// signed with the replaced one (s).
    rotation_overlap_secs: Option<u64>,
}

/// The longest a replaced webhook secret may keep signing calls: a week.
const MAX_ROTATION_OVERLAP_SECS: u64 = 7 * 24 * 3600;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolInput {
    name: String,
    title: Option<String>,
    description: String,
    #[serde(default = "empty_object_schema")]
    input_schema: Value,
    output_schema: Option<Value>,
    annotations: Option<Value>,
    webhook: WebhookInput,
}

impl Documented for ToolInput {
    const SCHEMA: &'static str = "ToolInput";
}

fn empty_object_schema() -> Value {
    json!({ "type": "object" })
}

/// A validated entry: its key, the body to store, and the body to answer with.
struct Validated {
    name: String,
    body: Value,
    shown: Value,
    uri: Option<String>,
}

/// A stored tool as the API shows it: the webhook's `secret` in clear when it was just set or
/// generated (shown once), `whsec_…` otherwise; never the sealed value.
fn shown_tool(stored: &Value, revealed: Option<&SecretString>) -> Value {
    let mut tool = stored.clone();
    if let Some(webhook) = tool.get_mut("webhook").and_then(Value::as_object_mut) {
        webhook.remove("secret_sealed");
        let secret = revealed.map_or("whsec_…", |s| s.expose_secret());
        webhook.insert("secret".into(), json!(secret));
    }
    tool
}

fn validate_tool(
    state: &AdminState,
    slug: &str,
    body: &[u8],
    existing: Option<&CatalogEntry>,
) -> Result<Validated, AdminError> {
    let input: ToolInput = parse_body(body)?;
    validate_name(&input.name)?;
    validate_text("description", &input.description, 4096)?;
    if let Some(title) = &input.title {
        validate_text("title", title, 200)?;
    }
    validate_object_schema("input_schema", &input.input_schema)?;
    // Its `x-mcp-header` annotations (2026-07-28): clients drop a tool with an invalid one, so
    // it is not published.
    crate::protocol::stateless::param_headers(&input.input_schema)
        .map_err(|e| AdminError::invalid("input_schema", e))?;
    if let Some(schema) = &input.output_schema {
        validate_object_schema("output_schema", schema)?;
    }
    if input.annotations.as_ref().is_some_and(|a| !a.is_object()) {
        return Err(AdminError::invalid("annotations", "must be an object"));
    }
    state
        .egress
        .check_url(&input.webhook.url)
        .map_err(|e| AdminError::invalid("webhook.url", e))?;
    if let Some(ms) = input.webhook.timeout_ms {
        if !(100..=120_000).contains(&ms) {
            return Err(AdminError::invalid(
                "webhook.timeout_ms",
                "must be between 100 and 120000",
            ));
        }
    }
    let overlap = input.webhook.rotation_overlap_secs.unwrap_or(0);
    if overlap > MAX_ROTATION_OVERLAP_SECS {
        return Err(AdminError::invalid(
            "webhook.rotation_overlap_secs",
            format!("must be between 0 and {MAX_ROTATION_OVERLAP_SECS} (a week)"),
        ));
    }
    let kept = existing
        .and_then(|e| serde_json::from_value::<ToolDef>(e.body.clone()).ok())
        .map(|t| t.webhook);
    let sealer = &state.directory.sealer;
    let (url, timeout_ms) = (input.webhook.url, input.webhook.timeout_ms);
    let seal = |secret: &SecretString, url: String| {
        StoredWebhook::sealed(sealer, slug, &input.name, url, secret, timeout_ms)
    };
    if let Some(s) = &input.webhook.secret {
        webhook::check_secret(s.expose_secret())
            .map_err(|e| AdminError::invalid("webhook.secret", e))?;
    }
    let now = crate::store::now_millis();
    // The secret is shown once: when it is set or generated.
    let (webhook, revealed) = match (input.webhook.secret, kept) {
        (Some(s), Some(kept)) if overlap > 0 => {
            let replaced = kept.open(sealer, slug, &input.name).map_err(|_| {
                AdminError::invalid(
                    "webhook.rotation_overlap_secs",
                    "the tool's current secret cannot be opened to keep signing with it; \
                     replace the secret without an overlap",
                )
            })?;
            let until = now + (overlap * 1000) as i64;
            let webhook = StoredWebhook::sealed_rotating(
                sealer,
                slug,
                &input.name,
                url,
                &s,
                &replaced.secret,
                until,
                timeout_ms,
            );
            (webhook, Some(s))
        }
        (Some(s), _) => (seal(&s, url), Some(s)),
        // A rotation that has ended: only the new secret is kept (sealed again without the old).
        (None, Some(kept)) if kept.previous_secret_until.is_some_and(|until| until <= now) => {
            let current = kept.open(sealer, slug, &input.name).map_err(|_| {
                AdminError::invalid(
                    "webhook.secret",
                    "the tool's current secret cannot be opened; set a new one",
                )
            })?;
            (seal(&current.secret, url), None)
        }
        (None, Some(kept)) if kept.secret_sealed.is_some() => (
            StoredWebhook {
                url,
                timeout_ms,
                ..kept
            },
            None,
        ),
        // Stored in clear before secrets were sealed: sealed now.
        (
            None,
            Some(StoredWebhook {
                legacy_secret: Some(clear),
                ..
            }),
        ) => (seal(&clear, url), None),
        (None, _) => {
            let s = webhook::new_secret();
            (seal(&s, url), Some(s))
        }
    };
    let def = ToolDef {
        name: input.name.clone(),
        title: input.title,
        description: input.description,
        input_schema: input.input_schema,
        output_schema: input.output_schema,
        annotations: input.annotations,
        webhook,
    };
    let body = serde_json::to_value(&def).map_err(|_| AdminError::internal())?;
    let shown = shown_tool(&body, revealed.as_ref());
    Ok(Validated {
        name: input.name,
        body,
        shown,
        uri: None,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptInput {
    name: String,
    title: Option<String>,
    description: String,
    #[serde(default)]
    arguments: Vec<PromptArgument>,
    messages: Vec<PromptMessage>,
}

impl Documented for PromptInput {
    const SCHEMA: &'static str = "PromptInput";
}

impl Documented for ResourceDef {
    const SCHEMA: &'static str = "ResourceDef";
}

impl Documented for ResourceTemplateDef {
    const SCHEMA: &'static str = "ResourceTemplateDef";
}

fn validate_prompt(body: &[u8]) -> Result<Validated, AdminError> {
    let input: PromptInput = parse_body(body)?;
    validate_name(&input.name)?;
    validate_text("description", &input.description, 4096)?;
    let mut declared = HashSet::new();
    for (i, a) in input.arguments.iter().enumerate() {
        if a.name.is_empty()
            || !a
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(AdminError::invalid(
                format!("arguments[{i}].name"),
                "must be letters, digits and '_'",
            ));
        }
        if !declared.insert(a.name.as_str()) {
            return Err(AdminError::invalid(
                format!("arguments[{i}].name"),
                format!("{:?} is declared twice", a.name),
            ));
        }
    }
    if input.messages.is_empty() {
        return Err(AdminError::invalid(
            "messages",
            "needs at least one message",
        ));
    }
    for (i, m) in input.messages.iter().enumerate() {
        if !matches!(m.role.as_str(), "user" | "assistant") {
            return Err(AdminError::invalid(
                format!("messages[{i}].role"),
                "must be \"user\" or \"assistant\"",
            ));
        }
        validate_text(&format!("messages[{i}].text"), &m.text, 100_000)?;
        for placeholder in m
            .text
            .split("{{")
            .skip(1)
            .filter_map(|p| p.split("}}").next())
        {
            if !declared.contains(placeholder) {
                return Err(AdminError::invalid(
                    format!("messages[{i}].text"),
                    format!(
                        "uses {{{{{placeholder}}}}} but no argument {placeholder:?} is declared"
                    ),
                ));
            }
        }
    }
    let def = PromptDef {
        name: input.name.clone(),
        title: input.title,
        description: input.description,
        arguments: input.arguments,
        messages: input.messages,
    };
    let body = serde_json::to_value(&def).map_err(|_| AdminError::internal())?;
    Ok(Validated {
        name: input.name,
        shown: body.clone(),
        body,
        uri: None,
    })
}

pub(super) fn validate_uri(field: &str, uri: &str) -> Result<(), AdminError> {
    let scheme_ok = uri.split_once(':').is_some_and(|(scheme, rest)| {
        !scheme.is_empty()
            && scheme
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            && !rest.is_empty()
    });
    if !scheme_ok || uri.chars().any(char::is_whitespace) || uri.chars().count() > 2048 {
        return Err(AdminError::invalid(
            field,
            "must be an absolute URI like docs://handbook/intro",
        ));
    }
    Ok(())
}

fn validate_resource(body: &[u8]) -> Result<Validated, AdminError> {
    let def: ResourceDef = parse_body(body)?;
    validate_name(&def.name)?;
    validate_uri("uri", &def.uri)?;
    validate_text("mime_type", &def.mime_type, 200)?;
    match (&def.text, &def.blob) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(AdminError::invalid(
                "text",
                "give exactly one of text or blob",
            ))
        }
        (Some(text), None) if text.chars().count() > MAX_RESOURCE_CHARS => {
            return Err(AdminError::invalid(
                "text",
                format!("is longer than {MAX_RESOURCE_CHARS} characters"),
            ))
        }
        (None, Some(blob)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|_| AdminError::invalid("blob", "must be standard base64"))?;
            if bytes.len() > MAX_RESOURCE_BYTES {
                return Err(AdminError::invalid("blob", "is larger than 1 MiB"));
            }
        }
        _ => {}
    }
    let body = serde_json::to_value(&def).map_err(|_| AdminError::internal())?;
    Ok(Validated {
        name: def.name,
        shown: body.clone(),
        body,
        uri: Some(def.uri),
    })
}

fn validate_template(body: &[u8]) -> Result<Validated, AdminError> {
    let def: ResourceTemplateDef = parse_body(body)?;
    validate_name(&def.name)?;
    let parsed = UriTemplate::parse(&def.uri_template)
        .map_err(|e| AdminError::invalid("uri_template", e))?;
    validate_uri("uri_template", &def.uri_template)?;
    validate_text("mime_type", &def.mime_type, 200)?;
    let TemplateResolver::Text { text } = &def.resolver;
    validate_text("resolver.text", text, MAX_RESOURCE_CHARS)?;
    let vars: HashSet<&str> = parsed.variables().into_iter().collect();
    for placeholder in text.split('{').skip(1).filter_map(|p| p.split('}').next()) {
        if !vars.contains(placeholder) {
            return Err(AdminError::invalid(
                "resolver.text",
                format!("uses {{{placeholder}}}, which the URI template does not define"),
            ));
        }
    }
    let body = serde_json::to_value(&def).map_err(|_| AdminError::internal())?;
    Ok(Validated {
        name: def.name,
        shown: body.clone(),
        body,
        uri: None,
    })
}

fn validate(
    state: &AdminState,
    slug: &str,
    kind: CatalogKind,
    body: &[u8],
    existing: Option<&CatalogEntry>,
) -> Result<Validated, AdminError> {
    match kind {
        CatalogKind::Tool => validate_tool(state, slug, body, existing),
        CatalogKind::Prompt => validate_prompt(body),
        CatalogKind::Resource => validate_resource(body),
        CatalogKind::ResourceTemplate => validate_template(body),
    }
}

fn shown(entry: &CatalogEntry) -> Value {
    match entry.kind {
        CatalogKind::Tool => shown_tool(&entry.body, None),
        _ => entry.body.clone(),
    }
}

/// Resource URIs are unique within a tenant.
async fn check_uri_free(
    state: &AdminState,
    slug: &str,
    uri: &str,
    except: Option<&str>,
) -> Result<(), AdminError> {
    let resources = state
        .directory
        .store
        .list_entries(slug, CatalogKind::Resource, None, u32::MAX)
        .await?;
    if resources
        .iter()
        .any(|r| r.body["uri"] == uri && Some(r.name.as_str()) != except)
    {
        return Err(AdminError::conflict(format!(
            "another resource of this tenant already has uri {uri:?}"
        )));
    }
    Ok(())
}

/// A built-in catalog entry a published entry would collide with: the catalog's name, the key
/// (`name`, `uri` or `uriTemplate`) and its value.
pub(super) struct BuiltinCollision {
    pub catalog: &'static str,
    pub key: &'static str,
    pub value: String,
}

/// Whether a published entry of `kind` (its `name` and stored `body`) takes the name, URI or
/// URI template of an entry of one of the built-in `catalogs`: it would be listed twice and
/// never reached (the built-in one answers first).
pub(super) fn builtin_collision(
    catalogs: &[String],
    kind: CatalogKind,
    name: &str,
    body: &Value,
) -> Option<BuiltinCollision> {
    let value = match kind {
        CatalogKind::Tool | CatalogKind::Prompt => Some(name),
        CatalogKind::Resource => body["uri"].as_str(),
        CatalogKind::ResourceTemplate => body["uri_template"].as_str(),
    }?;
    let builtins = crate::catalog::TenantCatalog::builtin(catalogs).unwrap_or_default();
    builtins.iter().find_map(|catalog| {
        let (entries, key) = match kind {
            CatalogKind::Tool => (catalog.tools(), "name"),
            CatalogKind::Prompt => (catalog.prompts(), "name"),
            CatalogKind::Resource => (catalog.resources(), "uri"),
            CatalogKind::ResourceTemplate => (catalog.resource_templates(), "uriTemplate"),
        };
        entries
            .iter()
            .any(|e| e[key] == value)
            .then(|| BuiltinCollision {
                catalog: catalog.name(),
                key,
                value: value.to_string(),
            })
    })
}

/// 409 when the entry would collide with a built-in catalog the tenant enabled.
fn check_builtin_free(
    tenant: &TenantRecord,
    kind: CatalogKind,
    v: &Validated,
) -> Result<(), AdminError> {
    match builtin_collision(&tenant.catalogs, kind, &v.name, &v.body) {
        None => Ok(()),
        Some(c) => Err(AdminError::conflict(format!(
            "the built-in catalog {:?} of this tenant already has a {} with {} {:?}",
            c.catalog,
            label(kind),
            c.key,
            c.value
        ))),
    }
}

/// Tells the tenant's live sessions that `existing` was replaced or removed: the list changed,
/// and a resource's subscribers hear about it (under its old URI, if that changed too).
async fn announce_change(state: &AdminState, slug: &str, existing: &CatalogEntry) {
    let updated_uri = match existing.kind {
        CatalogKind::Resource => existing.body["uri"].as_str(),
        _ => None,
    };
    super::applied_later(
        slug,
        state
            .directory
            .catalog_changed(slug, existing.kind, updated_uri)
            .await,
    );
}

pub async fn create(
    tenant: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let (slug, segment) = path.into_inner();
    let kind = kind_of(&segment)?;
    let tenant = &tenant.record;
    let v = validate(&state, &slug, kind, &body, None)?;
    if let Some(uri) = &v.uri {
        check_uri_free(&state, &slug, uri, None).await?;
    }
    check_builtin_free(tenant, kind, &v)?;
    let now = now_millis();
    let entry = CatalogEntry {
        tenant: slug.clone(),
        kind,
        name: v.name.clone(),
        body: v.body,
        created_at: now,
        updated_at: now,
    };
    match state.directory.store.insert_entry(&entry).await {
        Err(StoreError::Conflict) => {
            return Err(AdminError::conflict(format!(
                "{} {:?} already exists",
                label(kind),
                v.name
            )))
        }
        other => other?,
    }
    super::applied_later(
        &slug,
        state.directory.catalog_changed(&slug, kind, None).await,
    );
    tracing::info!(tenant = %slug, kind = kind.as_str(), name = %v.name, "catalog entry published");
    Ok(tagged(HttpResponse::Created(), entry.updated_at)
        .insert_header((
            "location",
            format!("/admin/v1/tenants/{slug}/{segment}/{}", v.name),
        ))
        .json(v.shown))
}

pub async fn list(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String)>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, AdminError> {
    let (slug, segment) = path.into_inner();
    let kind = kind_of(&segment)?;
    let (limit, after) = query.resolve()?;
    let entries = state
        .directory
        .store
        .list_entries(&slug, kind, after.as_deref(), limit)
        .await?;
    let last = entries.last().map(|e| e.name.clone());
    Ok(page(
        entries.iter().map(shown).collect(),
        last.as_deref(),
        limit,
    ))
}

async fn load(
    state: &AdminState,
    slug: &str,
    kind: CatalogKind,
    name: &str,
) -> Result<CatalogEntry, AdminError> {
    entry_of(state, slug, kind, name).await
}

/// A tenant's entry (404 when it has none of that name), the tenant known to exist.
async fn entry_of(
    state: &AdminState,
    slug: &str,
    kind: CatalogKind,
    name: &str,
) -> Result<CatalogEntry, AdminError> {
    state
        .directory
        .store
        .get_entry(slug, kind, name)
        .await?
        .ok_or_else(|| AdminError::not_found(format!("no {} {name:?}", label(kind))))
}

pub async fn get(
    _: AdminTenant,
    state: web::Data<AdminState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, segment, name) = path.into_inner();
    let entry = load(&state, &slug, kind_of(&segment)?, &name).await?;
    Ok(tagged(HttpResponse::Ok(), entry.updated_at).json(shown(&entry)))
}

pub async fn replace(
    tenant: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, AdminError> {
    let (slug, segment, name) = path.into_inner();
    let kind = kind_of(&segment)?;
    let if_match = IfMatch::of(&req)?;
    // Read, replace, write if unchanged meanwhile; else read again (see `precondition`): the
    // kept webhook secret is always the one stored when the write lands.
    let tenant = &tenant.record;
    for _ in 0..precondition::ATTEMPTS {
        let existing = entry_of(&state, &slug, kind, &name).await?;
        if_match.check(existing.updated_at)?;
        let v = validate(&state, &slug, kind, &body, Some(&existing))?;
        if v.name != name {
            return Err(AdminError::invalid(
                "name",
                format!("must match the path ({name:?}); create a new entry to rename"),
            ));
        }
        if let Some(uri) = &v.uri {
            check_uri_free(&state, &slug, uri, Some(&name)).await?;
        }
        check_builtin_free(tenant, kind, &v)?;
        let entry = CatalogEntry {
            body: v.body,
            updated_at: next_revision(existing.updated_at),
            ..existing.clone()
        };
        if !state
            .directory
            .store
            .replace_entry(&entry, existing.updated_at)
            .await?
        {
            continue;
        }
        announce_change(&state, &slug, &existing).await;
        tracing::info!(tenant = %slug, kind = kind.as_str(), name = %name, "catalog entry replaced");
        return Ok(tagged(HttpResponse::Ok(), entry.updated_at).json(v.shown));
    }
    Err(AdminError::write_contended())
}

pub async fn delete(
    _: AdminTenant,
    req: HttpRequest,
    state: web::Data<AdminState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (slug, segment, name) = path.into_inner();
    let kind = kind_of(&segment)?;
    let if_match = IfMatch::of(&req)?;
    let existing = load(&state, &slug, kind, &name).await?;
    let store = &state.directory.store;
    let (tenant, entry) = (slug.as_str(), name.as_str());
    // The first try goes on from the entry just loaded; a retry (it changed meanwhile) reads again.
    let mut loaded = Some(existing.updated_at);
    let deleted = precondition::delete(
        &if_match,
        || {
            let known = loaded.take();
            async move {
                Ok(match known {
                    Some(revision) => Some(revision),
                    None => store
                        .get_entry(tenant, kind, entry)
                        .await?
                        .map(|e| e.updated_at),
                })
            }
        },
        |seen| async move { Ok(store.delete_entry(tenant, kind, entry, seen).await?) },
    )
    .await?;
    if !deleted {
        return Err(AdminError::not_found(format!(
            "no {} {name:?}",
            label(kind)
        )));
    }
    announce_change(&state, &slug, &existing).await;
    tracing::info!(tenant = %slug, kind = kind.as_str(), name = %name, "catalog entry removed");
    Ok(HttpResponse::NoContent().finish())
}
