//! Policy endpoints.

use actix_web::{web, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::reply::{created, no_content, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// `/policies/templates` and `/policies/check` are registered before `/policies/{id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/policies/templates").route(web::get().to(templates)))
        .service(web::resource("/policies/check").route(web::post().to(check)))
        .service(
            web::resource("/policies")
                .route(web::get().to(list))
                .route(web::post().to(create)),
        )
        .service(
            web::resource("/policies/{id}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        );
}

/// The Rego templates.
#[utoipa::path(get, path = "/api/v1/policies/templates", tag = "policies", responses((status = 200)))]
pub async fn templates(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.policy.templates(&caller.0).await?)
}

/// Decide whether an agent may perform an action.
#[utoipa::path(post, path = "/api/v1/policies/check", tag = "policies", responses((status = 200)))]
pub async fn check(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.policy.check(&caller.0, &body.0).await?)
}

/// List policies (priority descending).
#[utoipa::path(get, path = "/api/v1/policies", tag = "policies", responses((status = 200)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.policy.list(&caller.0, &q.0).await?)
}

/// Create a policy from a template or Rego source.
#[utoipa::path(post, path = "/api/v1/policies", tag = "policies", responses((status = 201), (status = 422)))]
pub async fn create(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.policy.create(&caller.0, &body.0).await?)
}

async fn get(state: State, caller: ApiCaller, id: web::Path<String>) -> ApiResult<HttpResponse> {
    ok(state.policy.get(&caller.0, &id).await?)
}

async fn update(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.policy.update(&caller.0, &id, &body.0).await?)
}

async fn delete(state: State, caller: ApiCaller, id: web::Path<String>) -> ApiResult<HttpResponse> {
    state.policy.delete(&caller.0, &id).await?;
    no_content()
}
