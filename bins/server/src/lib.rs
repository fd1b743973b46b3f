//! The Steward HTTP server: settings, shared state, routing, credential extractors, the error
//! mapping to RFC 9457, OpenAPI documentation, metrics and start-up.
//!
//! Handlers stay thin: extract, call one service method, map the result.

pub mod app;
pub mod auth;
pub mod background;
pub mod body_limit;
pub mod dashboard;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod routes;
pub mod settings;
pub mod state;
pub mod telemetry;
pub mod webhooks;
pub mod wiring;

pub use app::build_app;
pub use settings::Settings;
pub use state::AppState;
pub mod ws;
