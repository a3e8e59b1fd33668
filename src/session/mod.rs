//! Sessions: the plain-Rust session state machine (`core`) and its ordered writer to shared state
//! (`outbox`), the actor that hosts one session (`actor`), the per-tenant supervisor and index
//! (`supervisor`), session ids (`id`), the one way in for the HTTP edge (`locate`: start,
//! find or restore, deliver) and the requests answered without the actor (`direct`).

pub mod actor;
pub mod channel;
pub mod core;
pub mod direct;
pub mod id;
pub mod locate;
pub mod outbox;
pub mod supervisor;
pub mod view;

pub use self::core::{
    Refusal, Reply, Session, SessionSettings, SessionSnapshot, StreamItem, StreamReceiver,
    TransportKind,
};
pub use locate::{Located, Replica, SessionError};
pub use supervisor::{SessionLimits, TenantSessions, TenantSupervisor};
