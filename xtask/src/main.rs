//! Developer and operator tasks: `cargo xtask <command>`.
//!
//! - `migrate`: apply pending migrations to `DATABASE_URL` (default `sqlite://./data/steward.db`).
//! - `check-migrations`: check that `migrations/postgres` and `migrations/sqlite` list the same
//!   versions, each with `up.sql` and `down.sql`.
//! - `audit-verify --tenant ID` (reads `DATABASE_URL`) or `audit-verify --file EXPORT`
//!   (`.jsonl` or `.json`): checks a tenant's hash chain and signatures offline; the signing key
//!   is `AUDIT_SIGNING_KEY`, else `SECRET_KEY`; `AUDIT_SIGNING_ENABLED=false` skips signatures.
//! - `bench [--quick] [--embedded|--both] [--bin PATH] [--scale F] [--seconds S] [--only a,b]`:
//!   the whole suite (starts the server, seeds, every scenario, peers, micro-benchmarks, writes
//!   `target/bench/report.{json,md}`; `suite.rs`).
//! - `bench <login|audit|heartbeat|search|check|guard|ws> [--url …] [--clients N] [--seconds S]
//!   [--tenants T] [--agents A]`: one scenario against a running server (docs/benchmarks.md).

mod anomaly_eval;
mod bench;
mod bench_guard;
mod bench_ws;
mod guard_eval;
mod report;
mod suite;

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
    eprintln!("usage: cargo xtask <migrate | check-migrations | audit-verify ... | bench SCENARIO [options] | guard-train | guard-eval>");
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

fn audit_verify(args: &[String]) -> anyhow::Result<()> {
    let signing = std::env::var("AUDIT_SIGNING_ENABLED")
        .map(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"))
        .unwrap_or(true);
    let key = std::env::var("AUDIT_SIGNING_KEY")
        .or_else(|_| std::env::var("SECRET_KEY"))
        .unwrap_or_else(|_| "dev-secret-key-change-me".into());
    let hasher = steward_audit::ChainHasher::new(signing.then_some(key.as_bytes()));
    let verification = match args {
        [flag, path] if flag == "--file" => {
            let text = std::fs::read_to_string(path)?;
            let entries: Vec<steward_audit::AuditEntry> = if text.trim_start().starts_with('[') {
                serde_json::from_str(&text)?
            } else {
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(serde_json::from_str)
                    .collect::<Result<_, _>>()?
            };
            steward_audit::verify_entries(&hasher, entries)
        }
        [flag, tenant] if flag == "--tenant" => {
            let url = std::env::var("DATABASE_URL")
                .unwrap_or_else(|_| "sqlite://./data/steward.db".into());
            let target = DbTarget::parse(&url).map_err(|e| anyhow::anyhow!("DATABASE_URL: {e}"))?;
            let tenant: steward_core::TenantId = tenant
                .parse()
                .map_err(|_| anyhow::anyhow!("--tenant needs a UUID"))?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(async {
                    let pool =
                        steward_store::DbPool::new(&target, &steward_store::DbSettings::default())
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let service = steward_audit::AuditService::new(
                        pool,
                        std::sync::Arc::new(steward_core::MemoryBus::new()),
                        hasher,
                    )
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                    service
                        .verify_tenant(tenant)
                        .await
                        .map_err(|e| anyhow::anyhow!("{e}"))
                })?
        }
        _ => anyhow::bail!("usage: cargo xtask audit-verify --tenant ID | --file EXPORT"),
    };
    println!("{}", serde_json::to_string(&verification)?);
    if verification.valid {
        Ok(())
    } else {
        anyhow::bail!(
            "the chain is broken at entry {}",
            verification.first_bad_id.unwrap_or_default()
        )
    }
}

fn main() -> ExitCode {
    let Some(cmd) = std::env::args().nth(1) else {
        return usage();
    };
    let result = match cmd.as_str() {
        "migrate" => migrate(),
        "check-migrations" => check_migrations(),
        "guard-train" => guard_eval::guard_train(&std::env::args().skip(2).collect::<Vec<_>>()),
        "guard-eval" => guard_eval::guard_eval(&std::env::args().skip(2).collect::<Vec<_>>()),
        "anomaly-eval" => anomaly_eval::anomaly_eval(&std::env::args().skip(2).collect::<Vec<_>>()),
        "audit-verify" => audit_verify(&std::env::args().skip(2).collect::<Vec<_>>()),
        "bench" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            let Some((scenario, rest)) = args
                .split_first()
                .filter(|(s, _)| !s.starts_with("--") && s.as_str() != "suite")
            else {
                let rest = args.strip_prefix(&["suite".to_owned()]).unwrap_or(&args);
                return match suite::suite(rest) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("xtask bench: {e:#}");
                        ExitCode::FAILURE
                    }
                };
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
