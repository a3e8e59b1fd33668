//! `UpstreamCatalog`: what a tenant's catalog serves of one upstream — its lists renamed
//! (`{prefix}_{name}`), filtered and overridden as the tenant defined, and every call, read,
//! prompt and completion of its entries sent to it. An entry a filter denies is served by no
//! list and no method: to clients it does not exist.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::Upstream;
use crate::catalog::stored::UriTemplate;
use crate::catalog::{CallFuture, Catalog, RequestContext, UPSTREAM};
use crate::protocol::RpcError;

pub struct UpstreamCatalog {
    upstream: Arc<Upstream>,
    tools: Vec<Value>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
    resource_templates: Vec<Value>,
    /// Exposed name → the upstream's.
    tool_names: HashMap<String, String>,
    /// Exposed names of tools held back (their definition changed and awaits approval).
    held: Vec<String>,
    prompt_names: HashMap<String, String>,
    templates: Vec<UriTemplate>,
}

impl UpstreamCatalog {
    /// The catalog of `upstream` as its last good lists have it (empty before the first),
    /// without the tools `held` back (upstream names).
    pub fn new(upstream: Arc<Upstream>, held: &HashSet<String>) -> UpstreamCatalog {
        let lists = upstream.lists().unwrap_or_default();
        let def = &upstream.def;
        let mut tool_names = HashMap::new();
        let mut held_back = Vec::new();
        let tools = lists
            .tools
            .iter()
            .filter_map(|t| {
                let name = t["name"].as_str().filter(|n| def.tools.admits(n))?;
                let exposed = def.exposed(name);
                if held.contains(name) {
                    held_back.push(exposed);
                    return None;
                }
                let mut tool = t.clone();
                tool["name"] = json!(exposed);
                if let Some(o) = def.overrides.get(name) {
                    if let Some(title) = &o.title {
                        tool["title"] = json!(title);
                    }
                    if let Some(description) = &o.description {
                        tool["description"] = json!(description);
                    }
                    if let Some(annotations) = &o.annotations {
                        tool["annotations"] = annotations.clone();
                    }
                }
                tool_names.insert(exposed, name.to_string());
                Some(tool)
            })
            .collect();
        let mut prompt_names = HashMap::new();
        let prompts = lists
            .prompts
            .iter()
            .filter_map(|p| {
                let name = p["name"].as_str().filter(|n| def.prompts.admits(n))?;
                let exposed = def.exposed(name);
                let mut prompt = p.clone();
                prompt["name"] = json!(exposed);
                prompt_names.insert(exposed, name.to_string());
                Some(prompt)
            })
            .collect();
        let resources = lists
            .resources
            .iter()
            .filter(|r| r["uri"].as_str().is_some_and(|u| def.resources.admits(u)))
            .cloned()
            .collect();
        let resource_templates: Vec<Value> = lists
            .resource_templates
            .iter()
            .filter(|t| {
                t["uriTemplate"]
                    .as_str()
                    .is_some_and(|u| def.resources.admits(u))
            })
            .cloned()
            .collect();
        let templates = resource_templates
            .iter()
            .filter_map(|t| UriTemplate::parse(t["uriTemplate"].as_str()?).ok())
            .collect();
        UpstreamCatalog {
            upstream,
            tools,
            prompts,
            resources,
            resource_templates,
            tool_names,
            held: held_back,
            prompt_names,
            templates,
        }
    }

    /// Whether a read of `uri` is this upstream's: a resource it lists, or a URI one of its
    /// templates matches, that the tenant's filter admits.
    fn serves_uri(&self, uri: &str) -> bool {
        self.upstream.def.resources.admits(uri)
            && (self.resources.iter().any(|r| r["uri"] == uri)
                || self.templates.iter().any(|t| t.matches(uri).is_some()))
    }

    fn forward(
        &self,
        method: &'static str,
        params: Value,
        ctx: Option<RequestContext>,
    ) -> CallFuture {
        let upstream = self.upstream.clone();
        Box::pin(async move { upstream.call(method, params, ctx.as_ref()).await })
    }
}

impl Catalog for UpstreamCatalog {
    fn name(&self) -> &'static str {
        UPSTREAM
    }

    fn tools(&self) -> Vec<Value> {
        self.tools.clone()
    }

    fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture> {
        let original = self.tool_names.get(name)?;
        Some(self.forward(
            "tools/call",
            json!({ "name": original, "arguments": arguments }),
            Some(ctx),
        ))
    }

    fn unlisted_tool_error(&self, name: &str) -> Option<RpcError> {
        self.held.iter().any(|h| h == name).then(|| {
            RpcError::invalid_params(format!(
                "Tool {name} is held back: its definition changed at upstream {:?} and awaits \
                 an administrator's approval",
                self.upstream.name
            ))
        })
    }

    fn resources(&self) -> Vec<Value> {
        self.resources.clone()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.resource_templates.clone()
    }

    fn read_resource_remote(&self, uri: &str, ctx: &RequestContext) -> Option<CallFuture> {
        self.serves_uri(uri)
            .then(|| self.forward("resources/read", json!({ "uri": uri }), Some(ctx.clone())))
    }

    fn subscribe_remote(&self, uri: &str) {
        let subscribable = self
            .upstream
            .client_session_capabilities()
            .is_some_and(|c| c["resources"]["subscribe"] == true);
        if subscribable && self.serves_uri(uri) {
            self.upstream.subscribe(uri);
        }
    }

    fn prompts(&self) -> Vec<Value> {
        self.prompts.clone()
    }

    fn prompt_asks(&self, name: &str) -> bool {
        self.prompt_names.contains_key(name)
    }

    fn get_prompt_asking(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Option<CallFuture> {
        let original = self.prompt_names.get(name)?;
        Some(self.forward(
            "prompts/get",
            json!({ "name": original, "arguments": arguments }),
            Some(ctx.clone()),
        ))
    }

    fn complete_remote(&self, params: &Map<String, Value>) -> Option<CallFuture> {
        let reference = params.get("ref")?;
        let mut forwarded = params.clone();
        match reference["type"].as_str()? {
            "ref/prompt" => {
                let original = self.prompt_names.get(reference["name"].as_str()?)?;
                forwarded.insert(
                    "ref".into(),
                    json!({ "type": "ref/prompt", "name": original }),
                );
            }
            "ref/resource" => {
                let uri = reference["uri"].as_str()?;
                let known = self
                    .resource_templates
                    .iter()
                    .any(|t| t["uriTemplate"] == uri)
                    || self.resources.iter().any(|r| r["uri"] == uri);
                if !known {
                    return None;
                }
            }
            _ => return None,
        }
        let session = self
            .upstream
            .client_session_capabilities()
            .is_some_and(|c| c.get("completions").is_some_and(Value::is_object));
        if !session {
            // An upstream without completions has no values to offer.
            return Some(crate::catalog::ready(Ok(
                json!({ "completion": { "values": [], "total": 0, "hasMore": false } }),
            )));
        }
        Some(self.forward("completion/complete", Value::Object(forwarded), None))
    }
}
