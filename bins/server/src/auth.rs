//! Credential extractors. They only authenticate (401, or 403 `user_blocked`); what the caller
//! may do is decided by the services from the `Principal`.

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::FutureExt;
use steward_core::{Error, Principal};
use steward_identity::PlatformCaller;

use crate::error::ApiError;
use crate::state::AppState;

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| Error::internal_msg("application state missing").into())
}

fn header_value(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// The token of `Authorization: Bearer <token>` (other schemes are not ours: ignored).
fn bearer(req: &HttpRequest) -> Option<String> {
    let value = header_value(req, header::AUTHORIZATION.as_str())?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
        .filter(|t| !t.is_empty())
}

const MISSING: &str = "this endpoint needs an X-API-Key or an Authorization: Bearer token";

/// An API key (`X-API-Key`, used when present even if invalid) or else a JWT.
pub struct ApiCaller(pub Principal);

impl FromRequest for ApiCaller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state(req);
        let key = header_value(req, "x-api-key");
        let token = bearer(req);
        async move {
            let state = state?;
            let principal = match (key, token) {
                (Some(key), _) => state.identity.principal_from_api_key(&key).await?,
                (None, Some(token)) => state.identity.principal_from_jwt(&token).await?,
                (None, None) => return Err(Error::missing_credentials(MISSING).into()),
            };
            Ok(ApiCaller(principal))
        }
        .boxed_local()
    }
}

/// An API key only (`X-API-Key`): the guarded gateway (contract 17.6, documented as `ApiKey`
/// alone). A bearer token is a credential of a kind the route does not accept: ignored.
pub struct KeyCaller(pub Principal);

impl FromRequest for KeyCaller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state(req);
        let key = header_value(req, "x-api-key");
        async move {
            let state = state?;
            let Some(key) = key else {
                return Err(Error::missing_credentials("this endpoint needs an X-API-Key").into());
            };
            Ok(KeyCaller(
                state.identity.principal_from_api_key(&key).await?,
            ))
        }
        .boxed_local()
    }
}

/// A JWT only (`Authorization: Bearer`); API keys are ignored.
pub struct JwtCaller(pub Principal);

impl FromRequest for JwtCaller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state(req);
        let token = bearer(req);
        async move {
            let state = state?;
            let Some(token) = token else {
                return Err(Error::missing_credentials(
                    "this endpoint needs an Authorization: Bearer token",
                )
                .into());
            };
            Ok(JwtCaller(state.identity.principal_from_jwt(&token).await?))
        }
        .boxed_local()
    }
}

/// Platform administration: `X-Admin-Key`, or else a JWT (a super admin's).
pub struct PlatformAuth(pub PlatformCaller);

impl FromRequest for PlatformAuth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state(req);
        let admin_key = header_value(req, "x-admin-key");
        let token = bearer(req);
        async move {
            let state = state?;
            let caller = match (admin_key, token) {
                (Some(key), _) => state.identity.check_admin_key(&key)?,
                (None, Some(token)) => PlatformCaller::User(state.identity.principal_from_jwt(&token).await?),
                (None, None) => {
                    return Err(Error::missing_credentials(
                        "this endpoint needs X-Admin-Key or a super admin's Authorization: Bearer token",
                    )
                    .into())
                }
            };
            Ok(PlatformAuth(caller))
        }
        .boxed_local()
    }
}
