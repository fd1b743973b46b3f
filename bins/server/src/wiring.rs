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
            .consume(
                a.tenant, a.user, id, a.agent_id, a.action, a.resource, a.context,
            )
            .await
    }
}

/// The guard resolves an `agent_id` reference (a UUID or a name) in the registry.
pub struct RegistryResolver(pub Registry);

#[async_trait]
impl steward_guard::AgentResolver for RegistryResolver {
    async fn resolve(&self, tenant: TenantId, reference: &str) -> Result<Option<AgentId>> {
        let reference = reference.trim();
        if let Ok(id) = reference.parse::<AgentId>() {
            if self.0.find_cached(tenant, id).await?.is_some() {
                return Ok(Some(id));
            }
        }
        self.0.id_by_name(tenant, reference).await
    }

    async fn suspended(&self, tenant: TenantId, agent: AgentId) -> Result<bool> {
        let found = self.0.find_cached(tenant, agent).await?;
        Ok(found.is_some_and(|a| a.status == "suspended"))
    }
}

/// What anomaly reports need from the registry (agent ids) and discovery (orphan reports),
/// and the detector's composite score for manual reports.
pub struct AnomalyHooks {
    pub registry: Registry,
    pub discovery: steward_discovery::Discovery,
    pub scorer: std::sync::Arc<steward_anomaly::scorer::Scorer>,
}

#[async_trait]
impl steward_anomaly::reports::ReportHooks for AnomalyHooks {
    async fn agent_registered(&self, tenant: TenantId, agent: uuid::Uuid) -> Result<bool> {
        Ok(self
            .registry
            .find_cached(tenant, AgentId(agent))
            .await?
            .is_some())
    }

    async fn score(&self, tenant: TenantId, event_data: &serde_json::Value) -> f64 {
        self.scorer.score(tenant, event_data).await.risk
    }

    async fn orphan(&self, tenant: TenantId, agent_name: &str, event_data: &serde_json::Value) {
        if let Err(e) = self
            .discovery
            .feed(tenant, agent_name, None, "anomaly", event_data.clone())
            .await
        {
            tracing::warn!(error = %e, "orphan anomaly report fed no discovery candidate");
        }
    }
}

/// The anomaly detector in every policy check: the composite score (rules + the tenant's
/// model under the hard ML time-out) and the automatic report when the flag is true.
pub struct DetectorRisk(pub steward_anomaly::service::Detector);

#[async_trait]
impl steward_policy::RiskScorer for DetectorRisk {
    async fn assess(
        &self,
        event: steward_policy::RiskEvent<'_>,
        reason: &steward_policy::ReasonFn<'_>,
    ) -> Result<steward_policy::RiskAssessment> {
        let agent_id = event.agent.map(|a| a.id.0);
        let ev = serde_json::json!({
            "agent_id": agent_id,
            "action": event.action,
            "resource": event.resource,
            "context": event.context,
        });
        let s = self.0.scorer.score(event.tenant, &ev).await;
        let report_id = if s.is_anomaly {
            let data = event.report_event_data(&reason(s.risk), s.risk);
            let report = self
                .0
                .reports
                .insert(event.tenant, agent_id, s.risk, "auto", data)
                .await?;
            Some(report.id.to_string())
        } else {
            None
        };
        Ok(steward_policy::RiskAssessment {
            risk_score: s.risk,
            is_anomaly: s.is_anomaly,
            report_id,
        })
    }
}

/// Several after-write hooks in order.
pub struct AfterWriteAll(pub Vec<std::sync::Arc<dyn AfterWrite>>);

#[async_trait]
impl AfterWrite for AfterWriteAll {
    async fn agent_entry_written(&self, tenant: TenantId, agent: AgentId) {
        for hook in &self.0 {
            hook.agent_entry_written(tenant, agent).await;
        }
    }
}

/// Each audit entry with an agent id is a training sample: counts toward auto-retrain.
pub struct AnomalySamples(pub steward_anomaly::service::Detector);

#[async_trait]
impl AfterWrite for AnomalySamples {
    async fn agent_entry_written(&self, tenant: TenantId, _agent: AgentId) {
        self.0.sample_added(tenant).await;
    }
}
