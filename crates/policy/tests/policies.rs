//! Policy records (contract 13.1-13.4): validation, CRUD, ordering, roles, audit, events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{admin, as_role, deny_rego, failure, Harness};
use serde_json::{json, Value};
use steward_core::event::EVENTS_CHANNEL;
use steward_core::{Body, ErrorKind, EventBus, MemoryBus, Role};
use steward_policy::{templates, PolicyConfig, POLICY_CHANGES_CHANNEL};
use steward_store::db_test;

fn fields(e: &steward_core::Error) -> Vec<String> {
    e.errors.iter().map(|f| f.field.clone()).collect()
}

db_test!(defaults_are_provisioned_without_audit, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let items = h.list(t).await;
    let names: Vec<_> = items.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["gdpr", "hipaa", "fz152"]);
    for p in &items {
        assert_eq!(p.template.as_deref(), Some(p.name.as_str()));
        assert!(p.is_active && p.priority == 0);
        assert_eq!(p.rego, templates::template(&p.name).unwrap().rego);
    }
    let created: Vec<_> = items.iter().map(|p| p.created_at.clone()).collect();
    let mut sorted = created.clone();
    sorted.sort();
    assert_eq!(created, sorted);
    assert!(
        h.audit.actions(t).is_empty(),
        "provisioning writes no audit entry"
    );
});

db_test!(templates_listed_in_order, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    let page = h
        .svc
        .templates(&as_role(t, Role::Developer), &[])
        .await
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|t| t.id).collect();
    assert_eq!(ids, ["gdpr", "hipaa", "fz152", "hitl", "custom", "guard"]);
    assert_eq!(page.total, 6);
    let v = serde_json::to_value(&page).unwrap();
    assert_eq!(v["items"][3]["file"], "hitl.rego");
    assert!(v["items"][3]["rego"]
        .as_str()
        .unwrap()
        .contains("package steward.policies.hitl"));
    // Paged like every list.
    let pairs = [
        ("skip".to_owned(), "4".to_owned()),
        ("limit".to_owned(), "1".to_owned()),
    ];
    let second = h
        .svc
        .templates(&as_role(t, Role::Developer), &pairs)
        .await
        .unwrap();
    let ids: Vec<_> = second.items.iter().map(|t| t.id).collect();
    assert_eq!(
        (ids, second.total, second.skip, second.limit),
        (vec!["custom"], 6, 4, 1)
    );
    let bad = [("limit".to_owned(), "0".to_owned())];
    assert_eq!(
        failure(h.svc.templates(&as_role(t, Role::Developer), &bad).await).kind,
        ErrorKind::ValidationFailed
    );
    assert_eq!(
        failure(h.svc.templates(&as_role(t, Role::Viewer), &[]).await).kind,
        ErrorKind::Forbidden
    );
});

db_test!(create_variants, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    // From a template.
    let p = h
        .create(
            t,
            json!({"name": "approvals", "description": "HITL gate", "template": "hitl"}),
        )
        .await
        .unwrap();
    assert_eq!(p.template.as_deref(), Some("hitl"));
    assert_eq!(p.rego, templates::template("hitl").unwrap().rego);
    assert!(p.is_active && p.priority == 0 && p.description == "HITL gate");
    assert_eq!(p.created_at, p.updated_at);
    assert!(p.created_at.ends_with('Z') && p.created_at.len() == 27);
    // A `.rego` suffix is accepted and stored bare.
    let p = h
        .create(t, json!({"name": "suffix", "template": "custom.rego"}))
        .await
        .unwrap();
    assert_eq!(p.template.as_deref(), Some("custom"));
    assert_eq!(p.description, "");
    // Custom source, stored verbatim.
    let rego = deny_rego("verbatim", "no shredding", "shred", "low");
    let p = h
        .create(
            t,
            json!({"name": "verbatim", "rego": rego, "priority": 7, "is_active": false}),
        )
        .await
        .unwrap();
    assert_eq!(p.rego, rego);
    assert_eq!(
        (p.priority, p.is_active, p.template.clone()),
        (7, false, None)
    );
    assert_eq!(h.svc.get(&admin(t), &p.id).await.unwrap().rego, rego);
    // Template and rego together: the given rego with the template id.
    let p = h
        .create(t, json!({"name": "both", "template": "custom", "rego": deny_rego("both", "m", "a", "low")}))
        .await
        .unwrap();
    assert_eq!(p.template.as_deref(), Some("custom"));
    assert!(p.rego.contains("steward.policies.both"));
    // Negative and huge priorities.
    let p = h
        .create(
            t,
            json!({"name": "neg", "template": "custom", "priority": -9_000_000_000i64}),
        )
        .await
        .unwrap();
    assert_eq!(p.priority, -9_000_000_000);
});

