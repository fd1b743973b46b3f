//! The audit interface other domains write through (the audit crate implements it).

use async_trait::async_trait;
use serde_json::Value;

use crate::{AgentId, AuditId, Result, TenantId, UserId};

/// A new audit entry, before the server assigns its sequence, time and hashes.
#[derive(Clone, Debug)]
pub struct AuditRecord {
    pub tenant: TenantId,
    pub agent_id: Option<AgentId>,
    pub user_id: Option<UserId>,
    pub action: String,
    pub resource: String,
    pub input: Value,
    pub output: Value,
    pub reasoning: Vec<String>,
    pub risk_score: f64,
    pub is_approved: bool,
}

impl AuditRecord {
    /// A server-written entry (no agent), e.g. `user.login` on `user:<id>`.
    pub fn system(
        tenant: TenantId,
        user_id: Option<UserId>,
        action: &str,
        resource: String,
    ) -> Self {
        Self {
            tenant,
            agent_id: None,
            user_id,
            action: action.to_owned(),
            resource,
            input: Value::Object(Default::default()),
            output: Value::Object(Default::default()),
            reasoning: Vec::new(),
            risk_score: 0.0,
            is_approved: true,
        }
    }

    pub fn with_input(mut self, input: Value) -> Self {
        self.input = input;
        self
    }

    pub fn with_output(mut self, output: Value) -> Self {
        self.output = output;
        self
    }
}

/// Appends entries to a tenant's audit chain.
#[async_trait]
pub trait AuditWriter: Send + Sync + 'static {
    async fn append(&self, record: AuditRecord) -> Result<AuditId>;
}
