//! The OpenAPI 3 document served at `/openapi.json`, generated from the handlers.

use utoipa::OpenApi;

use crate::routes::health;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Steward",
        description = "Governance of AI agents: registry, policies, audit, anomalies, approvals, prompt guard.",
    ),
    paths(health::root, health::health, health::ready, health::metrics),
    components(schemas(health::RootInfo, health::Health, health::Readiness, health::Checks)),
    tags((name = "health", description = "Platform info, health and metrics")),
)]
pub struct ApiDoc;
