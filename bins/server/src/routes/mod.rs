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
pub mod schemas;
pub mod siem;
pub mod status;

pub mod registrar;

use actix_web::web;
use utoipa_swagger_ui::SwaggerUi;

use registrar::Registrar;

/// Every route of the server with its documentation, in registration order.
pub fn registrar() -> Registrar {
    use actix_web::web::to;
    let mut r = Registrar::default();
    r.add::<health::__path_root>(to(health::root))
        .add::<health::__path_health_unversioned>(to(health::health_unversioned))
        .add::<health::__path_ready_unversioned>(to(health::ready_unversioned))
        .add::<health::__path_metrics>(to(health::metrics))
        .add::<health::__path_docs_redirect>(to(health::docs_redirect))
        .add::<discovery::__path_webhook>(to(discovery::webhook))
        .add::<health::__path_health>(to(health::health))
        .add::<health::__path_ready>(to(health::ready));
    identity::routes(&mut r);
    agents::routes(&mut r);
    discovery::routes(&mut r);
    policies::routes(&mut r);
    status::routes(&mut r);
    audit::routes(&mut r);
    hitl::routes(&mut r);
    anomalies::routes(&mut r);
    guard::routes(&mut r);
    siem::routes(&mut r);
    r.add::<crate::ws::__path_connect>(to(crate::ws::connect));
    r
}

/// The routes, and the interactive documentation of the same registration.
pub fn configure(cfg: &mut web::ServiceConfig) {
    registrar().register(cfg);
    cfg.service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", crate::openapi::document()));
    // The document answers GET only; another method is a known path's 405 (contract 3), not
    // the 404 of no resource (the Swagger UI's route is guarded by the method).
    cfg.service(web::resource("/openapi.json").to(|| async {
        actix_web::HttpResponse::MethodNotAllowed()
            .insert_header((actix_web::http::header::ALLOW, "GET, HEAD"))
            .finish()
    }));
    crate::dashboard::configure(cfg);
}
