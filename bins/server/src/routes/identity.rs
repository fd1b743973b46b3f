//! Auth, users, API keys and tenants: extract, call the identity service, map the result.

use actix_web::{web, HttpResponse};

use crate::auth::{JwtCaller, PlatformAuth};
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::reply::{created, no_content, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/login").route(web::post().to(login)))
        .service(web::resource("/auth/logout").route(web::post().to(logout)))
        .service(web::resource("/auth/me").route(web::get().to(me)))
        .service(web::resource("/auth/sso/providers").route(web::get().to(sso_providers)))
        .service(web::resource("/auth/sso/login").route(web::get().to(sso_login)))
        .service(web::resource("/auth/sso/callback").route(web::get().to(sso_callback)))
        .service(web::resource("/auth/sso/exchange").route(web::post().to(sso_exchange)))
        .service(
            web::resource("/users/me")
                .route(web::get().to(me))
                .route(web::put().to(update_me)),
        )
        .service(web::resource("/users/me/change-password").route(web::post().to(change_password)))
        .service(
            web::resource("/users")
                .route(web::get().to(list_users))
                .route(web::post().to(create_user)),
        )
        .service(
            web::resource("/users/{id}")
                .route(web::get().to(get_user))
                .route(web::put().to(update_user))
                .route(web::delete().to(delete_user)),
        )
        .service(web::resource("/users/{id}/reset-password").route(web::post().to(reset_password)))
        .service(web::resource("/users/{id}/role").route(web::put().to(set_role)))
        .service(web::resource("/users/{id}/block").route(web::post().to(block)))
        .service(web::resource("/users/{id}/unblock").route(web::post().to(unblock)))
        .service(
            web::resource("/api-keys")
                .route(web::get().to(list_keys))
                .route(web::post().to(create_key)),
        )
        .service(web::resource("/api-keys/{id}").route(web::delete().to(revoke_key)))
        .service(
            web::resource("/tenants")
                .route(web::get().to(list_tenants))
                .route(web::post().to(create_tenant)),
        );
}

/// Log in with e-mail and password.
#[utoipa::path(post, path = "/api/v1/auth/login", tag = "auth", responses((status = 200, description = "LoginResponse")))]
pub async fn login(state: State, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.identity.login(&body.0).await?)
}

/// End the session of this access token.
#[utoipa::path(post, path = "/api/v1/auth/logout", tag = "auth", responses((status = 204)))]
pub async fn logout(state: State, caller: JwtCaller) -> ApiResult<HttpResponse> {
    state.identity.logout(&caller.0).await?;
    no_content()
}

/// The current user.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth", responses((status = 200)))]
pub async fn me(state: State, caller: JwtCaller) -> ApiResult<HttpResponse> {
    ok(state.identity.me(&caller.0).await?)
}

/// A browser redirect that no cache may keep (it carries one-time values).
fn found(location: String) -> HttpResponse {
    HttpResponse::Found()
        .insert_header((actix_web::http::header::LOCATION, location))
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// The enabled single sign-on providers (no credentials needed).
#[utoipa::path(get, path = "/api/v1/auth/sso/providers", tag = "auth", security(()),
    responses((status = 200, description = "`{providers: [{id, name, enabled}]}`")))]
pub async fn sso_providers(state: State) -> ApiResult<HttpResponse> {
    ok(serde_json::json!({"providers": state.sso.providers()}))
}

/// Start single sign-on: redirects the browser to the provider (PKCE S256, state, nonce).
#[utoipa::path(get, path = "/api/v1/auth/sso/login", tag = "auth", security(()),
    params(("provider" = String, Query, description = "provider id"),
           ("redirect" = Option<String>, Query, description = "frontend path after login (default /dashboard)")),
    responses((status = 302, description = "to the provider's authorization endpoint"),
              (status = 404, description = "unknown or disabled provider", content_type = "application/problem+json"),
              (status = 422, description = "missing provider or unsafe redirect", content_type = "application/problem+json")))]
pub async fn sso_login(state: State, q: QueryPairs) -> ApiResult<HttpResponse> {
    Ok(found(state.sso.login(&q.0).await?))
}

