//! Test support: isolated databases on SQLite and, with `TEST_DATABASE_URL`, on PostgreSQL
//! (a schema per test), and the Redis URL of `TEST_REDIS_URL`.

use std::path::PathBuf;

use diesel::Connection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::AsyncPgConnection;
use steward_core::{Error, Result};

use crate::pool::{DbPool, DbSettings, DbTarget};

/// An isolated, migrated database for one test, removed when dropped.
pub struct TestDb {
    pub target: DbTarget,
    pub pool: DbPool,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(PathBuf),
    Schema { base_url: String, schema: String },
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// `TEST_DATABASE_URL` when set and not empty.
pub fn postgres_url() -> Option<String> {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.is_empty())
}

/// `TEST_REDIS_URL` when set and not empty.
pub fn redis_url() -> Option<String> {
    std::env::var("TEST_REDIS_URL")
        .ok()
        .filter(|s| !s.is_empty())
}

/// Appends a query parameter to a URL that may or may not already have a query.
fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

impl TestDb {
    /// A fresh, unmigrated target: a temporary SQLite file.
    pub fn sqlite_target() -> (DbTarget, PathBuf) {
        let dir = std::env::temp_dir().join(unique("steward_test"));
        (DbTarget::Sqlite(dir.join("steward.db")), dir)
    }

    /// A fresh, migrated SQLite database.
    pub async fn sqlite() -> Result<TestDb> {
        let (target, dir) = Self::sqlite_target();
        Self::finish(target, Cleanup::Dir(dir)).await
    }

    /// A fresh, unmigrated PostgreSQL schema; `None` without `TEST_DATABASE_URL`.
    pub fn postgres_target() -> Option<Result<(DbTarget, String, String)>> {
        let base = postgres_url()?;
        let schema = unique("t");
        let created = std::thread::spawn({
            let base = base.clone();
            let schema = schema.clone();
            move || -> Result<()> {
                let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&base)
                    .map_err(|e| Error::unavailable("database", e))?;
                diesel::connection::SimpleConnection::batch_execute(
                    &mut conn,
                    &format!("CREATE SCHEMA \"{schema}\""),
                )
                .map_err(Error::internal)
            }
        })
        .join()
        .map_err(|_| Error::internal_msg("schema creation thread panicked"));
        if let Err(e) = created.and_then(|r| r) {
            return Some(Err(e));
        }
        let url = with_param(&base, &format!("options=-c%20search_path%3D{schema}"));
        Some(Ok((DbTarget::Postgres(url), base, schema)))
    }

    /// A fresh, migrated PostgreSQL schema; `None` without `TEST_DATABASE_URL`.
    pub async fn postgres() -> Option<Result<TestDb>> {
        let (target, base_url, schema) = match Self::postgres_target()? {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        Some(Self::finish(target, Cleanup::Schema { base_url, schema }).await)
    }

    async fn finish(target: DbTarget, cleanup: Cleanup) -> Result<TestDb> {
        crate::migrate::run(&target).await?;
        // Tests run tens of concurrent database tasks on four connections (SQLite writes one
        // at a time): a wait beyond the production 3 s on a loaded machine is no failure.
        let settings = DbSettings {
            max_connections: 4,
            timeout: std::time::Duration::from_secs(30),
        };
        let pool = DbPool::new(&target, &settings)?;
        Ok(TestDb {
            target,
            pool,
            cleanup,
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Schema { base_url, schema } => drop_schema(base_url.clone(), schema.clone()),
        }
    }
}

/// Inserts a bare tenant row (for tests of tables that reference tenants).
pub async fn insert_tenant(db: &DbPool) -> Result<steward_core::TenantId> {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;

    use crate::schema::tenants;
    use crate::{DbResultExt, Id, Json, Ts};

    let id = steward_core::TenantId::new();
    crate::with_conn!(db, conn => {
        diesel::insert_into(tenants::table)
            .values((
                tenants::id.eq(Id(id.0)),
                tenants::name.eq(format!("t-{id}")),
                tenants::settings.eq(Json(serde_json::json!({}))),
                tenants::created_at.eq(Ts::from(steward_core::clock::now())),
            ))
            .execute(conn)
            .await
            .db()
    })?;
    Ok(id)
}

/// Drops a test schema (on a thread of its own: `Drop` may run inside an async runtime).
pub fn drop_schema(base_url: String, schema: String) {
    let _ = std::thread::spawn(move || {
        if let Ok(mut conn) = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&base_url) {
            let _ = diesel::connection::SimpleConnection::batch_execute(
                &mut conn,
                &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
            );
        }
    })
    .join();
}

/// Generates one test per backend from one body: `sqlite` always, `postgres` when
/// `TEST_DATABASE_URL` is set (otherwise it says it was skipped).
///
/// ```ignore
/// steward_store::db_test!(counts_tenants, |db| { /* use db.pool */ });
/// ```
#[macro_export]
macro_rules! db_test {
    ($name:ident, |$db:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = $crate::testing::TestDb::sqlite()
                    .await
                    .unwrap_or_else(|e| panic!("sqlite test database: {e}"));
                $body
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(db) = $crate::testing::TestDb::postgres().await else {
                    eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run");
                    return;
                };
                let $db = db.unwrap_or_else(|e| panic!("postgres test database: {e}"));
                $body
            }
        }
    };
}
