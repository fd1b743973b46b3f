//! `steward`: the server. Configuration comes from the environment (see docs/configuration.md).

use std::process::ExitCode;

use actix_web::{web, HttpServer};
use steward_server::{build_app, telemetry, AppState, Settings};

fn main() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init_logging(settings.log_level, settings.log_json);
    match actix_web::rt::System::new().block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "start-up failed");
            eprintln!("steward: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> anyhow::Result<()> {
    let addr = (settings.host, settings.port);
    tracing::info!(
        version = steward_core::VERSION,
        environment = settings.environment.as_str(),
        database = ?settings.database,
        cache = if settings.redis_url.is_some() { "redis" } else { "in-process" },
        "starting"
    );
    // Leases of claimed background work (docs/operations.md, "Background work").
    steward_store::jobs::set_lease_override(
        settings
            .job_lease_seconds
            .map(std::time::Duration::from_secs),
    );
    let state = web::Data::new(AppState::start(settings).await?);
    // The guard's detectors build their tables on first use; do it before the first request.
    let guard = state.guard.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || guard.warm_up()).await {
        tracing::warn!(error = %e, "guard warm-up failed");
    }

    steward_server::background::spawn_all(&state);

    let data = state.clone();
    // TCP_NODELAY on every accepted connection: a WebSocket event or a response is written as
    // soon as it is ready instead of waiting behind Nagle's algorithm for the peer's ACK of the
    // previous write (docs/adr/0020-tcp-nodelay.md).
    let server = HttpServer::new(move || build_app(data.clone()))
        .tcp_nodelay(true)
        .bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", addr.0, addr.1))?;
    for a in server.addrs() {
        tracing::info!("Steward {} listening on http://{a}", steward_core::VERSION);
    }
    // SIGTERM / SIGINT: stop accepting, let in-flight requests finish for up to 10 s, exit 0.
    server.shutdown_timeout(10).run().await?;
    // Events still queued in memory for SIEM export go to the outbox before exiting.
    state.siem.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
