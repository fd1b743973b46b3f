//! The normative decision table of contract 13.8 (all 40 rows), shared by the tests that run
//! it through the embedded engine and through OPA.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use steward_core::TenantId;

use super::{deny_rego, Harness};

pub const OTHER: &str = "11111111-2222-4333-8444-555555555555";

#[derive(Clone, Copy, PartialEq)]
pub enum Tenants {
    Both,
    T1,
    T2,
}

/// (row, tenants, action, resource, context, allowed, required_approval, reason has)
pub type Row = (
    u32,
    Tenants,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    Option<&'static str>,
);

pub const ROWS: &[Row] = &[
    (
        1,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{}"#,
        true,
        false,
        None,
    ),
    (
        2,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "consent": true, "purpose": "support"}"#,
        true,
        false,
        None,
    ),
    (
        3,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "purpose": "support"}"#,
        false,
        false,
        Some("consent"),
    ),
    (
        4,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "consent": true}"#,
        false,
        false,
        Some("purpose"),
    ),
    (
        5,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "consent": "yes", "purpose": "support"}"#,
        false,
        false,
        Some("consent"),
    ),
    (
        6,
        Tenants::Both,
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "consent": true, "purpose": "   "}"#,
        false,
        false,
        Some("purpose"),
    ),
    (
        7,
        Tenants::Both,
        "read_phi",
        "ehr/patients/42",
        r#"{"purpose": "treatment"}"#,
        true,
        false,
        None,
    ),
    (
        8,
        Tenants::Both,
        "read_phi",
        "ehr/patients/42",
        r#"{"purpose": "marketing"}"#,
        false,
        false,
        Some("HIPAA"),
    ),
    (
        9,
        Tenants::Both,
        "read_data",
        "ehr/patients/42",
        r#"{"phi": true, "authorization": true}"#,
        true,
        false,
        None,
    ),
    (
        10,
        Tenants::Both,
        "read_data",
        "ehr/patients/42",
        r#"{"phi": true}"#,
        false,
        false,
        Some("HIPAA"),
    ),
    (
        11,
        Tenants::Both,
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment", "encrypted": true}"#,
        false,
        true,
        Some("approval"),
    ),
    (
        12,
        Tenants::Both,
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment", "encrypted": true, "approved": true}"#,
        true,
        false,
        None,
    ),
    (
        13,
        Tenants::Both,
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment"}"#,
        false,
        false,
        Some("encrypted"),
    ),
    (
        14,
        Tenants::Both,
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment", "approved": true}"#,
        false,
        false,
        Some("encrypted"),
    ),
    (
        15,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "RU", "consent": true, "purpose": "account", "storage_region": "RU"}"#,
        true,
        false,
        None,
    ),
    (
        16,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "ru", "consent": true, "purpose": "account", "storage_region": "ru"}"#,
        true,
        false,
        None,
    ),
    (
        17,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "RU", "consent": true, "purpose": "account", "storage_region": "EU"}"#,
        false,
        false,
        Some("Russia"),
    ),
    (
        18,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "RU", "consent": true, "purpose": "account"}"#,
        false,
        false,
        Some("Russia"),
    ),
    (
        19,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "RU", "purpose": "account", "storage_region": "RU"}"#,
        false,
        false,
        Some("consent"),
    ),
    (
        20,
        Tenants::Both,
        "write_data",
        "users/ru/1001",
        r#"{"data_subject_country": "RU", "consent": true, "storage_region": "RU"}"#,
        false,
        false,
        Some("purpose"),
    ),
    (
        21,
        Tenants::Both,
        "write_data",
        "users/de/7",
        r#"{"data_subject_country": "DE", "storage_region": "EU"}"#,
        true,
        false,
        None,
    ),
    (
        22,
        Tenants::Both,
        "delete_data",
        "tmp/cache",
        r#"{}"#,
        false,
        true,
        Some("approval"),
    ),
    (
        23,
        Tenants::Both,
        "delete_data",
        "tmp/cache",
        r#"{"approved": true}"#,
        true,
        false,
        None,
    ),
    (
        24,
        Tenants::Both,
        "delete_data",
        "crm/contacts",
        r#"{"personal_data": true, "purpose": "cleanup", "approved": true}"#,
        false,
        false,
        Some("consent"),
    ),
    (
        25,
        Tenants::T1,
        "export_data",
        "reports/q3",
        r#"{"records": 5000}"#,
        true,
        false,
        None,
    ),
    (
        26,
        Tenants::T2,
        "export_data",
        "reports/q3",
        r#"{"records": 500}"#,
        true,
        false,
        None,
    ),
    (
        27,
        Tenants::T2,
        "export_data",
        "reports/q3",
        r#"{"records": 5000}"#,
        false,
        true,
        Some("approval"),
    ),
    (
        28,
        Tenants::T2,
        "export_data",
        "reports/q3",
        r#"{"records": 5000, "approved": true}"#,
        true,
        false,
        None,
    ),
    (
        29,
        Tenants::T2,
        "export_data",
        "reports/q3",
        r#"{"records": "5000"}"#,
        true,
        false,
        None,
    ),
    (
        30,
        Tenants::T2,
        "change_security_policy",
        "policies/firewall",
        r#"{}"#,
        false,
        true,
        Some("approval"),
    ),
    (
        31,
        Tenants::T2,
        "change_security_policy",
        "policies/firewall",
        r#"{"approved": true}"#,
        true,
        false,
        None,
    ),
    (
        32,
        Tenants::T2,
        "read_data",
        "shared/ledger",
        r#"{"target_tenant_id": "OTHER"}"#,
        false,
        true,
        Some("approval"),
    ),
    (
        33,
        Tenants::T2,
        "read_data",
        "shared/ledger",
        r#"{"target_tenant_id": "SELF"}"#,
        true,
        false,
        None,
    ),
    (
        34,
        Tenants::T2,
        "read_data",
        "shared/ledger",
        r#"{"target_tenant_id": "OTHER", "approved": true}"#,
        true,
        false,
        None,
    ),
];

