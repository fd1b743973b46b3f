//! HITL over HTTP: decisions exactly once, and approvals bound to the exact action they
//! approve (docs/hitl.md). Every test runs on SQLite, and on PostgreSQL with
//! `TEST_DATABASE_URL`.

mod common;

use common::{Cred, TestApp, User};
use serde_json::{json, Value};

struct Setup {
    key: Cred,
    analyst: User,
    agent: String,
}

async fn setup(app: &TestApp, name: &str) -> Setup {
    let tenant = app.tenant(name).await;
    let analyst = app.user(&tenant, "security_analyst").await;
    let agent = app.agent(&tenant.key).await;
    Setup {
        key: Cred::Key(tenant.key),
        analyst,
        agent,
    }
}

async fn check(
    app: &TestApp,
    key: &Cred,
    agent: &str,
    action: &str,
    resource: &str,
    context: Value,
) -> Value {
    let r = app
        .call(
            "POST",
            "/api/v1/policies/check",
            key,
            Some(json!({"agent_id": agent, "action": action, "resource": resource, "context": context})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Creates a request for the action and approves it; answers its id.
async fn approved(
    app: &TestApp,
    s: &Setup,
    action: &str,
    resource: &str,
    context: Value,
) -> String {
    let r = app
        .call(
            "POST",
            "/api/v1/hitl/request",
            &s.key,
            Some(json!({"agent_id": s.agent, "action": action, "resource": resource, "context": context})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["approval_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let r = app
        .call(
            "POST",
            &format!("/api/v1/hitl/approve/{id}"),
            &Cred::Jwt(s.analyst.token.clone()),
            Some(json!({"approver": "alice@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    id
}

app_test!(bound_approval_is_single_use, &[], |app| {
    let s = setup(&app, "hitl-single-use").await;
    let ctx = json!({"ticket": "T-1", "records": 3});
    let first = check(
        &app,
        &s.key,
        &s.agent,
        "delete_data",
        "crm/contacts/17",
        ctx.clone(),
    )
    .await;
    assert_eq!(first["allowed"], false);
    assert_eq!(first["required_approval"], true);

    let id = approved(&app, &s, "delete_data", "crm/contacts/17", ctx.clone()).await;
    let mut with_id = ctx.clone();
    with_id["approval_id"] = json!(id);
    // Made by a user (the analyst's login), whom the entry of the used approval names.
    let allowed = check(
        &app,
        &Cred::Jwt(s.analyst.token.clone()),
        &s.agent,
        "delete_data",
        "crm/contacts/17",
        with_id.clone(),
    )
    .await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert_eq!(allowed["required_approval"], false);

    // The same approval a second time: refused, and the reason says why.
    let again = check(
        &app,
        &s.key,
        &s.agent,
        "delete_data",
        "crm/contacts/17",
        with_id,
    )
    .await;
    assert_eq!(again["allowed"], false, "{again}");
    assert_eq!(again["required_approval"], true);
    assert!(
        again["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("already used"),
        "{again}"
    );

    // The allowed check's audit entry names the approval.
    let r = app
        .call(
            "GET",
            &format!("/api/v1/audit?action=hitl.consumed&resource=hitl:{id}"),
            &s.key,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let items = r.json()["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{}", r.text());
    assert_eq!(items[0]["output"]["approval_id"], json!(id));
    assert_eq!(items[0]["agent_id"], json!(s.agent));
    assert_eq!(items[0]["user_id"], json!(s.analyst.id), "{}", r.text());
});

app_test!(approval_for_another_action_is_refused, &[], |app| {
    let s = setup(&app, "hitl-mismatch").await;
    let other_agent = {
        let Cred::Key(k) = &s.key else { unreachable!() };
        app.agent(k).await
    };
    let ctx = json!({"ticket": "T-2"});
    let id = approved(&app, &s, "delete_data", "crm/contacts/1", ctx.clone()).await;
    let with = |c: Value| {
        let mut c = c;
        c["approval_id"] = json!(id);
        c
    };
    // Each differs in one bound member; none may use the approval (and none consumes it).
    let cases = [
        (
            s.agent.as_str(),
            "export_phi",
            "crm/contacts/1",
            with(ctx.clone()),
        ),
        (
            s.agent.as_str(),
            "delete_data",
            "crm/contacts/2",
            with(ctx.clone()),
        ),
        (
            other_agent.as_str(),
            "delete_data",
            "crm/contacts/1",
            with(ctx.clone()),
        ),
        (
            s.agent.as_str(),
            "delete_data",
            "crm/contacts/1",
            with(json!({"ticket": "T-3"})),
        ),
        (
            s.agent.as_str(),
            "delete_data",
            "crm/contacts/1",
            with(json!({"ticket": "T-2", "extra": 1})),
        ),
    ];
    for (agent, action, resource, context) in cases {
        let r = check(&app, &s.key, agent, action, resource, context.clone()).await;
        assert_eq!(r["allowed"], false, "{action} {resource} {context}: {r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("approval not accepted"),
            "{r}"
        );
    }
    // `approved: true` next to a refused approval_id does not count either.
    let mut both = with(json!({"ticket": "T-9"}));
    both["approved"] = json!(true);
    let r = check(
        &app,
        &s.key,
        &s.agent,
        "delete_data",
        "crm/contacts/1",
        both,
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    // The matching check still can use it: the refused ones did not burn it.
    let r = check(
        &app,
        &s.key,
        &s.agent,
        "delete_data",
        "crm/contacts/1",
        with(ctx),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
});

app_test!(approval_of_another_tenant_is_refused, &[], |app| {
    let a = setup(&app, "hitl-tenant-a").await;
    let b = setup(&app, "hitl-tenant-b").await;
    let id = approved(&app, &a, "delete_data", "r", json!({})).await;
    // Tenant B cannot read it, decide it, or use it, even for its own agent.
    let r = app
        .call("GET", &format!("/api/v1/hitl/status/{id}"), &b.key, None)
        .await;
    r.problem(404, "not_found");
    let r = check(
        &app,
        &b.key,
        &b.agent,
        "delete_data",
        "r",
        json!({"approval_id": id}),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    // Not even for tenant A's agent id presented by tenant B.
    let r = check(
        &app,
        &b.key,
        &a.agent,
        "delete_data",
        "r",
        json!({"approval_id": id}),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
});

app_test!(
    unapproved_and_rejected_requests_do_not_approve,
    &[],
    |app| {
        let s = setup(&app, "hitl-unapproved").await;
        let r = app
            .call(
                "POST",
                "/api/v1/hitl/request",
                &s.key,
                Some(json!({"agent_id": s.agent, "action": "delete_data", "resource": "r"})),
            )
            .await;
        let id = r.json()["approval_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approval_id": id}),
        )
        .await;
        assert_eq!(r["allowed"], false, "pending must not approve: {r}");
        let r = app
            .call(
                "POST",
                &format!("/api/v1/hitl/reject/{id}"),
                &Cred::Jwt(s.analyst.token.clone()),
                Some(json!({"approver": "bob", "reason": "no ticket"})),
            )
            .await;
        assert_eq!(r.status, 200);
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approval_id": id}),
        )
        .await;
        assert_eq!(r["allowed"], false, "rejected must not approve: {r}");
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approval_id": "not-an-id"}),
        )
        .await;
        assert_eq!(r["allowed"], false, "{r}");
    }
);

app_test!(bare_approved_flag_keeps_working_by_default, &[], |app| {
    let s = setup(&app, "hitl-bare-default").await;
    let r = check(
        &app,
        &s.key,
        &s.agent,
        "delete_data",
        "r",
        json!({"approved": true}),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
});

app_test!(
    bare_approved_flag_is_refused_when_an_approval_id_is_required,
    &[("HITL_REQUIRE_APPROVAL_ID", "true")],
    |app| {
        let s = setup(&app, "hitl-require").await;
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approved": true}),
        )
        .await;
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(r["required_approval"], true);
        assert!(
            r["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("HITL_REQUIRE_APPROVAL_ID"),
            "{r}"
        );
        // A valid approval still works.
        let id = approved(&app, &s, "delete_data", "r", json!({})).await;
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approval_id": id, "approved": true}),
        )
        .await;
        assert_eq!(r["allowed"], true, "{r}");
    }
);

app_test!(
    approval_expires_after_its_ttl,
    &[("HITL_APPROVAL_TTL_SECONDS", "1")],
    |app| {
        let s = setup(&app, "hitl-ttl").await;
        let id = approved(&app, &s, "delete_data", "r", json!({})).await;
        tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
        let r = check(
            &app,
            &s.key,
            &s.agent,
            "delete_data",
            "r",
            json!({"approval_id": id}),
        )
        .await;
        assert_eq!(r["allowed"], false, "{r}");
        assert!(
            r["reason"].as_str().unwrap_or_default().contains("expired"),
            "{r}"
        );
    }
);

app_test!(concurrent_decisions_decide_once, &[], |app| {
    let s = setup(&app, "hitl-race").await;
    let other = {
        let r = app
            .call(
                "GET",
                "/api/v1/auth/me",
                &Cred::Jwt(s.analyst.token.clone()),
                None,
            )
            .await;
        assert_eq!(r.status, 200);
        s.analyst.clone()
    };
    for round in 0..5 {
        let r = app
            .call(
                "POST",
                "/api/v1/hitl/request",
                &s.key,
                Some(json!({"agent_id": s.agent, "action": "delete_data", "resource": format!("r{round}")})),
            )
            .await;
        let id = r.json()["approval_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (approve_path, reject_path) = (
            format!("/api/v1/hitl/approve/{id}"),
            format!("/api/v1/hitl/reject/{id}"),
        );
        let (jwt, key) = (
            Cred::Jwt(s.analyst.token.clone()),
            Cred::Key(other.session_key.clone()),
        );
        let approve = app.call(
            "POST",
            &approve_path,
            &jwt,
            Some(json!({"approver": "alice"})),
        );
        let reject = app.call("POST", &reject_path, &key, Some(json!({"approver": "bob"})));
        let (a, b) = futures_util::join!(approve, reject);
        let mut statuses = [a.status.as_u16(), b.status.as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{} / {}", a.text(), b.text());
        let winner = if a.status == 200 { a.json() } else { b.json() };
        let r = app
            .call("GET", &format!("/api/v1/hitl/status/{id}"), &s.key, None)
            .await;
        assert_eq!(r.json()["status"], winner["status"]);
        // Exactly one decision is audited.
        let r = app
            .call(
                "GET",
                &format!("/api/v1/audit?resource=hitl:{id}"),
                &s.key,
                None,
            )
            .await;
        assert_eq!(r.json()["total"], 1, "{}", r.text());
    }
});
