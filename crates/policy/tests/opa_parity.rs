//! The two engines decide identically: the whole decision table of contract 13.8 run through
//! the embedded engine and through OPA, module by module and check by check; modules loaded
//! on save and removed on delete; a tenant's modules isolated from another's; OPA losing its
//! modules; and the fallback when OPA is unreachable.
//!
//! OPA here is the real OPA engine (Go) behind `fixtures/opa/shim.py`; `.ci/run` starts it and
//! sets `TEST_OPA_URL`. Without it the OPA tests say that they were skipped (the fallback test
//! needs no OPA and always runs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::table::{applies, context, run_table_with, ROWS};
use common::Harness;
use serde_json::{json, Value};
use steward_core::TenantId;
use steward_policy::{
    EmbeddedEngine, OpaEngine, OpaSettings, PolicyConfig, PolicyEngine, PolicyOutcome,
};
use steward_store::{db_test, DbPool};

fn opa_url(test: &str) -> Option<String> {
    match std::env::var("TEST_OPA_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("{test}: skipped (TEST_OPA_URL is not set; .ci/run starts the OPA harness)");
            None
        }
    }
}

/// A harness whose service evaluates through OPA, connected. Each test has a namespace of its
/// own in the shared OPA (and a database of its own), as separate deployments would.
async fn opa_harness(pool: &DbPool, url: &str) -> (Harness, Arc<OpaEngine>, String) {
    let mut h = Harness::new(pool, PolicyConfig::default());
    let embedded = Arc::new(EmbeddedEngine::new(
        pool.clone(),
        PolicyConfig::default().engine,
    ));
    let ns = format!("test_{}", uuid::Uuid::new_v4().simple());
    let mut settings = OpaSettings::new(url);
    settings.namespace = ns.clone();
    // The harness rebuilds its engine on every module change: on a loaded machine one answer
    // may take longer than the production default of 2 s, and a fallback would fail the
    // parity checks.
    settings.timeout = std::time::Duration::from_secs(30);
    let opa = Arc::new(OpaEngine::new(pool.clone(), embedded, settings).unwrap());
    assert!(opa.try_connect().await, "OPA at {url} does not answer");
    assert!(opa.online());
    h.svc = h.svc.clone().with_engine(opa.clone());
    (h, opa, ns)
}

fn input(tenant: TenantId, agent: &steward_policy::AgentInfo, row: &common::table::Row) -> Value {
    json!({
        "action": row.2,
        "resource": row.3,
        "context": context(row.4, tenant),
        "tenant_id": tenant.to_string(),
        "agent": agent.input_document(),
    })
}

async fn embedded_outcomes(opa: &OpaEngine, tenant: TenantId, input: &Value) -> Vec<PolicyOutcome> {
    let set = opa.embedded().compiled_set(tenant).await.unwrap();
    opa.embedded()
        .evaluate_set(tenant, set, regorus::Value::from(input.clone()))
        .await
}

