//! SIEM export (contract 22): formats, transports, the durable outbox and its sender.

pub mod format;
pub mod service;
pub mod transport;

pub use format::Format;
pub use service::{OutboxBus, Siem, SiemConfig, SiemStatus, SiemTestResult};
pub use transport::{Outcome, Transport, TransportConfig, TransportKind};
