//! `mcp-harbor admin …`: a command-line client of the admin API (`/admin/v1`).
//!
//! Results are printed to stdout as pretty JSON (lists follow `next_cursor` to the end and print
//! one array); confirmations of deletions go to stderr. Exit codes: 0 on success, 1 when the API
//! refused the request (`error: <message>` on stderr) or `keys rotate --wait` ended with values
//! still under another key, 2 when it could not be made (no token, an
//! unreadable input file, the server unreachable or not answering like the admin API). The token
//! is never printed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode, Url};
use serde_json::{json, Map, Value};

const EXAMPLES: &str = "\
Examples:
  export MCP_HARBOR_ADMIN_TOKEN=mh_admin_…
  mcp-harbor admin tenant create acme --display-name 'Acme Corp' --catalog demo --max-sessions 100
  mcp-harbor admin tenant list
  mcp-harbor admin tenant suspend acme
  mcp-harbor admin tool add acme --file lookup-order.yaml
  mcp-harbor admin tool list acme
  mcp-harbor admin tool remove acme lookup_order
  mcp-harbor admin upstream add acme --file github.json
  mcp-harbor admin keys generate --id k2
  mcp-harbor admin keys rotate --wait";

/// `mcp-harbor admin`: global flags and the command.
#[derive(Args)]
#[command(after_help = EXAMPLES)]
pub struct AdminArgs {
    /// The server's base URL (the admin API is under /admin/v1 there).
    #[arg(
        long,
        global = true,
        help_heading = "Admin API",
        env = "MCP_HARBOR_ADMIN_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// The admin API token. Prefer the environment variable: command-line arguments are visible
    /// to other users of the machine.
    #[arg(
        long,
        global = true,
        help_heading = "Admin API",
        env = "MCP_HARBOR_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Items fetched per request when listing (1-200); lists are always printed whole.
    #[arg(long, global = true, help_heading = "Admin API", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub page_size: u32,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Register, inspect, suspend, resume and delete tenants.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// A tenant's webhook tools.
    #[command(subcommand)]
    Tool(EntryCommand),
    /// A tenant's prompt templates.
    #[command(subcommand)]
    Prompt(EntryCommand),
    /// A tenant's static resources.
    #[command(subcommand)]
    Resource(EntryCommand),
    /// A tenant's resource templates.
    #[command(subcommand)]
    ResourceTemplate(EntryCommand),
    /// The upstream MCP servers a tenant federates (`add` defines or replaces one).
    #[command(subcommand)]
    Upstream(EntryCommand),
    /// A tenant's users (who sign in on its login page).
    #[command(subcommand)]
    User(UserCommand),
    /// The keys secrets at rest are sealed under (`auth.sealing_keys`), and their rotation.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Print a new sealing key spec (`id:base64`) for `auth.sealing_keys`; needs no server.
    Generate {
        /// The key's id (letters, digits, '-' and '_'); default: k<unix time>.
        #[arg(long)]
        id: Option<String>,
    },
    /// How many stored values each sealing key still seals, and the last rotation's status.
    Status,
    /// Re-seal every stored value under the first configured key (in the background on the
    /// server). Run it once every replica has the new key first in auth.sealing_keys.
    Rotate {
        /// Wait until the job has finished and print its outcome with the keys' counts.
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user; the password is read from the environment variable named by
    /// --password-env (default MCP_HARBOR_USER_PASSWORD), never from the command line.
    Add {
        tenant: String,
        username: String,
        #[arg(long)]
        display_name: Option<String>,
        #[arg(long, value_name = "VAR", default_value = "MCP_HARBOR_USER_PASSWORD")]
        password_env: String,
    },
    /// List a tenant's users.
    List { tenant: String },
    /// Delete a user.
    Remove { tenant: String, username: String },
}

#[derive(Subcommand)]
pub enum TenantCommand {
    /// Register a tenant; its MCP endpoint /t/<slug>/mcp serves at once.
    Create {
        /// 1-63 characters of a-z, 0-9 and '-'.
        slug: String,
        /// A human-readable name (defaults to the slug).
        #[arg(long)]
        display_name: Option<String>,
        /// A built-in catalog to serve (reference, demo); repeatable.
        #[arg(long = "catalog", value_name = "NAME")]
        catalogs: Vec<String>,
        /// Most live MCP sessions, across all replicas (default: the server's, per replica).
        #[arg(long, value_name = "N")]
        max_sessions: Option<u32>,
        /// Requests a minute, across all replicas (default: no limit).
        #[arg(long, value_name = "N")]
        requests_per_minute: Option<u32>,
        /// Most live MCP sessions of one signed-in principal (protected tenants).
        #[arg(long, value_name = "N")]
        max_sessions_per_principal: Option<u32>,
        /// Requests a minute of one signed-in principal (protected tenants).
        #[arg(long, value_name = "N")]
        requests_per_minute_per_principal: Option<u32>,
        /// A browser origin allowed to call the MCP endpoint (https://app.example.com); repeatable.
        #[arg(long = "allowed-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        /// How MCP requests are authorized: oauth (the platform signs users in) or none (open).
        /// Default: the server's (oauth).
        #[arg(long, value_parser = ["oauth", "none"])]
        auth: Option<String>,
    },
    /// List all tenants.
    List,
    /// Show a tenant.
    Get { slug: String },
    /// Suspend a tenant: its MCP endpoint refuses requests until it is resumed.
    Suspend { slug: String },
    /// Resume a suspended tenant.
    Resume { slug: String },
    /// Delete a tenant and everything it published.
    Delete { slug: String },
}

#[derive(Subcommand)]
pub enum EntryCommand {
    /// Publish an entry from a JSON or YAML file (by extension; `-` reads standard input).
    Add {
        /// The tenant's slug.
        tenant: String,
        /// The entry's definition, in the admin API's request format.
        #[arg(long, short, value_name = "FILE")]
        file: PathBuf,
        /// Replace the existing entry with the file's name instead of adding a new one.
        #[arg(long)]
        replace: bool,
    },
    /// List the tenant's entries.
    List {
        /// The tenant's slug.
        tenant: String,
    },
    /// Show one entry.
    Get {
        /// The tenant's slug.
        tenant: String,
        /// The entry's name.
        name: String,
    },
    /// Remove an entry.
    Remove {
        /// The tenant's slug.
        tenant: String,
        /// The entry's name.
        name: String,
    },
}

/// A catalog collection of the admin API.
#[derive(Clone, Copy)]
struct Kind {
    segment: &'static str,
    label: &'static str,
    /// Defined by name (`PUT …/{name}` creates or replaces), not added to a collection.
    by_name: bool,
}

const TOOL: Kind = Kind {
    segment: "tools",
    by_name: false,
    label: "tool",
};
const PROMPT: Kind = Kind {
    segment: "prompts",
    by_name: false,
    label: "prompt",
};
const RESOURCE: Kind = Kind {
    segment: "resources",
    by_name: false,
    label: "resource",
};
const UPSTREAM: Kind = Kind {
    segment: "upstreams",
    by_name: true,
    label: "upstream",
};
const RESOURCE_TEMPLATE: Kind = Kind {
    segment: "resource-templates",
    by_name: false,
    label: "resource template",
};

/// Why a command failed.
#[derive(Debug)]
enum Failure {
    /// The API answered with an error (exit 1).
    Api {
        status: StatusCode,
        code: Option<String>,
        message: String,
        field: Option<String>,
    },
    /// The request could not be made, or the answer was not the admin API's (exit 2).
    Unusable(String),
}

impl Failure {
    fn report(&self) -> ExitCode {
        match self {
            Failure::Api {
                status,
                code,
                message,
                field,
            } => {
                let mut detail = format!("HTTP {}", status.as_u16());
                if let Some(code) = code {
                    detail.push(' ');
                    detail.push_str(code);
                }
                if let Some(field) = field {
                    detail.push_str(&format!(", field {field}"));
                }
                eprintln!("error: {message} ({detail})");
                ExitCode::from(1)
            }
            Failure::Unusable(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        }
    }
}

/// What a successful command prints.
enum Output {
    /// A JSON result, to stdout.
    Json(Value),
    /// A confirmation without a result, to stderr.
    Done(String),
    /// A result (to stdout) that falls short of what was asked: the message to stderr, exit 1.
    Incomplete(Value, String),
}

/// A result on stdout, pretty-printed.
fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// A new sealing key spec: `id:` and 32 random bytes in base64.
fn generate_key(id: Option<String>) -> ExitCode {
    let id = id.unwrap_or_else(|| format!("k{}", crate::store::now_millis() / 1000));
    let valid = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if !valid {
        return Failure::Unusable(format!(
            "--id {id:?}: use 1-64 letters, digits, '-' and '_'"
        ))
        .report();
    }
    println!("{}", crate::auth::Sealer::generate_spec(&id));
    eprintln!("add it last in auth.sealing_keys on every replica and restart them; then move it first and restart them again; then run `mcp-harbor admin keys rotate --wait` (see the README)");
    ExitCode::SUCCESS
}

/// Runs `mcp-harbor admin …`.
pub fn run(args: AdminArgs) -> ExitCode {
    if let AdminCommand::Keys(KeysCommand::Generate { id }) = args.command {
        return generate_key(id);
    }
    let token = match args.token {
        Some(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => {
            return Failure::Unusable(
                "no admin token: set MCP_HARBOR_ADMIN_TOKEN (or pass --token)".into(),
            )
            .report()
        }
    };
    let client = match AdminClient::new(&args.url, token) {
        Ok(c) => c,
        Err(f) => return f.report(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Failure::Unusable(format!("cannot start the async runtime: {e}")).report()
        }
    };
    match runtime.block_on(execute(&client, args.command, args.page_size)) {
        Ok(Output::Json(value)) => {
            print_json(&value);
            ExitCode::SUCCESS
        }
        Ok(Output::Incomplete(value, message)) => {
            print_json(&value);
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
        Ok(Output::Done(message)) => {
            eprintln!("{message}");
            ExitCode::SUCCESS
        }
        Err(f) => f.report(),
    }
}

async fn execute(
    client: &AdminClient,
    command: AdminCommand,
    page_size: u32,
) -> Result<Output, Failure> {
    match command {
        AdminCommand::Tenant(cmd) => tenant(client, cmd, page_size).await,
        AdminCommand::User(cmd) => user(client, cmd, page_size).await,
        AdminCommand::Keys(cmd) => keys(client, cmd).await,
        AdminCommand::Tool(cmd) => entry(client, TOOL, cmd, page_size).await,
        AdminCommand::Prompt(cmd) => entry(client, PROMPT, cmd, page_size).await,
        AdminCommand::Resource(cmd) => entry(client, RESOURCE, cmd, page_size).await,
        AdminCommand::Upstream(cmd) => entry(client, UPSTREAM, cmd, page_size).await,
        AdminCommand::ResourceTemplate(cmd) => {
            entry(client, RESOURCE_TEMPLATE, cmd, page_size).await
        }
    }
}

/// How often `keys rotate --wait` asks whether the job has finished, and for how long at most.
const ROTATION_POLL: Duration = Duration::from_millis(500);
const ROTATION_WAIT: Duration = Duration::from_secs(3600);

async fn keys(client: &AdminClient, command: KeysCommand) -> Result<Output, Failure> {
    match command {
        KeysCommand::Generate { .. } => Err(Failure::Unusable(
            "keys generate runs without a server".into(),
        )),
        KeysCommand::Status => client.json(Method::GET, &["sealing-keys"], None).await,
        KeysCommand::Rotate { wait } => {
            let started = client
                .send(Method::POST, &["sealing-keys", "rotate"], &[], None)
                .await?
                .unwrap_or(Value::Null);
            if !wait {
                return Ok(Output::Json(started));
            }
            // The job runs on the replica that answered; behind a load balancer the status may
            // come from another replica: done when a job that started no earlier has finished,
            // or when no value is left under another key.
            let since = started["started_at"].as_i64().unwrap_or(0);
            let deadline = tokio::time::Instant::now() + ROTATION_WAIT;
            loop {
                let status = client
                    .send(Method::GET, &["sealing-keys"], &[], None)
                    .await?
                    .unwrap_or(Value::Null);
                let job = &status["rotation"];
                let running = job["state"] == "running";
                let finished = job["started_at"].as_i64().is_some_and(|t| t >= since) && !running;
                let nothing_left = status["in_clear"] == 0
                    && status["keys"].as_array().is_some_and(|keys| {
                        keys.iter()
                            .all(|k| k["sealing"] == true || k["values"] == 0)
                    });
                if finished || (nothing_left && !running) {
                    // This job's failures (an older job's, seen on another replica, do not
                    // count when nothing is left anyway).
                    let failed = finished
                        && (job["state"] == "failed"
                            || job["failed"].as_u64().is_some_and(|n| n > 0));
                    if failed || !nothing_left {
                        // Exit 1: a script that removes the old key next must not run.
                        return Ok(Output::Incomplete(
                            status,
                            "the rotation did not re-seal everything: some values are still \
                             under another key or in clear (see \"keys\" and \"rotation\"); \
                             keep the old keys configured"
                                .into(),
                        ));
                    }
                    return Ok(Output::Json(status));
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(Failure::Unusable(
                        "the rotation is still running; check `mcp-harbor admin keys status`"
                            .into(),
                    ));
                }
                tokio::time::sleep(ROTATION_POLL).await;
            }
        }
    }
}

async fn user(
    client: &AdminClient,
    command: UserCommand,
    page_size: u32,
) -> Result<Output, Failure> {
    match command {
        UserCommand::Add {
            tenant,
            username,
            display_name,
            password_env,
        } => {
            let password = std::env::var(&password_env).map_err(|_| {
                Failure::Unusable(format!(
                    "set the user's password in the environment variable {password_env}"
                ))
            })?;
            let mut body = json!({ "username": username, "password": password });
            if let Some(name) = display_name {
                body["display_name"] = json!(name);
            }
            client
                .json(Method::POST, &["tenants", &tenant, "users"], Some(&body))
                .await
        }
        UserCommand::List { tenant } => {
            client.list(&["tenants", &tenant, "users"], page_size).await
        }
        UserCommand::Remove { tenant, username } => {
            client
                .send(
                    Method::DELETE,
                    &["tenants", &tenant, "users", &username],
                    &[],
                    None,
                )
                .await?;
            Ok(Output::Done(format!("deleted user {username} of {tenant}")))
        }
    }
}

async fn tenant(
    client: &AdminClient,
    command: TenantCommand,
    page_size: u32,
) -> Result<Output, Failure> {
    let set_status = |status: &str| json!({ "status": status });
    match command {
        TenantCommand::Create {
            slug,
            display_name,
            catalogs,
            max_sessions,
            requests_per_minute,
            max_sessions_per_principal,
            requests_per_minute_per_principal,
            allowed_origins,
            auth,
        } => {
            let mut limits = Map::new();
            let counts = [
                ("max_sessions", max_sessions),
                ("requests_per_minute", requests_per_minute),
                ("max_sessions_per_principal", max_sessions_per_principal),
                (
                    "requests_per_minute_per_principal",
                    requests_per_minute_per_principal,
                ),
            ];
            for (name, value) in counts {
                if let Some(n) = value {
                    limits.insert(name.into(), json!(n));
                }
            }
            if !allowed_origins.is_empty() {
                limits.insert("allowed_origins".into(), json!(allowed_origins));
            }
            let mut body = json!({ "slug": slug, "catalogs": catalogs, "limits": limits });
            if let Some(name) = display_name {
                body["display_name"] = json!(name);
            }
            if let Some(mode) = auth {
                body["auth"] = json!({ "mode": mode });
            }
            client.json(Method::POST, &["tenants"], Some(&body)).await
        }
        TenantCommand::List => client.list(&["tenants"], page_size).await,
        TenantCommand::Get { slug } => client.json(Method::GET, &["tenants", &slug], None).await,
        TenantCommand::Suspend { slug } => {
            client
                .json(
                    Method::PATCH,
                    &["tenants", &slug],
                    Some(&set_status("suspended")),
                )
                .await
        }
        TenantCommand::Resume { slug } => {
            client
                .json(
                    Method::PATCH,
                    &["tenants", &slug],
                    Some(&set_status("active")),
                )
                .await
        }
        TenantCommand::Delete { slug } => {
            client
                .send(Method::DELETE, &["tenants", &slug], &[], None)
                .await?;
            Ok(Output::Done(format!("deleted tenant {slug}")))
        }
    }
}

async fn entry(
    client: &AdminClient,
    kind: Kind,
    command: EntryCommand,
    page_size: u32,
) -> Result<Output, Failure> {
    match command {
        EntryCommand::Add {
            tenant,
            file,
            replace,
        } => {
            let body = read_definition(&file, kind)?;
            if replace || kind.by_name {
                let name = body.get("name").and_then(Value::as_str).ok_or_else(|| {
                    Failure::Unusable(format!(
                        "{}: --replace needs the {} to have a \"name\"",
                        file.display(),
                        kind.label
                    ))
                })?;
                client
                    .json(
                        Method::PUT,
                        &["tenants", &tenant, kind.segment, name],
                        Some(&body),
                    )
                    .await
            } else {
                client
                    .json(
                        Method::POST,
                        &["tenants", &tenant, kind.segment],
                        Some(&body),
                    )
                    .await
            }
        }
        EntryCommand::List { tenant } => {
            client
                .list(&["tenants", &tenant, kind.segment], page_size)
                .await
        }
        EntryCommand::Get { tenant, name } => {
            client
                .json(
                    Method::GET,
                    &["tenants", &tenant, kind.segment, &name],
                    None,
                )
                .await
        }
        EntryCommand::Remove { tenant, name } => {
            client
                .send(
                    Method::DELETE,
                    &["tenants", &tenant, kind.segment, &name],
                    &[],
                    None,
                )
                .await?;
            Ok(Output::Done(format!(
                "removed {} {name} from tenant {tenant}",
                kind.label
            )))
        }
    }
}

/// Reads an entry's definition: YAML for `.yaml`/`.yml`, JSON for `.json`, otherwise JSON or
/// else YAML; `-` is standard input.
fn read_definition(path: &Path, kind: Kind) -> Result<Value, Failure> {
    let shown = path.display();
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            Failure::Unusable(format!(
                "cannot read the {} from standard input: {e}",
                kind.label
            ))
        })?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| {
            Failure::Unusable(format!("cannot read the {} file {shown}: {e}", kind.label))
        })?
    };
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let value: Value = match extension.as_deref() {
        Some("json") => serde_json::from_str(&text)
            .map_err(|e| Failure::Unusable(format!("{shown} is not valid JSON: {e}")))?,
        Some("yaml" | "yml") => serde_norway::from_str(&text)
            .map_err(|e| Failure::Unusable(format!("{shown} is not valid YAML: {e}")))?,
        _ => match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => serde_norway::from_str(&text)
                .map_err(|e| Failure::Unusable(format!("{shown} is neither JSON nor YAML: {e}")))?,
        },
    };
    if !value.is_object() {
        return Err(Failure::Unusable(format!(
            "{shown} must hold one {} definition (a JSON object or YAML mapping)",
            kind.label
        )));
    }
    Ok(value)
}