db_test!(create_validation, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"template": "custom"}), "name"),
        (json!({"name": "x"}), "rego"),
        (json!({"name": "x", "template": "nope"}), "template"),
        (json!({"name": "x", "template": "guard"}), "template"),
        (
            json!({"name": "x", "template": "custom", "priority": "high"}),
            "priority",
        ),
        (
            json!({"name": "x", "template": "custom", "priority": 1.5}),
            "priority",
        ),
        (
            json!({"name": "x", "template": "custom", "is_active": "yes"}),
            "is_active",
        ),
        (json!({"name": "", "template": "custom"}), "name"),
        (json!({"name": "   ", "template": "custom"}), "name"),
        (
            json!({"name": "n".repeat(101), "template": "custom"}),
            "name",
        ),
        (
            json!({"name": "x", "template": "custom", "description": 5}),
            "description",
        ),
        (json!({"name": "x", "rego": 5}), "rego"),
        (json!([1, 2]), "body"),
    ];
    for (body, field) in cases {
        let e = failure(h.create(t, body.clone()).await);
        assert_eq!(e.kind, ErrorKind::ValidationFailed, "{body}");
        assert!(
            fields(&e).contains(&field.to_owned()),
            "{body}: {:?}",
            fields(&e)
        );
    }
    // Every invalid field is reported at once.
    let e = failure(
        h.create(
            t,
            json!({"template": "nope", "priority": "x", "is_active": 1}),
        )
        .await,
    );
    assert_eq!(fields(&e), ["name", "template", "is_active", "priority"]);
    // Malformed JSON is a 400.
    let bad = Body::new(Some("application/json".into()), b"{\"name\":".to_vec());
    assert_eq!(
        failure(h.svc.create(&admin(t), &bad).await).kind,
        ErrorKind::BadRequest
    );
    assert!(h.list(t).await.is_empty());
});

db_test!(invalid_rego_stores_nothing, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    let cases = [
        (
            "syntax",
            "package steward.policies.broken\n\nallow if {{{".to_owned(),
            "policy.rego:",
        ),
        (
            "package",
            "package other.place\n\nimport rego.v1\n\ndefault allow := true\n".to_owned(),
            "steward.policies",
        ),
        (
            "recursion",
            "package steward.policies.r\nimport rego.v1\nallow if x\nx if allow\n".to_owned(),
            "recursion",
        ),
        (
            "function recursion",
            "package steward.policies.f\nimport rego.v1\nf(n) := f(n)\nallow if f(1)\n".to_owned(),
            "recursion",
        ),
        (
            "unknown function",
            "package steward.policies.u\nimport rego.v1\nallow if nope(1)\n".to_owned(),
            "unknown function",
        ),
        (
            "too large",
            format!(
                "package steward.policies.big\nimport rego.v1\nallow := true\n# {}\n",
                "x".repeat(70_000)
            ),
            "bytes",
        ),
    ];
    for (what, rego, has) in cases {
        let e = failure(h.create(t, json!({"name": what, "rego": rego})).await);
        assert_eq!(e.kind, ErrorKind::InvalidRego, "{what}");
        assert_eq!(e.status(), 422);
        assert_eq!(fields(&e), ["rego"], "{what}");
        assert!(e.detail.contains(has), "{what}: {}", e.detail);
    }
    assert!(h.list(t).await.is_empty(), "nothing stored");
    assert!(h.audit.actions(t).is_empty());
});

db_test!(duplicate_names_conflict, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    let other = h.bare_tenant().await;
    h.create(t, json!({"name": "Dup", "template": "custom"}))
        .await
        .unwrap();
    let e = failure(
        h.create(t, json!({"name": "DUP", "template": "custom"}))
            .await,
    );
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.detail.contains("DUP"));
    // Names are unique per tenant only.
    h.create(other, json!({"name": "dup", "template": "custom"}))
        .await
        .unwrap();
    // Renaming onto an existing name conflicts too.
    let p = h
        .create(t, json!({"name": "second", "template": "custom"}))
        .await
        .unwrap();
    let e = failure(h.update(t, &p.id, json!({"name": "dup"})).await);
    assert_eq!(e.kind, ErrorKind::Conflict);
});

