//! Approvals presented by a policy check (`context.approval_id`): the HITL service answers
//! through this trait, which the server wires (the policy crate does not know HITL storage).

use async_trait::async_trait;
use serde_json::Value;
use steward_core::{Result, TenantId, UserId};

/// What the check presents, for validation and consumption.
#[derive(Clone, Copy, Debug)]
pub struct PresentedApproval<'a> {
    pub tenant: TenantId,
    /// The user who made the check (none for a tenant key or the admin key): the audit
    /// entry of a used approval names them.
    pub user: Option<UserId>,
    pub approval_id: &'a str,
    pub agent_id: &'a str,
    pub action: &'a str,
    pub resource: &'a str,
    pub context: &'a Value,
}

/// Validates and consumes approvals bound to one action.
#[async_trait]
pub trait ApprovalGate: Send + Sync + 'static {
    /// `Ok(Ok(()))` when the approval may count for this check; `Ok(Err(reason))` when it may
    /// not (unknown, not approved, used, for another action, expired). Reads only.
    async fn validate(
        &self,
        approval: PresentedApproval<'_>,
    ) -> Result<std::result::Result<(), String>>;

    /// Uses the approval for an allowed check, atomically across instances. `false` when another
    /// check used it first (or it stopped being valid): the check is then not approved.
    async fn consume(&self, approval: PresentedApproval<'_>) -> Result<bool>;
}
