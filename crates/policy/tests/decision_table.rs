//! The normative decision table of contract 13.8, all 40 rows, against the shipped templates,
//! the embedded engine and the aggregator, on both database backends; and the same rows on
//! the VM and on the interpreter, which must agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::table::{applies, context, run_table_with, ROWS};
use common::Harness;
use serde_json::json;
use steward_core::{PolicyId, TenantId};
use steward_policy::{
    decide, AgentInfo, AgentState, Aggregation, CompiledSet, EvalLimits, Evaluator, PolicyConfig,
    PolicySource, RulesScorer,
};
use steward_store::db_test;

db_test!(contract_decision_table, |db| {
    run_table(&db.pool, PolicyConfig::default()).await;
    // The same without the inline pass: every module on the blocking pool.
    let mut pool_only = PolicyConfig::default();
    pool_only.engine.inline = false;
    run_table(&db.pool, pool_only).await;
});

async fn run_table(pool: &steward_store::DbPool, config: PolicyConfig) {
    let h = Harness::new(pool, config);
    run_table_with(&h).await;
}

/// The table's rows 1-34 decided with the VM and with the interpreter, directly on compiled
/// sets (no database): both evaluators must give the same module results.
#[test]
fn vm_and_interpreter_agree_on_the_table() {
    let sources = |with_hitl: bool| -> Vec<PolicySource> {
        let mut ids = vec!["gdpr", "hipaa", "fz152"];
        if with_hitl {
            ids.push("hitl");
        }
        ids.into_iter()
            .map(|id| PolicySource {
                policy_id: PolicyId::new(),
                name: id.to_owned(),
                rego: steward_policy::template(id).unwrap().rego.to_owned(),
            })
            .collect()
    };
    let tenant = TenantId::new();
    let agent = AgentInfo {
        id: steward_core::AgentId::new(),
        name: "table".into(),
        agent_type: "llm".into(),
        capabilities: vec![],
        permissions: json!({}),
        status: "active".into(),
    };
    for with_hitl in [false, true] {
        let vm = CompiledSet::compile(sources(with_hitl), EvalLimits::default(), Evaluator::Vm);
        let interp = CompiledSet::compile(
            sources(with_hitl),
            EvalLimits::default(),
            Evaluator::Interpreter,
        );
        for row in ROWS.iter().filter(|r| applies(r, with_hitl)) {
            let ctx = context(row.4, tenant);
            let input = json!({
                "action": row.2, "resource": row.3, "context": ctx,
                "tenant_id": tenant.to_string(), "agent": agent.input_document(),
            });
            let input = regorus::Value::from(input);
            let a = vm.evaluate_blocking(&input);
            let b = interp.evaluate_blocking(&input);
            let verdicts = |o: &[steward_policy::PolicyOutcome]| -> Vec<_> {
                o.iter().map(|x| x.verdict.clone()).collect()
            };
            assert_eq!(verdicts(&a), verdicts(&b), "row {}", row.0);
            let risk = RulesScorer::default().score(row.2, row.3, &ctx).risk_score;
            let decision = decide(
                &Aggregation {
                    agent_id: "table",
                    agent: AgentState::Registered(&agent),
                    outcomes: &a,
                    action: row.2,
                    context: &ctx,
                    hitl_risk_threshold: 0.8,
                },
                risk,
            );
            assert_eq!(
                (decision.allowed, decision.required_approval),
                (row.5, row.6),
                "row {}",
                row.0
            );
        }
    }
}
