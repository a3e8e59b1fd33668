//! Watching the server: traces and logs (`telemetry`: the tracing subscriber, the OpenTelemetry
//! bridge and OTLP export, the W3C trace context), the request spans and span export (`trace`), metrics (`metrics`: Prometheus text and OTLP
//! instruments) and the count of open connections (`connections`).

pub mod connections;
pub mod metrics;
mod otlp_http;
pub mod telemetry;
mod throttle;
pub mod trace;
