//! Risk scoring as the policy check uses it (contract 15.2), through a trait the anomaly crate
//! implements, and `RulesScorer`, which implements the rule heuristics alone.

use async_trait::async_trait;
use serde_json::{json, Value};
use steward_core::{Result, TenantId};

use crate::agents::AgentInfo;

/// The composite score at or above which an event is an anomaly (`ANOMALY_THRESHOLD`).
pub const DEFAULT_ANOMALY_THRESHOLD: f64 = 0.6;

/// A rules score at or above which an event is always an anomaly.
pub const RULES_ANOMALY_SCORE: f64 = 0.9;

/// The result of scoring one checked event.
#[derive(Clone, Debug, PartialEq)]
pub struct RiskAssessment {
    /// Composite risk in [0, 1].
    pub risk_score: f64,
    pub is_anomaly: bool,
    /// The automatic anomaly report created for this event (contract 15.1), if any.
    pub report_id: Option<String>,
}

/// The decision's `reason` for a given risk score (the reason depends on the score through
/// `max_risk` and `HITL_RISK_THRESHOLD`). Scorers call it to fill the report's `event_data`.
pub type ReasonFn<'a> = dyn Fn(f64) -> String + Send + Sync + 'a;

/// One checked event, as the scorer sees it.
#[derive(Clone, Copy, Debug)]
pub struct RiskEvent<'a> {
    pub tenant: TenantId,
    /// The checked agent; `None` when it is not a registered agent of the tenant.
    pub agent: Option<&'a AgentInfo>,
    pub action: &'a str,
    pub resource: &'a str,
    pub context: &'a Value,
}

impl RiskEvent<'_> {
    /// The `event_data` of the automatic anomaly report (contract 15.1): `action`, `resource`,
    /// `reason`, `risk_score` and `context`.
    pub fn report_event_data(&self, reason: &str, risk_score: f64) -> Value {
        json!({
            "action": self.action,
            "resource": self.resource,
            "reason": reason,
            "risk_score": risk_score,
            "context": self.context,
        })
    }
}

/// Scores a checked event and, when it is an anomaly, creates the automatic report.
///
/// An implementation computes the composite score (15.2), decides `is_anomaly`, and when it is
/// one creates a report with source `auto`, `agent_id` = the agent's id (null when
/// unregistered) and `event_data` = `event.report_event_data(&reason(score), score)`, then
/// returns the report's id. It must not fail the check for an ML time-out (rules decide then).
#[async_trait]
pub trait RiskScorer: Send + Sync + 'static {
    async fn assess(&self, event: RiskEvent<'_>, reason: &ReasonFn<'_>) -> Result<RiskAssessment>;
}

const PRIVILEGED_ACTIONS: [&str; 4] = [
    "change_security_policy",
    "disable_audit",
    "privilege_escalation",
    "cross_tenant_access",
];
const CRITICAL_ACTIONS: [&str; 2] = ["delete_data", "export_phi"];
const SENSITIVE_WORDS: [&str; 4] = ["password", "secret", "credential", "private_key"];

/// The rule heuristics of contract 15.2: the highest matching rule's score, 0 when none.
pub fn rules_score(action: &str, resource: &str, context: &Value) -> f64 {
    let mut score: f64 = 0.0;
    if PRIVILEGED_ACTIONS.contains(&action) {
        score = score.max(1.0);
    }
    if context
        .get("records")
        .and_then(Value::as_f64)
        .is_some_and(|n| n >= 10_000.0)
    {
        score = score.max(1.0);
    }
    let resource = resource.to_lowercase();
    if SENSITIVE_WORDS.iter().any(|w| resource.contains(w)) {
        score = score.max(0.8);
    }
    if CRITICAL_ACTIONS.contains(&action) {
        score = score.max(0.5);
    }
    score
}

/// A scorer using the rule heuristics only (no ML score, no reports): composite = rules,
/// `is_anomaly` = composite ≥ threshold or rules ≥ 0.9.
#[derive(Clone, Copy, Debug)]
pub struct RulesScorer {
    pub anomaly_threshold: f64,
}

impl Default for RulesScorer {
    fn default() -> Self {
        Self {
            anomaly_threshold: DEFAULT_ANOMALY_THRESHOLD,
        }
    }
}

impl RulesScorer {
    pub fn new(anomaly_threshold: f64) -> Self {
        Self { anomaly_threshold }
    }

    /// The assessment of an event, synchronously.
    pub fn score(&self, action: &str, resource: &str, context: &Value) -> RiskAssessment {
        let rules = rules_score(action, resource, context).clamp(0.0, 1.0);
        RiskAssessment {
            risk_score: rules,
            is_anomaly: rules >= self.anomaly_threshold || rules >= RULES_ANOMALY_SCORE,
            report_id: None,
        }
    }
}

#[async_trait]
impl RiskScorer for RulesScorer {
    async fn assess(&self, event: RiskEvent<'_>, _reason: &ReasonFn<'_>) -> Result<RiskAssessment> {
        Ok(self.score(event.action, event.resource, event.context))
    }
}

/// The values of `risk.level`, lowest first.
pub const RISK_LEVELS: [&str; 4] = ["low", "medium", "high", "critical"];

/// `risk.level` of a score (contract 13.7).
pub fn risk_level(score: f64) -> &'static str {
    if score < 0.3 {
        "low"
    } else if score < 0.6 {
        "medium"
    } else if score < 0.85 {
        "high"
    } else {
        "critical"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rule_heuristics() {
        let none = json!({});
        assert_eq!(rules_score("read_data", "crm/contacts", &none), 0.0);
        assert_eq!(rules_score("disable_audit", "audit/config", &none), 1.0);
        assert_eq!(
            rules_score("export_data", "r", &json!({"records": 10000})),
            1.0
        );
        assert_eq!(
            rules_score("export_data", "r", &json!({"records": 9999.5})),
            0.0
        );
        assert_eq!(
            rules_score("export_data", "r", &json!({"records": "50000"})),
            0.0
        );
        assert_eq!(rules_score("read_data", "vault/DB_Password", &none), 0.8);
        assert_eq!(rules_score("read_data", "keys/private_key.pem", &none), 0.8);
        assert_eq!(rules_score("delete_data", "tmp/cache", &none), 0.5);
        // The highest matching rule wins.
        assert_eq!(rules_score("delete_data", "secrets/x", &none), 0.8);
    }

    #[test]
    fn anomaly_flag() {
        let s = RulesScorer::default();
        assert!(s.score("disable_audit", "r", &json!({})).is_anomaly);
        assert!(s.score("read_data", "secret", &json!({})).is_anomaly);
        assert!(!s.score("delete_data", "r", &json!({})).is_anomaly);
        assert!(!s.score("read_data", "r", &json!({})).is_anomaly);
        let strict = RulesScorer::new(0.95);
        assert!(!strict.score("read_data", "secret", &json!({})).is_anomaly);
        assert!(strict.score("disable_audit", "r", &json!({})).is_anomaly);
    }

    #[test]
    fn levels() {
        assert_eq!(risk_level(0.0), "low");
        assert_eq!(risk_level(0.29), "low");
        assert_eq!(risk_level(0.3), "medium");
        assert_eq!(risk_level(0.59), "medium");
        assert_eq!(risk_level(0.6), "high");
        assert_eq!(risk_level(0.849), "high");
        assert_eq!(risk_level(0.85), "critical");
        assert_eq!(risk_level(1.0), "critical");
    }
}
