//! An upstream's definition: what the admin API takes in (`UpstreamInput`), what is stored
//! (`UpstreamDef`, static credentials sealed), and the name filters and renames it applies to the
//! upstream's lists.

use std::collections::BTreeMap;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::auth::seal::Sealer;

/// Calls to an upstream give up after this long without one when the definition names none.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 300_000;
const MAX_PATTERNS: usize = 100;
const MAX_HEADERS: usize = 16;

/// Allow and deny glob lists (`*` any run of characters, `?` one): an item is visible when it
/// matches an `allow` pattern (or there are none) and no `deny` pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Filter {
    pub fn admits(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|p| glob(p, name)))
            && !self.deny.iter().any(|p| glob(p, name))
    }
    fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// `*` matches any run of characters (none included), `?` exactly one; everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// What a tenant changes in one upstream tool's definition as its clients see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// How the server authenticates to the upstream, as stored.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StoredAuth {
    None,
    /// Static headers (an API key): their values sealed together, bound to the tenant and the
    /// upstream; their names in clear (shown by the admin API).
    Headers {
        names: Vec<String>,
        sealed: String,
    },
}

impl std::fmt::Debug for StoredAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredAuth::None => f.write_str("None"),
            StoredAuth::Headers { names, .. } => {
                f.debug_struct("Headers").field("names", names).finish()
            }
        }
    }
}

/// The transports an upstream may speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    #[default]
    StreamableHttp,
    Sse,
}

/// Whether tool definitions are pinned: a tool whose definition changed at the upstream since it
/// was first seen (or last approved) is held back until an admin approves the change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pinning {
    #[default]
    On,
    Off,
}

/// An upstream's stored definition (the body of its `upstreams` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamDef {
    pub url: String,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default)]
    pub tools: Filter,
    #[serde(default)]
    pub prompts: Filter,
    #[serde(default)]
    pub resources: Filter,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, ToolOverride>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub pinning: Pinning,
    pub auth: StoredAuth,
}

impl UpstreamDef {
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// The name clients see for the upstream's tool or prompt `name`.
    pub fn exposed(&self, name: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}_{name}"),
            None => name.to_string(),
        }
    }

    /// The static headers, opened (`None` when there are none); an error when they do not open
    /// (the sealing key is gone, or the value was copied from another tenant's upstream).
    pub fn headers(
        &self,
        sealer: &Sealer,
        tenant: &str,
        upstream: &str,
    ) -> Result<Vec<(String, SecretString)>, String> {
        let StoredAuth::Headers { sealed, .. } = &self.auth else {
            return Ok(Vec::new());
        };
        let opened = sealer
            .open(&purpose(tenant, upstream), sealed)
            .map_err(|e| format!("its stored credentials do not open ({e})"))?;
        let map: BTreeMap<String, String> = serde_json::from_slice(&opened)
            .map_err(|e| format!("its stored credentials are unreadable ({e})"))?;
        Ok(map
            .into_iter()
            .map(|(k, v)| (k, SecretString::from(v)))
            .collect())
    }

    /// The definition as the admin API shows it: credentials by header name only.
    pub fn shown(&self, name: &str) -> Value {
        let mut shown = json!({ "name": name, "url": self.url, "transport": self.transport });
        if let Some(prefix) = &self.prefix {
            shown["prefix"] = json!(prefix);
        }
        for (key, filter) in [
            ("tools", &self.tools),
            ("prompts", &self.prompts),
            ("resources", &self.resources),
        ] {
            if !filter.is_empty() {
                shown[key] = json!(filter);
            }
        }
        if !self.overrides.is_empty() {
            shown["overrides"] = json!(self.overrides);
        }
        shown["timeout_ms"] = json!(self.timeout_ms());
        shown["pinning"] = json!(self.pinning);
        shown["auth"] = match &self.auth {
            StoredAuth::None => json!({ "type": "none" }),
            StoredAuth::Headers { names, .. } => json!({ "type": "headers", "headers": names }),
        };
        shown
    }
}

/// What the sealed headers of `tenant`'s upstream `upstream` are bound to.
pub fn purpose(tenant: &str, upstream: &str) -> String {
    format!("upstream-headers:{tenant}:upstream:{upstream}")
}

/// `auth` as the admin API takes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthInput {
    None,
    /// Header name → value; on a replacement, omitted values keep the stored ones.
    Headers {
        #[serde(default)]
        headers: Option<BTreeMap<String, String>>,
    },
}

