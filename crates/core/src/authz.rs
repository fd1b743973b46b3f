//! The permission matrix (contract 6.3): every guarded operation and the least role that may
//! call it. Services call `principal.authorize(Op::…)`; no handler decides a role itself.

use crate::{Principal, Result, Role};

/// A guarded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    // Users (JWT).
    UsersManage,
    // Agents.
    AgentsRead,
    AgentsWrite,
    AgentsDelete,
    AgentsSuspend,
    // Discovery and integrations.
    DiscoveryRead,
    DiscoveryWrite,
    IntegrationsRead,
    // Policies.
    PoliciesRead,
    PoliciesCheck,
    PoliciesWrite,
    // Audit.
    AuditWrite,
    AuditRead,
    AuditExport,
    // Anomalies.
    AnomaliesReport,
    AnomaliesRead,
    AnomaliesManage,
    // HITL.
    HitlRequest,
    HitlDecide,
    // Guard.
    GuardValidate,
    GuardRead,
    GuardManage,
    // Dashboard.
    StatsRead,
    // Platform (tenants, SIEM): super admin JWT or the admin key.
    PlatformManage,
}

impl Op {
    /// The least role allowed to perform the operation.
    pub fn least_role(&self) -> Role {
        use Op::*;
        match self {
            UsersManage => Role::Admin,
            AgentsRead | AgentsWrite => Role::Developer,
            AgentsDelete | AgentsSuspend => Role::Admin,
            DiscoveryRead | DiscoveryWrite => Role::Developer,
            IntegrationsRead => Role::Viewer,
            PoliciesRead | PoliciesCheck => Role::Developer,
            PoliciesWrite => Role::Admin,
            AuditWrite => Role::Developer,
            AuditRead => Role::Viewer,
            AuditExport => Role::SecurityAnalyst,
            AnomaliesReport => Role::Developer,
            AnomaliesRead => Role::SecurityAnalyst,
            AnomaliesManage => Role::Admin,
            HitlRequest => Role::Developer,
            HitlDecide => Role::SecurityAnalyst,
            GuardValidate => Role::Developer,
            GuardRead => Role::Viewer,
            GuardManage => Role::Admin,
            StatsRead => Role::Viewer,
            PlatformManage => Role::SuperAdmin,
        }
    }

    pub const ALL: &'static [Op] = &[
        Op::UsersManage,
        Op::AgentsRead,
        Op::AgentsWrite,
        Op::AgentsDelete,
        Op::AgentsSuspend,
        Op::DiscoveryRead,
        Op::DiscoveryWrite,
        Op::IntegrationsRead,
        Op::PoliciesRead,
        Op::PoliciesCheck,
        Op::PoliciesWrite,
        Op::AuditWrite,
        Op::AuditRead,
        Op::AuditExport,
        Op::AnomaliesReport,
        Op::AnomaliesRead,
        Op::AnomaliesManage,
        Op::HitlRequest,
        Op::HitlDecide,
        Op::GuardValidate,
        Op::GuardRead,
        Op::GuardManage,
        Op::StatsRead,
        Op::PlatformManage,
    ];
}

impl Principal {
    /// 403 `forbidden` unless the caller's current role may perform `op`.
    pub fn authorize(&self, op: Op) -> Result<()> {
        self.require(op.least_role())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::CredentialKind;
    use crate::TenantId;

    fn as_role(role: Role) -> Principal {
        Principal {
            tenant: TenantId::new(),
            role,
            user: None,
            key: None,
            kind: CredentialKind::Jwt,
            jti: None,
        }
    }

    #[test]
    fn least_role_allowed_and_role_below_denied() {
        for op in Op::ALL {
            let least = op.least_role();
            for role in Role::ALL {
                let allowed = as_role(role).authorize(*op).is_ok();
                assert_eq!(allowed, role >= least, "{op:?} as {role}");
            }
        }
    }

    #[test]
    fn matrix_matches_contract_examples() {
        assert_eq!(Op::AgentsWrite.least_role(), Role::Developer);
        assert_eq!(Op::AgentsDelete.least_role(), Role::Admin);
        assert_eq!(Op::AuditExport.least_role(), Role::SecurityAnalyst);
        assert_eq!(Op::AuditRead.least_role(), Role::Viewer);
        assert_eq!(Op::GuardManage.least_role(), Role::Admin);
        assert_eq!(Op::PlatformManage.least_role(), Role::SuperAdmin);
    }
}
