//! Telemetry in one place: the tracing subscriber (env filter, plain or JSON lines).

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

/// Installs the global subscriber; a second call (tests) is a no-op.
pub fn init_telemetry(config: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.filter));
    // Colour codes only on a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = if config.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
