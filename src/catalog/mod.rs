//! What a tenant serves: tools, resources, resource templates and prompts. A `Catalog` is one
//! source of them (the built-in `reference` and `demo` catalogs today); a `TenantCatalog` merges
//! the catalogs a tenant has enabled and is what sessions list and call through.

pub mod demo;
pub mod reference;
pub mod stored;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Map, Value};

pub use crate::request::{RequestContext, SessionPort};

use crate::protocol::RpcError;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
/// The outcome of one catalog call: a result object, or a protocol error.
pub type CallFuture = BoxFuture<Result<Value, RpcError>>;

/// One source of tools, resources and prompts.
pub trait Catalog: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// Tool definitions (`Tool` objects of the MCP schema).
    fn tools(&self) -> Vec<Value>;
    /// Starts a call; `None` when this catalog has no tool of that name.
    fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture>;
    /// Why tool `name`, which this catalog does not list, cannot be called, when it knows
    /// better than "unknown" (an upstream's tool held back); `None` otherwise.
    fn unlisted_tool_error(&self, _name: &str) -> Option<RpcError> {
        None
    }
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Reads a resource (or a URI matching one of its templates); `None` when not this catalog's.
    fn read_resource(&self, _uri: &str) -> Option<Result<Value, RpcError>> {
        None
    }
    /// Starts reading a resource whose content is elsewhere (an upstream server's); `None` when
    /// not this catalog's. Asked only when no catalog answers [`Self::read_resource`].
    fn read_resource_remote(&self, _uri: &str, _ctx: &RequestContext) -> Option<CallFuture> {
        None
    }
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }
    fn get_prompt(
        &self,
        _name: &str,
        _arguments: &Map<String, Value>,
    ) -> Option<Result<Value, RpcError>> {
        None
    }
    /// Whether prompt `name` asks the client something (an elicitation, a sample, its roots)
    /// before it is rendered: then `prompts/get` runs [`Self::get_prompt_asking`] like a tool
    /// call (in a session, asking over its stream; in 2026-07-28, by `input_required` rounds).
    fn prompt_asks(&self, _name: &str) -> bool {
        false
    }
    /// Starts `prompts/get` of a prompt that asks (see [`Self::prompt_asks`]); its outcome is a
    /// `GetPromptResult`. `None` when this catalog has no such prompt.
    fn get_prompt_asking(
        &self,
        _name: &str,
        _arguments: &Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Option<CallFuture> {
        None
    }
    /// Whether a call of this tool may be run again after a failover interrupted it, beyond what
    /// its annotations say (read-only or idempotent tools always may).
    fn reruns_safely(&self, _tool: &str) -> bool {
        false
    }
    /// Whether a call of this tool always finishes on its first poll without talking to the
    /// client (no log, progress, sampling, elicitation, roots) or changing anything others see:
    /// then a session answers it without a hop through its actor.
    fn answers_at_once(&self, _tool: &str) -> bool {
        false
    }
    /// Goes on with a call of `tool` that a previous replica left waiting for the client's input
    /// (an elicitation or a sampling answer): `answer` resolves with the client's answer. `None`
    /// when this catalog cannot (the call is then re-run or reported interrupted).
    fn resume_call(
        &self,
        _tool: &str,
        _arguments: Map<String, Value>,
        _ctx: RequestContext,
        _answer: tokio::sync::oneshot::Receiver<Result<Value, RpcError>>,
    ) -> Option<CallFuture> {
        None
    }
    /// Whether `resume_call` can go on with this catalog's calls from a recorded round (webhook
    /// tools, whose rounds are recorded in the database).
    fn resumes_calls(&self) -> bool {
        false
    }
    /// Completion values for a prompt argument or template variable; `None` when the reference
    /// is not this catalog's.
    fn complete(&self, _reference: &Value, _argument: &str, _value: &str) -> Option<Vec<String>> {
        None
    }
    /// A session subscribed to `uri`: a catalog whose resource lives elsewhere (an upstream
    /// server's) follows it there, to hear of its changes.
    fn subscribe_remote(&self, _uri: &str) {}
    /// Starts `completion/complete` (its `params`, checked) for a reference whose values are
    /// elsewhere (an upstream server's prompt or template); `None` when not this catalog's.
    fn complete_remote(&self, _params: &Map<String, Value>) -> Option<CallFuture> {
        None
    }
}