/// The provider's redirect back: ends in a redirect to the frontend with `sso_code`, or to
/// `/login?sso_error=REASON`.
#[utoipa::path(get, path = "/api/v1/auth/sso/callback", tag = "auth", security(()),
    params(("code" = Option<String>, Query, description = "authorization code"),
           ("state" = Option<String>, Query, description = "state from the login redirect"),
           ("error" = Option<String>, Query, description = "error sent by the provider")),
    responses((status = 302, description = "to the frontend with `sso_code`, or with `sso_error`"),
              (status = 503, description = "the cache or database is unavailable", content_type = "application/problem+json")))]
pub async fn sso_callback(state: State, q: QueryPairs) -> ApiResult<HttpResponse> {
    Ok(found(state.sso.callback(&q.0).await?))
}

/// Exchange the one-time `sso_code` for a session (`LoginResponse`).
#[utoipa::path(post, path = "/api/v1/auth/sso/exchange", tag = "auth", security(()),
    request_body(content = serde_json::Value, description = "`{code}`", example = json!({"code": "…"})),
    responses((status = 200, description = "LoginResponse"),
              (status = 401, description = "unknown, expired or used code", content_type = "application/problem+json"),
              (status = 403, description = "the user is blocked", content_type = "application/problem+json"),
              (status = 422, description = "missing code", content_type = "application/problem+json")))]
pub async fn sso_exchange(state: State, body: RawBody) -> ApiResult<HttpResponse> {
    let response = state.sso.exchange(&body.0).await?;
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(response))
}

async fn update_me(state: State, caller: JwtCaller, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.identity.update_me(&caller.0, &body.0).await?)
}

async fn change_password(
    state: State,
    caller: JwtCaller,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    state.identity.change_password(&caller.0, &body.0).await?;
    no_content()
}

/// List users (admin: own tenant; super admin: every tenant).
#[utoipa::path(get, path = "/api/v1/users", tag = "users", responses((status = 200)))]
pub async fn list_users(state: State, caller: JwtCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.identity.list_users(&caller.0, &q.0).await?)
}

/// Create a user.
#[utoipa::path(post, path = "/api/v1/users", tag = "users", responses((status = 201)))]
pub async fn create_user(
    state: State,
    caller: JwtCaller,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    created(state.identity.create_user(&caller.0, &body.0).await?)
}

async fn get_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.identity.get_user(&caller.0, &id).await?)
}

async fn update_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.identity.update_user(&caller.0, &id, &body.0).await?)
}

async fn delete_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.identity.delete_user(&caller.0, &id).await?;
    no_content()
}

async fn reset_password(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    state
        .identity
        .reset_password(&caller.0, &id, &body.0)
        .await?;
    no_content()
}

async fn set_role(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.identity.set_role(&caller.0, &id, &body.0).await?)
}

async fn block(state: State, caller: JwtCaller, id: web::Path<String>) -> ApiResult<HttpResponse> {
    ok(state.identity.set_blocked(&caller.0, &id, true).await?)
}

async fn unblock(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.identity.set_blocked(&caller.0, &id, false).await?)
}

/// Create a personal API key (the raw key is shown once).
#[utoipa::path(post, path = "/api/v1/api-keys", tag = "api-keys", responses((status = 201)))]
pub async fn create_key(state: State, caller: JwtCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.identity.create_api_key(&caller.0, &body.0).await?)
}

async fn list_keys(state: State, caller: JwtCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.identity.list_api_keys(&caller.0, &q.0).await?)
}

async fn revoke_key(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.identity.revoke_api_key(&caller.0, &id).await?;
    no_content()
}

/// Create a tenant (admin key or super admin).
#[utoipa::path(post, path = "/api/v1/tenants", tag = "tenants", responses((status = 201)))]
pub async fn create_tenant(
    state: State,
    caller: PlatformAuth,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    created(state.identity.create_tenant(&caller.0, &body.0).await?)
}

async fn list_tenants(
    state: State,
    caller: PlatformAuth,
    q: QueryPairs,
) -> ApiResult<HttpResponse> {
    ok(state.identity.list_tenants(&caller.0, &q.0).await?)
}
