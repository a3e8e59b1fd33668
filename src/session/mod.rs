//! Sessions: the plain-Rust session state machine (`core`), the actor that hosts one session
//! (`actor`) and the per-tenant supervisor that owns them (`supervisor`).

pub mod actor;
pub mod core;
pub mod supervisor;

pub use self::core::{
    Frame, Refusal, Reply, Session, SessionSettings, SessionSnapshot, TransportKind,
};
pub use supervisor::{SessionLimits, TenantSessions, TenantSupervisor};
