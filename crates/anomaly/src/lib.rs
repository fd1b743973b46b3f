//! The anomaly domain (see docs/architecture.md and docs/anomaly.md).

pub mod codec;
pub mod detector;
pub mod features;
pub mod iforest;
pub mod onnx;
pub mod reports;
pub mod scorer;
pub mod seen;
pub mod service;
pub mod supervised;
pub mod trees;
