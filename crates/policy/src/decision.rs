//! The built-in aggregator `steward.main` (contract 13.6) and the check response (13.7).
//!
//! Pure functions: the modules' outcomes, the agent and the risk score in, the decision out.

use serde::Serialize;
use serde_json::Value;
use steward_core::PolicyId;

use crate::agents::AgentInfo;
use crate::module::ModuleResult;
use crate::risk::risk_level;

/// The actions the built-in critical-operation rule sends to a human (13.6 step 6).
fn severity_or_null() -> utoipa::openapi::Object {
    steward_core::schema::nullable_one_of(&crate::module::SEVERITIES)
}

fn risk_levels() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&crate::risk::RISK_LEVELS)
}

pub const CRITICAL_OPERATIONS: [&str; 2] = ["delete_data", "export_phi"];

/// What one active policy's module did.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Decided(ModuleResult),
    /// The module could not be evaluated (error, time-out); the text is for the log.
    Failed(String),
}

/// One active policy's outcome, in evaluation order.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyOutcome {
    pub policy_id: PolicyId,
    pub name: String,
    pub verdict: Verdict,
}

/// The checked agent as step 1 sees it.
#[derive(Clone, Copy, Debug)]
pub enum AgentState<'a> {
    /// Not a registered agent of the caller's tenant (unknown, another tenant's, not a UUID).
    Unregistered,
    Registered(&'a AgentInfo),
}

/// Everything the decision depends on besides the risk score.
#[derive(Clone, Copy, Debug)]
pub struct Aggregation<'a> {
    /// The `agent_id` as the request gave it.
    pub agent_id: &'a str,
    pub agent: AgentState<'a>,
    /// The active policies' outcomes, priority descending then creation ascending.
    pub outcomes: &'a [PolicyOutcome],
    pub action: &'a str,
    pub context: &'a Value,
    /// `HITL_RISK_THRESHOLD`: a risk score strictly above it requires approval.
    pub hitl_risk_threshold: f64,
}

/// The decision of a policy check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
    pub severity: Option<String>,
    pub required_approval: bool,
}

impl Decision {
    fn deny(reason: String, severity: &str) -> Self {
        Decision {
            allowed: false,
            reason,
            severity: Some(severity.to_owned()),
            required_approval: false,
        }
    }
}

/// Steps 1 to 7 of contract 13.6 for a given risk score.
pub fn decide(a: &Aggregation<'_>, risk_score: f64) -> Decision {
    // Step 1: the agent.
    let agent = match a.agent {
        AgentState::Unregistered => {
            return Decision::deny(
                format!("agent {} is not registered in this tenant", a.agent_id),
                "high",
            )
        }
        AgentState::Registered(agent) if agent.is_suspended() => {
            return Decision::deny(format!("agent {} is suspended", a.agent_id), "high")
        }
        AgentState::Registered(agent) => agent,
    };

    // Steps 2 to 4: the modules, in order.
    let mut hard: Vec<String> = Vec::new();
    let mut severity: Option<String> = None;
    let mut approvals: Vec<String> = Vec::new();
    for outcome in a.outcomes {
        match &outcome.verdict {
            Verdict::Failed(_) => {
                hard.push(format!("policy '{}' failed to evaluate", outcome.name));
                severity.get_or_insert_with(|| "medium".to_owned());
            }
            Verdict::Decided(r) => {
                if r.hard_denies() {
                    if r.deny.is_empty() {
                        hard.push(format!("denied by policy '{}'", outcome.name));
                    } else {
                        hard.extend(r.deny.iter().cloned());
                    }
                    severity.get_or_insert_with(|| {
                        r.severity.clone().unwrap_or_else(|| "medium".to_owned())
                    });
                }
                if r.require_approval {
                    approvals.push(format!(
                        "human approval required by policy '{}'",
                        outcome.name
                    ));
                }
            }
        }
    }
    if a.outcomes.is_empty() {
        hard.push("no active policy allows this action".to_owned());
        severity.get_or_insert_with(|| "medium".to_owned());
    }

    // Step 5: the agent's max_risk.
    if let Some(max) = agent.max_risk() {
        if risk_score > max {
            hard.push(format!(
                "risk score {risk_score:.2} exceeds the agent's max_risk {max:.2}"
            ));
            severity.get_or_insert_with(|| "high".to_owned());
        }
    }

    // Step 6: approval triggers, unless the request says it was approved.
    let approved = a.context.get("approved") == Some(&Value::Bool(true));
    if approved {
        approvals.clear();
    } else {
        if CRITICAL_OPERATIONS.contains(&a.action) {
            approvals.push(format!(
                "human approval required: {} is a critical operation",
                a.action
            ));
        }
        if risk_score > a.hitl_risk_threshold {
            approvals.push(format!(
                "human approval required: risk score {risk_score:.2} exceeds the threshold {:.2}",
                a.hitl_risk_threshold
            ));
        }
    }

    // Step 7.
    if !hard.is_empty() {
        Decision {
            allowed: false,
            reason: hard.join("; "),
            severity,
            required_approval: false,
        }
    } else if !approvals.is_empty() {
        Decision {
            allowed: false,
            reason: approvals.join("; "),
            severity: Some("high".to_owned()),
            required_approval: true,
        }
    } else {
        Decision {
            allowed: true,
            reason: format!("allowed by {} active policies", a.outcomes.len()),
            severity: None,
            required_approval: false,
        }
    }
}