struct AdminClient {
    http: reqwest::Client,
    /// The server's base URL, shown in messages.
    shown: String,
    /// `…/admin/v1`.
    api: Url,
    token: String,
}

impl AdminClient {
    fn new(url: &str, token: String) -> Result<AdminClient, Failure> {
        let mut api = Url::parse(url.trim())
            .map_err(|e| Failure::Unusable(format!("--url {url:?} is not a URL: {e}")))?;
        if !matches!(api.scheme(), "http" | "https") || api.host_str().is_none() {
            return Err(Failure::Unusable(format!(
                "--url {url:?} must be an http:// or https:// URL"
            )));
        }
        // Never echo credentials that were put in the URL.
        let _ = api.set_username("");
        let _ = api.set_password(None);
        api.set_query(None);
        api.set_fragment(None);
        let shown = api.as_str().trim_end_matches('/').to_string();
        // Accept the server's base URL, or the API's (…/admin/v1).
        let mut segments: Vec<String> = api
            .path_segments()
            .map(|s| s.filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        if segments.ends_with(&["admin".to_string(), "v1".to_string()]) {
            segments.truncate(segments.len() - 2);
        }
        {
            let mut path = api
                .path_segments_mut()
                .map_err(|_| Failure::Unusable(format!("--url {url:?} cannot be a base URL")))?;
            path.clear();
            path.extend(segments.iter().map(String::as_str));
            path.extend(["admin", "v1"]);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("mcp-harbor-admin/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::Unusable(format!("cannot set up the HTTP client: {e}")))?;
        Ok(AdminClient {
            http,
            shown,
            api,
            token,
        })
    }

    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.api.clone();
        url.path_segments_mut()
            .expect("an http(s) URL has path segments")
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Sends a request; the JSON answer of a success (`None` for an empty body, as for 204).
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Option<Value>, Failure> {
        let url = self.url(segments, query);
        let mut request = self
            .http
            .request(method, url)
            .bearer_auth(&self.token)
            .header("accept", "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(api_error(status, &text));
        }
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text).map(Some).map_err(|_| {
            Failure::Unusable(format!(
                "{} answered {status} with a body that is not JSON; is --url the mcp-harbor server?",
                self.shown
            ))
        })
    }

    async fn json(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&Value>,
    ) -> Result<Output, Failure> {
        let value = self.send(method, segments, &[], body).await?;
        Ok(Output::Json(value.unwrap_or(Value::Null)))
    }

    /// Every item of a paginated list, following `next_cursor`.
    async fn list(&self, segments: &[&str], page_size: u32) -> Result<Output, Failure> {
        let limit = page_size.to_string();
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("limit", limit.as_str())];
            if let Some(c) = &cursor {
                query.push(("cursor", c.as_str()));
            }
            let page = self
                .send(Method::GET, segments, &query, None)
                .await?
                .unwrap_or(Value::Null);
            let Some(page_items) = page.get("items").and_then(Value::as_array) else {
                return Err(Failure::Unusable(format!(
                    "{} answered a list without \"items\"",
                    self.shown
                )));
            };
            items.extend(page_items.iter().cloned());
            match page.get("next_cursor").and_then(Value::as_str) {
                Some(next) if Some(next) != cursor.as_deref() && !page_items.is_empty() => {
                    cursor = Some(next.to_string())
                }
                _ => break,
            }
        }
        Ok(Output::Json(Value::Array(items)))
    }

