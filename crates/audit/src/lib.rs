//! The audit log: per-tenant hash-chained entries over RFC 8785 canonical JSON, with an
//! optional HMAC-SHA256 signature; appends, queries and verification.

pub mod chain;
pub mod export;
pub mod service;
mod writer;

pub use chain::{canonical_bytes, ChainHasher, GENESIS_HASH};
pub use service::{
    check_entry, verify_entries, AfterWrite, AgentDirectory, AuditEntry, AuditService,
    Verification, RESERVED_PREFIXES,
};