db_test!(get_update_delete, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.bare_tenant().await;
    let other = h.bare_tenant().await;
    let p = h
        .create(
            t,
            json!({"name": "p", "template": "custom", "description": "before"}),
        )
        .await
        .unwrap();
    let a = admin(t);
    // Unknown, non-UUID and other-tenant ids are 404.
    for id in ["5d8e0b1c-2a3b-4c5d-8e6f-7a8b9c0d1e2f", "12345"] {
        assert_eq!(failure(h.svc.get(&a, id).await).kind, ErrorKind::NotFound);
    }
    assert_eq!(
        failure(h.svc.get(&admin(other), &p.id).await).kind,
        ErrorKind::NotFound
    );
    assert_eq!(
        failure(h.update(other, &p.id, json!({"priority": 99})).await).kind,
        ErrorKind::NotFound
    );
    assert_eq!(
        failure(h.svc.delete(&admin(other), &p.id).await).kind,
        ErrorKind::NotFound
    );
    // A partial update.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let u = h
        .update(t, &p.id, json!({"priority": 42, "is_active": false}))
        .await
        .unwrap();
    assert_eq!((u.priority, u.is_active), (42, false));
    assert_eq!(
        (u.description.as_str(), u.rego.as_str(), u.name.as_str()),
        ("before", p.rego.as_str(), "p")
    );
    assert!(u.updated_at > p.updated_at && u.created_at == p.created_at);
    // A changed template without rego replaces the source.
    let u = h
        .update(t, &p.id, json!({"template": "hitl"}))
        .await
        .unwrap();
    assert_eq!(u.template.as_deref(), Some("hitl"));
    assert_eq!(u.rego, templates::template("hitl").unwrap().rego);
    // Invalid rego changes nothing, not even the valid fields next to it.
    let e = failure(
        h.update(
            t,
            &p.id,
            json!({"rego": "package steward.policies.x\nallow if {{{", "priority": 3}),
        )
        .await,
    );
    assert_eq!(e.kind, ErrorKind::InvalidRego);
    let after = h.svc.get(&a, &p.id).await.unwrap();
    assert_eq!((after.rego.as_str(), after.priority), (u.rego.as_str(), 42));
    // Validation precedes the lookup (422 before 404).
    let e = failure(
        h.update(
            t,
            "5d8e0b1c-2a3b-4c5d-8e6f-7a8b9c0d1e2f",
            json!({"priority": "x"}),
        )
        .await,
    );
    assert_eq!(e.kind, ErrorKind::ValidationFailed);
    // An empty update answers the policy unchanged.
    let same = h.update(t, &p.id, json!({})).await.unwrap();
    assert_eq!(same, after);
    // Delete, then it is gone.
    h.svc.delete(&a, &p.id).await.unwrap();
    assert_eq!(
        failure(h.svc.get(&a, &p.id).await).kind,
        ErrorKind::NotFound
    );
    assert_eq!(
        failure(h.svc.delete(&a, &p.id).await).kind,
        ErrorKind::NotFound
    );
    // Audit trail: created, updated twice, deleted; resource policy:<id>.
    let resource = format!("policy:{}", p.id);
    let actions: Vec<_> = h
        .audit
        .actions(t)
        .into_iter()
        .filter(|(_, r)| *r == resource)
        .map(|(a, _)| a)
        .collect();
    assert_eq!(
        actions,
        [
            "policy.created",
            "policy.updated",
            "policy.updated",
            "policy.deleted"
        ]
    );
});

db_test!(list_order_filter_and_paging, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let low = h
        .create(
            t,
            json!({"name": "low", "template": "custom", "priority": -5, "is_active": false}),
        )
        .await
        .unwrap();
    let high = h
        .create(
            t,
            json!({"name": "high", "template": "custom", "priority": 50}),
        )
        .await
        .unwrap();
    let mid = h
        .create(
            t,
            json!({"name": "mid", "template": "custom", "priority": 10, "is_active": false}),
        )
        .await
        .unwrap();
    let names: Vec<_> = h.list(t).await.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["high", "mid", "gdpr", "hipaa", "fz152", "low"]);
    let a = admin(t);
    let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let page = h
        .svc
        .list(&a, &q(&[("active_only", "true")]))
        .await
        .unwrap();
    let names: Vec<_> = page.items.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["high", "gdpr", "hipaa", "fz152"]);
    assert_eq!(page.total, 4);
    let page = h
        .svc
        .list(
            &a,
            &q(&[("active_only", "0"), ("skip", "1"), ("limit", "2")]),
        )
        .await
        .unwrap();
    assert_eq!((page.total, page.skip, page.limit), (6, 1, 2));
    assert_eq!(page.items[0].id, mid.id);
    let page = h.svc.list(&a, &q(&[("limit", "500")])).await.unwrap();
    assert_eq!(page.limit, 200);
    let e = failure(h.svc.list(&a, &q(&[("active_only", "maybe")])).await);
    assert_eq!(
        (e.kind, fields(&e)),
        (ErrorKind::ValidationFailed, vec!["active_only".to_owned()])
    );
    // Tenants see only their own policies.
    let other = h.bare_tenant().await;
    assert!(h.list(other).await.is_empty());
    let _ = (low, high);
});

