//! The OpenAPI 3 document served at `/openapi.json`, generated from the handlers.

use utoipa::OpenApi;

use crate::routes::{
    agents, anomalies, audit, discovery, guard, health, hitl, identity, policies, siem, status,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Steward",
        description = "Governance of AI agents: registry, policies, audit, anomalies, approvals, prompt guard.",
    ),
    paths(
        health::root, health::health, health::ready, health::metrics, status::status,
        identity::login, identity::logout, identity::me, identity::sso_providers,
        identity::sso_login, identity::sso_callback, identity::sso_exchange, identity::list_users, identity::create_user,
        identity::create_key, identity::create_tenant,
        audit::list, audit::verify, audit::log, audit::export, audit::export_async,
        agents::register, agents::list, agents::search, agents::details, agents::heartbeat,
        discovery::ingest, discovery::list, discovery::cluster, discovery::webhook,
        policies::templates, policies::check, policies::list, policies::create,
        status::stats,
        hitl::request, hitl::status, hitl::pending, hitl::approve, hitl::reject,
        guard::health, guard::validate, guard::stats, guard::detector_status, guard::detector_metrics,
        guard::detector_versions, guard::feedback, guard::chat, guard::agent_chat, guard::agent_action, guard::agent_completions, crate::ws::connect,
        guard::train, guard::training_status, guard::rollback, guard::cancel,
        siem::status, siem::test,
        anomalies::report, anomalies::list, anomalies::get, anomalies::set_status, anomalies::stats,
        anomalies::detector_status, anomalies::detector_metrics, anomalies::versions,
        anomalies::feedback, anomalies::train, anomalies::training_status,
        anomalies::latest_training, anomalies::cancel, anomalies::rollback,
    ),
    components(schemas(health::RootInfo, health::Health, health::Readiness, health::Checks)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "health", description = "Platform info, health, status and metrics"),
        (name = "auth", description = "Login, logout, current user"),
        (name = "users", description = "User management"),
        (name = "api-keys", description = "Personal API keys"),
        (name = "tenants", description = "Tenant provisioning"),
        (name = "audit", description = "The signed, hash-chained audit log"),
        (name = "agents", description = "The agent registry"),
        (name = "policies", description = "Rego policies and policy checks"),
        (name = "discovery", description = "Shadow-agent discovery, integrations and inbound webhooks"),
        (name = "events", description = "Live events over WebSocket"),
        (name = "guard", description = "The prompt guard and the guarded gateway"),
        (name = "hitl", description = "Human approval of risky actions, bound to the exact action"),
        (name = "siem", description = "SIEM export status and test event"),
        (name = "anomalies", description = "Anomaly reports, scoring, and the per-tenant anomaly detector"),
    ),
)]
pub struct ApiDoc;

/// The credentials of contract 5: `ApiKey` (`X-API-Key`), `bearer` (JWT), `AdminKey`
/// (`X-Admin-Key`) and the inbound webhook signature.
struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "ApiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "A tenant key, a personal key or the session key returned by login",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
        components.add_security_scheme(
            "AdminKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Admin-Key",
                "The value of ADMIN_API_KEY (platform operations)",
            ))),
        );
        components.add_security_scheme(
            "WebhookSignature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Webhook-Signature",
                "HMAC-SHA256 of the raw body with WEBHOOK_SECRET",
            ))),
        );
    }
}
