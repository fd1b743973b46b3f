//! Identity and access: tenants, users, roles, API keys, password hashing, tokens, and the
//! first-boot bootstrap. No HTTP here; the server calls these services with a `Principal`.

pub mod bootstrap;
pub mod keys;
pub mod password;
pub mod rows;

pub use bootstrap::{bootstrap, BootstrapOutcome};
