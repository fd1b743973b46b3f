//! The shared kernel of Steward: identifiers, roles, the principal, errors, pagination, events,
//! and the cache / event-bus / clock traits with their in-process implementations.
//!
//! This crate knows nothing about HTTP, SQL or Redis.

pub mod audit;
pub mod authz;
pub mod body;
pub mod bus;
pub mod cache;
pub mod clock;
pub mod error;
pub mod event;
pub mod id;
pub mod page;
pub mod presence;
pub mod principal;
pub mod role;
pub mod schema;
pub mod validate;

pub use audit::{AuditRecord, AuditWriter};
pub use authz::Op;
pub use body::{Body, FromJson};
pub use bus::{EventBus, MemoryBus};
pub use cache::{Cache, MemoryCache};
pub use clock::{Clock, SystemClock};
pub use error::{Error, ErrorKind, FieldError, Result};
pub use event::{Event, Severity};
pub use id::*;
pub use page::{Page, PageRequest};
pub use presence::{MemoryPresence, Presence};
pub use principal::Principal;
pub use role::Role;

/// The platform version reported by `/`, `/health` and `/status`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
