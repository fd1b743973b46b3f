//! `TestApp`: the whole application in process, on an isolated database.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::body::to_bytes;
use actix_web::http::header::HeaderMap;
use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use actix_web::web;
use serde_json::Value;
use steward_core::{Cache, EventBus, MemoryBus, MemoryCache};
use steward_server::{build_app, AppState, Settings};
use steward_store::testing::TestDb;

pub const ADMIN_KEY: &str = "test-admin-key";
pub const SUPER_EMAIL: &str = "super@test.local";
pub const SUPER_PASSWORD: &str = "Super-Password-1";

/// The response of one request.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// Asserts a problem document of `status` and `code`; returns it.
    pub fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text());
        let ct = self.header("content-type").unwrap_or_default();
        assert!(
            ct.starts_with("application/problem+json"),
            "content-type {ct}"
        );
        let body = self.json();
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["status"], status);
        assert_eq!(body["type"], format!("urn:steward:error:{code}"));
        assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(body["detail"].as_str().is_some());
        body
    }
}

/// The application over one test database.
pub struct TestApp {
    pub state: web::Data<AppState>,
    pub db: Option<TestDb>,
}

/// The settings of a test server (the contract's conformance profile, more or less).
pub fn test_settings(extra: &[(&str, &str)]) -> Settings {
    let mut vars: BTreeMap<String, String> = [
        ("SECRET_KEY", "test-secret-key-0123456789abcdef-0123"),
        ("ADMIN_API_KEY", ADMIN_KEY),
        ("WEBHOOK_SECRET", "test-webhook-secret"),
        ("SUPER_ADMIN_EMAIL", SUPER_EMAIL),
        ("SUPER_ADMIN_PASSWORD", SUPER_PASSWORD),
        ("ENVIRONMENT", "test"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (k, v) in extra {
        vars.insert((*k).to_owned(), (*v).to_owned());
    }
    Settings::from_lookup(|name| vars.get(name).cloned()).unwrap_or_else(|e| panic!("{e}"))
}

impl TestApp {
    /// Starts the application on `db` the way `main` does (migrations, bootstrap).
    pub async fn on(db: TestDb, extra: &[(&str, &str)]) -> TestApp {
        let mut settings = test_settings(extra);
        settings.database = db.target.clone();
        let state = AppState::start(settings)
            .await
            .unwrap_or_else(|e| panic!("start: {e:#}"));
        TestApp {
            state: web::Data::new(state),
            db: Some(db),
        }
    }

    /// An application over parts built by the test (no migration, no bootstrap).
    pub fn from_parts(
        settings: Settings,
        db: steward_store::DbPool,
        cache: Arc<dyn Cache>,
    ) -> TestApp {
        let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
        TestApp {
            state: web::Data::new(
                AppState::new(settings, db, cache, bus).unwrap_or_else(|e| panic!("{e}")),
            ),
            db: None,
        }
    }

    pub fn memory_cache() -> Arc<dyn Cache> {
        Arc::new(MemoryCache::new())
    }

    pub async fn send(&self, req: TestRequest) -> Reply {
        let app = test::init_service(build_app(self.state.clone())).await;
        let res = test::call_service(&app, req.to_request()).await;
        let status = res.status();
        let headers = res.headers().clone();
        let body = to_bytes(res.into_body())
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(TestRequest::get().uri(path)).await
    }
}

/// One test per backend: SQLite always, PostgreSQL with `TEST_DATABASE_URL`.
#[macro_export]
macro_rules! app_test {
    ($name:ident, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[actix_web::test]
            async fn sqlite() {
                let db = steward_store::testing::TestDb::sqlite()
                    .await
                    .unwrap_or_else(|e| panic!("sqlite test database: {e}"));
                let $app = $crate::common::TestApp::on(db, &[]).await;
                $body
            }

            #[actix_web::test]
            async fn postgres() {
                let Some(db) = steward_store::testing::TestDb::postgres().await else {
                    eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run");
                    return;
                };
                let db = db.unwrap_or_else(|e| panic!("postgres test database: {e}"));
                let $app = $crate::common::TestApp::on(db, &[]).await;
                $body
            }
        }
    };
}
