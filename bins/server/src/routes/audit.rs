//! The audit log endpoints.

use actix_web::{web, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::reply::{created, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/audit").route(web::get().to(list)))
        .service(web::resource("/audit/log").route(web::post().to(log)))
        .service(web::resource("/audit/verify").route(web::get().to(verify)))
        .service(web::resource("/audit/{id}").route(web::get().to(get)));
}

/// List audit entries, newest first.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit", responses((status = 200)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.audit.list(&caller.0, &q.0).await?)
}

/// Verify the tenant's hash chain and signatures.
#[utoipa::path(get, path = "/api/v1/audit/verify", tag = "audit", responses((status = 200)))]
pub async fn verify(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.audit.verify(&caller.0).await?)
}

async fn get(state: State, caller: ApiCaller, id: web::Path<String>) -> ApiResult<HttpResponse> {
    ok(state.audit.get(&caller.0, &id).await?)
}

/// Write an audit entry for an agent action.
#[utoipa::path(post, path = "/api/v1/audit/log", tag = "audit", responses((status = 201)))]
pub async fn log(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.audit.log(&caller.0, &body.0).await?)
}
