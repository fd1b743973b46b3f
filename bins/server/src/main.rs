//! `steward`: the server. Configuration comes from the environment (see docs/configuration.md).

use actix_web::{web, HttpServer};
use steward_server::{build_app, telemetry, AppState, Settings};

fn main() {
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("steward: {e}");
            std::process::exit(2);
        }
    };
    telemetry::init_logging(settings.log_level, settings.log_json);
    let system = actix_web::rt::System::new();
    let code = match system.block_on(run(settings)) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "start-up failed");
            eprintln!("steward: {e:#}");
            1
        }
    };
    // Exit now: dropping the runtime would wait for blocking work the drain abandoned (an
    // export still being built), past the 10 s the supervisor was promised. Every write that
    // was answered is durable already.
    std::process::exit(code)
}

/// SIGTERM or SIGINT (Ctrl-C): both drain (actix-server's own handling stops at once on
/// SIGINT).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
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
    let server = server.disable_signals().shutdown_timeout(10).run();
    let handle = server.handle();
    let ws = state.ws.clone();
    actix_web::rt::spawn(async move {
        stop_signal().await;
        tracing::info!("stopping: draining in-flight requests for up to 10 s");
        // Live event connections would hold the drain for its whole 10 s: they are told to go.
        ws.close_all();
        handle.stop(true).await;
    });
    server.await?;
    // Exports, trainings and clustering this instance was running go back to the queue, so
    // another instance (or this one, restarted) takes them up at once, not after the lease.
    match steward_store::jobs::release_held(&state.db).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(jobs = n, "running background jobs put back in the queue"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot put running jobs back in the queue; they resume when their lease runs out")
        }
    }
    // Events still queued in memory for SIEM export go to the outbox before exiting.
    state.siem.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
