//! Embedded migrations for both backends, applied at start-up and by `cargo xtask migrate`.
//!
//! `migrations/postgres` and `migrations/sqlite` hold the same version names; `check_parity`
//! proves it (run by `cargo xtask check-migrations` and by a unit test).

use std::path::Path;

use diesel::migration::MigrationSource;
use diesel::pg::Pg;
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::Connection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::AsyncPgConnection;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use steward_core::{Error, Result};

use crate::pool::{ensure_parent_dir, DbTarget};

pub const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");
pub const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::internal_msg(format!("{what}: {e}"))
}

/// What a migration run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Versions applied by this run, oldest first.
    pub applied: Vec<String>,
}

fn run_on<C, DB>(conn: &mut C, source: EmbeddedMigrations) -> std::result::Result<Report, BoxError>
where
    DB: diesel::backend::Backend,
    C: MigrationHarness<DB>,
{
    let applied = conn.run_pending_migrations(source)?;
    Ok(Report {
        applied: applied.into_iter().map(|v| v.to_string()).collect(),
    })
}

fn pg_connect(url: &str) -> Result<AsyncConnectionWrapper<AsyncPgConnection>> {
    AsyncConnectionWrapper::<AsyncPgConnection>::establish(url)
        .map_err(|e| Error::unavailable("database", e))
}

fn sqlite_connect(path: &Path) -> Result<SqliteConnection> {
    ensure_parent_dir(path)?;
    let mut conn = SqliteConnection::establish(&path.to_string_lossy())
        .map_err(|e| Error::unavailable("database", e))?;
    diesel::connection::SimpleConnection::batch_execute(
        &mut conn,
        "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;",
    )
    .map_err(|e| fail("cannot configure the SQLite connection", e))?;
    Ok(conn)
}

/// Applies every pending migration (blocking: call from a blocking thread).
pub fn run_blocking(target: &DbTarget) -> Result<Report> {
    match target {
        DbTarget::Postgres(url) => {
            let mut conn = pg_connect(url)?;
            // Instances starting together migrate one after the other; the lock goes with the
            // connection at the end of this function.
            diesel::connection::SimpleConnection::batch_execute(&mut conn, MIGRATION_LOCK)
                .map_err(|e| fail("cannot take the migration lock", e))?;
            run_on::<_, Pg>(&mut conn, POSTGRES).map_err(|e| fail("migration failed", e))
        }
        DbTarget::Sqlite(path) => {
            let mut conn = sqlite_connect(path)?;
            run_on::<_, Sqlite>(&mut conn, SQLITE).map_err(|e| fail("migration failed", e))
        }
    }
}

/// A session-level advisory lock serialising migrations across instances (PostgreSQL).
const MIGRATION_LOCK: &str = "SELECT pg_advisory_lock(7368146)";

/// Applies every pending migration from async code.
pub async fn run(target: &DbTarget) -> Result<Report> {
    let target = target.clone();
    tokio::task::spawn_blocking(move || run_blocking(&target))
        .await
        .map_err(|e| fail("migration task failed", e))?
}

fn redo_each_on<C, DB>(
    conn: &mut C,
    source: fn() -> EmbeddedMigrations,
) -> std::result::Result<usize, BoxError>
where
    DB: diesel::backend::Backend,
    C: MigrationHarness<DB>,
{
    let all = MigrationSource::<DB>::migrations(&source())?;
    for _ in &all {
        conn.run_next_migration(source())?;
        conn.revert_last_migration(source())?;
        conn.run_next_migration(source())?;
    }
    // And the whole stack down and up again.
    conn.revert_all_migrations(source())?;
    conn.run_pending_migrations(source())?;
    Ok(all.len())
}

/// For tests: on an empty database, applies each migration, reverts it, applies it again,
/// then reverts everything and re-applies everything. Returns the number of migrations.
pub fn redo_each_blocking(target: &DbTarget) -> Result<usize> {
    match target {
        DbTarget::Postgres(url) => {
            let mut conn = pg_connect(url)?;
            redo_each_on::<_, Pg>(&mut conn, || POSTGRES)
                .map_err(|e| fail("migration redo failed", e))
        }
        DbTarget::Sqlite(path) => {
            let mut conn = sqlite_connect(path)?;
            redo_each_on::<_, Sqlite>(&mut conn, || SQLITE)
                .map_err(|e| fail("migration redo failed", e))
        }
    }
}

/// The migration version directories of a folder, sorted.
pub fn versions_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// Checks that `root/postgres` and `root/sqlite` list the same versions, each with an
/// `up.sql` and a `down.sql`. Returns the versions, or a description of every difference.
pub fn check_parity(root: &Path) -> std::result::Result<Vec<String>, String> {
    let pg =
        versions_in(&root.join("postgres")).map_err(|e| format!("migrations/postgres: {e}"))?;
    let lite = versions_in(&root.join("sqlite")).map_err(|e| format!("migrations/sqlite: {e}"))?;
    let mut problems = Vec::new();
    for v in pg.iter().filter(|v| !lite.contains(v)) {
        problems.push(format!("{v} is in postgres but not in sqlite"));
    }
    for v in lite.iter().filter(|v| !pg.contains(v)) {
        problems.push(format!("{v} is in sqlite but not in postgres"));
    }
    for (backend, list) in [("postgres", &pg), ("sqlite", &lite)] {
        for v in list {
            for file in ["up.sql", "down.sql"] {
                if !root.join(backend).join(v).join(file).is_file() {
                    problems.push(format!("{backend}/{v} has no {file}"));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(pg)
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_the_same_versions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let versions = check_parity(&root).unwrap_or_else(|e| panic!("{e}"));
        assert!(!versions.is_empty());
    }
}