/// `Catalog::name` of every upstream server's catalog (the upstream room's `UpstreamCatalog`).
pub const UPSTREAM: &str = "upstream";

/// The built-in catalogs there are (`TenantCatalog::builtin`).
pub const BUILTIN_NAMES: [&str; 2] = ["reference", "demo"];

/// The merged view of a tenant's enabled catalogs, with its lists computed once.
pub struct TenantCatalog {
    catalogs: Vec<Arc<dyn Catalog>>,
    /// Tool name → index of the catalog that serves it.
    tool_owner: crate::FastMap<String, usize>,
    /// Tools whose interrupted calls may run again after a failover.
    rerunnable: crate::FastSet<String>,
    /// Tools whose catalog says they answer at once (`Catalog::answers_at_once`).
    immediate: crate::FastSet<String>,
    /// Tools with `x-mcp-header` parameters (mirrored into `Mcp-Param-*` headers), computed once.
    param_headers: crate::FastMap<String, Vec<crate::protocol::stateless::ParamHeader>>,
    pub tools: Vec<Value>,
    pub resources: Vec<Value>,
    pub resource_templates: Vec<Value>,
    pub prompts: Vec<Value>,
}

impl TenantCatalog {
    pub fn new(catalogs: Vec<Arc<dyn Catalog>>) -> Self {
        let collect = |f: &dyn Fn(&dyn Catalog) -> Vec<Value>| {
            catalogs.iter().flat_map(|c| f(c.as_ref())).collect()
        };
        let mut tool_owner = crate::FastMap::default();
        let mut rerunnable = crate::FastSet::default();
        let mut immediate = crate::FastSet::default();
        let mut param_headers = crate::FastMap::default();
        for (i, c) in catalogs.iter().enumerate() {
            for t in c.tools() {
                let Some(name) = t["name"].as_str() else {
                    continue;
                };
                if tool_owner.contains_key(name) {
                    continue;
                }
                tool_owner.insert(name.to_string(), i);
                let hint = |h: &str| t["annotations"][h] == Value::Bool(true);
                if hint("readOnlyHint") || hint("idempotentHint") || c.reruns_safely(name) {
                    rerunnable.insert(name.to_string());
                }
                if c.answers_at_once(name) {
                    immediate.insert(name.to_string());
                }
                // An invalid annotation mirrors nothing (clients drop such tools anyway).
                if let Ok(headers) = crate::protocol::stateless::param_headers(&t["inputSchema"]) {
                    if !headers.is_empty() {
                        param_headers.insert(name.to_string(), headers);
                    }
                }
            }
        }
        TenantCatalog {
            tool_owner,
            rerunnable,
            immediate,
            param_headers,
            tools: collect(&|c| c.tools()),
            resources: collect(&|c| c.resources()),
            resource_templates: collect(&|c| c.resource_templates()),
            prompts: collect(&|c| c.prompts()),
            catalogs,
        }
    }

    /// Builds the catalog from built-in names (`reference`, `demo`).
    pub fn from_builtin_names(names: &[String]) -> Result<Self, String> {
        Ok(Self::new(Self::builtin(names)?))
    }

    /// The built-in catalogs a stored tenant enabled, and the names this version has no
    /// catalog of (enabled through a newer version, during a rolling upgrade or before a
    /// rollback): those are left out rather than making the tenant unservable.
    pub fn stored_builtin(names: &[String]) -> (Vec<Arc<dyn Catalog>>, Vec<&str>) {
        let mut catalogs: Vec<Arc<dyn Catalog>> = Vec::new();
        let mut unknown = Vec::new();
        for (i, name) in names.iter().enumerate() {
            // Served once however often named (twice would list every entry twice; the admin
            // API refuses a repeat, a record stored before it did is still served).
            if names[..i].contains(name) {
                continue;
            }
            match name.as_str() {
                "reference" => catalogs.push(Arc::new(reference::ReferenceCatalog)),
                "demo" => catalogs.push(Arc::new(demo::DemoCatalog::default())),
                other => unknown.push(other),
            }
        }
        (catalogs, unknown)
    }

