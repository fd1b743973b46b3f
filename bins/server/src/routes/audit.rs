//! The audit log endpoints.

use actix_web::{web, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::QueryPairs;
use crate::routes::reply::ok;
use crate::state::AppState;

type State = web::Data<AppState>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/audit").route(web::get().to(list)))
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
