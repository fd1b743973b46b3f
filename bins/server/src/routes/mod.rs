//! Route registration: one `configure` per area.

pub mod agents;
pub mod anomalies;
pub mod audit;
pub mod discovery;
pub mod guard;
pub mod health;
pub mod hitl;
pub mod identity;
pub mod policies;
pub mod reply;
pub mod siem;
pub mod status;

use actix_web::web;
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;

use crate::openapi::ApiDoc;

/// Everything outside `/api/v1` plus the versioned API.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/").route(web::get().to(health::root)))
        .service(web::resource("/health").route(web::get().to(health::health)))
        .service(web::resource("/health/ready").route(web::get().to(health::ready)))
        .service(web::resource("/metrics").route(web::get().to(health::metrics)))
        .service(web::resource("/docs").route(web::get().to(health::docs_redirect)))
        .service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", ApiDoc::openapi()))
        .service(web::resource("/webhooks/agent").route(web::post().to(discovery::webhook)))
        .service(web::scope("/api/v1").configure(api_v1));
}

/// The versioned API.
fn api_v1(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/health").route(web::get().to(health::health)))
        .service(web::resource("/health/ready").route(web::get().to(health::ready)))
        .configure(identity::configure)
        .configure(agents::configure)
        .configure(discovery::configure)
        .configure(policies::configure)
        .configure(status::configure)
        .configure(audit::configure)
        .configure(hitl::configure)
        .configure(anomalies::configure)
        .configure(guard::configure)
        .configure(siem::configure)
        .service(web::resource("/ws").route(web::get().to(crate::ws::connect)));
}