    fn unreachable(&self, e: &reqwest::Error) -> Failure {
        // The error's own text names the request URL; the causes say what went wrong.
        let mut causes = Vec::new();
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !causes.contains(&text) {
                causes.push(text);
            }
            source = cause.source();
        }
        let what = if e.is_timeout() {
            "timed out".to_string()
        } else if let (true, Some(root)) = (e.is_connect(), causes.last()) {
            format!("cannot connect: {root}")
        } else if causes.is_empty() {
            e.to_string()
        } else {
            causes.join(": ")
        };
        Failure::Unusable(format!(
            "cannot reach the admin API at {}: {what}",
            self.shown
        ))
    }
}

/// The API's `{"error": {"code", "message", "field"?}}`, or whatever else an error answer held.
fn api_error(status: StatusCode, text: &str) -> Failure {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let error = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .filter(|e| e.get("message").is_some());
    match error {
        Some(e) => Failure::Api {
            status,
            code: e.get("code").and_then(Value::as_str).map(str::to_string),
            message: e["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| e["message"].to_string()),
            field: e.get("field").and_then(Value::as_str).map(str::to_string),
        },
        None => {
            let excerpt: String = text.trim().chars().take(200).collect();
            let reason = status.canonical_reason().unwrap_or("error");
            let message = if excerpt.is_empty() {
                reason.to_string()
            } else {
                format!("{reason}: {excerpt}")
            };
            Failure::Api {
                status,
                code: None,
                message,
                field: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised() {
        let api = |url: &str| {
            AdminClient::new(url, "t".into())
                .map(|c| (c.api.to_string(), c.shown))
                .unwrap()
        };
        assert_eq!(
            api("http://127.0.0.1:8080").0,
            "http://127.0.0.1:8080/admin/v1"
        );
        assert_eq!(
            api("http://127.0.0.1:8080/").0,
            "http://127.0.0.1:8080/admin/v1"
        );
        assert_eq!(
            api("https://h.example/admin/v1/").0,
            "https://h.example/admin/v1"
        );
        assert_eq!(
            api("https://h.example/prefix").0,
            "https://h.example/prefix/admin/v1"
        );
        assert_eq!(api("https://user:pw@h.example").1, "https://h.example");
        assert!(AdminClient::new("ftp://h.example", "t".into()).is_err());
        assert!(AdminClient::new("not a url", "t".into()).is_err());
    }

    #[test]
    fn path_segments_are_escaped() {
        let c = AdminClient::new("http://h.example", "t".into()).unwrap();
        assert_eq!(
            c.url(&["tenants", "a/b", "tools", "x y"], &[]).as_str(),
            "http://h.example/admin/v1/tenants/a%2Fb/tools/x%20y"
        );
        assert_eq!(
            c.url(&["tenants"], &[("limit", "5"), ("cursor", "a+b")])
                .as_str(),
            "http://h.example/admin/v1/tenants?limit=5&cursor=a%2Bb"
        );
    }

    #[test]
    fn api_errors_are_read() {
        let body = r#"{"error":{"code":"invalid","message":"slug: bad","field":"slug"}}"#;
        match api_error(StatusCode::UNPROCESSABLE_ENTITY, body) {
            Failure::Api {
                code,
                message,
                field,
                ..
            } => {
                assert_eq!(code.as_deref(), Some("invalid"));
                assert_eq!(message, "slug: bad");
                assert_eq!(field.as_deref(), Some("slug"));
            }
            other => panic!("{other:?}"),
        }
        match api_error(StatusCode::PAYLOAD_TOO_LARGE, "payload reached size limit") {
            Failure::Api {
                message,
                code: None,
                ..
            } => assert_eq!(message, "Payload Too Large: payload reached size limit"),
            other => panic!("{other:?}"),
        }
    }
}
