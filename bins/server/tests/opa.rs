//! `OPA_URL` over HTTP: while OPA cannot be used, status and readiness say so and the embedded
//! engine answers checks; with the OPA harness (`TEST_OPA_URL`, started by `.ci/run`) checks
//! are decided by OPA and everything reports online.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Cred, TestApp};
use serde_json::json;
use steward_store::testing::TestDb;

async fn check(
    app: &TestApp,
    key: &str,
    agent: &str,
    context: serde_json::Value,
) -> serde_json::Value {
    let r = app
        .call(
            "POST",
            "/api/v1/policies/check",
            &Cred::Key(key.to_owned()),
            Some(json!({"agent_id": agent, "action": "read_data", "resource": "crm/contacts", "context": context})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[actix_web::test]
async fn unreachable_opa_degrades_status_and_readiness_and_checks_still_answer() {
    let db = TestDb::sqlite().await.unwrap();
    // Nothing listens on port 9 (discard) here.
    let app = TestApp::on(db, &[("OPA_URL", "http://127.0.0.1:9")]).await;
    let opa = app
        .state
        .opa
        .clone()
        .expect("OPA_URL configures the remote engine");
    assert!(!opa.try_connect().await);
    let t = app.tenant("opa-down").await;
    let status = app
        .call("GET", "/api/v1/status", &Cred::Key(t.key.clone()), None)
        .await
        .json();
    assert_eq!(status["services"]["policy_engine"], "offline", "{status}");
    assert_eq!(status["status"], "degraded");
    let ready = app.get("/health/ready").await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"]["policy_engine"], false);
    let a = app.agent(&t.key).await;
    let allowed = check(&app, &t.key, &a, json!({})).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    let denied = check(
        &app,
        &t.key,
        &a,
        json!({"personal_data": true, "purpose": "support"}),
    )
    .await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["reason"].as_str().unwrap().contains("consent"),
        "{denied}"
    );
    assert_eq!(opa.stats().fallback, 2);
}

#[actix_web::test]
async fn checks_are_decided_by_opa_when_it_answers() {
    let Ok(url) = std::env::var("TEST_OPA_URL") else {
        eprintln!("skipped: TEST_OPA_URL is not set (.ci/run starts the OPA harness)");
        return;
    };
    let db = TestDb::sqlite().await.unwrap();
    let app = TestApp::on(db, &[("OPA_URL", url.as_str())]).await;
    let opa = app.state.opa.clone().unwrap();
    assert!(opa.try_connect().await, "OPA at {url} does not answer");
    let t = app.tenant("opa-up").await;
    let status = app
        .call("GET", "/api/v1/status", &Cred::Key(t.key.clone()), None)
        .await
        .json();
    assert_eq!(status["services"]["policy_engine"], "online", "{status}");
    assert_eq!(app.get("/health/ready").await.status, 200);
    let a = app.agent(&t.key).await;
    let before = opa.stats();
    let denied = check(
        &app,
        &t.key,
        &a,
        json!({"personal_data": true, "consent": true}),
    )
    .await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["reason"].as_str().unwrap().contains("purpose"),
        "{denied}"
    );
    assert_eq!(opa.stats().remote, before.remote + 1);
    assert_eq!(opa.stats().fallback, before.fallback);
}
