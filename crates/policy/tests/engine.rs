//! The embedded engine's per-tenant cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Harness;
use serde_json::json;
use steward_policy::{EmbeddedEngine, EngineSettings, PolicyConfig, PolicyEngine, Verdict};
use steward_store::db_test;

fn input(tenant: steward_core::TenantId) -> serde_json::Value {
    json!({"action": "read_data", "resource": "r", "context": {"personal_data": true},
           "tenant_id": tenant.to_string(), "agent": {}})
}

db_test!(cache_is_bounded_and_invalidated, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let engine = EmbeddedEngine::new(
        db.pool.clone(),
        EngineSettings {
            max_cached_tenants: 2,
            ..EngineSettings::default()
        },
    );
    let tenants = [h.tenant().await, h.tenant().await, h.tenant().await];
    for t in tenants {
        let outcomes = engine.evaluate(t, &input(t)).await.unwrap();
        let names: Vec<_> = outcomes.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["gdpr", "hipaa", "fz152"]);
        match &outcomes[0].verdict {
            Verdict::Decided(r) => assert_eq!(r.deny.len(), 2, "{r:?}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(engine.cached_tenants(), 2);
    // A change is seen only after invalidation (the service invalidates on every write).
    let t = tenants[2];
    let gdpr = h
        .list(t)
        .await
        .into_iter()
        .find(|p| p.name == "gdpr")
        .unwrap();
    h.update(t, &gdpr.id, json!({"is_active": false}))
        .await
        .unwrap();
    assert_eq!(
        engine.evaluate(t, &input(t)).await.unwrap().len(),
        3,
        "still cached"
    );
    engine.invalidate(t);
    assert_eq!(engine.cached_tenants(), 1);
    assert_eq!(engine.evaluate(t, &input(t)).await.unwrap().len(), 2);
    engine.invalidate_all();
    assert_eq!(engine.cached_tenants(), 0);
    assert_eq!(
        engine
            .evaluate(tenants[0], &input(tenants[0]))
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(engine.kind(), "embedded");
});

db_test!(stored_module_that_no_longer_compiles_denies, |db| {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use steward_store::schema::policies;
    use steward_store::{with_conn, DbResultExt, Id};
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    let p = h.list(t).await.remove(0);
    // Corrupt the stored source behind the service's back (e.g. an engine upgrade).
    let id = Id(p.id.parse::<uuid::Uuid>().unwrap());
    let updated: steward_core::Result<usize> = async {
        with_conn!(&db.pool, conn => {
            diesel::update(policies::table.filter(policies::id.eq(id)))
                .set(policies::rego.eq("package steward.policies.gdpr\nallow if {"))
                .execute(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(updated.unwrap(), 1);
    h.svc.invalidate(t);
    let body = h.check(t, &a, "read_data", "r", json!({})).await;
    assert!(!body.allowed);
    assert_eq!(body.reason, "policy 'gdpr' failed to evaluate");
});

// A notice lost to a cache outage cannot leave an instance on old policies for longer than
// `max_set_age`: an older set is built again from the database, invalidated or not.
db_test!(an_old_compiled_set_is_built_again, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let aging = EmbeddedEngine::new(
        db.pool.clone(),
        EngineSettings {
            max_set_age: std::time::Duration::from_millis(50),
            ..EngineSettings::default()
        },
    );
    let t = h.tenant().await;
    assert_eq!(aging.evaluate(t, &input(t)).await.unwrap().len(), 3);
    let gdpr = h
        .list(t)
        .await
        .into_iter()
        .find(|p| p.name == "gdpr")
        .unwrap();
    // Written through the harness's own service: this engine hears of it from nobody.
    h.update(t, &gdpr.id, json!({"is_active": false}))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    assert_eq!(aging.evaluate(t, &input(t)).await.unwrap().len(), 2);
});