async fn opa_modules(url: &str) -> Vec<String> {
    let listed: Value = reqwest::get(format!("{url}/v1/policies"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect()
}

/// Removes a test's modules from the shared OPA (the harness rebuilds its engine on every
/// change, so leftovers would slow every later test down).
async fn forget(url: &str, ns: &str) {
    for id in opa_modules(url).await {
        if id.starts_with(&format!("{ns}/")) {
            reqwest::Client::new()
                .delete(format!("{url}/v1/policies/{id}"))
                .send()
                .await
                .unwrap();
        }
    }
}

db_test!(decision_table_through_both_engines, |db| {
    let Some(url) = opa_url("decision_table_through_both_engines") else {
        return;
    };
    let (h, opa, ns) = opa_harness(&db.pool, &url).await;

    // Module by module: every row's outcomes (verdicts, messages, severities) are equal.
    let t1 = h.tenant().await;
    let t2 = h.tenant().await;
    h.create(t2, json!({"name": "hitl", "template": "hitl"}))
        .await
        .unwrap();
    for (tenant, is_t2) in [(t1, false), (t2, true)] {
        let agent_id = h.agent(tenant, "active", json!({}));
        let agent = steward_policy::AgentInfo {
            id: agent_id,
            name: format!("agent-{agent_id}"),
            agent_type: "llm".into(),
            capabilities: vec!["read".into()],
            permissions: json!({}),
            status: "active".into(),
        };
        let mut compared = 0;
        for row in ROWS.iter().filter(|r| applies(r, is_t2)) {
            let input = input(tenant, &agent, row);
            let remote = opa.evaluate_remote(tenant, &input).await.unwrap();
            let local = embedded_outcomes(&opa, tenant, &input).await;
            assert_eq!(remote, local, "row {} (T{})", row.0, 1 + is_t2 as u8);
            assert_eq!(remote.len(), if is_t2 { 4 } else { 3 });
            compared += 1;
        }
        assert!(compared >= 24, "{compared}");
    }

    // Check by check: the whole table through the service, every check decided by OPA.
    let before = opa.stats();
    run_table_with(&h).await;
    let after = opa.stats();
    assert_eq!(after.fallback, before.fallback, "no check fell back");
    assert!(after.remote - before.remote >= 50, "{after:?}");
    forget(&url, &ns).await;
});

db_test!(saves_load_modules_and_deletes_remove_them, |db| {
    let Some(url) = opa_url("saves_load_modules_and_deletes_remove_them") else {
        return;
    };
    let (h, opa, ns) = opa_harness(&db.pool, &url).await;
    let tenant = h.tenant().await;
    let agent = h.agent(tenant, "active", json!({})).to_string();
    let mods = opa_modules(&url).await;
    assert!(mods.contains(&format!("{ns}/{tenant}/eval")), "{mods:?}");

    // A new policy is in OPA as soon as the save returns, and decides the next check there.
    let rego = "package steward.policies.launch\n\nimport rego.v1\n\n\
                deny contains \"no launches on fridays\" if input.context.day == \"friday\"\n\n\
                default allow := false\n\nallow if count(deny) == 0\n\nseverity := \"critical\"\n";
    let p = h
        .create(tenant, json!({"name": "launch", "rego": rego}))
        .await
        .unwrap();
    assert!(opa_modules(&url)
        .await
        .contains(&format!("{ns}/{tenant}/{}", p.id)));
    let before = opa.stats();
    let body = h
        .check(
            tenant,
            &agent,
            "launch",
            "rockets/1",
            json!({"day": "friday"}),
        )
        .await;
    assert!(!body.allowed);
    assert_eq!(body.reason, "no launches on fridays");
    assert_eq!(body.severity.as_deref(), Some("critical"));
    assert_eq!(opa.stats().remote, before.remote + 1);

    // Deactivated: gone from OPA, and the check follows.
    h.update(tenant, &p.id, json!({"is_active": false}))
        .await
        .unwrap();
    assert!(!opa_modules(&url)
        .await
        .contains(&format!("{ns}/{tenant}/{}", p.id)));
    let body = h
        .check(
            tenant,
            &agent,
            "launch",
            "rockets/1",
            json!({"day": "friday"}),
        )
        .await;
    assert!(body.allowed, "{body:?}");

    // Deleted.
    h.update(tenant, &p.id, json!({"is_active": true}))
        .await
        .unwrap();
    h.svc.delete(&common::admin(tenant), &p.id).await.unwrap();
    assert!(!opa_modules(&url)
        .await
        .contains(&format!("{ns}/{tenant}/{}", p.id)));
    assert_eq!(opa.stats().fallback, before.fallback);
    forget(&url, &ns).await;
});

db_test!(tenants_are_isolated_in_opa, |db| {
    let Some(url) = opa_url("tenants_are_isolated_in_opa") else {
        return;
    };
    let (h, opa, ns) = opa_harness(&db.pool, &url).await;
    let (a, b) = (h.bare_tenant().await, h.bare_tenant().await);
    // The same package in both tenants, opposite decisions.
    for (tenant, verdict) in [(a, "true"), (b, "false")] {
        let rego = format!(
            "package steward.policies.shared\n\nimport rego.v1\n\ndefault allow := {verdict}\n"
        );
        h.create(tenant, json!({"name": "shared", "rego": rego}))
            .await
            .unwrap();
    }
    let agent_a = h.agent(a, "active", json!({})).to_string();
    let agent_b = h.agent(b, "active", json!({})).to_string();
    let before = opa.stats();
    assert!(h.check(a, &agent_a, "x", "y", json!({})).await.allowed);
    assert!(!h.check(b, &agent_b, "x", "y", json!({})).await.allowed);
    assert_eq!(opa.stats().remote, before.remote + 2);
    forget(&url, &ns).await;
});

db_test!(opa_losing_its_modules_is_repaired, |db| {
    let Some(url) = opa_url("opa_losing_its_modules_is_repaired") else {
        return;
    };
    let (h, opa, ns) = opa_harness(&db.pool, &url).await;
    let tenant = h.tenant().await;
    let agent = h.agent(tenant, "active", json!({})).to_string();
    assert!(
        h.check(tenant, &agent, "read_data", "crm/contacts", json!({}))
            .await
            .allowed
    );
    // OPA restarted empty (as far as this tenant goes).
    for id in opa_modules(&url).await {
        if id.starts_with(&format!("{ns}/{tenant}/")) {
            reqwest::Client::new()
                .delete(format!("{url}/v1/policies/{id}"))
                .send()
                .await
                .unwrap();
        }
    }
    let before = opa.stats();
    let body = h
        .check(
            tenant,
            &agent,
            "read_phi",
            "ehr/patients/42",
            json!({"purpose": "marketing"}),
        )
        .await;
    assert!(!body.allowed && body.reason.contains("HIPAA"), "{body:?}");
    assert_eq!(
        opa.stats().remote,
        before.remote + 1,
        "decided by OPA after reloading"
    );
    assert!(opa_modules(&url)
        .await
        .contains(&format!("{ns}/{tenant}/eval")));
    forget(&url, &ns).await;
});

db_test!(unreachable_opa_falls_back_to_the_embedded_engine, |db| {
    let mut h = Harness::new(&db.pool, PolicyConfig::default());
    let embedded = Arc::new(EmbeddedEngine::new(
        db.pool.clone(),
        PolicyConfig::default().engine,
    ));
    // Nothing listens on port 9 (discard) here.
    let mut settings = OpaSettings::new("http://127.0.0.1:9");
    settings.timeout = Duration::from_millis(500);
    let opa = Arc::new(OpaEngine::new(db.pool.clone(), embedded, settings).unwrap());
    assert!(!opa.try_connect().await);
    assert!(!opa.online());
    h.svc = h.svc.clone().with_engine(opa.clone());
    let tenant = h.tenant().await;
    let agent = h.agent(tenant, "active", json!({})).to_string();
    let body = h
        .check(
            tenant,
            &agent,
            "read_data",
            "crm/contacts",
            json!({"personal_data": true}),
        )
        .await;
    assert!(!body.allowed && body.reason.contains("consent"), "{body:?}");
    assert_eq!(opa.stats().fallback, 1);
    assert_eq!(opa.stats().remote, 0);
});

db_test!(unread_assignments_decide_as_in_opa, |db| {
    let Some(url) = opa_url("unread_assignments_decide_as_in_opa") else {
        return;
    };
    let (h, opa, ns) = opa_harness(&db.pool, &url).await;
    // Probe H-1: an assignment whose value is undefined makes its body undefined in OPA,
    // whether its variable is read again or not.
    let modules = [
        "default allow := false\nallow if {\n\tticket := input.context.ticket_id\n}",
        "default allow := false\nallow if {\n\tx := input.context.nope.deeper\n}",
        "default allow := false\nallow if {\n\tn := count(input.context.items)\n}",
        "default allow := false\nhas_token if {\n\ttok := input.context.token\n}\nallow if has_token",
        "default allow := true\ndeny contains \"spurious\" if {\n\tx := input.context.missing\n}",
    ];
    let t = h.tenant().await;
    for (i, body) in modules.iter().enumerate() {
        let rego = format!("package steward.policies.unread{i}\nimport rego.v1\n{body}\n");
        h.create(t, json!({"name": format!("unread-{i}"), "rego": rego}))
            .await
            .unwrap();
    }
    let agent_id = h.agent(t, "active", json!({}));
    let agent = steward_policy::AgentInfo {
        id: agent_id,
        name: format!("agent-{agent_id}"),
        agent_type: "llm".into(),
        capabilities: vec!["read".into()],
        permissions: json!({}),
        status: "active".into(),
    };
    for context in [
        json!({}),
        json!({"ticket_id": "T-1", "nope": {"deeper": 1}, "items": [], "token": "x", "missing": 0}),
    ] {
        let input = json!({
            "action": "read_data", "resource": "crm/contacts", "context": context,
            "tenant_id": t.to_string(), "agent": agent.input_document(),
        });
        let remote = opa.evaluate_remote(t, &input).await.unwrap();
        let local = embedded_outcomes(&opa, t, &input).await;
        assert_eq!(remote, local, "context {}", input["context"]);
        assert!(remote.len() >= modules.len());
    }
    forget(&url, &ns).await;
});
