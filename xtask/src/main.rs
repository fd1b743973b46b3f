//! Developer and operator tasks: `cargo xtask <command>`.
//!
//! - `migrate`: apply pending migrations to `DATABASE_URL` (default `sqlite://./data/steward.db`).
//! - `check-migrations`: check that `migrations/postgres` and `migrations/sqlite` list the same
//!   versions, each with `up.sql` and `down.sql`.
//! - `bench <login|audit|heartbeat|search> [--url …] [--clients N] [--seconds S] [--tenants T]
//!   [--agents A]`: HTTP load against a running server (docs/benchmarks.md).

mod bench;

use std::path::PathBuf;
use std::process::ExitCode;

use steward_store::DbTarget;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn usage() -> ExitCode {
    eprintln!("usage: cargo xtask <migrate | check-migrations | bench SCENARIO [options]>");
    ExitCode::from(2)
}

fn migrate() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite://./data/steward.db".into());
    let target = DbTarget::parse(&url).map_err(|e| anyhow::anyhow!("DATABASE_URL: {e}"))?;
    let report =
        steward_store::migrate::run_blocking(&target).map_err(|e| anyhow::anyhow!("{e}"))?;
    if report.applied.is_empty() {
        println!("{target:?}: up to date");
    }
    for v in report.applied {
        println!("{target:?}: applied {v}");
    }
    Ok(())
}

fn check_migrations() -> anyhow::Result<()> {
    let root = workspace_root().join("migrations");
    let versions =
        steward_store::migrate::check_parity(&root).map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "migrations: {} versions, identical on postgres and sqlite",
        versions.len()
    );
    Ok(())
}

fn main() -> ExitCode {
    let Some(cmd) = std::env::args().nth(1) else {
        return usage();
    };
    let result = match cmd.as_str() {
        "migrate" => migrate(),
        "check-migrations" => check_migrations(),
        "bench" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            let Some((scenario, rest)) = args.split_first() else {
                return usage();
            };
            bench::Options::from_args(rest).and_then(|o| {
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()?
                    .block_on(bench::run(scenario, o))
            })
        }
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {cmd}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
