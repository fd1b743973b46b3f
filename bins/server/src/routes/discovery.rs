//! Discovery, integrations and inbound webhooks.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::auth::{ApiCaller, KeyCaller};
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{accepted, created, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_ingest>(web::to(ingest));
    r.add::<__path_ingest_batch>(web::to(ingest_batch));
    r.add::<__path_list>(web::to(list));
    r.add::<__path_confirm>(web::to(confirm));
    r.add::<__path_dismiss>(web::to(dismiss));
    r.add::<__path_cluster>(web::to(cluster));
    r.add::<__path_cluster_status>(web::to(cluster_status));
    r.add::<__path_integration>(web::to(integration));
}

/// Report activity of a possibly unregistered agent (201 new candidate, 200 merged).
#[utoipa::path(post, path = "/api/v1/discovery/ingest", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::DiscoveryEvent, content_type = "application/json", example = json!({"name": "shadow-summarizer", "source": "proxy-logs", "fingerprint": "ua:python-httpx/0.27", "type": "custom", "capabilities": ["summarize"], "evidence": {"host": "10.0.0.7"}})), responses((status = 201, body = steward_discovery::model::Candidate, description = "a new candidate"), (status = 200, body = steward_discovery::model::Candidate, description = "the event merged into an existing candidate")))]
pub async fn ingest(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    let (candidate, is_new) = state.discovery.ingest(&caller.0, &body.0).await?;
    if is_new {
        created(candidate)
    } else {
        ok(candidate)
    }
}

/// Report several observed agents at once.
#[utoipa::path(post, path = "/api/v1/discovery/ingest/batch", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::DiscoveryBatch, content_type = "application/json", example = json!({"events": [{"name": "shadow-summarizer", "source": "proxy-logs"}], "cluster": false})), responses((status = 200, body = steward_discovery::service::BatchResult, description = "per-observation results")))]
pub async fn ingest_batch(
    state: State,
    caller: ApiCaller,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.ingest_batch(&caller.0, &body.0).await?)
}

/// List candidates (`status` = pending by default).
#[utoipa::path(get, path = "/api/v1/discovery/candidates", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::CandidateFilters), responses((status = 200, body = steward_core::page::Page<steward_discovery::model::Candidate>)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.discovery.list(&caller.0, &q.0).await?)
}

/// Confirm a discovery candidate: it is registered as an agent.
#[utoipa::path(post, path = "/api/v1/discovery/candidates/{id}/confirm", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), request_body(content = Option<crate::routes::schemas::ConfirmCandidate>, content_type = "application/json"), responses((status = 200, body = steward_discovery::service::Confirmed, description = "the candidate and its agent"), (status = 409, description = "already decided")))]
pub async fn confirm(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.confirm(&caller.0, &id, &body.0).await?)
}

/// Dismiss a discovery candidate.
#[utoipa::path(post, path = "/api/v1/discovery/candidates/{id}/dismiss", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_discovery::model::Candidate, description = "the candidate"), (status = 409, description = "already decided")))]
pub async fn dismiss(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .discovery
        .dismiss_request(&caller.0, &id, &body.0)
        .await?)
}

/// Start a clustering task (202).
#[utoipa::path(post, path = "/api/v1/discovery/cluster", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), request_body(content = Option<crate::routes::schemas::ClusterRequest>, content_type = "application/json", example = json!({"threshold": 0.8})), responses((status = 202, body = steward_discovery::cluster::Task, description = "the queued task (the tenant's task already queued with the same threshold, if any)"), (status = 409, description = "a task of this tenant is queued with another threshold")))]
pub async fn cluster(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    accepted(state.discovery.start_cluster(&caller.0, &body.0).await?)
}

/// The state of a clustering job.
#[utoipa::path(get, path = "/api/v1/discovery/cluster/{id}", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_discovery::cluster::Task, description = "the job")))]
pub async fn cluster_status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.cluster_status(&caller.0, &id).await?)
}

/// Whether an integration (`agent_framework`, `model_provider`) is enabled.
#[utoipa::path(get, path = "/api/v1/integrations/{name}/status", tag = "discovery", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_discovery::service::IntegrationStatus, description = "`{integration, enabled, …}`")))]
pub async fn integration(
    state: State,
    caller: ApiCaller,
    name: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.integration_status(&caller.0, &name).await?)
}

/// Inbound agent events: `X-API-Key` and `X-Webhook-Signature` (HMAC-SHA256 of the raw body).
#[utoipa::path(post, path = "/webhooks/agent", tag = "discovery", security(("ApiKey" = [], "WebhookSignature" = [])),
    request_body(content = crate::routes::schemas::WebhookEvent, content_type = "application/json"),
    responses((status = 202, body = crate::routes::schemas::WebhookAccepted, description = "accepted"), (status = 401, description = "missing or wrong signature (`invalid_signature`) or key")))]
pub async fn webhook(
    state: State,
    // Contract 5.1 and 21: an API key binds the tenant; a bearer token is not accepted here.
    caller: KeyCaller,
    req: HttpRequest,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    let signature = req
        .headers()
        .get("x-webhook-signature")
        .and_then(|v| v.to_str().ok());
    accepted(crate::webhooks::receive(&state, &caller.0, signature, &body.0).await?)
}
