//! Agent registry endpoints.

use actix_web::{web, HttpResponse};
use steward_core::clock::format_timestamp;

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{created, no_content, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_register>(web::to(register));
    r.add::<__path_list>(web::to(list));
    r.add::<__path_search>(web::to(search));
    r.add::<__path_get>(web::to(get));
    r.add::<__path_update>(web::to(update));
    r.add::<__path_delete>(web::to(delete));
    r.add::<__path_details>(web::to(details));
    r.add::<__path_heartbeat>(web::to(heartbeat));
    r.add::<__path_suspend>(web::to(suspend));
    r.add::<__path_resume>(web::to(resume));
}

/// Register an agent.
#[utoipa::path(post, path = "/api/v1/agents/register", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::RegisterAgent, content_type = "application/json", example = json!({"name": "invoice-bot", "type": "langchain", "capabilities": ["read_data", "send_email"], "permissions": ["invoices:read"], "version": "1.2.0"})), responses((status = 409, description = "an agent with this name exists in the tenant"), (status = 201, body = steward_registry::service::AgentView)))]
pub async fn register(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.registry.register(&caller.0, &body.0).await?)
}

/// List agents.
#[utoipa::path(get, path = "/api/v1/agents", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::AgentFilters), responses((status = 200, body = steward_core::page::Page<steward_registry::service::AgentView>)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.registry.list(&caller.0, &q.0).await?)
}

/// Semantic search over the tenant's agents.
#[utoipa::path(get, path = "/api/v1/agents/search", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::AgentSearch), responses((status = 200, body = steward_core::page::Page<crate::routes::schemas::AgentSearchHit>)))]
pub async fn search(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.registry.search(&caller.0, &q.0).await?)
}

/// One agent.
#[utoipa::path(get, path = "/api/v1/agents/{id}", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_registry::service::AgentView, description = "the agent")))]
pub async fn get(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.registry.get(&caller.0, &id).await?)
}

/// An agent with its embedding summary, recent audit entries and risk figures.
#[utoipa::path(get, path = "/api/v1/agents/{id}/details", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = AgentDetails)))]
pub async fn details(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let p = caller.0;
    let agent = state.registry.details(&p, &id).await?;
    let agent_id = agent.agent_id();
    let (recent, average, discovered) = futures_util::join!(
        state.audit.recent_entries(p.tenant, agent_id, 20),
        state.audit.mean_risk(p.tenant, agent_id, None),
        state.discovery.candidate_for_agent(p.tenant, agent_id),
    );
    ok(AgentDetails {
        agent: steward_registry::AgentView::from(&agent),
        embedding: EmbeddingSummary {
            predicted_type: agent.predicted_type.clone(),
            confidence: agent.type_confidence,
            risk_score: agent.risk_score,
            updated_at: agent.embedding_updated_at.map(|t| format_timestamp(t.0)),
        },
        recent_audit: recent?,
        average_risk_score: average?,
        anomaly_count: state
            .anomaly
            .reports
            .count_for_agent(p.tenant, agent_id.0)
            .await?,
        discovery: discovered?,
    })
}

/// The type prediction of an agent's profile embedding.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct EmbeddingSummary {
    predicted_type: Option<String>,
    /// The best similarity's share of all positive similarities.
    confidence: Option<f64>,
    risk_score: Option<f64>,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    updated_at: Option<String>,
}

/// `GET /agents/{id}/details`: the agent, its embedding summary, its 20 latest audit
/// entries, its mean risk, its anomaly count and the discovery candidate it came from.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AgentDetails {
    #[serde(flatten)]
    agent: steward_registry::AgentView,
    embedding: EmbeddingSummary,
    recent_audit: Vec<steward_audit::service::AuditEntry>,
    average_risk_score: Option<f64>,
    anomaly_count: i64,
    discovery: Option<steward_discovery::model::Candidate>,
}

/// Update an agent.
#[utoipa::path(put, path = "/api/v1/agents/{id}", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::UpdateAgent, content_type = "application/json", example = json!({"capabilities": ["read_data"], "version": "1.3.0"})), responses((status = 409, description = "another agent of the tenant has this name"), (status = 200, body = steward_registry::service::AgentView, description = "the agent")))]
pub async fn update(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.registry.update(&caller.0, &id, &body.0).await?)
}

/// Delete an agent.
#[utoipa::path(delete, path = "/api/v1/agents/{id}", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), responses((status = 204)))]
pub async fn delete(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.registry.delete(&caller.0, &id).await?;
    no_content()
}

/// Heartbeat: `{status?: active | error}`.
#[utoipa::path(post, path = "/api/v1/agents/{id}/heartbeat", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), request_body(content = Option<crate::routes::schemas::Heartbeat>, content_type = "application/json", example = json!({"status": "active"})), responses((status = 200, body = steward_registry::service::AgentView), (status = 403, description = "missing role, or the agent is suspended (`agent_suspended`)"), (status = 409, description = "the agent's status changed between its read and its write five times in a row (heartbeats of other statuses or suspensions at the same moment); retry")))]
pub async fn heartbeat(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.registry.heartbeat(&caller.0, &id, &body.0).await?)
}

/// Suspend an agent: its checks and gateway calls are refused.
#[utoipa::path(post, path = "/api/v1/agents/{id}/suspend", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_registry::service::AgentView, description = "the agent")))]
pub async fn suspend(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .registry
        .suspend_request(&caller.0, &id, &body.0)
        .await?)
}

/// Resume a suspended agent.
#[utoipa::path(post, path = "/api/v1/agents/{id}/resume", tag = "agents", security(("ApiKey" = []), ("bearer" = [])), responses((status = 409, description = "the agent is not suspended"), (status = 200, body = steward_registry::service::AgentView, description = "the agent")))]
pub async fn resume(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .registry
        .resume_request(&caller.0, &id, &body.0)
        .await?)
}
