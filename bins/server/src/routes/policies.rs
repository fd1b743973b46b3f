//! Policy endpoints.

use actix_web::{web, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{created, no_content, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// `/policies/templates` and `/policies/check` are registered before `/policies/{id}`.
/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_templates>(web::to(templates));
    r.add::<__path_check>(web::to(check));
    r.add::<__path_list>(web::to(list));
    r.add::<__path_create>(web::to(create));
    r.add::<__path_get>(web::to(get));
    r.add::<__path_update>(web::to(update));
    r.add::<__path_delete>(web::to(delete));
}

/// The Rego templates.
#[utoipa::path(get, path = "/api/v1/policies/templates", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams), responses((status = 200, body = steward_core::page::Page<steward_policy::templates::Template>)))]
pub async fn templates(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.policy.templates(&caller.0, &q.0).await?)
}

/// Decide whether an agent may perform an action.
#[utoipa::path(post, path = "/api/v1/policies/check", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::PolicyCheck, content_type = "application/json", example = json!({"agent_id": "5b0e…", "action": "send_email", "resource": "mailto:ceo@example.com", "context": {"amount": 1200}})), responses((status = 200, body = steward_policy::decision::CheckResponse)))]
pub async fn check(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.policy.check(&caller.0, &body.0).await?)
}

/// List policies (priority descending).
#[utoipa::path(get, path = "/api/v1/policies", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::PolicyFilters), responses((status = 200, body = steward_core::page::Page<steward_policy::service::PolicyView>)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.policy.list(&caller.0, &q.0).await?)
}

/// Create a policy from a template or Rego source.
#[utoipa::path(post, path = "/api/v1/policies", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::CreatePolicy, content_type = "application/json", example = json!({"name": "deny-deletes", "description": "No agent deletes data", "rego": "package steward.custom

deny contains msg if { input.action == \"delete_data\"; msg := \"deletes are not allowed\" }", "is_active": true, "priority": 10})), responses((status = 409, description = "a policy with this name exists"), (status = 201, body = steward_policy::service::PolicyView), (status = 422)))]
pub async fn create(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.policy.create(&caller.0, &body.0).await?)
}

/// One policy with its Rego source.
#[utoipa::path(get, path = "/api/v1/policies/{id}", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_policy::service::PolicyView, description = "the policy")))]
pub async fn get(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.policy.get(&caller.0, &id).await?)
}

/// Update a policy (the Rego is compiled first; errors answer 422 `invalid_rego`).
#[utoipa::path(put, path = "/api/v1/policies/{id}", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::UpdatePolicy, content_type = "application/json", example = json!({"description": "Deny deletes", "is_active": true, "priority": 10})), responses((status = 200, body = steward_policy::service::PolicyView, description = "the policy"), (status = 409, description = "the name is taken")))]
pub async fn update(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.policy.update(&caller.0, &id, &body.0).await?)
}

/// Delete a policy.
#[utoipa::path(delete, path = "/api/v1/policies/{id}", tag = "policies", security(("ApiKey" = []), ("bearer" = [])), responses((status = 204)))]
pub async fn delete(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.policy.delete(&caller.0, &id).await?;
    no_content()
}
