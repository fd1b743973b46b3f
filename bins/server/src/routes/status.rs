//! `GET /api/v1/status`: platform status for the dashboard (contract 18).

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use steward_core::clock;

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::routes::health::checks;
use crate::routes::registrar::Registrar;
use crate::routes::reply::ok;
use crate::state::AppState;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_status>(web::to(status));
    r.add::<__path_stats>(web::to(stats));
}

fn uptime(secs: u64) -> String {
    format!(
        "{}d {}h {}m {}s",
        secs / 86_400,
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

fn online(up: bool) -> &'static str {
    if up {
        "online"
    } else {
        "offline"
    }
}

fn service_state() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&["online", "offline"])
}

fn platform_state() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&["online", "degraded"])
}

/// The state of each service the platform depends on.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Services {
    #[schema(schema_with = service_state)]
    database: &'static str,
    #[schema(schema_with = service_state)]
    cache: &'static str,
    #[schema(schema_with = service_state)]
    policy_engine: &'static str,
}

/// The caller's tenant, its key masked.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusTenant {
    id: String,
    name: String,
    api_key_masked: Option<String>,
}

/// `GET /status` (contract 18).
#[derive(Serialize, utoipa::ToSchema)]
pub struct PlatformStatus {
    /// `online` when every service is, else `degraded`.
    #[schema(schema_with = platform_state)]
    status: &'static str,
    version: &'static str,
    tenant: StatusTenant,
    services: Services,
    /// `{d}d {h}h {m}m {s}s` since this instance started.
    uptime: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    timestamp: String,
}

/// One UTC day of audit activity.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DayActivity {
    /// `YYYY-MM-DD`.
    #[schema(format = Date)]
    date: String,
    count: i64,
}

/// `GET /stats` (contract 18).
#[derive(Serialize, utoipa::ToSchema)]
pub struct DashboardStats {
    total_agents: i64,
    active_policies: i64,
    total_anomalies: i64,
    pending_hitl: i64,
    /// Prompts blocked by the guard since this instance started.
    guard_blocked: u64,
    /// Mean guard validation time, milliseconds.
    guard_avg_ms: f64,
    /// `[{pattern, count}]`, most frequent first.
    guard_top_patterns: Vec<Value>,
    /// The last 7 UTC days, oldest first.
    activities: Vec<DayActivity>,
}

/// Platform status: services, tenant, uptime.
#[utoipa::path(get, path = "/api/v1/status", tag = "health", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = PlatformStatus)))]
pub async fn status(state: web::Data<AppState>, caller: ApiCaller) -> ApiResult<HttpResponse> {
    // The tenant read authorises the caller; the checks run alongside it.
    let (c, tenant) = futures_util::join!(checks(&state), state.identity.own_tenant(&caller.0));
    let tenant = tenant?;
    let all = c.database && c.cache && c.policy_engine;
    ok(PlatformStatus {
        status: if all { "online" } else { "degraded" },
        version: steward_core::VERSION,
        tenant: StatusTenant {
            id: tenant.id,
            name: tenant.name,
            api_key_masked: tenant.api_key_masked,
        },
        services: Services {
            database: online(c.database),
            cache: online(c.cache),
            policy_engine: online(c.policy_engine),
        },
        uptime: uptime(state.started.elapsed().as_secs()),
        timestamp: clock::format_timestamp(clock::now()),
    })
}

/// Dashboard statistics of the caller's tenant (contract 18): counts, guard counters and the
/// audit activity of the last 7 UTC days, oldest first.
#[utoipa::path(get, path = "/api/v1/stats", tag = "health",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = DashboardStats, description = "Statistics of the caller's tenant"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json")))]
pub async fn stats(state: web::Data<AppState>, caller: ApiCaller) -> ApiResult<HttpResponse> {
    // The activity read authorises the caller; the counts run alongside it.
    let tenant = caller.0.tenant;
    let (activity, agents, policies, pending_hitl, anomalies) = futures_util::try_join!(
        state.audit.daily_activity(&caller.0, 7),
        state.registry.count(tenant),
        state.policy.count_active(tenant),
        state.hitl.pending_count(tenant),
        state.anomaly.reports.total(tenant),
    )?;
    let (guard_blocked, guard_avg_ms, guard_top) = state.guard.dashboard(tenant);
    let activities = activity
        .into_iter()
        .map(|(day, count)| DayActivity {
            date: day.to_string(),
            count,
        })
        .collect();
    ok(DashboardStats {
        total_agents: agents,
        active_policies: policies,
        total_anomalies: anomalies,
        pending_hitl,
        guard_blocked,
        guard_avg_ms,
        guard_top_patterns: guard_top,
        activities,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn uptime_format() {
        assert_eq!(super::uptime(0), "0d 0h 0m 0s");
        assert_eq!(super::uptime(90_061), "1d 1h 1m 1s");
    }
}