db_test!(roles, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let p = h.list(t).await.remove(0);
    let agent = h.agent(t, "active", json!({})).to_string();
    let check_body = Body::json(
        &json!({"agent_id": agent, "action": "read_data", "resource": "r", "context": {}}),
    );
    let create_body = Body::json(&json!({"name": "new", "template": "custom"}));
    let update_body = Body::json(&json!({"priority": 5}));

    let viewer = as_role(t, Role::Viewer);
    assert_eq!(
        failure(h.svc.list(&viewer, &[]).await).kind,
        ErrorKind::Forbidden
    );
    assert_eq!(
        failure(h.svc.get(&viewer, &p.id).await).kind,
        ErrorKind::Forbidden
    );
    assert_eq!(
        failure(h.svc.check(&viewer, &check_body).await).kind,
        ErrorKind::Forbidden
    );
    // The role check precedes body parsing and validation.
    let junk = Body::new(Some("text/plain".into()), b"junk".to_vec());
    assert_eq!(
        failure(h.svc.check(&viewer, &junk).await).kind,
        ErrorKind::Forbidden
    );

    for role in [Role::Developer, Role::SecurityAnalyst] {
        let dev = as_role(t, role);
        assert!(h.svc.list(&dev, &[]).await.is_ok());
        assert!(h.svc.get(&dev, &p.id).await.is_ok());
        assert!(h.svc.templates(&dev, &[]).await.is_ok());
        assert!(h.svc.check(&dev, &check_body).await.is_ok());
        assert_eq!(
            failure(h.svc.create(&dev, &create_body).await).kind,
            ErrorKind::Forbidden
        );
        assert_eq!(
            failure(h.svc.update(&dev, &p.id, &update_body).await).kind,
            ErrorKind::Forbidden
        );
        assert_eq!(
            failure(h.svc.delete(&dev, &p.id).await).kind,
            ErrorKind::Forbidden
        );
    }

    let adm = as_role(t, Role::Admin);
    let created = h.svc.create(&adm, &create_body).await.unwrap();
    assert!(h.svc.update(&adm, &created.id, &update_body).await.is_ok());
    assert!(h.svc.delete(&adm, &created.id).await.is_ok());
    // The audit entries carry the acting user.
    let records = h.audit.records.lock().unwrap();
    let created_entry = records
        .iter()
        .find(|r| r.action == "policy.created")
        .unwrap();
    assert_eq!(created_entry.user_id, adm.user);
    assert_eq!(created_entry.resource, format!("policy:{}", created.id));
});

db_test!(check_validation, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    let dev = as_role(t, Role::Developer);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"action": "read_data", "resource": "r", "context": {}}),
            "agent_id",
        ),
        (
            json!({"agent_id": a, "resource": "r", "context": {}}),
            "action",
        ),
        (
            json!({"agent_id": a, "action": "read_data", "context": {}}),
            "resource",
        ),
        (
            json!({"agent_id": a, "action": "read_data", "resource": "r"}),
            "context",
        ),
        (
            json!({"agent_id": a, "action": "read_data", "resource": "r", "context": ["x"]}),
            "context",
        ),
        (
            json!({"agent_id": a, "action": "", "resource": "r", "context": {}}),
            "action",
        ),
        (
            json!({"agent_id": a, "action": "read", "resource": "", "context": {}}),
            "resource",
        ),
        (
            json!({"agent_id": 5, "action": "read", "resource": "r", "context": {}}),
            "agent_id",
        ),
    ];
    for (body, field) in cases {
        let e = failure(h.svc.check(&dev, &Body::json(&body)).await);
        assert_eq!(e.kind, ErrorKind::ValidationFailed, "{body}");
        assert!(
            fields(&e).contains(&field.to_owned()),
            "{body}: {:?}",
            fields(&e)
        );
    }
    let e = failure(h.svc.check(&dev, &Body::json(&json!({}))).await);
    assert_eq!(fields(&e), ["agent_id", "action", "resource", "context"]);
});

