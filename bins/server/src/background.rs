//! The background workers every instance runs. Work that must happen once is claimed through
//! the database by the workers themselves (schedules and job leases).

use std::time::Duration;

use crate::state::AppState;

/// Starts every worker on the current runtime.
pub fn spawn_all(state: &AppState) {
    let metrics = state.metrics.clone();
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            if let Some(m) = &metrics {
                m.run_upkeep();
            }
        }
    });
    actix_web::rt::spawn(state.registry.clone().run_sweeper());
    actix_web::rt::spawn(state.registry.clone().listen_for_changes());
    actix_web::rt::spawn(state.registry.clone().listen_for_agent_changes());
    actix_web::rt::spawn(state.identity.clone().listen_for_changes());
    actix_web::rt::spawn(state.sso.clone().discover());
    actix_web::rt::spawn(
        state
            .audit
            .clone()
            .run_export_worker(state.settings.export_storage_path.clone()),
    );
    actix_web::rt::spawn(
        state
            .audit
            .clone()
            .run_retention(state.settings.audit_retention_days),
    );
    actix_web::rt::spawn(state.audit.clone().run_export_retention(
        state.settings.export_storage_path.clone(),
        state.settings.export_retention_hours,
    ));
    actix_web::rt::spawn(state.discovery.clone().run_cluster_worker());
    actix_web::rt::spawn(state.ws.clone().run(state.bus.clone()));
    actix_web::rt::spawn(state.policy.clone().listen_for_changes());
    actix_web::rt::spawn(state.siem.clone().run_writer());
    actix_web::rt::spawn(state.siem.clone().run_sender());
    actix_web::rt::spawn(state.anomaly.clone().run_model_listener());
    actix_web::rt::spawn(state.guard.clone().run_model_listener(state.bus.clone()));
    // One training runner per instance for every trainable detector (docs/adr/0003).
    actix_web::rt::spawn(
        steward_store::training::Runner::new(state.db.clone(), state.bus.clone())
            .register(steward_anomaly::service::DETECTOR, state.anomaly.trainer())
            .register(steward_guard::service::DETECTOR, state.guard.trainer())
            .run(),
    );
    if let Some(opa) = &state.opa {
        actix_web::rt::spawn(opa.clone().connect());
    }
    let identity = state.identity.clone();
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            if let Err(e) = identity.purge_expired_credentials().await {
                tracing::debug!(error = %e, "purge of expired credentials failed");
            }
        }
    });
}
