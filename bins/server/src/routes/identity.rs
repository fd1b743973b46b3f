//! Auth, users, API keys and tenants: extract, call the identity service, map the result.

use actix_web::{web, HttpResponse};

use crate::auth::{JwtCaller, PlatformAuth};
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{created, no_content, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_login>(web::to(login));
    r.add::<__path_logout>(web::to(logout));
    r.add::<__path_me>(web::to(me));
    r.add::<__path_sso_providers>(web::to(sso_providers));
    r.add::<__path_sso_login>(web::to(sso_login));
    r.add::<__path_sso_callback>(web::to(sso_callback));
    r.add::<__path_sso_exchange>(web::to(sso_exchange));
    r.add::<__path_users_me>(web::to(users_me));
    r.add::<__path_update_me>(web::to(update_me));
    r.add::<__path_change_password>(web::to(change_password));
    r.add::<__path_list_users>(web::to(list_users));
    r.add::<__path_create_user>(web::to(create_user));
    r.add::<__path_get_user>(web::to(get_user));
    r.add::<__path_update_user>(web::to(update_user));
    r.add::<__path_delete_user>(web::to(delete_user));
    r.add::<__path_reset_password>(web::to(reset_password));
    r.add::<__path_set_role>(web::to(set_role));
    r.add::<__path_block>(web::to(block));
    r.add::<__path_unblock>(web::to(unblock));
    r.add::<__path_list_keys>(web::to(list_keys));
    r.add::<__path_create_key>(web::to(create_key));
    r.add::<__path_revoke_key>(web::to(revoke_key));
    r.add::<__path_list_tenants>(web::to(list_tenants));
    r.add::<__path_create_tenant>(web::to(create_tenant));
}

/// Log in with e-mail and password.
#[utoipa::path(post, path = "/api/v1/auth/login", tag = "auth", security(()), request_body(content = crate::routes::schemas::Login, content_type = "application/json", example = json!({"email": "ada@example.com", "password": "Correct-horse-1"})), responses((status = 200, body = steward_identity::views::LoginResponse, description = "LoginResponse")))]
pub async fn login(state: State, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.identity.login(&body.0).await?)
}

/// End the session of this access token.
#[utoipa::path(post, path = "/api/v1/auth/logout", tag = "auth", security(("bearer" = [])), responses((status = 204)))]
pub async fn logout(state: State, caller: JwtCaller, body: RawBody) -> ApiResult<HttpResponse> {
    state.identity.logout_request(&caller.0, &body.0).await?;
    no_content()
}

/// The current user.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth", security(("bearer" = [])), responses((status = 200, body = steward_identity::views::UserView)))]
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
    responses((status = 200, body = SsoProviders, description = "The configured providers")))]
pub async fn sso_providers(state: State) -> ApiResult<HttpResponse> {
    ok(SsoProviders {
        providers: state.sso.providers(),
    })
}

/// `GET /auth/sso/providers`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct SsoProviders {
    providers: Vec<steward_identity::sso::ProviderView>,
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
    request_body(content = crate::routes::schemas::SsoExchange, description = "`{code}`", example = json!({"code": "…"})),
    responses((status = 200, body = steward_identity::views::LoginResponse, description = "LoginResponse"),
              (status = 401, description = "unknown, expired or used code", content_type = "application/problem+json"),
              (status = 403, description = "the user is blocked", content_type = "application/problem+json"),
              (status = 422, description = "missing code", content_type = "application/problem+json")))]
pub async fn sso_exchange(state: State, body: RawBody) -> ApiResult<HttpResponse> {
    let response = state.sso.exchange(&body.0).await?;
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(response))
}

/// The current user (as `GET /auth/me`).
#[utoipa::path(get, path = "/api/v1/users/me", tag = "users", security(("bearer" = [])), responses((status = 200, body = steward_identity::views::UserView, description = "the user")))]
pub async fn users_me(state: State, caller: JwtCaller) -> ApiResult<HttpResponse> {
    me(state, caller).await
}

/// Update the current user's profile.
#[utoipa::path(put, path = "/api/v1/users/me", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::UpdateMe, content_type = "application/json", example = json!({"full_name": "Ada Lovelace"})), responses((status = 200, body = steward_identity::views::UserView, description = "the user")))]
pub async fn update_me(state: State, caller: JwtCaller, body: RawBody) -> ApiResult<HttpResponse> {
    ok(state.identity.update_me(&caller.0, &body.0).await?)
}

/// Change the current user's password (409 for single sign-on users).
#[utoipa::path(post, path = "/api/v1/users/me/change-password", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::ChangePassword, content_type = "application/json", example = json!({"current_password": "Old-password-1", "new_password": "New-password-22"})), responses((status = 204), (status = 409, description = "single sign-on users have no password")))]
pub async fn change_password(
    state: State,
    caller: JwtCaller,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    state.identity.change_password(&caller.0, &body.0).await?;
    no_content()
}

/// List users (admin: own tenant; super admin: every tenant).
#[utoipa::path(get, path = "/api/v1/users", tag = "users", security(("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::UserFilters), responses((status = 200, body = steward_core::page::Page<steward_identity::views::UserView>)))]
pub async fn list_users(state: State, caller: JwtCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.identity.list_users(&caller.0, &q.0).await?)
}

