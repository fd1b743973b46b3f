//! The five roles, in their order from lowest to highest.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A user's role. The derived order is the privilege order: `Viewer < … < SuperAdmin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Developer,
    SecurityAnalyst,
    Admin,
    SuperAdmin,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::SuperAdmin,
        Role::Admin,
        Role::SecurityAnalyst,
        Role::Developer,
        Role::Viewer,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Developer => "developer",
            Role::SecurityAnalyst => "security_analyst",
            Role::Admin => "admin",
            Role::SuperAdmin => "super_admin",
        }
    }

    /// True when this role is `least` or higher.
    pub fn at_least(&self, least: Role) -> bool {
        *self >= least
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an unknown role name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRole;

impl fmt::Display for UnknownRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("must be one of super_admin, admin, security_analyst, developer, viewer")
    }
}

impl FromStr for Role {
    type Err = UnknownRole;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or(UnknownRole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_privilege_order() {
        assert!(Role::SuperAdmin > Role::Admin);
        assert!(Role::Admin > Role::SecurityAnalyst);
        assert!(Role::SecurityAnalyst > Role::Developer);
        assert!(Role::Developer > Role::Viewer);
        assert!(Role::Admin.at_least(Role::Developer));
        assert!(!Role::Viewer.at_least(Role::Developer));
    }

    #[test]
    fn names_round_trip() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert!("root".parse::<Role>().is_err());
        assert!("Admin".parse::<Role>().is_err());
    }
}
