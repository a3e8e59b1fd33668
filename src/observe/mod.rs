//! Watching the server: traces and logs (`telemetry`: the tracing subscriber, the OpenTelemetry
//! bridge and OTLP export, the MCP spans), metrics (`metrics`: Prometheus text and OTLP
//! instruments) and the count of open connections (`connections`).

pub mod connections;
pub mod metrics;
pub mod telemetry;
