//! What the policy check needs to know about agents, asked through a trait the registry (or a
//! cache in front of it) implements.

use std::collections::HashMap;
use std::sync::RwLock;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{json, Value};
use steward_core::{AgentId, Result, TenantId};

/// A registered agent as the policy input and the aggregation see it (contract 13.5).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentInfo {
    pub id: AgentId,
    pub name: String,
    /// The agent's type (`llm`, `tool`, …).
    pub agent_type: String,
    pub capabilities: Vec<String>,
    /// The agent's permissions object (may carry `max_risk`).
    pub permissions: Value,
    /// `active`, `inactive`, `error` or `suspended`.
    pub status: String,
}

impl AgentInfo {
    pub fn is_suspended(&self) -> bool {
        self.status == "suspended"
    }

    /// `permissions.max_risk` when it is a number.
    pub fn max_risk(&self) -> Option<f64> {
        self.permissions.get("max_risk").and_then(Value::as_f64)
    }

    /// The `agent` member of the policy input.
    pub fn input_document(&self) -> Value {
        json!({
            "id": self.id.to_string(),
            "name": self.name,
            "type": self.agent_type,
            "capabilities": self.capabilities,
            "permissions": self.permissions,
            "status": self.status,
        })
    }
}

/// Finds a tenant's agent. `Ok(None)` when the agent does not exist in that tenant (an agent
/// of another tenant is `None` too).
#[async_trait]
pub trait AgentLookup: Send + Sync + 'static {
    async fn find(&self, tenant: TenantId, agent: AgentId) -> Result<Option<AgentInfo>>;
}

/// An in-memory `AgentLookup` (tests, and until a registry is wired).
#[derive(Default)]
pub struct MemoryAgents {
    agents: RwLock<HashMap<(TenantId, AgentId), AgentInfo>>,
}

impl MemoryAgents {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&self, tenant: TenantId, agent: AgentInfo) {
        let mut map = self.agents.write().unwrap_or_else(|p| p.into_inner());
        map.insert((tenant, agent.id), agent);
    }

    pub fn remove(&self, tenant: TenantId, agent: AgentId) {
        let mut map = self.agents.write().unwrap_or_else(|p| p.into_inner());
        map.remove(&(tenant, agent));
    }
}

#[async_trait]
impl AgentLookup for MemoryAgents {
    async fn find(&self, tenant: TenantId, agent: AgentId) -> Result<Option<AgentInfo>> {
        let map = self.agents.read().unwrap_or_else(|p| p.into_inner());
        Ok(map.get(&(tenant, agent)).cloned())
    }
}
