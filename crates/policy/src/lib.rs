//! The policy domain (contract 13): the Rego templates, validation of policy modules, the
//! per-tenant compiled sets of active modules, the aggregator `steward.main`, and the policy
//! service (records and the policy check). No HTTP here: `bins/server` maps requests to
//! `PolicyService` calls.
//!
//! Collaborators are traits the server wires: `AgentLookup` (the registry), `RiskScorer` (the
//! anomaly detector; `RulesScorer` until then), `AuditWriter` and `EventBus` (from the kernel).
//! `PolicyEngine` abstracts the evaluator so that an OPA-backed engine can be added.

pub mod agents;
mod analysis;
pub mod approval;
mod assignments;
pub mod decision;
pub mod engine;
pub mod module;
pub mod opa;
pub mod risk;
pub mod service;
pub mod templates;

pub use agents::{AgentInfo, AgentLookup, MemoryAgents};
pub use approval::{ApprovalGate, PresentedApproval};
pub use decision::{
    decide, AgentState, Aggregation, AnomalyView, CheckResponse, Decision, PolicyOutcome, RiskView,
    Verdict,
};
pub use engine::{
    tenant_share, CompiledSet, EmbeddedEngine, EngineSettings, PolicyEngine, PolicySource,
};
pub use module::{
    defined, validate_module, CompiledEntry, CompiledModule, EvalLimits, Evaluator, ModuleResult,
};
pub use opa::{opa_modules, OpaEngine, OpaSettings, OpaStats};
pub use risk::{
    risk_level, rules_score, ReasonFn, RiskAssessment, RiskEvent, RiskScorer, RulesScorer,
};
pub use service::{PolicyConfig, PolicyService, PolicyView, POLICY_CHANGES_CHANNEL};
pub use templates::{guard_module, template, templates, Template, DEFAULT_POLICIES};
