//! Discovery, integrations and inbound webhooks.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::reply::{accepted, created, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/discovery/ingest").route(web::post().to(ingest)))
        .service(web::resource("/discovery/ingest/batch").route(web::post().to(ingest_batch)))
        .service(web::resource("/discovery/candidates").route(web::get().to(list)))
        .service(web::resource("/discovery/candidates/{id}/confirm").route(web::post().to(confirm)))
        .service(web::resource("/discovery/candidates/{id}/dismiss").route(web::post().to(dismiss)))
        .service(web::resource("/discovery/cluster").route(web::post().to(cluster)))
        .service(web::resource("/discovery/cluster/{id}").route(web::get().to(cluster_status)))
        .service(web::resource("/integrations/{name}/status").route(web::get().to(integration)));
}

/// Report activity of a possibly unregistered agent (201 new candidate, 200 merged).
#[utoipa::path(post, path = "/api/v1/discovery/ingest", tag = "discovery", responses((status = 201), (status = 200)))]
pub async fn ingest(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    let (candidate, is_new) = state.discovery.ingest(&caller.0, &body.0).await?;
    if is_new {
        created(candidate)
    } else {
        ok(candidate)
    }
}

async fn ingest_batch(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.discovery.ingest_batch(&caller.0, &body.0).await?)
}

/// List candidates (`status` = pending by default).
#[utoipa::path(get, path = "/api/v1/discovery/candidates", tag = "discovery", responses((status = 200)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.discovery.list(&caller.0, &q.0).await?)
}

async fn confirm(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.confirm(&caller.0, &id, &body.0).await?)
}

async fn dismiss(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.dismiss(&caller.0, &id).await?)
}

/// Start a clustering task (202).
#[utoipa::path(post, path = "/api/v1/discovery/cluster", tag = "discovery", responses((status = 202)))]
pub async fn cluster(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    accepted(state.discovery.start_cluster(&caller.0, &body.0).await?)
}

async fn cluster_status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.cluster_status(&caller.0, &id).await?)
}

async fn integration(
    state: State,
    caller: ApiCaller,
    name: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.discovery.integration_status(&caller.0, &name).await?)
}

/// Inbound agent events: `X-API-Key` and `X-Webhook-Signature` (HMAC-SHA256 of the raw body).
#[utoipa::path(post, path = "/webhooks/agent", tag = "discovery", responses((status = 202)))]
pub async fn webhook(
    state: State,
    caller: ApiCaller,
    req: HttpRequest,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    let signature = req
        .headers()
        .get("x-webhook-signature")
        .and_then(|v| v.to_str().ok());
    accepted(crate::webhooks::receive(&state, &caller.0, signature, &body.0).await?)
}
