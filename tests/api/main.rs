//! The integration tests, one binary: each module spawns the real server (or its stores and
//! shared-state backends) and checks what a client, an operator or another replica sees.
//! Shared helpers (the test app, MCP and OAuth clients, fake webhook endpoints, tenant builders,
//! test databases, a Redis proxy that fails on demand) live in `helpers`.

mod helpers;

mod admin;
mod cli;
mod cluster;
mod cluster_contract;
mod docs;
mod elicitation;
mod fuzz_regressions;
mod http_edge;
mod https;
mod logging;
mod metrics;
mod migrate;
mod oauth;
mod openapi;
mod outages;
mod protocol;
mod quotas;
mod secrets_at_rest;
mod sessions;
mod stateless;
mod store_contract;
mod store_tls;
mod streams;
mod telemetry;
mod upstreams;
mod webhook;
mod webhook_tools;
