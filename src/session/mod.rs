//! Sessions of the session-era revisions. From the bottom up: the channel a stream's items go
//! through (`channel`), the ordered writer to shared state (`outbox`), what a session publishes
//! for requests answered without its actor (`view`), the plain-Rust state machine (`core`), the
//! actor that hosts one session (`actor`), this replica as sessions see it (`replica`), session
//! ids (`id`), the per-tenant index and supervisor (`supervisor`), the requests answered without
//! the actor (`direct`), and the one front door everything outside reaches sessions through
//! (`front`: `Sessions`).

pub mod actor;
pub mod channel;
pub mod core;
pub mod direct;
pub mod front;
pub mod id;
pub mod outbox;
pub mod replica;
pub mod supervisor;
pub mod view;

pub use self::actor::TenantBroadcast;
pub use self::channel::{StreamItem, StreamReceiver, StreamSink};
pub use self::core::{Refusal, Reply, Session, SessionSettings, SessionSnapshot, TransportKind};
pub use front::{Caller, OwnerMessage, Reached, Relay, Sessions, Unrelayed};
pub use replica::{Replica, SessionError};
pub use supervisor::{SessionLimits, TenantSupervisor};
