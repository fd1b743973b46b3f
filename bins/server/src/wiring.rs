//! Adapters that let domain crates call each other through the traits the callers define.

use async_trait::async_trait;
use steward_audit::{AfterWrite, AuditService};
use steward_core::{AgentId, Result, TenantId};
use steward_registry::{AgentActivity, Registry};

/// The registry reads an agent's activity from the audit log.
pub struct AuditActivity(pub AuditService);

#[async_trait]
impl AgentActivity for AuditActivity {
    async fn recent_actions(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Vec<String>> {
        self.0.recent_actions(tenant, agent, limit).await
    }

    async fn recent_risk(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Option<f64>> {
        self.0.mean_risk(tenant, agent, Some(limit)).await
    }
}

/// After an audit write about an agent, the registry refreshes its risk score and embedding.
pub struct RefreshAgent(pub Registry);

#[async_trait]
impl AfterWrite for RefreshAgent {
    async fn agent_entry_written(&self, tenant: TenantId, agent: AgentId) {
        if let Err(e) = self.0.refresh_after_audit(tenant, agent).await {
            tracing::debug!(error = %e, agent = %agent, "agent refresh after audit write failed");
        }
    }
}
