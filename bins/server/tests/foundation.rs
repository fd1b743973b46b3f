//! HTTP behaviour of the foundation: health, readiness, root, docs, metrics, errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use actix_web::test::TestRequest;
use async_trait::async_trait;
use common::{test_settings, TestApp};
use steward_core::{Cache, Error, Result};
use steward_store::{DbPool, DbSettings, DbTarget};

app_test!(health_root_and_docs, |app| {
    for path in ["/health", "/api/v1/health"] {
        let r = app.get(path).await;
        assert_eq!(r.status, 200);
        // Contract 2: JSON bodies name their charset.
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json; charset=utf-8")
        );
        let body = r.json();
        assert_eq!(body["status"], "healthy");
        assert_eq!(body["version"], steward_core::VERSION);
        assert_eq!(body["environment"], "test");
    }
    let root = app.get("/").await.json();
    assert_eq!(root["name"], "Steward");
    assert_eq!(root["docs"], "/docs");
    assert_eq!(root["dashboard"], "/dashboard");

    let docs = app.get("/docs").await;
    assert_eq!(docs.status, 308);
    assert_eq!(docs.header("location").as_deref(), Some("/docs/"));
    let html = app.get("/docs/").await;
    assert_eq!(html.status, 200);
    assert!(html
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    // The API reference page has a CSP of its own kind: its own scripts only.
    assert_eq!(
        html.header("content-security-policy").as_deref(),
        Some(steward_server::middleware::PAGE_CSP)
    );

    let spec = app.get("/openapi.json").await.json();
    assert!(spec["openapi"]
        .as_str()
        .unwrap_or_default()
        .starts_with("3."));
    assert!(
        spec["paths"]["/api/v1/health/ready"].is_object(),
        "{}",
        spec["paths"]
    );

    // HEAD answers as GET does, without a body (RFC 9110 §9.3.2): health checkers probe so.
    for path in [
        "/health",
        "/api/v1/health/ready",
        "/openapi.json",
        "/dashboard",
    ] {
        let get = app.get(path).await;
        let head = app
            .send(
                TestRequest::default()
                    .method(actix_web::http::Method::HEAD)
                    .uri(path),
            )
            .await;
        assert_eq!(head.status, get.status, "{path}");
        assert_eq!(
            head.header("content-type"),
            get.header("content-type"),
            "{path}"
        );
        assert!(head.body.is_empty(), "{path}");
    }
    // A path that answers only to POST still answers 405 to HEAD.
    let r = app
        .send(
            TestRequest::default()
                .method(actix_web::http::Method::HEAD)
                .uri("/api/v1/auth/login"),
        )
        .await;
    assert_eq!(r.status, 405);
});

app_test!(readiness_all_ok, |app| {
    for path in ["/health/ready", "/api/v1/health/ready"] {
        let r = app.get(path).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.json();
        assert_eq!(body["status"], "ready");
        for check in ["database", "cache", "policy_engine"] {
            assert_eq!(body["checks"][check], true, "{body}");
        }
    }
});

app_test!(errors_are_problem_documents, |app| {
    let r = app.get("/api/v1/definitely/not/here").await;
    r.problem(404, "not_found");
    app.get("/nowhere").await.problem(404, "not_found");

    let r = app.send(TestRequest::delete().uri("/health")).await;
    r.problem(405, "method_not_allowed");
    assert_eq!(r.header("allow").as_deref(), Some("GET"));
    // The OpenAPI document is a known path too (probe I F5: it answered 404).
    let r = app.send(TestRequest::post().uri("/openapi.json")).await;
    r.problem(405, "method_not_allowed");
    assert_eq!(app.get("/openapi.json").await.status, 200);

    // 413 from the declared length alone, before routing or authentication.
    let r = app
        .send(
            TestRequest::post()
                .uri("/api/v1/agents/register")
                .insert_header(("content-length", "2000000"))
                .insert_header(("content-type", "application/json")),
        )
        .await;
    r.problem(413, "payload_too_large");
});

app_test!(request_ids, |app| {
    let r = app.get("/health").await;
    let id = r.header("x-request-id").unwrap_or_default();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let r = app
        .send(
            TestRequest::get()
                .uri("/health")
                .insert_header(("x-request-id", "trace-abc-123")),
        )
        .await;
    assert_eq!(r.header("x-request-id").as_deref(), Some("trace-abc-123"));
    // The id is also in problem bodies.
    let r = app
        .send(
            TestRequest::get()
                .uri("/missing")
                .insert_header(("x-request-id", "trace-404")),
        )
        .await;
    assert_eq!(r.problem(404, "not_found")["request_id"], "trace-404");
});

app_test!(metrics_families_from_start, |app| {
    let r = app.get("/metrics").await;
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain") && ct.contains("version=0.0.4"),
        "{ct}"
    );
    let text = r.text();
    for f in steward_server::metrics::FAMILIES {
        assert!(
            text.contains(&format!("# TYPE {} ", f.name)),
            "{} missing",
            f.name
        );
    }
    assert!(text.contains("shadow_candidates_total 0"));
    assert!(text.contains("shadow_time_to_confirm_seconds_count 0"));
});

/// A cache that never answers.
struct DeadCache;

#[async_trait]
impl Cache for DeadCache {
    async fn get(&self, _: &str) -> Result<Option<Vec<u8>>> {
        Err(Error::internal_msg("down"))
    }
    async fn set(&self, _: &str, _: &[u8], _: Option<Duration>) -> Result<()> {
        Err(Error::internal_msg("down"))
    }
    async fn set_nx(&self, _: &str, _: &[u8], _: Option<Duration>) -> Result<bool> {
        Err(Error::internal_msg("down"))
    }
    async fn delete(&self, _: &str) -> Result<bool> {
        Err(Error::internal_msg("down"))
    }
    async fn take(&self, _: &str) -> Result<Option<Vec<u8>>> {
        Err(Error::internal_msg("down"))
    }
    async fn incr(&self, _: &str, _: i64, _: Option<Duration>) -> Result<i64> {
        Err(Error::internal_msg("down"))
    }
    async fn ping(&self) -> Result<()> {
        Err(Error::internal_msg("down"))
    }
    fn kind(&self) -> &'static str {
        "dead"
    }
}

#[actix_web::test]
async fn readiness_names_an_unreachable_database() {
    // Nothing listens on port 1: every connection attempt is refused.
    let target = DbTarget::Postgres("postgres://steward@127.0.0.1:1/steward".into());
    let settings = DbSettings {
        max_connections: 2,
        timeout: Duration::from_millis(500),
    };
    let pool = DbPool::new(&target, &settings).unwrap_or_else(|e| panic!("{e}"));
    let app = TestApp::from_parts(test_settings(&[]), pool, TestApp::memory_cache());
    let started = std::time::Instant::now();
    let r = app.get("/health/ready").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    let body = r.json();
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["checks"]["database"], false);
    assert_eq!(body["checks"]["cache"], true);
    // Liveness is unaffected.
    assert_eq!(app.get("/health").await.status, 200);
}

#[actix_web::test]
async fn readiness_names_an_unreachable_cache() {
    let db = steward_store::testing::TestDb::sqlite()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let app = TestApp::from_parts(test_settings(&[]), db.pool.clone(), Arc::new(DeadCache));
    let r = app.get("/api/v1/health/ready").await;
    assert_eq!(r.status, 503);
    let body = r.json();
    assert_eq!(body["checks"]["cache"], false);
    assert_eq!(body["checks"]["database"], true);
}