/// Create a user.
#[utoipa::path(post, path = "/api/v1/users", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::CreateUser, content_type = "application/json", example = json!({"email": "ada@example.com", "password": "Correct-horse-1", "full_name": "Ada Lovelace", "role": "developer"})), responses((status = 409, description = "a user with this e-mail (or SSO subject) exists"), (status = 201, body = steward_identity::views::UserView)))]
pub async fn create_user(
    state: State,
    caller: JwtCaller,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    created(state.identity.create_user(&caller.0, &body.0).await?)
}

/// One user.
#[utoipa::path(get, path = "/api/v1/users/{id}", tag = "users", security(("bearer" = [])), responses((status = 200, body = steward_identity::views::UserView, description = "the user")))]
pub async fn get_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.identity.get_user(&caller.0, &id).await?)
}

/// Update a user.
#[utoipa::path(put, path = "/api/v1/users/{id}", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::UpdateUser, content_type = "application/json", example = json!({"full_name": "Ada Lovelace", "is_active": true})), responses((status = 200, body = steward_identity::views::UserView, description = "the user"), (status = 409, description = "the e-mail is taken")))]
pub async fn update_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.identity.update_user(&caller.0, &id, &body.0).await?)
}

/// Delete a user (its keys and sessions end).
#[utoipa::path(delete, path = "/api/v1/users/{id}", tag = "users", security(("bearer" = [])), responses((status = 204), (status = 409, description = "the caller's own account, or the user changed while the request ran (read it again)")))]
pub async fn delete_user(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.identity.delete_user(&caller.0, &id).await?;
    no_content()
}

/// Set a user's password (409 for single sign-on users).
#[utoipa::path(post, path = "/api/v1/users/{id}/reset-password", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::ResetPassword, content_type = "application/json", example = json!({"new_password": "Brand-new-pass-1"})), responses((status = 204), (status = 409, description = "single sign-on users have no password")))]
pub async fn reset_password(
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

/// Change a user's role.
#[utoipa::path(put, path = "/api/v1/users/{id}/role", tag = "users", security(("bearer" = [])), request_body(content = crate::routes::schemas::SetRole, content_type = "application/json", example = json!({"role": "security_analyst"})), responses((status = 200, body = steward_identity::views::UserView, description = "the user"), (status = 409, description = "the caller's own account, or the user changed while the request ran (read it again)")))]
pub async fn set_role(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state.identity.set_role(&caller.0, &id, &body.0).await?)
}

/// Block a user: every credential of the user is refused at once.
#[utoipa::path(post, path = "/api/v1/users/{id}/block", tag = "users", security(("bearer" = [])), responses((status = 200, body = steward_identity::views::UserView, description = "the user"), (status = 409, description = "the caller's own account, or the user changed while the request ran (read it again)")))]
pub async fn block(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .identity
        .set_blocked_request(&caller.0, &id, true, &body.0)
        .await?)
}

/// Unblock a user.
#[utoipa::path(post, path = "/api/v1/users/{id}/unblock", tag = "users", security(("bearer" = [])), responses((status = 200, body = steward_identity::views::UserView, description = "the user"), (status = 409, description = "the caller's own account, or the user changed while the request ran (read it again)")))]
pub async fn unblock(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    ok(state
        .identity
        .set_blocked_request(&caller.0, &id, false, &body.0)
        .await?)
}

/// Create a personal API key (the raw key is shown once).
#[utoipa::path(post, path = "/api/v1/api-keys", tag = "api-keys", security(("bearer" = [])), request_body(content = Option<crate::routes::schemas::CreateApiKey>, content_type = "application/json", example = json!({"name": "ci pipeline"})), responses((status = 201, body = steward_identity::views::ApiKeyView)))]
pub async fn create_key(state: State, caller: JwtCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.identity.create_api_key(&caller.0, &body.0).await?)
}

/// The caller's API keys (masked; session keys are not listed).
#[utoipa::path(get, path = "/api/v1/api-keys", tag = "api-keys", security(("bearer" = [])), params(steward_core::schema::PageParams), responses((status = 200, body = steward_core::page::Page<steward_identity::views::ApiKeyView>, description = "`{items, total, limit, offset}`")))]
pub async fn list_keys(state: State, caller: JwtCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.identity.list_api_keys(&caller.0, &q.0).await?)
}

/// Revoke an API key.
#[utoipa::path(delete, path = "/api/v1/api-keys/{id}", tag = "api-keys", security(("bearer" = [])), responses((status = 204)))]
pub async fn revoke_key(
    state: State,
    caller: JwtCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    state.identity.revoke_api_key(&caller.0, &id).await?;
    no_content()
}

/// Create a tenant (admin key or super admin).
#[utoipa::path(post, path = "/api/v1/tenants", tag = "tenants", security(("AdminKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::CreateTenant, content_type = "application/json", example = json!({"name": "acme", "settings": {}})), responses((status = 409, description = "a tenant with this name exists"), (status = 201, body = steward_identity::views::CreatedTenant)))]
pub async fn create_tenant(
    state: State,
    caller: PlatformAuth,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    created(state.identity.create_tenant(&caller.0, &body.0).await?)
}

/// List tenants (admin key or super admin).
#[utoipa::path(get, path = "/api/v1/tenants", tag = "tenants", security(("AdminKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams), responses((status = 200, body = steward_core::page::Page<steward_identity::views::TenantView>, description = "`{items, total, limit, offset}`")))]
pub async fn list_tenants(
    state: State,
    caller: PlatformAuth,
    q: QueryPairs,
) -> ApiResult<HttpResponse> {
    ok(state.identity.list_tenants(&caller.0, &q.0).await?)
}