/// The row's context with `SELF` / `OTHER` replaced.
pub fn context(raw: &str, tenant: TenantId) -> Value {
    let mut v: Value = serde_json::from_str(raw).unwrap();
    if let Some(obj) = v.as_object_mut() {
        for value in obj.values_mut() {
            match value.as_str() {
                Some("SELF") => *value = json!(tenant.to_string()),
                Some("OTHER") => *value = json!(OTHER),
                _ => {}
            }
        }
    }
    v
}

pub fn applies(row: &Row, tenant_is_t2: bool) -> bool {
    match row.1 {
        Tenants::Both => true,
        Tenants::T1 => !tenant_is_t2,
        Tenants::T2 => tenant_is_t2,
    }
}

pub fn assert_row(
    label: &str,
    body: &steward_policy::CheckResponse,
    allowed: bool,
    ra: bool,
    has: Option<&str>,
) {
    assert_eq!(body.allowed, allowed, "{label}: {body:?}");
    assert_eq!(body.required_approval, ra, "{label}: {body:?}");
    if let Some(has) = has {
        assert!(
            body.reason.to_lowercase().contains(&has.to_lowercase()),
            "{label}: reason {:?}",
            body.reason
        );
    }
    if allowed {
        assert_eq!(body.severity, None, "{label}");
        assert!(
            body.reason.starts_with("allowed by "),
            "{label}: {}",
            body.reason
        );
    } else {
        let s = body.severity.as_deref().unwrap_or("none");
        assert!(
            ["low", "medium", "high", "critical"].contains(&s),
            "{label}: {s}"
        );
    }
    assert!((0.0..=1.0).contains(&body.risk_score), "{label}");
    assert_eq!(body.anomaly.score, body.risk_score, "{label}");
}

