//! The agent registry: agents, their status machine, embeddings, type prediction and search.

pub mod embedding;
pub mod index;
pub mod service;

pub use service::{AgentActivity, AgentRecord, AgentView, NoActivity, Registry};
