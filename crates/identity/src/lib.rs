//! Identity and access: tenants, users, roles, API keys, password hashing, tokens, and the
//! first-boot bootstrap. No HTTP here; the server calls these services with a `Principal`.

pub mod apikeys;
pub mod bootstrap;
pub mod keys;
pub mod password;
mod resolved;
pub mod rows;
pub mod service;
pub mod sso;
pub mod tenants;
pub mod tokens;
pub mod users;
pub mod views;

pub use bootstrap::{bootstrap, BootstrapOutcome};
pub use resolved::CREDENTIAL_CHANGES_CHANNEL;
pub use service::{Identity, IdentityConfig, NoProvisioning, PlatformCaller, TenantProvisioner};