    /// The built-in catalogs of these names (`reference`, `demo`); an error naming the first
    /// one there is no catalog of.
    pub fn builtin(names: &[String]) -> Result<Vec<Arc<dyn Catalog>>, String> {
        match Self::stored_builtin(names) {
            (catalogs, unknown) if unknown.is_empty() => Ok(catalogs),
            (_, unknown) => Err(format!(
                "unknown built-in catalog {:?} (known: {})",
                unknown[0],
                BUILTIN_NAMES.join(", ")
            )),
        }
    }

    /// The catalogs other than the tenant's published one and its upstreams (kept across
    /// catalog rebuilds, so built-in state such as the demo note survives a publish).
    pub fn builtins(&self) -> Vec<Arc<dyn Catalog>> {
        self.catalogs
            .iter()
            .filter(|c| c.name() != stored::PUBLISHED && c.name() != UPSTREAM)
            .cloned()
            .collect()
    }

    pub fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
    ) -> Option<CallFuture> {
        let owner = self.tool_owner.get(name)?;
        let version = ctx.version;
        let call = self.catalogs[*owner].call_tool(name, arguments, ctx)?;
        if version >= crate::protocol::ProtocolVersion::V2025_06_18 {
            return Some(call);
        }
        // An older client gets the content blocks its revision has (see `content_for`).
        use futures_util::FutureExt;
        Some(Box::pin(call.map(move |outcome| {
            outcome.map(|result| crate::protocol::mcp::content_for(version, result))
        })))
    }

    /// See `Catalog::resume_call`.
    pub fn resume_call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: RequestContext,
        answer: tokio::sync::oneshot::Receiver<Result<Value, RpcError>>,
    ) -> Option<CallFuture> {
        let owner = self.tool_owner.get(name)?;
        self.catalogs[*owner].resume_call(name, arguments, ctx, answer)
    }

    /// See `Catalog::unlisted_tool_error`.
    pub fn unlisted_tool_error(&self, name: &str) -> Option<RpcError> {
        self.catalogs
            .iter()
            .find_map(|c| c.unlisted_tool_error(name))
    }

    pub fn has_tool(&self, name: &str) -> bool {
        self.tool_owner.contains_key(name)
    }

    /// The `x-mcp-header` parameters of tool `name` (empty for most tools).
    pub fn param_headers(&self, name: &str) -> &[crate::protocol::stateless::ParamHeader] {
        self.param_headers.get(name).map_or(&[], Vec::as_slice)
    }

    /// Whether calls of `name` go on from a recorded round (see `Catalog::resumes_calls`).
    pub fn resumes_calls(&self, name: &str) -> bool {
        self.tool_owner
            .get(name)
            .is_some_and(|owner| self.catalogs[*owner].resumes_calls())
    }

    /// Whether an interrupted call of `tool` may run again (see `Catalog::reruns_safely`).
    pub fn is_rerunnable(&self, tool: &str) -> bool {
        self.rerunnable.contains(tool)
    }

    /// See `Catalog::answers_at_once`.
    pub fn answers_at_once(&self, tool: &str) -> bool {
        self.immediate.contains(tool)
    }

    pub fn read_resource(&self, uri: &str) -> Option<Result<Value, RpcError>> {
        self.catalogs.iter().find_map(|c| c.read_resource(uri))
    }

    /// See `Catalog::read_resource_remote`.
    pub fn read_resource_remote(&self, uri: &str, ctx: &RequestContext) -> Option<CallFuture> {
        self.catalogs
            .iter()
            .find_map(|c| c.read_resource_remote(uri, ctx))
    }

    /// See `Catalog::subscribe_remote`.
    pub fn subscribe_remote(&self, uri: &str) {
        for c in &self.catalogs {
            c.subscribe_remote(uri);
        }
    }

    /// See `Catalog::complete_remote`.
    pub fn complete_remote(&self, params: &Map<String, Value>) -> Option<CallFuture> {
        self.catalogs.iter().find_map(|c| c.complete_remote(params))
    }

    pub fn get_prompt(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Option<Result<Value, RpcError>> {
        self.catalogs
            .iter()
            .find_map(|c| c.get_prompt(name, arguments))
    }

    /// See `Catalog::prompt_asks`.
    pub fn prompt_asks(&self, name: &str) -> bool {
        self.catalogs.iter().any(|c| c.prompt_asks(name))
    }

    /// See `Catalog::get_prompt_asking`.
    pub fn get_prompt_asking(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Option<CallFuture> {
        self.catalogs
            .iter()
            .find_map(|c| c.get_prompt_asking(name, arguments, ctx))
    }

    pub fn complete(&self, reference: &Value, argument: &str, value: &str) -> Option<Vec<String>> {
        self.catalogs
            .iter()
            .find_map(|c| c.complete(reference, argument, value))
    }
}

/// A tenant's current catalog, swappable while sessions run.
#[derive(Clone)]
pub struct CatalogHandle(Arc<RwLock<Arc<TenantCatalog>>>);

impl CatalogHandle {
    pub fn new(catalog: TenantCatalog) -> Self {
        CatalogHandle(Arc::new(RwLock::new(Arc::new(catalog))))
    }
    pub fn current(&self) -> Arc<TenantCatalog> {
        self.0.read().clone()
    }
    pub fn replace(&self, catalog: TenantCatalog) {
        *self.0.write() = Arc::new(catalog);
    }
}

/// A call whose outcome is already known.
pub fn ready(result: Result<Value, RpcError>) -> CallFuture {
    Box::pin(std::future::ready(result))
}

/// A built-in tool's outcome as the client's revision wants arguments the tool cannot use
/// (Invalid Params from the tool itself): from 2025-11-25 on a tool execution error
/// (`isError`, which the model can correct), before that the JSON-RPC error.
pub fn with_argument_errors(
    version: crate::protocol::ProtocolVersion,
    outcome: Result<Value, RpcError>,
) -> Result<Value, RpcError> {
    match outcome {
        Err(e)
            if e.code == crate::protocol::jsonrpc::INVALID_PARAMS
                && version >= crate::protocol::ProtocolVersion::V2025_11_25 =>
        {
            Ok(crate::protocol::mcp::tool_error(e.message))
        }
        other => other,
    }
}

/// Reads a string argument, or explains which one is missing.
pub fn str_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, RpcError> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("Missing or non-string argument: {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name in `BUILTIN_NAMES` is a catalog; a stored tenant's names this version has no
    /// catalog of are left out and answered, the admin API's check refuses them.
    #[test]
    fn builtin_names_build_and_unknown_stored_ones_are_left_out() {
        let all: Vec<String> = BUILTIN_NAMES.iter().map(|n| n.to_string()).collect();
        assert_eq!(TenantCatalog::builtin(&all).map(|c| c.len()).ok(), Some(2));
        let stored = vec!["github".to_string(), "demo".to_string()];
        let (catalogs, unknown) = TenantCatalog::stored_builtin(&stored);
        assert_eq!(
            catalogs.iter().map(|c| c.name()).collect::<Vec<_>>(),
            ["demo"]
        );
        assert_eq!(unknown, ["github"]);
        assert!(TenantCatalog::builtin(&stored).is_err());
    }

    /// A built-in catalog named twice (a record stored before the admin API refused repeats) is
    /// served once: its entries are listed once.
    #[test]
    fn a_builtin_catalog_named_twice_is_served_once() {
        let names = ["demo".to_string(), "reference".into(), "demo".into()];
        let catalogs = TenantCatalog::builtin(&names).unwrap();
        assert_eq!(catalogs.len(), 2);
        let catalog = TenantCatalog::new(catalogs);
        let echoes = catalog.tools.iter().filter(|t| t["name"] == "echo").count();
        assert_eq!(echoes, 1);
        assert!(TenantCatalog::builtin(&["nope".to_string()]).is_err());
    }
}
