//! The anomaly domain (see docs/architecture.md). Built in a later issue.

pub mod detector;
pub mod reports;
pub mod scorer;
pub mod service;
