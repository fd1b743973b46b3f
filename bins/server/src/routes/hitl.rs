//! Human-in-the-loop approvals (contract 16).

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
    r.add::<__path_request>(web::to(request));
    r.add::<__path_status>(web::to(status));
    r.add::<__path_pending>(web::to(pending));
    r.add::<__path_approve>(web::to(approve));
    r.add::<__path_reject>(web::to(reject));
}

/// Ask for a human approval of one action (201, status `pending`).
#[utoipa::path(post, path = "/api/v1/hitl/request", tag = "hitl",
    security(("ApiKey" = []), ("bearer" = [])),
    request_body(content = crate::routes::schemas::HitlRequestBody, description = "`{agent_id, action, resource, context?}`",
        example = json!({"agent_id": "0192f0c4-7d4e-7b5a-9c1d-2e3f4a5b6c7d", "action": "delete_data", "resource": "crm/contacts", "context": {"reason": "GDPR erasure request"}})),
    responses((status = 201, body = steward_hitl::HitlRequest, description = "The pending request"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below developer, or the agent is suspended", content_type = "application/problem+json"),
              (status = 422, description = "Invalid field, or not an agent of this tenant", content_type = "application/problem+json")))]
pub async fn request(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.hitl.request(&caller.0, &body.0).await?)
}

/// One request and its decision.
#[utoipa::path(get, path = "/api/v1/hitl/status/{id}", tag = "hitl",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "The approval_id")),
    responses((status = 200, body = steward_hitl::HitlRequest, description = "The request"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below developer", content_type = "application/problem+json"),
              (status = 404, description = "No such request in this tenant", content_type = "application/problem+json")))]
pub async fn status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.hitl.status(&caller.0, &id).await?)
}

/// Pending requests, oldest first (security analyst or higher).
#[utoipa::path(get, path = "/api/v1/hitl/pending", tag = "hitl",
    security(("ApiKey" = []), ("bearer" = [])),
    params(steward_core::schema::PageParams),
    responses((status = 200, body = steward_core::page::Page<steward_hitl::HitlRequest>, description = "Envelope `{items, total, skip, limit}`"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 422, description = "Invalid paging", content_type = "application/problem+json")))]
pub async fn pending(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.hitl.pending(&caller.0, &q.0).await?)
}

/// Approve a pending request (exactly once; 409 when already decided).
#[utoipa::path(post, path = "/api/v1/hitl/approve/{id}", tag = "hitl",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "The approval_id")),
    request_body(content = crate::routes::schemas::HitlApproval, description = "`{approver}`", example = json!({"approver": "alice@example.com"})),
    responses((status = 200, body = steward_hitl::HitlRequest, description = "The approved request"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "No such request in this tenant", content_type = "application/problem+json"),
              (status = 409, description = "Already approved or rejected", content_type = "application/problem+json"),
              (status = 422, description = "`approver` missing or not a non-empty string", content_type = "application/problem+json")))]
pub async fn approve(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.hitl.approve(&caller.0, &id, &body.0).await?)
}

/// Reject a pending request (exactly once; 409 when already decided).
#[utoipa::path(post, path = "/api/v1/hitl/reject/{id}", tag = "hitl",
    security(("ApiKey" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "The approval_id")),
    request_body(content = crate::routes::schemas::HitlRejection, description = "`{approver, reason?}`", example = json!({"approver": "bob@example.com", "reason": "no ticket"})),
    responses((status = 200, body = steward_hitl::HitlRequest, description = "The rejected request"),
              (status = 401, description = "No or invalid credentials", content_type = "application/problem+json"),
              (status = 403, description = "Role below security_analyst", content_type = "application/problem+json"),
              (status = 404, description = "No such request in this tenant", content_type = "application/problem+json"),
              (status = 409, description = "Already approved or rejected", content_type = "application/problem+json"),
              (status = 422, description = "`approver` missing or not a non-empty string", content_type = "application/problem+json")))]
pub async fn reject(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.hitl.reject(&caller.0, &id, &body.0).await?)
}
