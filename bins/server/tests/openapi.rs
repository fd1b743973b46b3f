//! The OpenAPI document is complete and truthful: every route the server answers is documented
//! and every documented operation is answered (contract 19.3, issue 12).

mod common;

use actix_web::test::TestRequest;
use common::TestApp;
use steward_server::routes::registrar::{compare, documented};

/// The registration and the served document list the same operations, both ways.
#[test]
fn registered_routes_and_documented_operations_are_the_same() {
    let registered = steward_server::routes::registrar().operations();
    let doc = steward_server::openapi::document();
    let (undocumented, unregistered) = compare(&registered, &documented(&doc));
    assert!(
        undocumented.is_empty(),
        "routes without documentation: {undocumented:?}"
    );
    assert!(
        unregistered.is_empty(),
        "documented but not served: {unregistered:?}"
    );
    assert!(
        registered.len() >= 100,
        "only {} operations",
        registered.len()
    );
}

/// Every documented operation is answered by its route, not by the fallback (which answers
/// 404 "no resource at …" for paths the router does not know, and 405 for another method).
#[actix_web::test]
async fn every_documented_operation_reaches_its_handler() {
    let db = steward_store::testing::TestDb::sqlite()
        .await
        .unwrap_or_else(|e| panic!("sqlite: {e}"));
    let app = TestApp::on(db, &[]).await;
    let doc = steward_server::openapi::document();
    for (method, path) in documented(&doc) {
        if path == "/api/v1/ws" {
            continue; // answers only a WebSocket handshake (tests/websocket.rs)
        }
        let concrete: String = path
            .split('/')
            .map(|seg| {
                if seg.starts_with('{') {
                    "0190c0de-0000-7000-8000-000000000000"
                } else {
                    seg
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let req = TestRequest::default()
            .method(method.parse().unwrap_or_else(|e| panic!("{method}: {e}")))
            .uri(&concrete);
        let reply = app.send(req).await;
        let status = reply.status.as_u16();
        assert_ne!(
            status, 405,
            "{method} {path}: the router has no such method"
        );
        if status == 404 {
            let body = reply.text();
            assert!(
                !body.contains("no resource at"),
                "{method} {path}: the router does not know the path: {body}"
            );
        }
    }
    // The fallback itself is what the assertions above look for.
    let reply = app.get("/api/v1/no-such-thing").await;
    assert_eq!(reply.status.as_u16(), 404);
    assert!(reply.text().contains("no resource at"));
}

/// Each operation states its security, and every operation that needs a credential documents
/// 401 and 403 as problems; operation ids are unique.
#[test]
fn every_operation_has_security_and_problem_responses() {
    let doc = serde_json::to_value(steward_server::openapi::document()).unwrap_or_default();
    let mut ids = std::collections::BTreeSet::new();
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    for (path, item) in paths {
        for (method, op) in item.as_object().cloned().unwrap_or_default() {
            let at = format!("{method} {path}");
            let security = op["security"]
                .as_array()
                .unwrap_or_else(|| panic!("{at}: no security"));
            let public = security
                .iter()
                .all(|r| r.as_object().is_some_and(|o| o.is_empty()));
            if !public {
                for status in ["401", "403"] {
                    let schema = &op["responses"][status]["content"]["application/problem+json"]
                        ["schema"]["$ref"];
                    assert_eq!(schema, "#/components/schemas/Problem", "{at}: {status}");
                }
            }
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no id"));
            assert!(ids.insert(id.to_owned()), "{at}: operation id {id} repeats");
            if method == "post" || method == "put" || method == "patch" {
                if let Some(body) = op.get("requestBody") {
                    assert!(
                        body["content"]["application/json"].get("example").is_some()
                            || body["content"]["application/json"]["schema"].is_object(),
                        "{at}: request body without schema or example"
                    );
                }
            }
        }
    }
    assert!(doc["components"]["schemas"]["Problem"]["properties"]["errors"].is_object());
    for scheme in ["ApiKey", "bearer", "AdminKey", "WebhookSignature"] {
        assert!(
            doc["components"]["securitySchemes"][scheme].is_object(),
            "{scheme}"
        );
    }
}

/// The document as JSON, for checks over its shape.
fn document_json() -> serde_json::Value {
    serde_json::to_value(steward_server::openapi::document())
        .unwrap_or_else(|e| panic!("document: {e}"))
}

/// Lists answer the one generic envelope (`Page`, composed with the item type) and take the
/// paging parameters with their bounds; request bodies and JSON successes name a schema.
#[test]
fn lists_bodies_and_successes_are_typed() {
    let doc = document_json();
    let schemas = &doc["components"]["schemas"];
    let page = &schemas["Page"];
    for field in ["items", "total", "skip", "limit"] {
        assert!(page["properties"][field].is_object(), "Page.{field}");
    }
    let mut lists = 0;
    let mut untyped = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let Some(responses) = op["responses"].as_object() else {
                continue;
            };
            if let Some(body) = op.get("requestBody") {
                for (ct, content) in body["content"].as_object().into_iter().flatten() {
                    if ct == "application/json" && content["schema"].get("$ref").is_none() {
                        untyped.push(format!("{method} {path} request"));
                    }
                }
            }
            let Some(ok) = responses.get("200").or_else(|| responses.get("201")) else {
                continue;
            };
            let schema = &ok["content"]["application/json"]["schema"];
            let reference = schema["$ref"].as_str().unwrap_or_default();
            if let Some(name) = reference.strip_prefix("#/components/schemas/Page_") {
                lists += 1;
                let composed = &schemas[format!("Page_{name}")]["allOf"];
                assert_eq!(
                    composed[0]["$ref"], "#/components/schemas/Page",
                    "{method} {path}: not the generic envelope"
                );
                let params: Vec<&str> = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                assert!(
                    params.contains(&"limit")
                        && (params.contains(&"skip") || params.contains(&"offset")),
                    "{method} {path}: a list without paging parameters ({params:?})"
                );
            }
        }
    }
    assert!(lists >= 12, "only {lists} lists use the envelope");
    assert!(
        untyped.is_empty(),
        "JSON bodies without a schema: {untyped:?}"
    );
}

/// Enumerations are schema enums drawn from the validation constants.
#[test]
fn enumerations_are_schema_enums() {
    let doc = document_json();
    let schemas = &doc["components"]["schemas"];
    let values = |schema: &str, field: &str| -> Vec<String> {
        schemas[schema]["properties"][field]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema}.{field} is not an enum"))
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        values("UserView", "role"),
        [
            "viewer",
            "developer",
            "security_analyst",
            "admin",
            "super_admin"
        ]
    );
    assert_eq!(values("SetRole", "role"), values("UserView", "role"));
    assert_eq!(
        values("GuardResult", "threat_level"),
        ["safe", "suspicious", "blocked"]
    );
    assert_eq!(values("ExportJob", "format"), ["jsonl", "json", "csv"]);
    assert_eq!(
        values("HitlRequest", "status"),
        ["pending", "approved", "rejected"]
    );
    assert_eq!(
        values("Report", "status"),
        steward_anomaly::reports::STATUSES.to_vec()
    );
    assert_eq!(
        values("AgentView", "type"),
        steward_registry::embedding::AGENT_TYPES.to_vec()
    );
    assert!(values("Task", "status").contains(&"cancelled".to_owned()));
    assert_eq!(
        values("RiskView", "level"),
        ["low", "medium", "high", "critical"]
    );
}
