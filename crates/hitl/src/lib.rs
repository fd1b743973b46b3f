//! Human-in-the-loop approvals (contract 16), bound to the exact action they approve.
//!
//! A request stores a digest of what it asks to approve: the tenant, the agent, the action,
//! the resource and the context (without `approved` / `approval_id`), as SHA-256 over RFC 8785
//! JSON. A policy check that presents `context.approval_id` counts as approved only when that
//! request is approved, belongs to the tenant, has the same digest and (with a TTL) was
//! decided recently enough; the first allowed check consumes it with one conditional UPDATE,
//! so it is single use across instances. Decisions are one conditional UPDATE too: of two
//! analysts deciding at once, one wins and the other gets 409. See docs/hitl.md.

mod digest;
mod service;

pub use digest::action_digest;
pub use service::{
    AgentStatuses, ApprovalRefusal, Hitl, HitlConfig, HitlRequest, APPROVED, PENDING, REJECTED,
};