/// `risk` of the check response.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RiskView {
    #[schema(schema_with = risk_levels)]
    pub level: &'static str,
}

/// `anomaly` of the check response.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AnomalyView {
    pub is_anomaly: bool,
    pub score: f64,
    pub report_id: Option<String>,
}

/// The body of `POST /policies/check` (contract 13.7).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CheckResponse {
    pub allowed: bool,
    pub reason: String,
    #[schema(schema_with = severity_or_null)]
    pub severity: Option<String>,
    pub required_approval: bool,
    pub risk_score: f64,
    pub risk: RiskView,
    pub anomaly: AnomalyView,
}

impl CheckResponse {
    pub fn new(
        decision: Decision,
        risk_score: f64,
        is_anomaly: bool,
        report_id: Option<String>,
    ) -> Self {
        CheckResponse {
            allowed: decision.allowed,
            reason: decision.reason,
            severity: decision.severity,
            required_approval: decision.required_approval,
            risk_score,
            risk: RiskView {
                level: risk_level(risk_score),
            },
            anomaly: AnomalyView {
                is_anomaly,
                score: risk_score,
                report_id,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use steward_core::AgentId;

    fn agent(status: &str, permissions: Value) -> AgentInfo {
        AgentInfo {
            id: AgentId::new(),
            name: "bot".into(),
            agent_type: "llm".into(),
            capabilities: vec![],
            permissions,
            status: status.into(),
        }
    }

    fn decided(name: &str, r: ModuleResult) -> PolicyOutcome {
        PolicyOutcome {
            policy_id: PolicyId::new(),
            name: name.into(),
            verdict: Verdict::Decided(r),
        }
    }

    fn allows() -> ModuleResult {
        ModuleResult {
            allow: true,
            ..Default::default()
        }
    }

    fn denies(msgs: &[&str], severity: Option<&str>) -> ModuleResult {
        ModuleResult {
            allow: false,
            deny: msgs.iter().map(|m| m.to_string()).collect(),
            severity: severity.map(str::to_owned),
            ..Default::default()
        }
    }

    fn run(
        agent: &AgentInfo,
        outcomes: &[PolicyOutcome],
        action: &str,
        context: Value,
        risk: f64,
    ) -> Decision {
        decide(
            &Aggregation {
                agent_id: "a-1",
                agent: AgentState::Registered(agent),
                outcomes,
                action,
                context: &context,
                hitl_risk_threshold: 0.8,
            },
            risk,
        )
    }

    #[test]
    fn unregistered_and_suspended() {
        let ctx = json!({});
        let d = decide(
            &Aggregation {
                agent_id: "not-a-uuid",
                agent: AgentState::Unregistered,
                outcomes: &[],
                action: "read_data",
                context: &ctx,
                hitl_risk_threshold: 0.8,
            },
            0.0,
        );
        assert_eq!(
            d,
            Decision {
                allowed: false,
                reason: "agent not-a-uuid is not registered in this tenant".into(),
                severity: Some("high".into()),
                required_approval: false
            }
        );
        let suspended = agent("suspended", json!({}));
        let d = run(
            &suspended,
            &[decided("p", allows())],
            "delete_data",
            json!({}),
            0.9,
        );
        assert_eq!(d.reason, "agent a-1 is suspended");
        assert!(!d.allowed && !d.required_approval);
    }

    #[test]
    fn allowed_reason_counts_policies() {
        let a = agent("active", json!({}));
        let d = run(
            &a,
            &[decided("x", allows()), decided("y", allows())],
            "read",
            json!({}),
            0.1,
        );
        assert_eq!(
            d,
            Decision {
                allowed: true,
                reason: "allowed by 2 active policies".into(),
                severity: None,
                required_approval: false
            }
        );
    }

    #[test]
    fn hard_denies_in_module_order_with_first_severity() {
        let a = agent("active", json!({"max_risk": 0.5}));
        let outcomes = [
            decided("first", denies(&["b msg", "a msg"], Some("critical"))),
            decided("silent", ModuleResult::default()),
            PolicyOutcome {
                policy_id: PolicyId::new(),
                name: "broken".into(),
                verdict: Verdict::Failed("boom".into()),
            },
            decided("ok", allows()),
        ];
        let d = run(&a, &outcomes, "delete_data", json!({}), 0.9);
        assert_eq!(
            d.reason,
            "b msg; a msg; denied by policy 'silent'; policy 'broken' failed to evaluate; \
             risk score 0.90 exceeds the agent's max_risk 0.50"
        );
        assert_eq!(d.severity.as_deref(), Some("critical"));
        assert!(!d.allowed && !d.required_approval);
    }

    #[test]
    fn default_severities() {
        let a = agent("active", json!({"max_risk": 0.5}));
        let d = run(
            &a,
            &[decided("s", ModuleResult::default())],
            "r",
            json!({}),
            0.0,
        );
        assert_eq!(d.severity.as_deref(), Some("medium"));
        assert_eq!(d.reason, "denied by policy 's'");
        let d = run(&a, &[decided("ok", allows())], "r", json!({}), 0.6);
        assert_eq!(d.severity.as_deref(), Some("high"));
        assert_eq!(
            d.reason,
            "risk score 0.60 exceeds the agent's max_risk 0.50"
        );
        let d = run(&a, &[], "r", json!({}), 0.0);
        assert_eq!(d.reason, "no active policy allows this action");
        assert_eq!(d.severity.as_deref(), Some("medium"));
        // max_risk that is not a number is ignored.
        let b = agent("active", json!({"max_risk": "0.1"}));
        assert!(run(&b, &[decided("ok", allows())], "r", json!({}), 0.6).allowed);
        // Equal to max_risk is not above it.
        assert!(run(&a, &[decided("ok", allows())], "r", json!({}), 0.5).allowed);
    }

    #[test]
    fn approval_triggers() {
        let a = agent("active", json!({}));
        let hitl = ModuleResult {
            allow: true,
            require_approval: true,
            ..Default::default()
        };
        let d = run(
            &a,
            &[decided("gate", hitl.clone())],
            "delete_data",
            json!({}),
            0.85,
        );
        assert_eq!(
            d,
            Decision {
                allowed: false,
                reason: "human approval required by policy 'gate'; human approval required: \
                         delete_data is a critical operation; human approval required: risk \
                         score 0.85 exceeds the threshold 0.80"
                    .into(),
                severity: Some("high".into()),
                required_approval: true
            }
        );
        // `approved: true` silences every trigger; anything else does not.
        let d = run(
            &a,
            &[decided("gate", hitl.clone())],
            "delete_data",
            json!({"approved": true}),
            0.85,
        );
        assert!(d.allowed && !d.required_approval);
        let d = run(
            &a,
            &[decided("gate", hitl)],
            "read",
            json!({"approved": "true"}),
            0.1,
        );
        assert!(d.required_approval);
        // The threshold is strict.
        assert!(run(&a, &[decided("ok", allows())], "read", json!({}), 0.8).allowed);
    }

    #[test]
    fn hard_deny_wins_over_approval() {
        let a = agent("active", json!({}));
        let d = run(
            &a,
            &[decided("gdpr", denies(&["GDPR: consent"], Some("high")))],
            "delete_data",
            json!({}),
            0.5,
        );
        assert!(!d.allowed && !d.required_approval);
        assert_eq!(d.reason, "GDPR: consent");
    }

    #[test]
    fn response_shape() {
        let r = CheckResponse::new(
            Decision {
                allowed: true,
                reason: "allowed by 3 active policies".into(),
                severity: None,
                required_approval: false,
            },
            0.31,
            false,
            None,
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap_or_default(),
            json!({
                "allowed": true, "reason": "allowed by 3 active policies", "severity": null,
                "required_approval": false, "risk_score": 0.31, "risk": {"level": "medium"},
                "anomaly": {"is_anomaly": false, "score": 0.31, "report_id": null}
            })
        );
    }
}
