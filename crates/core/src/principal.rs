//! Who is calling: the tenant, the effective role and, for user credentials, the user.

use crate::{ApiKeyId, Error, Result, Role, TenantId, UserId};

/// How the caller authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// The tenant key: role `admin` in its tenant, no user.
    TenantKey,
    /// A user's personal or session key.
    UserKey,
    /// A JWT access token.
    Jwt,
    /// `X-Admin-Key`: platform administration only (tenants, SIEM).
    AdminKey,
}

/// The authenticated caller. Services decide authorisation and tenant scope from it.
#[derive(Clone, Debug)]
pub struct Principal {
    pub tenant: TenantId,
    pub role: Role,
    pub user: Option<UserId>,
    pub key: Option<ApiKeyId>,
    pub kind: CredentialKind,
    /// The token id of a JWT (for logout).
    pub jti: Option<String>,
}

impl Principal {
    /// Fails with 403 `forbidden` unless the caller's role is `least` or higher.
    pub fn require(&self, least: Role) -> Result<()> {
        if self.role.at_least(least) {
            Ok(())
        } else {
            Err(Error::forbidden(format!(
                "this operation needs the role {least} or higher"
            )))
        }
    }

    pub fn is_super_admin(&self) -> bool {
        self.role == Role::SuperAdmin
    }
}
