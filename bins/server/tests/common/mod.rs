//! `TestApp`: the whole application in process, on an isolated database.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::body::to_bytes;
use actix_web::http::header::HeaderMap;
use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use actix_web::web;
#[allow(unused_imports)]
use serde_json::json;
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

/// A request sent through the application's service, answered as a `Reply`.
type Call =
    std::rc::Rc<dyn Fn(TestRequest) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reply>>>>;

/// The application over one test database.
pub struct TestApp {
    pub state: web::Data<AppState>,
    pub db: Option<TestDb>,
    /// The service, built at the first request and reused (building the app with its ~100
    /// routes for every request made the larger suites several times slower).
    call: std::cell::OnceCell<Call>,
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
            call: std::cell::OnceCell::new(),
        }
    }

    /// An application over a state the test started itself (a second instance, say).
    pub fn with_state(state: AppState) -> TestApp {
        TestApp {
            state: web::Data::new(state),
            db: None,
            call: std::cell::OnceCell::new(),
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
            call: std::cell::OnceCell::new(),
        }
    }

    pub fn memory_cache() -> Arc<dyn Cache> {
        Arc::new(MemoryCache::new())
    }

    pub async fn send(&self, req: TestRequest) -> Reply {
        let call = match self.call.get() {
            Some(call) => call.clone(),
            None => {
                let app = std::rc::Rc::new(test::init_service(build_app(self.state.clone())).await);
                let call: Call = std::rc::Rc::new(move |req: TestRequest| {
                    let app = app.clone();
                    Box::pin(async move {
                        let res = test::call_service(&*app, req.to_request()).await;
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
                    })
                });
                self.call.get_or_init(|| call).clone()
            }
        };
        call(req).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(TestRequest::get().uri(path)).await
    }
}

/// One test per backend: SQLite always, PostgreSQL with `TEST_DATABASE_URL`.
#[macro_export]
macro_rules! app_test {
    ($name:ident, |$app:ident| $body:block) => {
        app_test!($name, &[], |$app| $body);
    };
    // With extra settings (`&[("NAME", "value")]`).
    ($name:ident, $extra:expr, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[actix_web::test]
            async fn sqlite() {
                let db = steward_store::testing::TestDb::sqlite()
                    .await
                    .unwrap_or_else(|e| panic!("sqlite test database: {e}"));
                let $app = $crate::common::TestApp::on(db, $extra).await;
                $body
            }

            #[actix_web::test]
            async fn postgres() {
                let Some(db) = steward_store::testing::TestDb::postgres().await else {
                    eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run");
                    return;
                };
                let db = db.unwrap_or_else(|e| panic!("postgres test database: {e}"));
                let $app = $crate::common::TestApp::on(db, $extra).await;
                $body
            }
        }
    };
}

/// A credential to send with a request.
#[derive(Clone, Debug)]
pub enum Cred {
    None,
    Key(String),
    Jwt(String),
    Admin(String),
}

/// A tenant created through the API.
#[derive(Clone, Debug)]
pub struct Tenant {
    pub id: String,
    pub key: String,
}

/// A user created through the API and logged in.
#[derive(Clone, Debug)]
pub struct User {
    pub id: String,
    pub token: String,
    pub session_key: String,
}

impl TestApp {
    /// A JSON request with a credential.
    pub async fn call(&self, method: &str, path: &str, cred: &Cred, body: Option<Value>) -> Reply {
        let mut req = match method {
            "GET" => TestRequest::get(),
            "POST" => TestRequest::post(),
            "PUT" => TestRequest::put(),
            "PATCH" => TestRequest::patch(),
            "DELETE" => TestRequest::delete(),
            other => panic!("method {other}"),
        }
        .uri(path);
        req = match cred {
            Cred::None => req,
            Cred::Key(k) => req.insert_header(("x-api-key", k.as_str())),
            Cred::Jwt(t) => req.insert_header(("authorization", format!("Bearer {t}"))),
            Cred::Admin(k) => req.insert_header(("x-admin-key", k.as_str())),
        };
        if let Some(b) = body {
            req = req.set_json(b);
        }
        self.send(req).await
    }

    /// Registers an agent (a unique name) with the tenant key `key`; answers its id.
    pub async fn agent(&self, key: &str) -> String {
        let r = self
            .call(
                "POST",
                "/api/v1/agents/register",
                &Cred::Key(key.into()),
                Some(serde_json::json!({"name": format!("a-{}", uuid::Uuid::new_v4().simple())})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["id"].as_str().unwrap_or_default().to_owned()
    }

    pub async fn tenant(&self, name: &str) -> Tenant {
        let r = self
            .call(
                "POST",
                "/api/v1/tenants",
                &Cred::Admin(ADMIN_KEY.into()),
                Some(serde_json::json!({"name": name})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let b = r.json();
        Tenant {
            id: b["id"].as_str().unwrap_or_default().to_owned(),
            key: b["api_key"].as_str().unwrap_or_default().to_owned(),
        }
    }

    pub async fn login(&self, email: &str, password: &str) -> User {
        let r = self
            .call(
                "POST",
                "/api/v1/auth/login",
                &Cred::None,
                Some(serde_json::json!({"email": email, "password": password})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let b = r.json();
        User {
            id: b["user"]["id"].as_str().unwrap_or_default().to_owned(),
            token: b["access_token"].as_str().unwrap_or_default().to_owned(),
            session_key: b["api_key"].as_str().unwrap_or_default().to_owned(),
        }
    }

    pub async fn super_admin(&self) -> User {
        self.login(SUPER_EMAIL, SUPER_PASSWORD).await
    }

    /// Creates a user of `role` in `tenant` (as the super admin) and logs it in.
    pub async fn user(&self, tenant: &Tenant, role: &str) -> User {
        let sup = self.super_admin().await;
        let email = format!("{role}-{}@test.local", uuid::Uuid::new_v4().simple());
        let password = "Test-password-123";
        let r = self
            .call(
                "POST",
                "/api/v1/users",
                &Cred::Jwt(sup.token),
                Some(serde_json::json!({"email": email, "password": password, "role": role, "tenant_id": tenant.id})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        self.login(&email, password).await
    }
}
