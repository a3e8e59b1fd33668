//! A minimal rmcp 3.x Streamable HTTP server for `bench/compare.sh`: stateful sessions (rmcp's
//! default), one tool `echo {"text"}` answering the text as text content, served by axum on a
//! loopback port. Prints `rmcp-echo: serving MCP at http://127.0.0.1:PORT/mcp` once listening.
//!
//! Usage: `rmcp-echo [PORT]` (0, the default, lets the kernel pick). `ECHO_THREADS` (1) tokio
//! worker threads; 1 runs a current-thread runtime, like one actix worker.

use axum::serve::ListenerExt;
use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    },
    ServerHandler,
};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to answer.
    text: String,
}

#[derive(Debug, Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    #[tool(description = "Answers the given text")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        None => 0,
        Some(p) => p
            .parse()
            .map_err(|_| std::io::Error::other(format!("bad port {p:?}")))?,
    };
    let threads: usize = std::env::var("ECHO_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(serve(port))
}

async fn serve(port: u16) -> std::io::Result<()> {
    let service: StreamableHttpService<Echo, LocalSessionManager> = StreamableHttpService::new(
        || {
            Ok(Echo {
                tool_router: Echo::tool_router(),
            })
        },
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "rmcp-echo: serving MCP at http://{}/mcp",
        listener.local_addr()?
    );
    // TCP_NODELAY as actix-web and mcp-harbor set it: without it the SSE answers (several
    // writes) stall on Nagle + delayed ACK, about 40 ms per request.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
