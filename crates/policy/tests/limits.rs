//! Runaway policies: the engine's own time limit and the check's deadline both turn a module
//! that does not finish into a hard deny, while other checks keep answering.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::Harness;
use serde_json::json;
use steward_policy::{EngineSettings, EvalLimits, Evaluator, PolicyConfig};
use steward_store::db_test;

/// Iterates a billion times: stopped by the engine's cooperative time limit.
const LOOPING: &str = "package steward.policies.looping\nimport rego.v1\n\
    allow if count([1 | some a in numbers.range(1, 1000); some b in numbers.range(1, 1000); \
    some c in numbers.range(1, 1000)]) > 0\n";

/// Four million iterations (tens of milliseconds to seconds): only the deadline stops waiting.
/// (A single `numbers.range` call is limited to 100,000 numbers when the policy is saved.)
const ONE_BIG_CALL: &str = "package steward.policies.bigcall\nimport rego.v1\n\
    allow if count([1 | some a in numbers.range(1, 100000); some b in numbers.range(1, 40)]) > 0\n";

fn config(timeout_ms: u64, deadline_ms: u64) -> PolicyConfig {
    PolicyConfig {
        engine: EngineSettings {
            limits: EvalLimits {
                timeout: Duration::from_millis(timeout_ms),
                max_instructions: usize::MAX,
            },
            deadline: Duration::from_millis(deadline_ms),
            max_concurrent: 4,
            evaluator: Evaluator::Vm,
            ..EngineSettings::default()
        },
        ..PolicyConfig::default()
    }
}

/// Two tenants with an active agent each, the first with the slow `policy` as well, and
/// both compiled sets built, so that only evaluation is timed.
async fn slow_and_fast(
    h: &Harness,
    policy: serde_json::Value,
) -> [(steward_core::TenantId, String); 2] {
    let slow = h.tenant().await;
    h.create(slow, policy).await.unwrap();
    let fast = h.tenant().await;
    let mut out = Vec::new();
    for t in [slow, fast] {
        let agent = h.agent(t, "active", json!({})).to_string();
        let _ = h.svc.engine().evaluate(t, &json!({})).await;
        out.push((t, agent));
    }
    [out.remove(0), out.remove(0)]
}

/// A developer's check of `read_data` by `agent`, running on its own task.
fn spawn_check(
    h: &Harness,
    tenant: steward_core::TenantId,
    agent: &str,
) -> tokio::task::JoinHandle<steward_core::Result<steward_policy::CheckResponse>> {
    let (svc, agent) = (h.svc.clone(), agent.to_owned());
    tokio::spawn(async move {
        let body =
            json!({"agent_id": agent, "action": "read_data", "resource": "r", "context": {}});
        svc.check(
            &common::as_role(tenant, steward_core::Role::Developer),
            &steward_core::Body::json(&body),
        )
        .await
    })
}

db_test!(engine_time_limit_denies, |db| {
    let h = Harness::new(&db.pool, config(200, 5_000));
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    h.create(t, json!({"name": "looping", "rego": LOOPING}))
        .await
        .unwrap();
    let started = Instant::now();
    let body = h.check(t, &a, "read_data", "r", json!({})).await;
    assert!(!body.allowed && !body.required_approval);
    assert_eq!(body.reason, "policy 'looping' failed to evaluate");
    assert_eq!(body.severity.as_deref(), Some("medium"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
});

db_test!(deadline_denies_while_others_answer, |db| {
    let h = Harness::new(&db.pool, config(10_000, 10));
    let [(slow_tenant, slow_agent), (fast_tenant, fast_agent)] = slow_and_fast(
        &h,
        json!({"name": "bigcall", "priority": 5, "rego": ONE_BIG_CALL}),
    )
    .await;

    let slow = spawn_check(&h, slow_tenant, &slow_agent);
    // Another tenant's check answers normally meanwhile (the deadline is tight, so retry a
    // few times in case the machine is busy).
    let mut fast_ok = false;
    for _ in 0..20 {
        let body = h
            .check(fast_tenant, &fast_agent, "read_data", "r", json!({}))
            .await;
        if body.allowed {
            fast_ok = true;
            break;
        }
    }
    assert!(fast_ok, "the other tenant's check answers");
    let body = slow.await.unwrap().unwrap();
    assert!(!body.allowed && !body.required_approval);
    assert!(
        body.reason
            .starts_with("policy 'bigcall' failed to evaluate"),
        "{}",
        body.reason
    );
});

db_test!(over_inline_budget_moves_to_the_pool, |db| {
    // The defaults but for the time limits, which a loaded machine could outlast on 10,000
    // items (the limits have tests of their own above).
    let mut cfg = PolicyConfig::default();
    cfg.engine.limits.timeout = Duration::from_secs(30);
    cfg.engine.deadline = Duration::from_secs(30);
    let h = Harness::new(&db.pool, cfg);
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    let rego = "package steward.policies.items\nimport rego.v1\n\
        deny contains \"negative item\" if { some x in input.context.items; x < 0 }\n\
        default allow := false\nallow if count(deny) == 0\n";
    h.create(t, json!({"name": "items", "rego": rego}))
        .await
        .unwrap();
    // Just under the 10,000 values a free-form member may hold (the context object, the array
    // and its items), and over the inline budget (`module::tests::inline_budget_is_small`).
    let mut items: Vec<i64> = (0..9_997).collect();
    let body = h
        .check(t, &a, "read_data", "r", json!({ "items": items }))
        .await;
    assert!(body.allowed, "{}", body.reason);
    items.push(-1);
    let body = h
        .check(t, &a, "read_data", "r", json!({ "items": items }))
        .await;
    assert!(!body.allowed);
    assert_eq!(body.reason, "negative item");
});

db_test!(a_tenant_with_slow_policies_leaves_slots_to_others, |db| {
    // Every module on the pool (no inline pass), four slots; a looping module holds its slot
    // until the engine stops it (6 s), far longer than a check waits (1.5 s).
    let mut cfg = config(6_000, 1_500);
    cfg.engine.inline = false;
    let h = Harness::new(&db.pool, cfg);
    let [(slow_tenant, slow_agent), (fast_tenant, fast_agent)] =
        slow_and_fast(&h, json!({"name": "looping", "rego": LOOPING})).await;
    // Eight of the slow tenant's checks at once: before tenants had shares, they took all four
    // slots for six seconds and the other tenant's check failed for want of one.
    let slow: Vec<_> = (0..8)
        .map(|_| spawn_check(&h, slow_tenant, &slow_agent))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let body = h
        .check(fast_tenant, &fast_agent, "read_data", "r", json!({}))
        .await;
    assert!(body.allowed, "{}", body.reason);
    for check in slow {
        let body = check.await.unwrap().unwrap();
        assert!(!body.allowed, "{}", body.reason);
    }
    assert_eq!(steward_policy::tenant_share(4), 2);
});
