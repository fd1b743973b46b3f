//! Discovery of unregistered ("shadow") agents (contract 12): candidates fed by ingest, batch
//! ingest, orphan anomaly reports, webhooks of unknown agents and the integrations; merged by
//! fingerprint, clustered by name similarity in a background task, confirmed into registered
//! agents or dismissed.

pub mod cluster;
pub mod model;
pub mod service;
pub mod similarity;

pub use cluster::Task;
pub use model::{Candidate, CandidateRow};
pub use service::{BatchResult, Confirmed, Discovery, IntegrationSettings, IntegrationStatus};
