//! Anomaly reports and the anomaly detector (contract 15).

use actix_web::{web, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{created, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_report>(web::to(report));
    r.add::<__path_stats>(web::to(stats));
    r.add::<__path_detector_status>(web::to(detector_status));
    r.add::<__path_detector_metrics>(web::to(detector_metrics));
    r.add::<__path_versions>(web::to(versions));
    r.add::<__path_feedback>(web::to(feedback));
    r.add::<__path_train>(web::to(train));
    r.add::<__path_training_status>(web::to(training_status));
    r.add::<__path_latest_training>(web::to(latest_training));
    r.add::<__path_cancel>(web::to(cancel));
    r.add::<__path_rollback>(web::to(rollback));
    r.add::<__path_list>(web::to(list));
    r.add::<__path_get>(web::to(get));
    r.add::<__path_set_status>(web::to(set_status));
}

/// Report an anomaly (201); the risk is `event_data.risk_score` or the composite score.
#[utoipa::path(post, path = "/api/v1/anomalies/report", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    request_body(content = crate::routes::schemas::AnomalyReport, description = "`{agent_id?, event_data, source?}`",
        example = json!({"agent_id": null, "event_data": {"action": "disable_audit", "resource": "audit/config"}, "source": "manual"})),
    responses((status = 201, body = steward_anomaly::reports::Report, description = "The report"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below developer", content_type = "application/problem+json"),
              (status = 422, description = "Invalid field or unknown agent", content_type = "application/problem+json")))]
pub async fn report(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.anomaly.reports.create(&caller.0, &body.0).await?)
}

/// Reports, newest first, filtered by `status`, `source`, `agent_id`.
#[utoipa::path(get, path = "/api/v1/anomalies", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(steward_core::schema::PageParams, crate::routes::schemas::AnomalyFilters),
    responses((status = 200, body = steward_core::page::Page<steward_anomaly::reports::Report>, description = "Envelope `{items, total, skip, limit}`"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 422, description = "Invalid filter or paging", content_type = "application/problem+json")))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.anomaly.reports.list(&caller.0, &q.0).await?)
}

/// One report.
#[utoipa::path(get, path = "/api/v1/anomalies/{id}", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "Report id")),
    responses((status = 200, body = steward_anomaly::reports::Report, description = "The report"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "No such report in this tenant", content_type = "application/problem+json")))]
pub async fn get(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.anomaly.reports.get(&caller.0, &id).await?)
}

/// Set a report's investigation status.
#[utoipa::path(patch, path = "/api/v1/anomalies/{id}", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "Report id")),
    request_body(content = crate::routes::schemas::AnomalyStatus, description = "`{status}`", example = json!({"status": "investigating"})),
    responses((status = 200, body = steward_anomaly::reports::Report, description = "The report"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "No such report in this tenant", content_type = "application/problem+json"),
              (status = 422, description = "Unknown status", content_type = "application/problem+json")))]
pub async fn set_status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .anomaly
        .reports
        .set_status(&caller.0, &id, &body.0)
        .await?)
}

/// Report counts by status and source, average risk, last 24 hours.
#[utoipa::path(get, path = "/api/v1/anomalies/stats", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_anomaly::reports::Stats, description = "Statistics"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json")))]
pub async fn stats(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.anomaly.reports.stats(&caller.0).await?)
}

/// The tenant's detector: active version, backend, training status, samples.
#[utoipa::path(get, path = "/api/v1/anomalies/detector/status", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_anomaly::service::DetectorStatus, description = "Detector status"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json")))]
pub async fn detector_status(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.anomaly.status(&caller.0).await?)
}

/// Quality figures of the active version.
#[utoipa::path(get, path = "/api/v1/anomalies/detector/metrics", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_anomaly::service::DetectorMetrics, description = "`{model_version, precision, recall, f1, evaluated_samples}`"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json")))]
pub async fn detector_metrics(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.anomaly.metrics(&caller.0).await?)
}

/// Stored model versions, newest first.
#[utoipa::path(get, path = "/api/v1/anomalies/detector/versions", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(steward_core::schema::PageParams),
    responses((status = 200, body = steward_core::page::Page<steward_anomaly::service::VersionView>, description = "Envelope of versions"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json")))]
pub async fn versions(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.anomaly.versions(&caller.0, &q.0).await?)
}

/// A labelled sample (201); label 0 counts a false positive.
#[utoipa::path(post, path = "/api/v1/anomalies/detector/feedback", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    request_body(content = crate::routes::schemas::AnomalyFeedback, description = "`{event_data, label, source?, report_id?}`",
        example = json!({"event_data": {"action": "read_data", "resource": "crm/contacts"}, "label": 0, "source": "analyst", "report_id": null})),
    responses((status = 201, body = steward_anomaly::reports::Feedback, description = "`{id, label, source, report_id, created_at}`"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 422, description = "Invalid field or unknown report", content_type = "application/problem+json")))]
pub async fn feedback(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.anomaly.feedback(&caller.0, &body.0).await?)
}

/// Start a training task (202).
#[utoipa::path(post, path = "/api/v1/anomalies/detector/train", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 202, body = steward_store::training::Task, description = "The task"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below admin", content_type = "application/problem+json"),
              (status = 409, description = "A task is already queued or running", content_type = "application/problem+json"),
              (status = 422, description = "`insufficient_samples`", content_type = "application/problem+json")))]
pub async fn train(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    let task = state.anomaly.train(&caller.0).await?;
    Ok(HttpResponse::Accepted().json(task))
}

/// One training task.
#[utoipa::path(get, path = "/api/v1/anomalies/detector/training-status/{task_id}", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("task_id" = String, Path, description = "Task id")),
    responses((status = 200, body = steward_store::training::Task, description = "The task"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "No such task in this tenant", content_type = "application/problem+json")))]
pub async fn training_status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.anomaly.task(&caller.0, &id).await?)
}

/// The most recent training task.
#[utoipa::path(get, path = "/api/v1/anomalies/detector/training/status", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_store::training::Task, description = "The task"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "Never trained", content_type = "application/problem+json")))]
pub async fn latest_training(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.anomaly.latest_task(&caller.0).await?)
}

/// Cancel the queued or running task.
#[utoipa::path(delete, path = "/api/v1/anomalies/detector/cancel", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_store::training::Task, description = "The cancelled task"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below admin", content_type = "application/problem+json"),
              (status = 409, description = "No task queued or running", content_type = "application/problem+json")))]
pub async fn cancel(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.anomaly.cancel(&caller.0).await?)
}

/// Make a stored version active.
#[utoipa::path(post, path = "/api/v1/anomalies/detector/rollback/{version}", tag = "anomalies",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("version" = i32, Path, description = "Stored version")),
    responses((status = 200, body = steward_anomaly::service::DetectorStatus, description = "Detector status"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below admin", content_type = "application/problem+json"),
              (status = 404, description = "Unknown version", content_type = "application/problem+json"),
              (status = 409, description = "A task is queued or running", content_type = "application/problem+json")))]
pub async fn rollback(
    state: State,
    caller: ApiCaller,
    version: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.anomaly.rollback(&caller.0, &version).await?)
}
