//! Identifier newtypes. Every identifier is a UUID emitted in lowercase hyphenated form.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! id_type {
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {$(
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new random identifier (UUID v7: time-ordered, so indexes stay compact).
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            pub fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0.hyphenated())
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(value: Uuid) -> Self {
                Self(value)
            }
        }

        impl From<$name> for Uuid {
            fn from(value: $name) -> Self {
                value.0
            }
        }
    )*};
}

id_type!(
    /// A tenant.
    TenantId,
    /// A user.
    UserId,
    /// An API key record (not the key itself).
    ApiKeyId,
    /// A registered agent.
    AgentId,
    /// A policy.
    PolicyId,
    /// An audit entry.
    AuditId,
    /// An anomaly report.
    ReportId,
    /// A HITL approval request.
    ApprovalId,
    /// A discovery candidate.
    CandidateId,
    /// A background job (export, training, clustering).
    JobId,
);

/// Parses a path segment that must be an identifier; anything else is "not found" (contract 2).
pub fn parse_path_id<T: FromStr>(segment: &str, what: &str) -> crate::Result<T> {
    segment
        .parse()
        .map_err(|_| crate::Error::not_found(format!("{what} {segment} was not found")))
}
