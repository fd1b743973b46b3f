//! Platform info, health, readiness, metrics.

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::{AppState, CHECK_TIMEOUT};

#[derive(Serialize, ToSchema)]
pub struct RootInfo {
    name: &'static str,
    version: &'static str,
    docs: &'static str,
    dashboard: &'static str,
}

/// Platform information.
#[utoipa::path(get, path = "/", tag = "health", security(()), responses((status = 200, body = RootInfo)))]
pub async fn root() -> web::Json<RootInfo> {
    web::Json(RootInfo {
        name: "Steward",
        version: steward_core::VERSION,
        docs: "/docs",
        dashboard: "/dashboard",
    })
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    status: &'static str,
    version: &'static str,
    environment: &'static str,
}

/// Liveness: the process serves requests.
#[utoipa::path(get, path = "/api/v1/health", tag = "health", security(()), responses((status = 200, body = Health)))]
pub async fn health(state: web::Data<AppState>) -> web::Json<Health> {
    web::Json(Health {
        status: "healthy",
        version: steward_core::VERSION,
        environment: state.settings.environment.as_str(),
    })
}

/// Liveness, outside the versioned API (as `/api/v1/health`).
#[utoipa::path(get, path = "/health", tag = "health", security(()), responses((status = 200, body = Health)))]
pub async fn health_unversioned(state: web::Data<AppState>) -> web::Json<Health> {
    health(state).await
}

#[derive(Serialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checks {
    pub database: bool,
    pub cache: bool,
    pub policy_engine: bool,
}

#[derive(Serialize, ToSchema)]
pub struct Readiness {
    status: &'static str,
    checks: Checks,
}

async fn within<F: std::future::Future<Output = steward_core::Result<()>>>(
    what: &str,
    f: F,
) -> bool {
    match tokio::time::timeout(CHECK_TIMEOUT, f).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::warn!(check = what, error = %e, "readiness check failed");
            false
        }
        Err(_) => {
            tracing::warn!(check = what, "readiness check timed out");
            false
        }
    }
}

/// Runs the three dependency checks concurrently.
pub async fn checks(state: &AppState) -> Checks {
    let (database, cache) = futures_util::join!(
        within("database", state.db.ping()),
        within("cache", state.cache.ping()),
    );
    Checks {
        database,
        cache,
        // The embedded engine is always online; OPA (`OPA_URL`) when it answers.
        policy_engine: state.policy.engine().online(),
    }
}

/// Readiness: 200 when the database, cache and policy engine answer, else 503 naming the failure.
#[utoipa::path(get, path = "/api/v1/health/ready", tag = "health", security(()), responses(
    (status = 200, body = Readiness), (status = 503, body = Readiness)))]
pub async fn ready(state: web::Data<AppState>) -> HttpResponse {
    let checks = checks(&state).await;
    let all = checks.database && checks.cache && checks.policy_engine;
    let body = Readiness {
        status: if all { "ready" } else { "not_ready" },
        checks,
    };
    if all {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// Readiness, outside the versioned API (as `/api/v1/health/ready`).
#[utoipa::path(get, path = "/health/ready", tag = "health", security(()), responses(
    (status = 200, body = Readiness), (status = 503, body = Readiness)))]
pub async fn ready_unversioned(state: web::Data<AppState>) -> HttpResponse {
    ready(state).await
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "health", security(()), responses((status = 200, content_type = "text/plain")))]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    // `background_tasks_in_progress` counts queued tasks too (contract 19.4): the workers set
    // it when they claim or finish one, so a scrape reads it again, at most once a second.
    static LAST_COUNT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if LAST_COUNT.swap(now, std::sync::atomic::Ordering::Relaxed) != now {
        if let Ok(n) = steward_store::jobs::count_active(&state.db).await {
            metrics::gauge!("background_tasks_in_progress").set(n as f64);
        }
    }
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        ))
        .body(crate::metrics::render(state.metrics.as_ref()))
}

/// `/docs` → `/docs/` (the interactive documentation).
#[utoipa::path(get, path = "/docs", tag = "health", security(()), responses((status = 308, description = "to `/docs/`")))]
pub async fn docs_redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, "/docs/"))
        .finish()
}
