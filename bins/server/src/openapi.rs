//! The OpenAPI 3 document served at `/openapi.json`, generated from the handlers.

use utoipa::OpenApi;

use crate::routes::health;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Steward",
        description = "Governance of AI agents: registry, policies, audit, anomalies, approvals, prompt guard.",
    ),
    components(schemas(health::RootInfo, health::Health, health::Readiness, health::Checks, Problem, ProblemField)),
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

/// The OpenAPI document: info, tags and components from `ApiDoc`, every operation from the
/// route registration (`routes::registrar`), then the conventions applied to each operation.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    let (paths, schemas) = crate::routes::registrar().into_documentation();
    doc.paths.merge(paths);
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, schema) in schemas {
        components.schemas.entry(name).or_insert(schema);
    }
    utoipa::Modify::modify(&Conventions, &mut doc);
    doc
}

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

/// An RFC 9457 problem (contract 3), the body of every error response.
#[derive(utoipa::ToSchema)]
#[schema(example = json!({"type": "urn:steward:error:validation_failed",
    "title": "Validation failed", "status": 422,
    "detail": "the request has invalid fields", "code": "validation_failed",
    "request_id": "0b7c…",
    "errors": [{"field": "agent_id", "message": "is required"}]}))]
#[allow(dead_code)]
pub struct Problem {
    /// `urn:steward:error:{code}`.
    #[schema(rename = "type")]
    kind: String,
    title: String,
    status: u16,
    detail: String,
    /// The machine-readable error code (contract 3), e.g. `not_found`, `validation_failed`.
    code: String,
    /// The request's `X-Request-ID`.
    request_id: Option<String>,
    /// The invalid fields (422 `validation_failed` only).
    errors: Option<Vec<ProblemField>>,
}

/// One invalid field of a 422 problem.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ProblemField {
    field: String,
    message: String,
}

/// Conventions applied to every operation, so that no operation can lack them:
/// - security: `ApiKey` or `bearer` unless the operation names its own (`security(())` marks a
///   public operation);
/// - a path parameter for each `{name}` of the path that the operation does not describe;
/// - problem responses (`application/problem+json`, schema `Problem`) for the statuses every
///   operation of its kind can answer: 401/403 when a credential is needed, 404 with path
///   parameters, 408/413/422 with a request body, 422 with query parameters, 503 always (a store is
///   unavailable), unless the operation documents that status itself.
struct Conventions;

impl utoipa::Modify for Conventions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::schema::Schema;
        use utoipa::openapi::security::SecurityRequirement;
        use utoipa::openapi::{ContentBuilder, Ref, Required, ResponseBuilder};

        let default_security = vec![
            SecurityRequirement::new("ApiKey", Vec::<String>::new()),
            SecurityRequirement::new("bearer", Vec::<String>::new()),
        ];
        let problem = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                )
                .build()
        };
        let mut operation_ids = std::collections::BTreeSet::new();
        for (path, item) in openapi.paths.paths.iter_mut() {
            let names: Vec<String> = path
                .split('/')
                .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
                .map(str::to_owned)
                .collect();
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            let methods = ["get", "put", "post", "delete", "patch"];
            for (method, op) in methods.into_iter().zip(ops) {
                let Some(op) = op.as_mut() else { continue };
                // Unique operation ids (handler names repeat across areas: `list`, `get`).
                let tag = op
                    .tags
                    .as_ref()
                    .and_then(|t| t.first())
                    .cloned()
                    .unwrap_or_default();
                let base = op.operation_id.clone().unwrap_or_default();
                let mut id = format!("{}_{base}", tag.replace('-', "_"));
                if !operation_ids.insert(id.clone()) {
                    id = format!("{method}_{}", path.replace(['/', '{', '}', '-'], "_"));
                    operation_ids.insert(id.clone());
                }
                op.operation_id = Some(id);
                let security = op.security.get_or_insert_with(|| default_security.clone());
                let public = security
                    .iter()
                    .all(|r| *r == SecurityRequirement::default());
                let params = op.parameters.get_or_insert_with(Vec::new);
                for name in &names {
                    let described = params
                        .iter()
                        .any(|p| p.name == *name && p.parameter_in == ParameterIn::Path);
                    if !described {
                        params.push(
                            ParameterBuilder::new()
                                .name(name.clone())
                                .parameter_in(ParameterIn::Path)
                                .required(Required::True)
                                .description(Some(format!("the {name}")))
                                .schema(Some(
                                    utoipa::openapi::ObjectBuilder::new()
                                        .schema_type(utoipa::openapi::schema::Type::String)
                                        .min_length(Some(1))
                                        .max_length(Some(200)),
                                ))
                                .build(),
                        );
                    }
                }
                let has_query = params.iter().any(|p| p.parameter_in == ParameterIn::Query);
                if params.is_empty() {
                    op.parameters = None;
                }
                let mut statuses: Vec<(&str, &str)> = Vec::new();
                if !public {
                    statuses.push(("401", "missing or invalid credentials"));
                    statuses.push(("403", "the role or the tenant does not allow it"));
                }
                if !names.is_empty() {
                    statuses.push(("404", "no such resource in the caller's tenant"));
                }
                if op.request_body.is_some() {
                    statuses.push((
                        "408",
                        "the body did not arrive within REQUEST_BODY_TIMEOUT_SECONDS",
                    ));
                    statuses.push(("413", "the body is larger than MAX_REQUEST_BODY_BYTES"));
                }
                if op.request_body.is_some() || has_query {
                    statuses.push(("422", "invalid fields (listed in `errors`)"));
                }
                statuses.push(("503", "the database or cache is unavailable"));
                // An optional body is documented as its schema with `required: false`, not
                // as `oneOf: [null, schema]` (a JSON `null` body is not what is meant).
                if let Some(body) = op.request_body.as_mut() {
                    for content in body.content.values_mut() {
                        if let Some(utoipa::openapi::RefOr::T(Schema::OneOf(one))) = &content.schema
                        {
                            let not_null: Vec<_> = one
                                .items
                                .iter()
                                .filter(|s| !is_null_schema(s))
                                .cloned()
                                .collect();
                            if not_null.len() == 1 && one.items.len() == 2 {
                                content.schema = not_null.into_iter().next();
                            }
                        }
                    }
                }
                let responses = &mut op.responses.responses;
                for (status, response) in responses.iter_mut() {
                    if let utoipa::openapi::RefOr::T(r) = response {
                        if r.description.is_empty() {
                            r.description = default_description(status).to_owned();
                        }
                    }
                }
                for (status, description) in statuses {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| problem(description).into());
                }
                // Documented error statuses without a body get the problem schema.
                for (status, response) in responses.iter_mut() {
                    let is_error = status.starts_with('4') || status.starts_with('5');
                    if let (true, utoipa::openapi::RefOr::T(r)) = (is_error, response) {
                        if r.content.is_empty()
                            || r.content.contains_key("application/problem+json")
                                && r.content["application/problem+json"].schema.is_none()
                        {
                            r.content.insert(
                                "application/problem+json".to_owned(),
                                ContentBuilder::new()
                                    .schema(Some(Ref::from_schema_name("Problem")))
                                    .build(),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// True for the `{"type": "null"}` member of an `Option`'s `oneOf`.
fn is_null_schema(s: &utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>) -> bool {
    use utoipa::openapi::schema::{Schema, SchemaType, Type};
    matches!(s, utoipa::openapi::RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null))
}

/// The description of a response its handler left without one.
fn default_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "202" => "Accepted: the work continues in the background",
        "204" => "No content",
        "308" => "Permanent redirect",
        _ => "See the problem document",
    }
}
