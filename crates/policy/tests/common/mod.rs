//! Test support: a policy service over a test database with in-memory collaborators.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod table;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use steward_core::principal::CredentialKind;
use steward_core::{
    AgentId, AuditId, AuditRecord, AuditWriter, Body, Error, EventBus, MemoryBus, Principal,
    Result, Role, TenantId, UserId,
};
use steward_policy::{
    AgentInfo, CheckResponse, MemoryAgents, PolicyConfig, PolicyService, PolicyView, RulesScorer,
};
use steward_store::schema::tenants;
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

/// Records audit entries in memory.
#[derive(Default)]
pub struct RecordingAudit {
    pub records: Mutex<Vec<AuditRecord>>,
}

#[async_trait]
impl AuditWriter for RecordingAudit {
    async fn append(&self, record: AuditRecord) -> Result<AuditId> {
        self.records.lock().unwrap().push(record);
        Ok(AuditId::new())
    }
}

impl RecordingAudit {
    pub fn actions(&self, tenant: TenantId) -> Vec<(String, String)> {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.tenant == tenant)
            .map(|r| (r.action.clone(), r.resource.clone()))
            .collect()
    }
}

pub struct Harness {
    pub db: DbPool,
    pub svc: PolicyService,
    pub agents: Arc<MemoryAgents>,
    pub audit: Arc<RecordingAudit>,
    pub bus: Arc<MemoryBus>,
}

impl Harness {
    pub fn new(db: &DbPool, config: PolicyConfig) -> Harness {
        Self::with_bus(db, config, Arc::new(MemoryBus::new()))
    }

    pub fn with_bus(db: &DbPool, config: PolicyConfig, bus: Arc<MemoryBus>) -> Harness {
        let agents = Arc::new(MemoryAgents::new());
        let audit = Arc::new(RecordingAudit::default());
        let svc = PolicyService::new(
            db.clone(),
            bus.clone() as Arc<dyn EventBus>,
            audit.clone(),
            agents.clone(),
            Arc::new(RulesScorer::default()),
            config,
        );
        Harness {
            db: db.clone(),
            svc,
            agents,
            audit,
            bus,
        }
    }

    /// A tenant row without policies.
    pub async fn bare_tenant(&self) -> TenantId {
        let id = TenantId::new();
        let row = (
            tenants::id.eq(Id(id.0)),
            tenants::name.eq(format!("t-{id}")),
            tenants::settings.eq(Json(json!({}))),
            tenants::created_at.eq(Ts(steward_core::clock::now())),
        );
        let inserted: Result<usize> = async {
            with_conn!(&self.db, conn => {
                diesel::insert_into(tenants::table).values(row).execute(conn).await.db()
            })
        }
        .await;
        inserted.unwrap();
        id
    }

    /// A tenant with its default policies.
    pub async fn tenant(&self) -> TenantId {
        let t = self.bare_tenant().await;
        self.svc.provision_defaults(t).await.unwrap();
        t
    }

    /// A registered agent of the tenant.
    pub fn agent(&self, tenant: TenantId, status: &str, permissions: Value) -> AgentId {
        let id = AgentId::new();
        self.agents.insert(
            tenant,
            AgentInfo {
                id,
                name: format!("agent-{id}"),
                agent_type: "llm".into(),
                capabilities: vec!["read".into()],
                permissions,
                status: status.into(),
            },
        );
        id
    }

    pub async fn create(&self, tenant: TenantId, body: Value) -> Result<PolicyView> {
        self.svc.create(&admin(tenant), &Body::json(&body)).await
    }

    pub async fn update(&self, tenant: TenantId, id: &str, body: Value) -> Result<PolicyView> {
        self.svc
            .update(&admin(tenant), id, &Body::json(&body))
            .await
    }

    pub async fn list(&self, tenant: TenantId) -> Vec<PolicyView> {
        let pairs = vec![("limit".to_owned(), "200".to_owned())];
        self.svc.list(&admin(tenant), &pairs).await.unwrap().items
    }

    pub async fn check(
        &self,
        tenant: TenantId,
        agent_id: &str,
        action: &str,
        resource: &str,
        context: Value,
    ) -> CheckResponse {
        let body = json!({"agent_id": agent_id, "action": action, "resource": resource, "context": context});
        self.svc
            .check(&as_role(tenant, Role::Developer), &Body::json(&body))
            .await
            .unwrap_or_else(|e| panic!("check failed: {e}"))
    }
}

pub fn as_role(tenant: TenantId, role: Role) -> Principal {
    Principal {
        tenant,
        role,
        user: Some(UserId::new()),
        key: None,
        kind: CredentialKind::UserKey,
        jti: None,
    }
}

/// The tenant key: role admin, no user.
pub fn admin(tenant: TenantId) -> Principal {
    Principal {
        tenant,
        role: Role::Admin,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    }
}

/// The error of a result that must have failed.
pub fn failure<T: std::fmt::Debug>(r: Result<T>) -> Error {
    match r {
        Ok(v) => panic!("unexpectedly succeeded: {v:?}"),
        Err(e) => e,
    }
}

/// A module that denies `action` with `msg` and the given severity.
pub fn deny_rego(pkg: &str, msg: &str, action: &str, severity: &str) -> String {
    format!(
        "package steward.policies.{pkg}\n\nimport rego.v1\n\n\
         deny contains \"{msg}\" if input.action == \"{action}\"\n\n\
         default allow := false\n\nallow if count(deny) == 0\n\nseverity := \"{severity}\"\n"
    )
}
