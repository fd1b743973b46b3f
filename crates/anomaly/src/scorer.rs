//! Live scoring (contract 15.2): the rule table, the per-tenant active model held in
//! memory, ML inference under a hard time-out, the composite `α·ml + (1-α)·rules`.
//! No database on this path.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{json, Value};
use steward_core::TenantId;
use steward_store::external::{in_band, ExternalScorer, Outcome};

/// A loaded model of one tenant (an adapter over the model crate's types).
pub trait LoadedModel: Send + Sync + 'static {
    /// Anomaly score in [0, 1] of an event (`action`, `resource`, `context`, …).
    fn score(&self, event: &Value) -> f64;
    /// The backend name reported while this model serves (`sklearn`, `onnx`, `hybrid`).
    fn backend(&self) -> &'static str;
    /// Whether scoring this event has a small bound by construction (microseconds), so that
    /// it runs on the caller's thread instead of the blocking pool. The hard time-out guards
    /// every other call; the default is `false`.
    fn inline(&self, _event: &Value) -> bool {
        false
    }
}

/// One scoring result.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    /// The composite risk, clamped to [0, 1].
    pub risk: f64,
    pub ml: Option<f64>,
    pub rules: f64,
    pub reasons: Vec<String>,
    /// `rules`, `timeout`, `external`, or the model's backend.
    pub backend: &'static str,
    pub is_anomaly: bool,
}

/// Scoring parameters.
#[derive(Clone, Debug)]
pub struct ScoreConfig {
    pub ml_weight: f64,
    pub threshold: f64,
    pub ml_timeout: Duration,
    pub ml_enabled: bool,
    /// The configured backend (`sklearn`, `onnx`, `hybrid`) reported while a model serves.
    pub backend: &'static str,
}

impl Default for ScoreConfig {
    fn default() -> Self {
        ScoreConfig {
            ml_weight: 0.6,
            threshold: 0.6,
            ml_timeout: Duration::from_millis(300),
            ml_enabled: true,
            backend: "sklearn",
        }
    }
}

const PRIVILEGED: [&str; 4] = [
    "change_security_policy",
    "disable_audit",
    "privilege_escalation",
    "cross_tenant_access",
];
const CRITICAL: [&str; 2] = ["delete_data", "export_phi"];
const SENSITIVE: [&str; 4] = ["password", "secret", "credential", "private_key"];

/// The contract's rule table: the highest matching score (0 when none) and the reasons.
pub fn contract_rules(event: &Value) -> (f64, Vec<String>) {
    let action = event.get("action").and_then(Value::as_str).unwrap_or("");
    let resource = event
        .get("resource")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_lowercase();
    let mut score: f64 = 0.0;
    let mut reasons = Vec::new();
    if PRIVILEGED.contains(&action) {
        score = score.max(1.0);
        reasons.push(format!("privileged action {action}"));
    }
    let records = event
        .get("context")
        .and_then(|c| c.get("records"))
        .and_then(Value::as_f64);
    if records.is_some_and(|r| r >= 10_000.0) {
        score = score.max(1.0);
        reasons.push("bulk volume".to_owned());
    }
    if SENSITIVE.iter().any(|s| resource.contains(s)) {
        score = score.max(0.8);
        reasons.push("sensitive resource".to_owned());
    }
    if CRITICAL.contains(&action) {
        score = score.max(0.5);
        reasons.push(format!("critical action {action}"));
    }
    (score, reasons)
}

/// The composite scores sent to the external scorer: `[0.4, 0.7)` (contract 15.2).
pub const EXTERNAL_BAND: (f64, f64) = (0.4, 0.7);

/// A loaded model with its version.
type Versioned = (i32, Arc<dyn LoadedModel>);

/// The per-tenant models in memory, and the last backend each tenant's scoring used.
#[derive(Default)]
pub struct Scorer {
    models: RwLock<HashMap<TenantId, Versioned>>,
    last_backend: RwLock<HashMap<TenantId, &'static str>>,
    pub config: ScoreConfig,
    /// `ANOMALY_EXTERNAL_*`: where composites in [`EXTERNAL_BAND`] are escalated.
    external: Option<ExternalScorer>,
}

impl Scorer {
    pub fn new(config: ScoreConfig) -> Scorer {
        Scorer {
            config,
            ..Scorer::default()
        }
    }

    /// Escalates composites in [`EXTERNAL_BAND`] to `external` (contract 15.2).
    pub fn with_external(mut self, external: Option<ExternalScorer>) -> Scorer {
        self.external = external;
        self
    }

    /// Installs (or replaces) the active model of a tenant.
    pub fn install(&self, tenant: TenantId, version: i32, model: Arc<dyn LoadedModel>) {
        let mut m = self.models.write().unwrap_or_else(|p| p.into_inner());
        let t = tenant.0.to_string();
        if let Some((old, _)) = m.insert(tenant, (version, model)) {
            if old != version {
                metrics::gauge!("anomaly_model_version_info", "tenant_id" => t.clone(), "version" => old.to_string()).set(0.0);
            }
        }
        metrics::gauge!("anomaly_model_version_info", "tenant_id" => t, "version" => version.to_string()).set(1.0);
    }