/// A `PUT` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamInput {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default)]
    pub prefix: Option<String>,
    /// (`null` for any optional field is the same as leaving it out.)
    #[serde(default)]
    pub tools: Option<Filter>,
    #[serde(default)]
    pub prompts: Option<Filter>,
    #[serde(default)]
    pub resources: Option<Filter>,
    #[serde(default)]
    pub overrides: Option<BTreeMap<String, ToolOverride>>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub pinning: Pinning,
    #[serde(default = "no_auth")]
    pub auth: AuthInput,
}

fn no_auth() -> AuthInput {
    AuthInput::None
}

/// A refused field and why.
pub type Invalid = (String, String);

fn invalid(field: &str, message: impl Into<String>) -> Invalid {
    (field.to_string(), message.into())
}

impl UpstreamInput {
    /// Checks the input and builds what is stored: headers sealed under `purpose(tenant, name)`,
    /// or kept from `existing` when the input names none. `check_url` is the egress policy's.
    pub fn into_def(
        self,
        sealer: &Sealer,
        tenant: &str,
        existing: Option<&UpstreamDef>,
        check_url: impl Fn(&str) -> Result<(), String>,
    ) -> Result<UpstreamDef, Invalid> {
        check_url(&self.url).map_err(|e| invalid("url", e))?;
        if self.transport == Transport::Sse {
            return Err(invalid(
                "transport",
                "\"sse\" (the 2024-11-05 HTTP+SSE transport) is not served yet; use \
                 \"streamable-http\"",
            ));
        }
        if let Some(prefix) = &self.prefix {
            let ok = !prefix.is_empty()
                && prefix.len() <= 32
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
            if !ok {
                return Err(invalid(
                    "prefix",
                    "must be 1-32 characters of A-Z, a-z, 0-9, '_' and '-'",
                ));
            }
        }
        let (tools, prompts, resources) = (
            self.tools.unwrap_or_default(),
            self.prompts.unwrap_or_default(),
            self.resources.unwrap_or_default(),
        );
        let overrides = self.overrides.unwrap_or_default();
        for (field, filter) in [
            ("tools", &tools),
            ("prompts", &prompts),
            ("resources", &resources),
        ] {
            let patterns = filter.allow.iter().chain(&filter.deny);
            if filter.allow.len() > MAX_PATTERNS
                || filter.deny.len() > MAX_PATTERNS
                || patterns
                    .clone()
                    .any(|p| p.is_empty() || p.chars().count() > 256)
            {
                return Err(invalid(
                    field,
                    format!("at most {MAX_PATTERNS} patterns of 1-256 characters"),
                ));
            }
        }
        for (tool, o) in &overrides {
            let long = |s: &Option<String>, max: usize| {
                s.as_ref().is_some_and(|s| s.chars().count() > max)
            };
            if tool.is_empty() || long(&o.title, 256) || long(&o.description, 4096) {
                return Err(invalid(
                    "overrides",
                    "a tool name, a title of at most 256 characters and a description of at most 4096",
                ));
            }
            if o.annotations.as_ref().is_some_and(|a| !a.is_object()) {
                return Err(invalid("overrides", "annotations must be an object"));
            }
        }
        if let Some(t) = self.timeout_ms {
            if t == 0 || t > MAX_TIMEOUT_MS {
                return Err(invalid(
                    "timeout_ms",
                    format!("must be 1 to {MAX_TIMEOUT_MS}"),
                ));
            }
        }
        let auth = match self.auth {
            AuthInput::None => StoredAuth::None,
            AuthInput::Headers {
                headers: Some(headers),
            } => {
                if headers.is_empty() || headers.len() > MAX_HEADERS {
                    return Err(invalid("auth", format!("1 to {MAX_HEADERS} headers")));
                }
                for (name, value) in &headers {
                    let name_ok = name.len() <= 64
                        && reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                        && !RESERVED.contains(&name.to_ascii_lowercase().as_str());
                    if !name_ok {
                        return Err(invalid(
                            "auth",
                            format!("{name:?} is not a header name the server may send"),
                        ));
                    }
                    if reqwest::header::HeaderValue::from_str(value).is_err() || value.len() > 8192
                    {
                        return Err(invalid(
                            "auth",
                            format!("the value of {name:?} is not a valid header value"),
                        ));
                    }
                }
                let names = headers.keys().cloned().collect();
                let plain = SecretString::from(serde_json::to_string(&headers).unwrap_or_default());
                StoredAuth::Headers {
                    names,
                    sealed: sealer.seal(
                        &purpose(tenant, &self.name),
                        plain.expose_secret().as_bytes(),
                    ),
                }
            }
            AuthInput::Headers { headers: None } => match existing.map(|e| &e.auth) {
                Some(kept @ StoredAuth::Headers { .. }) => kept.clone(),
                _ => {
                    return Err(invalid(
                        "auth",
                        "\"headers\" is required (values are kept on a replacement only)",
                    ))
                }
            },
        };
        Ok(UpstreamDef {
            url: self.url.trim().to_string(),
            transport: self.transport,
            prefix: self.prefix,
            tools,
            prompts,
            resources,
            overrides,
            timeout_ms: self.timeout_ms,
            pinning: self.pinning,
            auth,
        })
    }
}