/// Runs the whole table through the harness's service (rows 35-40 create their own tenants).
pub async fn run_table_with(h: &Harness) {
    let t1 = h.tenant().await;
    let t2 = h.tenant().await;
    h.create(t2, json!({"name": "hitl", "template": "hitl"}))
        .await
        .unwrap();
    let a1 = h.agent(t1, "active", json!({})).to_string();
    let a2 = h.agent(t2, "active", json!({})).to_string();

    // Rows 1-34.
    let mut checked = 0;
    for row in ROWS {
        for (tenant, agent, is_t2) in [(t1, &a1, false), (t2, &a2, true)] {
            if !applies(row, is_t2) {
                continue;
            }
            let label = format!("row {} ({})", row.0, if is_t2 { "T2" } else { "T1" });
            let body = h
                .check(tenant, agent, row.2, row.3, context(row.4, tenant))
                .await;
            assert_row(&label, &body, row.5, row.6, row.7);
            checked += 1;
        }
    }
    assert_eq!(checked, 24 * 2 + 1 + 9);

    // Row 35: unknown agent, another tenant's agent, not a UUID.
    for agent_id in [
        steward_core::AgentId::new().to_string(),
        a2.clone(),
        "not-a-uuid".to_owned(),
    ] {
        let body = h
            .check(t1, &agent_id, "read_data", "crm/contacts", json!({}))
            .await;
        assert_row("row 35", &body, false, false, Some("not registered"));
        assert_eq!(
            body.reason,
            format!("agent {agent_id} is not registered in this tenant")
        );
        assert_eq!(body.severity.as_deref(), Some("high"));
    }

    // Row 36: a suspended agent.
    let suspended = h.agent(t1, "suspended", json!({})).to_string();
    let body = h
        .check(t1, &suspended, "read_data", "crm/contacts", json!({}))
        .await;
    assert_row("row 36", &body, false, false, Some("suspended"));
    assert_eq!(body.severity.as_deref(), Some("high"));

    // Row 37: T1 with its three default policies deactivated.
    let t3 = h.tenant().await;
    let a3 = h.agent(t3, "active", json!({})).to_string();
    for p in h.list(t3).await {
        h.update(t3, &p.id, json!({"is_active": false}))
            .await
            .unwrap();
    }
    let body = h
        .check(t3, &a3, "read_data", "crm/contacts", json!({}))
        .await;
    assert_row("row 37", &body, false, false, Some("no active policy"));
    assert_eq!(body.severity.as_deref(), Some("medium"));

    // Row 38: a module that defines neither allow nor deny.
    let t4 = h.tenant().await;
    let a4 = h.agent(t4, "active", json!({})).to_string();
    h.create(
        t4,
        json!({"name": "silent-module", "rego": "package steward.policies.silent\n\nimport rego.v1\n\nnote := \"nothing\"\n"}),
    )
    .await
    .unwrap();
    let body = h
        .check(t4, &a4, "read_data", "crm/contacts", json!({}))
        .await;
    assert_row("row 38", &body, false, false, Some("silent-module"));
    assert_eq!(body.reason, "denied by policy 'silent-module'");
    assert_eq!(body.severity.as_deref(), Some("medium"));

    // Row 39: max_risk 0.5 and a privileged action.
    let risky = h.agent(t1, "active", json!({"max_risk": 0.5})).to_string();
    let body = h
        .check(t1, &risky, "disable_audit", "audit/config", json!({}))
        .await;
    assert!(body.risk_score >= 0.6);
    assert_row("row 39", &body, false, false, Some("max_risk"));
    assert_eq!(
        body.reason,
        "risk score 1.00 exceeds the agent's max_risk 0.50"
    );
    assert_eq!(body.severity.as_deref(), Some("high"));

    // Row 40: two denying policies; the higher priority one comes first and sets severity.
    let t5 = h.tenant().await;
    let a5 = h.agent(t5, "active", json!({})).to_string();
    h.create(t5, json!({"name": "low", "priority": 1, "rego": deny_rego("lowprio", "low-priority says no", "launch", "low")}))
        .await
        .unwrap();
    h.create(t5, json!({"name": "high", "priority": 10, "rego": deny_rego("highprio", "high-priority says no", "launch", "critical")}))
        .await
        .unwrap();
    let body = h.check(t5, &a5, "launch", "rockets/1", json!({})).await;
    assert_row("row 40", &body, false, false, None);
    assert_eq!(body.reason, "high-priority says no; low-priority says no");
    assert_eq!(body.severity.as_deref(), Some("critical"));
}