    /// The configured backend name.
    pub fn backend_name(&self) -> &'static str {
        self.config.backend
    }

    /// Drops a tenant's model (rules only).
    pub fn remove(&self, tenant: TenantId) {
        let mut m = self.models.write().unwrap_or_else(|p| p.into_inner());
        if let Some((old, _)) = m.remove(&tenant) {
            metrics::gauge!("anomaly_model_version_info", "tenant_id" => tenant.0.to_string(), "version" => old.to_string()).set(0.0);
        }
    }

    /// The loaded version of a tenant.
    pub fn loaded_version(&self, tenant: TenantId) -> Option<i32> {
        let m = self.models.read().unwrap_or_else(|p| p.into_inner());
        m.get(&tenant).map(|(v, _)| *v)
    }

    fn model(&self, tenant: TenantId) -> Option<Arc<dyn LoadedModel>> {
        let m = self.models.read().unwrap_or_else(|p| p.into_inner());
        m.get(&tenant).map(|(_, model)| model.clone())
    }

    /// The backend the tenant's last scoring used (`rules` before any).
    pub fn last_backend(&self, tenant: TenantId) -> Option<&'static str> {
        let m = self.last_backend.read().unwrap_or_else(|p| p.into_inner());
        m.get(&tenant).copied()
    }

    fn set_backend(&self, tenant: TenantId, backend: &'static str) {
        let known = self.last_backend(tenant);
        if known != Some(backend) {
            let mut m = self.last_backend.write().unwrap_or_else(|p| p.into_inner());
            m.insert(tenant, backend);
        }
    }

    /// Combines an ML score (if any) with the rules.
    pub fn combine(
        &self,
        ml: Option<f64>,
        rules: f64,
        reasons: Vec<String>,
        backend: &'static str,
    ) -> Scored {
        let a = self.config.ml_weight.clamp(0.0, 1.0);
        let risk = match ml {
            Some(m) => a * m + (1.0 - a) * rules,
            None => rules,
        };
        let risk = if risk.is_finite() {
            risk.clamp(0.0, 1.0)
        } else {
            rules
        };
        Scored {
            risk,
            ml,
            rules,
            reasons,
            backend,
            is_anomaly: risk >= self.config.threshold || rules >= 0.9,
        }
    }

    /// Scores an event: rules always, the tenant's model (if loaded and enabled) under the
    /// hard time-out; on time-out the rules decide and the backend reads `timeout`. A
    /// composite in [`EXTERNAL_BAND`] is then escalated when an external scorer is set.
    pub async fn score(&self, tenant: TenantId, event: &Value) -> Scored {
        let started = std::time::Instant::now();
        let mut scored = self.score_inner(tenant, event).await;
        if let Some(external) = &self.external {
            scored = self.escalate(external, tenant, event, scored).await;
        }
        metrics::histogram!("anomaly_processing_seconds").record(started.elapsed().as_secs_f64());
        let label = if scored.ml.is_some() || scored.backend == "external" {
            scored.backend
        } else {
            "rules"
        };
        metrics::counter!("anomaly_ml_backend_total", "backend" => label).increment(1);
        metrics::histogram!("anomaly_score_histogram").record(scored.risk);
        scored
    }

    /// Contract 15.2, external escalation: a composite in [`EXTERNAL_BAND`] is sent as
    /// `{tenant_id, event}`; a `{score}` answer replaces it (backend `external`, the anomaly
    /// flag recomputed from it: score ≥ threshold or rules ≥ 0.9). On any failure the
    /// composite stands. Counted in `anomaly_external_escalations_total{outcome}`.
    async fn escalate(
        &self,
        external: &ExternalScorer,
        tenant: TenantId,
        event: &Value,
        scored: Scored,
    ) -> Scored {
        if !in_band(scored.risk, EXTERNAL_BAND.0, EXTERNAL_BAND.1) {
            return scored;
        }
        let body = json!({"tenant_id": tenant.0.to_string(), "event": event});
        match external.score(&body).await {
            Ok(risk) => {
                count_escalation(Outcome::Scored);
                self.set_backend(tenant, "external");
                let mut reasons = scored.reasons;
                reasons.push(format!(
                    "external scorer: {risk:.2} (composite {:.2})",
                    scored.risk
                ));
                Scored {
                    risk,
                    reasons,
                    backend: "external",
                    is_anomaly: risk >= self.config.threshold || scored.rules >= 0.9,
                    ..scored
                }
            }
            Err(failure) => {
                count_escalation(failure.outcome());
                tracing::warn!(
                    tenant = %tenant.0,
                    error = %failure,
                    "anomaly external scorer failed; the composite score stands"
                );
                scored
            }
        }
    }

    async fn score_inner(&self, tenant: TenantId, event: &Value) -> Scored {
        let (rules, reasons) = contract_rules(event);
        let model = if self.config.ml_enabled {
            self.model(tenant)
        } else {
            None
        };
        let Some(model) = model else {
            return self.combine(None, rules, reasons, "rules");
        };
        let backend = model.backend();
        if model.inline(event) {
            // Bounded cost: no hand-off to the blocking pool (its wake-up dominates).
            let ml = model.score(event);
            let scored = if ml.is_finite() {
                self.combine(Some(ml.clamp(0.0, 1.0)), rules, reasons, backend)
            } else {
                self.combine(None, rules, reasons, "rules")
            };
            self.set_backend(tenant, scored.backend);
            return scored;
        }
        let ev = event.clone();
        let work = tokio::task::spawn_blocking(move || model.score(&ev));
        let scored = match tokio::time::timeout(self.config.ml_timeout, work).await {
            Ok(Ok(ml)) if ml.is_finite() => {
                self.combine(Some(ml.clamp(0.0, 1.0)), rules, reasons, backend)
            }
            Ok(_) => self.combine(None, rules, reasons, "rules"),
            Err(_) => self.combine(None, rules, reasons, "timeout"),
        };
        self.set_backend(tenant, scored.backend);
        scored
    }
}

fn count_escalation(outcome: Outcome) {
    metrics::counter!("anomaly_external_escalations_total", "outcome" => outcome.as_str())
        .increment(1);
}
