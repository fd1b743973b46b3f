//! The event type published on the bus: WebSocket notifications and SIEM sources.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::TenantId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// A domain event: `kind` is the event name (`policy.violated`, `user.login`, …).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Event {
    pub kind: String,
    pub tenant_id: TenantId,
    pub severity: Severity,
    #[serde(with = "crate::clock::serde_ts")]
    pub timestamp: OffsetDateTime,
    /// Event-specific members.
    pub data: Value,
}

impl Event {
    pub fn new(
        kind: impl Into<String>,
        tenant_id: TenantId,
        severity: Severity,
        data: Value,
    ) -> Self {
        Self {
            kind: kind.into(),
            tenant_id,
            severity,
            timestamp: crate::clock::now(),
            data,
        }
    }
}

/// The bus channel carrying domain events.
pub const EVENTS_CHANNEL: &str = "events";

/// Publishes an event on the bus without waiting for delivery (errors are logged).
pub fn publish(bus: &std::sync::Arc<dyn crate::EventBus>, event: Event) {
    let bus = bus.clone();
    let payload = match serde_json::to_vec(&event) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, kind = %event.kind, "event not serialisable");
            return;
        }
    };
    tokio::spawn(async move {
        if let Err(e) = bus.publish(EVENTS_CHANNEL, &payload).await {
            tracing::warn!(error = %e, "event not published");
        }
    });
}
