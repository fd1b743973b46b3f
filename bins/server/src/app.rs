//! The actix application: middleware, routes, fallbacks.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpRequest};
use steward_core::Error;

use crate::error::ApiError;
use crate::middleware::request_context;
use crate::state::AppState;

/// Builds the application around shared state (used by `main` and by the tests' `TestApp`).
pub fn build_app(
    state: web::Data<AppState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let limit = state.settings.max_request_body_bytes;
    App::new()
        .app_data(state)
        .app_data(web::PayloadConfig::new(limit))
        .configure(crate::routes::configure)
        .default_service(web::to(not_found))
        .wrap(from_fn(crate::body_limit::body_limit))
        .wrap(from_fn(request_context))
        .wrap(from_fn(crate::middleware::head_as_get))
}

async fn not_found(req: HttpRequest) -> Result<actix_web::HttpResponse, ApiError> {
    Err(Error::not_found(format!("no resource at {}", req.path())).into())
}