/// Headers the server sets itself on every upstream request.
const RESERVED: &[&str] = &[
    "content-type",
    "content-length",
    "accept",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "transfer-encoding",
    "connection",
    "traceparent",
    "tracestate",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_documented() {
        assert!(glob("*", ""));
        assert!(glob("get_*", "get_weather"));
        assert!(!glob("get_*", "set_weather"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*_admin_*", "x_admin_y"));
        assert!(glob("file:///docs/*", "file:///docs/a/b.md"));
        assert!(!glob("abc", "abcd"));
        assert!(glob("**a", "bbba"));
        // No exponential blow-up on patterns built to cause it.
        let text = "a".repeat(5_000);
        assert!(!glob("*a*a*a*a*a*b", &text));
    }

    #[test]
    fn a_filter_admits_what_it_allows_and_does_not_deny() {
        let f = Filter {
            allow: vec!["get_*".into(), "echo".into()],
            deny: vec!["get_secret*".into()],
        };
        assert!(f.admits("echo"));
        assert!(f.admits("get_weather"));
        assert!(!f.admits("get_secret_key"));
        assert!(!f.admits("delete_all"));
        assert!(Filter::default().admits("anything"));
    }

    #[test]
    fn headers_are_sealed_bound_to_the_tenant_and_upstream_and_shown_by_name() {
        let sealer = Sealer::from_specs(&[Sealer::generate_spec("k1")]).unwrap();
        let input: UpstreamInput = serde_json::from_value(json!({
            "name": "gh", "url": "https://example.com/mcp",
            "auth": { "type": "headers", "headers": { "Authorization": "Bearer s3cret" } }
        }))
        .unwrap();
        let def = input.into_def(&sealer, "acme", None, |_| Ok(())).unwrap();
        let stored = serde_json::to_string(&def).unwrap();
        assert!(!stored.contains("s3cret"), "{stored}");
        let headers = def.headers(&sealer, "acme", "gh").unwrap();
        assert_eq!(headers[0].0, "Authorization");
        assert_eq!(headers[0].1.expose_secret(), "Bearer s3cret");
        assert!(def.headers(&sealer, "other", "gh").is_err());
        assert!(def.headers(&sealer, "acme", "gl").is_err());
        assert_eq!(
            def.shown("gh")["auth"],
            json!({ "type": "headers", "headers": ["Authorization"] })
        );
        // A replacement without values keeps them; a create without them is refused.
        let again: UpstreamInput = serde_json::from_value(json!({
            "name": "gh", "url": "https://example.com/mcp", "auth": { "type": "headers" }
        }))
        .unwrap();
        let kept = again
            .into_def(&sealer, "acme", Some(&def), |_| Ok(()))
            .unwrap();
        assert_eq!(kept.auth, def.auth);
        let new: UpstreamInput = serde_json::from_value(json!({
            "name": "gh", "url": "https://example.com/mcp", "auth": { "type": "headers" }
        }))
        .unwrap();
        assert_eq!(
            new.into_def(&sealer, "acme", None, |_| Ok(()))
                .unwrap_err()
                .0,
            "auth"
        );
        let reserved: UpstreamInput = serde_json::from_value(json!({
            "name": "gh", "url": "https://example.com/mcp",
            "auth": { "type": "headers", "headers": { "Mcp-Session-Id": "x" } }
        }))
        .unwrap();
        assert_eq!(
            reserved
                .into_def(&sealer, "acme", None, |_| Ok(()))
                .unwrap_err()
                .0,
            "auth"
        );
    }
}
