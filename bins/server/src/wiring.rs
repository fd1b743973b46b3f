//! Adapters that let domain crates call each other through the traits the callers define.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use steward_audit::{AfterWrite, AuditService};
use steward_core::{AgentId, Result, TenantId};
use steward_identity::TenantProvisioner;
use steward_policy::{AgentInfo, AgentLookup, PolicyService};
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
/// Refreshes are coalesced: a burst of writes about one agent causes one refresh, `DELAY` after
/// the first write of the burst.
pub struct RefreshAgent {
    registry: Registry,
    pending: Mutex<HashSet<AgentId>>,
}

/// How long writes about one agent are gathered before its refresh.
const DELAY: Duration = Duration::from_millis(500);

impl RefreshAgent {
    pub fn new(registry: Registry) -> Self {
        Self {
            registry,
            pending: Mutex::new(HashSet::new()),
        }
    }
}

#[async_trait]
impl AfterWrite for RefreshAgent {
    async fn agent_entry_written(&self, tenant: TenantId, agent: AgentId) {
        if !self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent)
        {
            return; // a refresh is already scheduled and will see this entry
        }
        tokio::time::sleep(DELAY).await;
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&agent);
        if let Err(e) = self.registry.refresh_after_audit(tenant, agent).await {
            tracing::debug!(error = %e, agent = %agent, "agent refresh after audit write failed");
        }
    }
}

/// The policy engine reads agents from the registry.
pub struct RegistryAgents(pub Registry);

#[async_trait]
impl AgentLookup for RegistryAgents {
    async fn find(&self, tenant: TenantId, agent: AgentId) -> Result<Option<AgentInfo>> {
        Ok(self.0.find_cached(tenant, agent).await?.map(|a| AgentInfo {
            id: a.agent_id(),
            name: a.name.clone(),
            agent_type: a.agent_type.clone(),
            capabilities: a.capability_list(),
            permissions: a.permissions.0.clone(),
            status: a.status.clone(),
        }))
    }
}

/// `POST /audit/log` looks the reporting agent up in the registry's in-memory view.
pub struct RegistryDirectory(pub Registry);

#[async_trait]
impl steward_audit::AgentDirectory for RegistryDirectory {
    async fn status_and_name(
        &self,
        tenant: TenantId,
        agent: AgentId,
    ) -> Result<Option<(String, String)>> {
        Ok(self
            .0
            .find_cached(tenant, agent)
            .await?
            .map(|a| (a.status, a.name)))
    }
}

/// A new tenant receives the default policies.
pub struct DefaultPolicies(pub PolicyService);

#[async_trait]
impl TenantProvisioner for DefaultPolicies {
    async fn provision(&self, tenant: TenantId) -> Result<()> {
        self.0.provision_defaults(tenant).await
    }
}

/// Scores risk with the contract's rule heuristics (the anomaly detector's ML part is not built
/// yet) and records the anomaly metrics of every scoring: `anomaly_ml_backend_total{backend="rules"}`,
/// `anomaly_processing_seconds`, `anomaly_score_histogram`.
pub struct MeasuredRules(pub steward_policy::RulesScorer);

#[async_trait]
impl steward_policy::RiskScorer for MeasuredRules {
    async fn assess(
        &self,
        event: steward_policy::RiskEvent<'_>,
        reason: &steward_policy::ReasonFn<'_>,
    ) -> Result<steward_policy::RiskAssessment> {
        let started = std::time::Instant::now();
        let result = self.0.assess(event, reason).await;
        metrics::histogram!("anomaly_processing_seconds").record(started.elapsed().as_secs_f64());
        metrics::counter!("anomaly_ml_backend_total", "backend" => "rules").increment(1);
        if let Ok(r) = &result {
            metrics::histogram!("anomaly_score_histogram").record(r.risk_score);
        }
        result
    }
}

/// The HITL service reads agents' statuses from the registry's in-memory view.
pub struct RegistryStatuses(pub Registry);

#[async_trait]
impl steward_hitl::AgentStatuses for RegistryStatuses {
    async fn status(&self, tenant: TenantId, agent: AgentId) -> Result<Option<String>> {
        Ok(self.0.find_cached(tenant, agent).await?.map(|a| a.status))
    }
}

/// Policy checks validate and consume `context.approval_id` through the HITL service.
pub struct HitlApprovals(pub steward_hitl::Hitl);

#[async_trait]
impl steward_policy::ApprovalGate for HitlApprovals {
    async fn validate(
        &self,
        a: steward_policy::PresentedApproval<'_>,
    ) -> Result<std::result::Result<(), String>> {
        Ok(self
            .0
            .validate_approval(
                a.tenant,
                a.approval_id,
                a.agent_id,
                a.action,
                a.resource,
                a.context,
            )
            .await?
            .map(|_| ())
            .map_err(|refusal| refusal.describe().to_owned()))
    }

    async fn consume(&self, a: steward_policy::PresentedApproval<'_>) -> Result<bool> {
        let Ok(id) = a.approval_id.trim().parse() else {
            return Ok(false);
        };
        self.0
            .consume(a.tenant, id, a.agent_id, a.action, a.resource, a.context)
            .await
    }
}
