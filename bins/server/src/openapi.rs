//! The OpenAPI 3 document served at `/openapi.json`, generated from the handlers.

use utoipa::OpenApi;

use crate::routes::{agents, audit, discovery, health, identity, policies, status};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Steward",
        description = "Governance of AI agents: registry, policies, audit, anomalies, approvals, prompt guard.",
    ),
    paths(
        health::root, health::health, health::ready, health::metrics, status::status,
        identity::login, identity::logout, identity::me, identity::list_users, identity::create_user,
        identity::create_key, identity::create_tenant,
        audit::list, audit::verify, audit::log, audit::export, audit::export_async,
        agents::register, agents::list, agents::search, agents::details, agents::heartbeat,
        discovery::ingest, discovery::list, discovery::cluster, discovery::webhook,
        policies::templates, policies::check, policies::list, policies::create,
    ),
    components(schemas(health::RootInfo, health::Health, health::Readiness, health::Checks)),
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
    ),
)]
pub struct ApiDoc;