db_test!(check_response_and_violation_event, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    let mut events = h.bus.subscribe(EVENTS_CHANNEL).await.unwrap();
    let body = h
        .check(t, &a, "read_data", "docs/handbook", json!({}))
        .await;
    let v = serde_json::to_value(&body).unwrap();
    assert_eq!(
        v,
        json!({"allowed": true, "reason": "allowed by 3 active policies", "severity": null,
               "required_approval": false, "risk_score": 0.0, "risk": {"level": "low"},
               "anomaly": {"is_anomaly": false, "score": 0.0, "report_id": null}})
    );
    let denied = h.check(t, &a, "delete_data", "tmp/x", json!({})).await;
    assert!(!denied.allowed && denied.required_approval);
    assert_eq!(
        denied.reason,
        "human approval required: delete_data is a critical operation"
    );
    assert_eq!((denied.risk_score, denied.risk.level), (0.5, "medium"));
    let event: Value = loop {
        let raw = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .unwrap()
            .unwrap();
        let ev: Value = serde_json::from_slice(&raw).unwrap();
        if ev["kind"] == "policy.violated" {
            break ev;
        }
    };
    assert_eq!(event["tenant_id"], t.to_string());
    assert_eq!(event["severity"], "error");
    assert_eq!(
        event["data"],
        json!({"agent_id": a, "action": "delete_data", "resource": "tmp/x",
               "reason": denied.reason, "required_approval": true, "risk_score": 0.5})
    );
    // A privileged action is an anomaly (rules ≥ 0.9) and above the approval threshold.
    let body = h
        .check(t, &a, "disable_audit", "audit/config", json!({}))
        .await;
    assert!(body.anomaly.is_anomaly && body.risk.level == "critical");
    assert!(body.required_approval && body.reason.contains("exceeds the threshold 0.80"));
});

db_test!(changes_take_effect_immediately, |db| {
    let h = Harness::new(&db.pool, PolicyConfig::default());
    let t = h.tenant().await;
    let a = h.agent(t, "active", json!({})).to_string();
    assert!(
        h.check(t, &a, "shred_documents", "r", json!({}))
            .await
            .allowed
    );
    let p = h
        .create(t, json!({"name": "noshred", "rego": deny_rego("noshred", "shredding is not permitted", "shred_documents", "critical")}))
        .await
        .unwrap();
    let d = h.check(t, &a, "shred_documents", "r", json!({})).await;
    assert!(!d.allowed && d.reason.contains("shredding is not permitted"));
    assert_eq!(d.severity.as_deref(), Some("critical"));
    h.update(t, &p.id, json!({"is_active": false}))
        .await
        .unwrap();
    assert!(
        h.check(t, &a, "shred_documents", "r", json!({}))
            .await
            .allowed
    );
    h.update(t, &p.id, json!({"is_active": true}))
        .await
        .unwrap();
    assert!(
        !h.check(t, &a, "shred_documents", "r", json!({}))
            .await
            .allowed
    );
    h.svc.delete(&admin(t), &p.id).await.unwrap();
    assert!(
        h.check(t, &a, "shred_documents", "r", json!({}))
            .await
            .allowed
    );
});

db_test!(change_notices_reach_other_instances, |db| {
    let bus = Arc::new(MemoryBus::new());
    let a = Harness::with_bus(&db.pool, PolicyConfig::default(), bus.clone());
    let b = Harness::with_bus(&db.pool, PolicyConfig::default(), bus.clone());
    let mut notices = bus.subscribe(POLICY_CHANGES_CHANNEL).await.unwrap();
    let listener = tokio::spawn(b.svc.clone().listen_for_changes());
    let t = a.tenant().await;
    let agent = steward_core::AgentId::new();
    for h in [&a, &b] {
        h.agents.insert(
            t,
            steward_policy::AgentInfo {
                id: agent,
                name: "shared".into(),
                agent_type: "llm".into(),
                capabilities: vec![],
                permissions: json!({}),
                status: "active".into(),
            },
        );
    }
    let agent = agent.to_string();
    // Let the listener subscribe, then warm B's cache.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(b.check(t, &agent, "launch", "r", json!({})).await.allowed);
    a.create(
        t,
        json!({"name": "nolaunch", "rego": deny_rego("nolaunch", "no launches", "launch", "high")}),
    )
    .await
    .unwrap();
    let notice = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let raw = notices.recv().await.unwrap();
            if raw == t.to_string().into_bytes() {
                break raw;
            }
        }
    })
    .await;
    assert!(notice.is_ok(), "a change notice carries the tenant id");
    let mut denied = false;
    for _ in 0..50 {
        if !b.check(t, &agent, "launch", "r", json!({})).await.allowed {
            denied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(denied, "the other instance recompiled after the notice");
    listener.abort();
});
