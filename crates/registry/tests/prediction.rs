//! Type prediction learns from the tenant's labelled agents (both backends).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use steward_core::principal::CredentialKind;
use steward_core::{Body, MemoryBus, Principal, Role, TenantId};
use steward_registry::{NoActivity, Registry};
use steward_store::db_test;

db_test!(prediction_uses_the_tenants_agents, |db| {
    let pool = &db.pool;
    let tenant: TenantId = steward_store::testing::insert_tenant(pool).await.unwrap();
    let registry = Registry::new(
        pool.clone(),
        Arc::new(MemoryBus::new()),
        Arc::new(NoActivity),
        Duration::from_secs(300),
    );
    let p = Principal {
        tenant,
        role: Role::Developer,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    };
    let register = |name: &str, ty: &str| Body::json(&json!({"name": name, "type": ty}));
    // The seed examples alone do not know this made-up vocabulary (see the unit test); the
    // tenant's own workflow agents teach it.
    for name in [
        "zorblax ledger",
        "zorblax quantifier engine",
        "quantifier zorblax sync",
    ] {
        registry
            .register(&p, &register(name, "workflow"))
            .await
            .unwrap();
    }
    let later = registry
        .register(&p, &register("zorblax quantifier two", "custom"))
        .await
        .unwrap();
    assert_eq!(later.predicted_type.as_deref(), Some("workflow"));
});
