//! Concurrent writes of one agent never undo each other (both backends; probe L).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use steward_core::principal::CredentialKind;
use steward_core::{Body, ErrorKind, MemoryBus, Principal, Role, TenantId};
use steward_registry::{AgentView, NoActivity, Registry};
use steward_store::{db_test, DbPool};

fn developer(tenant: TenantId) -> Principal {
    Principal {
        tenant,
        role: Role::Developer,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    }
}

/// A registry on `pool`, a developer of a new tenant, and one agent of theirs named `name`.
async fn one_agent(pool: &DbPool, name: &str) -> (Registry, Principal, AgentView) {
    let tenant = steward_store::testing::insert_tenant(pool).await.unwrap();
    let registry = Registry::new(
        pool.clone(),
        Arc::new(MemoryBus::new()),
        Arc::new(NoActivity),
        Duration::from_secs(300),
    );
    let p = developer(tenant);
    let agent = registry
        .register(&p, &Body::json(&json!({"name": name, "type": "custom"})))
        .await
        .unwrap();
    (registry, p, agent)
}

// Three updates of different fields and a heartbeat, all at once, eight times over: every
// update lands (before, the whole row was written back from each request's own read, so the
// last writer undid the others' fields while all answered 200).
db_test!(concurrent_updates_of_different_fields_all_land, |db| {
    let (registry, p, agent) = one_agent(&db.pool, "racer").await;
    let tenant = p.tenant;
    for round in 0..8 {
        let bodies = [
            json!({"version": format!("v{round}")}),
            json!({"capabilities": [format!("cap-{round}")]}),
            json!({"permissions": {"max_risk": f64::from(round) / 10.0}}),
        ];
        let mut tasks = Vec::new();
        for body in bodies {
            let (registry, p, id) = (registry.clone(), p.clone(), agent.id.clone());
            tasks.push(tokio::spawn(async move {
                registry.update(&p, &id, &Body::json(&body)).await
            }));
        }
        let (registry2, p2, id2) = (registry.clone(), p.clone(), agent.id.clone());
        let beat = tokio::spawn(async move {
            registry2
                .heartbeat(&p2, &id2, &Body::json(&json!({})))
                .await
        });
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => {}
                // Allowed only after five lost races in a row; then nothing of it landed.
                Err(e) => panic!("round {round}: {e:?}"),
            }
        }
        beat.await.unwrap().unwrap();
        let now = registry.get(&p, &agent.id).await.unwrap();
        let now = serde_json::to_value(&now).unwrap();
        assert_eq!(
            now["version"],
            json!(format!("v{round}")),
            "round {round}: {now}"
        );
        assert_eq!(
            now["capabilities"],
            json!([format!("cap-{round}")]),
            "round {round}"
        );
        assert_eq!(
            now["permissions"],
            json!({"max_risk": f64::from(round) / 10.0}),
            "round {round}"
        );
    }
    // Of concurrent deletions one answers, the others find nothing.
    let admin = Principal {
        role: Role::Admin,
        ..developer(tenant)
    };
    let mut deletes = Vec::new();
    for _ in 0..4 {
        let (registry, p, id) = (registry.clone(), admin.clone(), agent.id.clone());
        deletes.push(tokio::spawn(async move { registry.delete(&p, &id).await }));
    }
    let mut ok = 0;
    for d in deletes {
        match d.await.unwrap() {
            Ok(()) => ok += 1,
            Err(e) => assert_eq!(e.kind, ErrorKind::NotFound, "{e:?}"),
        }
    }
    assert_eq!(ok, 1);
});

// Replicas of one agent beating at once (the load bench's 32 clients over 100 agents lost
// five races in a row once and answered 409): every heartbeat answers 200, an update sent
// among them lands, and `last_heartbeat` / `updated_at` never move back.
db_test!(concurrent_heartbeats_of_one_agent_all_succeed, |db| {
    let (registry, p, agent) = one_agent(&db.pool, "replicated").await;
    let tenant = p.tenant;
    let mut latest = String::new();
    for round in 0..6 {
        let mut beats = Vec::new();
        for _ in 0..24 {
            let (registry, p, id) = (registry.clone(), p.clone(), agent.id.clone());
            beats.push(tokio::spawn(async move {
                registry.heartbeat(&p, &id, &Body::json(&json!({}))).await
            }));
        }
        let (registry2, p2, id2) = (registry.clone(), p.clone(), agent.id.clone());
        let update = tokio::spawn(async move {
            registry2
                .update(
                    &p2,
                    &id2,
                    &Body::json(&json!({"version": format!("r{round}")})),
                )
                .await
        });
        for b in beats {
            let view = serde_json::to_value(b.await.unwrap().unwrap()).unwrap();
            assert_eq!(view["status"], "active", "round {round}: {view}");
            let beat = view["last_heartbeat"].as_str().unwrap().to_owned();
            assert!(
                beat.as_str() > latest.as_str(),
                "round {round}: {beat} after {latest}"
            );
        }
        update.await.unwrap().unwrap();
        let now = serde_json::to_value(registry.get(&p, &agent.id).await.unwrap()).unwrap();
        assert_eq!(
            now["version"],
            json!(format!("r{round}")),
            "round {round}: {now}"
        );
        let beat = now["last_heartbeat"].as_str().unwrap().to_owned();
        assert!(beat.as_str() > latest.as_str(), "round {round}");
        assert!(
            now["updated_at"].as_str().unwrap() >= beat.as_str(),
            "round {round}: {now}"
        );
        latest = beat;
    }
    // A suspension among heartbeats: those that land after it answer agent_suspended.
    let admin = Principal {
        role: Role::Admin,
        ..developer(tenant)
    };
    registry.suspend(&admin, &agent.id).await.unwrap();
    let e = registry
        .heartbeat(&p, &agent.id, &Body::json(&json!({})))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::AgentSuspended);
});
