//! The `mcp-harbor` command: `serve` (the default), `migrate`, `healthcheck` and `admin` (the
//! admin API client).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcp_harbor::observe::telemetry;
use mcp_harbor::{Application, Config};

/// mimalloc: the request path allocates many small JSON values; glibc malloc spent ~20% of a
/// core on them under load (`memory::Allocator` says how it is called). (`--features
/// system-allocator` keeps glibc's, so that heap profilers such as valgrind's massif see every
/// allocation.)
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mcp_harbor::server::memory::Allocator = mcp_harbor::server::memory::Allocator;

#[derive(Parser)]
#[command(name = "mcp-harbor", version, about = "Multi-tenant hosted MCP server")]
struct Cli {
    /// TOML configuration file (also MCP_HARBOR_CONFIG); MCP_HARBOR__SECTION__KEY variables override it.
    #[arg(long, global = true, env = "MCP_HARBOR_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP (the default command).
    Serve,
    /// Check that a running server answers /healthz.
    Healthcheck {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Apply the database migrations of the configured store, then exit.
    Migrate,
    /// Manage tenants and their published catalogs through a running server's admin API.
    Admin(mcp_harbor::cli::AdminArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
        Command::Healthcheck { url } => healthcheck(&url),
        Command::Migrate => migrate(cli.config),
        Command::Admin(args) => mcp_harbor::cli::run(args),
    }
}

fn serve(config_file: Option<PathBuf>) -> ExitCode {
    let mut config = match Config::load(config_file.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcp-harbor: {e}");
            return ExitCode::from(2);
        }
    };
    // Before the server allocates its heap (src/server/memory.rs says what it costs either way).
    let huge_pages = mcp_harbor::server::memory::set_transparent_huge_pages(
        config.server.transparent_huge_pages,
    );
    // One replica id for the cluster and the telemetry resource (service.instance.id).
    if config.cluster.replica_id.is_empty() {
        config.cluster.replica_id =
            format!("r-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    }
    let telemetry = telemetry::init_telemetry(&config);
    if let Err(e) = huge_pages {
        tracing::warn!(
            error = %e,
            wanted = config.server.transparent_huge_pages,
            "could not set transparent huge pages for the process; the kernel's default applies"
        );
    }
    let result = actix_web::rt::System::new().block_on(async move {
        let app = Application::build(config).await?;
        if let Some(token) = app.generated_admin_token() {
            println!(
                "mcp-harbor: generated the admin API token (shown once, stored hashed): {token}"
            );
        }
        for slug in app.tenants().slugs() {
            println!(
                "mcp-harbor: tenant {slug} serving MCP at {}",
                app.mcp_url(&slug)
            );
        }
        app.run_until_stopped()
            .await
            .map_err(|e| mcp_harbor::server::app::StartError::Bind {
                addr: "server".into(),
                source: e,
            })
    });
    // The last spans and a final metrics export leave before the process does.
    telemetry.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-harbor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn migrate(config_file: Option<PathBuf>) -> ExitCode {
    let mut config = match Config::load(config_file.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcp-harbor: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init_logging(&config.log);
    config.storage.migrate_on_start = true;
    let result = actix_web::rt::System::new().block_on(async move {
        let store = mcp_harbor::server::app::open_store(&config).await?;
        store.close().await;
        Ok::<_, mcp_harbor::server::app::StartError>(())
    });
    match result {
        Ok(()) => {
            println!("mcp-harbor: migrations applied");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp-harbor: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A dependency-free probe for container health checks: GET /healthz over plain TCP.
fn healthcheck(url: &str) -> ExitCode {
    use std::io::{Read, Write};
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("");
    let probe = || -> std::io::Result<bool> {
        let mut stream = std::net::TcpStream::connect(authority)?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        write!(
            stream,
            "GET /healthz HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response.starts_with("HTTP/1.1 200"))
    };
    match probe() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("mcp-harbor: {url} is not healthy");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("mcp-harbor: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}
