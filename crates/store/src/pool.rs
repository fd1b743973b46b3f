//! Connection pools for both backends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use deadpool::Runtime;
use diesel::sqlite::SqliteConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolableConnection, RecyclingMethod,
};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;
use steward_core::{Error, Result};

/// The SQLite connection type (diesel's synchronous connection run on a blocking thread).
pub type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// Which database a pool talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A parsed `DATABASE_URL`.
#[derive(Clone, PartialEq, Eq)]
pub enum DbTarget {
    /// A `postgres://` or `postgresql://` URL, passed to the driver as is.
    Postgres(String),
    /// A SQLite database file.
    Sqlite(PathBuf),
}

impl std::fmt::Debug for DbTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbTarget::Postgres(url) => write!(f, "Postgres({})", redact_url(url)),
            DbTarget::Sqlite(path) => write!(f, "Sqlite({})", path.display()),
        }
    }
}

/// Hides the password of a URL for logs: the `user:password@` part and a `password` query
/// parameter (libpq's form, also `sslpassword`).
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            let secret = |k: &str| k.to_ascii_lowercase().contains("password");
            if u.query_pairs().any(|(k, _)| secret(&k)) {
                let pairs: Vec<(String, String)> = u
                    .query_pairs()
                    .map(|(k, v)| {
                        let v = if secret(&k) {
                            "***".to_owned()
                        } else {
                            v.into_owned()
                        };
                        (k.into_owned(), v)
                    })
                    .collect();
                u.query_pairs_mut().clear().extend_pairs(pairs);
            }
            u.to_string()
        }
        Err(_) => "<unparseable url>".to_owned(),
    }
}

impl DbTarget {
    /// Parses `sqlite://PATH` (relative, or absolute as `sqlite:///abs/path`) and
    /// `postgres://…` / `postgresql://…`. Any other scheme is an error.
    pub fn parse(url: &str) -> std::result::Result<DbTarget, String> {
        let url = url.trim();
        if let Some(rest) = url.strip_prefix("sqlite://") {
            let path = rest.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err(
                    "a sqlite:// URL needs a file path, e.g. sqlite://./data/steward.db".into(),
                );
            }
            Ok(DbTarget::Sqlite(PathBuf::from(path)))
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            if rest.is_empty() {
                return Err("a sqlite: URL needs a file path".into());
            }
            Ok(DbTarget::Sqlite(PathBuf::from(rest)))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // A malformed URL is a configuration error now, not 20 s of retries at start-up.
            // (A multi-host URL, `postgres://h1,h2/db`, is the driver's to read.)
            let authority = url
                .split("://")
                .nth(1)
                .unwrap_or("")
                .split('/')
                .next()
                .unwrap_or("");
            if !authority.contains(',') {
                if let Err(e) = url::Url::parse(url) {
                    return Err(format!(
                        "not a valid PostgreSQL URL ({e}): use postgres://USER[:PASSWORD]@HOST[:PORT]/DB"
                    ));
                }
            }
            Ok(DbTarget::Postgres(url.to_owned()))
        } else {
            let scheme = url.split(':').next().unwrap_or(url);
            Err(format!(
                "unsupported scheme {scheme:?}: use sqlite://PATH or postgres://USER@HOST/DB"
            ))
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            DbTarget::Postgres(_) => Backend::Postgres,
            DbTarget::Sqlite(_) => Backend::Sqlite,
        }
    }
}

/// Pool settings.
#[derive(Clone, Debug)]
pub struct DbSettings {
    pub max_connections: usize,
    /// Longest wait for a connection (also bounds connecting and recycling).
    pub timeout: Duration,
}

impl Default for DbSettings {
    fn default() -> Self {
        Self {
            max_connections: 16,
            timeout: Duration::from_secs(3),
        }
    }
}

/// A pool of connections to PostgreSQL or SQLite.
#[derive(Clone)]
pub enum DbPool {
    Pg(Pool<AsyncPgConnection>),
    Sqlite(Pool<SqliteConn>),
}

impl std::fmt::Debug for DbPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DbPool({:?})", self.backend())
    }
}

/// The commit durability of every SQLite connection (set up by `SQLITE_PRAGMAS`, restored
/// after `with_conn_async_commit!`).
macro_rules! sqlite_durable {
    () => {
        "PRAGMA synchronous = FULL"
    };
}

/// Connection set-up run on every new SQLite connection.
/// `busy_timeout` comes first: until it is set, a lock held by another connection (the WAL
/// recovery of the first connection after the last one closed, a checkpoint) fails the
/// statement at once with `database is locked` instead of waiting.
const SQLITE_PRAGMAS: &str = concat!(
    "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; ",
    sqlite_durable!(),
    "; PRAGMA foreign_keys = ON;"
);

fn sqlite_setup(
    url: &str,
) -> futures_util::future::BoxFuture<'_, diesel::ConnectionResult<SqliteConn>> {
    async move {
        let mut conn = SqliteConn::establish(url).await?;
        conn.batch_execute(SQLITE_PRAGMAS)
            .await
            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
        Ok(conn)
    }
    .boxed()
}

/// Creates the parent directory of a SQLite file.
pub fn ensure_parent_dir(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::internal_msg(format!(
                "cannot create the directory {}: {e}",
                parent.display()
            ))
        })?;
    }
    Ok(())
}

fn build<C>(manager: AsyncDieselConnectionManager<C>, settings: &DbSettings) -> Result<Pool<C>>
where
    C: PoolableConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    Pool::builder(manager)
        .max_size(settings.max_connections)
        .wait_timeout(Some(settings.timeout))
        .create_timeout(Some(settings.timeout))
        .recycle_timeout(Some(settings.timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| Error::internal_msg(format!("cannot build the connection pool: {e}")))
}

impl DbPool {
    /// Builds a pool (connections are opened lazily). For SQLite the file and its directory
    /// are created when missing.
    ///
    /// A connection handed back to the pool is checked without a round trip (`Fast`): it is
    /// dropped when its transaction was left open or broken, or (PostgreSQL) when its socket
    /// was closed, as by a database restart. The default (`Verified`) would send `SELECT 1`
    /// before every checkout, one extra round trip per request.
    pub fn new(target: &DbTarget, settings: &DbSettings) -> Result<DbPool> {
        match target {
            DbTarget::Postgres(url) => {
                let mut config = ManagerConfig::<AsyncPgConnection>::default();
                config.recycling_method = RecyclingMethod::Fast;
                let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
                    url.clone(),
                    config,
                );
                Ok(DbPool::Pg(build(manager, settings)?))
            }
            DbTarget::Sqlite(path) => {
                ensure_parent_dir(path)?;
                let mut config = ManagerConfig::<SqliteConn>::default();
                config.custom_setup = Box::new(sqlite_setup);
                config.recycling_method = RecyclingMethod::Fast;
                let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(
                    path.to_string_lossy().into_owned(),
                    config,
                );
                Ok(DbPool::Sqlite(build(manager, settings)?))
            }
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            DbPool::Pg(_) => Backend::Postgres,
            DbPool::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// `s` lower-cased as this database's SQL `lower()` lower-cases, so that a pattern
    /// compared with `lower(column)` matches what it should: every letter on PostgreSQL, ASCII
    /// letters only on SQLite (whose `lower()` leaves "Ö" as it is; lowering the pattern
    /// fully there would make "Örjan" miss itself).
    pub fn sql_lower(&self, s: &str) -> String {
        match self {
            DbPool::Pg(_) => s.to_lowercase(),
            DbPool::Sqlite(_) => s.to_ascii_lowercase(),
        }
    }

    /// Checks that the database answers a query (readiness).
    pub async fn ping(&self) -> Result<()> {
        crate::with_conn!(self, conn => {
            conn.batch_execute("SELECT 1")
                .await
                .map_err(|e| Error::unavailable("database", e))
        })
    }
}

/// Takes a connection from a pool; failures mean the database is unavailable.
pub async fn checkout<C>(pool: &Pool<C>) -> Result<Object<C>>
where
    C: PoolableConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    pool.get()
        .await
        .map_err(|e| Error::unavailable("database", PoolFailure(e.to_string())))
}

/// A pooled connection that goes back to the pool only when [`Lease::release`]d. Dropped
/// without that (an early return from the code using it, or its future cancelled while a
/// statement runs), it is closed instead, so that a connection whose state is unknown is
/// never handed out again.
///
/// SQLite needs this: diesel-async runs each statement on a blocking thread that shares the
/// connection, and a future cancelled mid-statement (a client that hangs up, a time-out, an
/// aborted task) leaves that thread running. Handed back to the pool, the connection would
/// make the pool's next check of it panic ("Cannot access shared transaction state",
/// diesel-rs/diesel_async#281). Transactions use it on both backends: a transaction whose
/// future was dropped is never reused half-finished.
pub struct Lease<C>
where
    C: PoolableConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    object: Option<Object<C>>,
}

impl<C> Lease<C>
where
    C: PoolableConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    /// Takes a connection from `pool`.
    pub async fn checkout(pool: &Pool<C>) -> Result<Self> {
        Ok(Self {
            object: Some(checkout(pool).await?),
        })
    }

    /// The connection.
    pub fn conn(&mut self) -> Result<&mut C> {
        self.object
            .as_deref_mut()
            .ok_or_else(|| Error::internal_msg("the connection was already released"))
    }

    /// Hands the connection back to the pool: call it once the last statement has returned.
    pub fn release(mut self) {
        drop(self.object.take());
    }
}

impl<C> Drop for Lease<C>
where
    C: PoolableConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            // Out of the pool: the connection closes when its last user lets go of it.
            drop(Object::take(object));
        }
    }
}

/// A pooled connection whose commits do not wait for the disk (see `with_conn_async_commit!`).
/// It goes back to the pool only once the usual durability is restored; dropped before
/// that (an early return, an error while restoring), the connection is closed instead, so
/// that no other query ever runs on it with the relaxed setting.
pub struct AsyncCommitConn<C>
where
    C: PoolableConnection + SimpleAsyncConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    lease: Lease<C>,
    restore: &'static str,
}

/// The statements that relax and restore the commit's wait for the disk, per backend:
/// PostgreSQL's asynchronous commit (`synchronous_commit`), SQLite's `synchronous` (in WAL
/// mode, `NORMAL` commits without an fsync; the next `FULL` commit or checkpoint of any
/// connection makes them durable).
fn async_commit_statements(backend: Backend) -> (&'static str, &'static str) {
    match backend {
        Backend::Postgres => ("SET synchronous_commit = off", "RESET synchronous_commit"),
        Backend::Sqlite => ("PRAGMA synchronous = NORMAL", sqlite_durable!()),
    }
}

impl<C> AsyncCommitConn<C>
where
    C: PoolableConnection + SimpleAsyncConnection + 'static,
    diesel::dsl::select<diesel::dsl::AsExprOf<i32, diesel::sql_types::Integer>>:
        diesel_async::methods::ExecuteDsl<C>,
    diesel::query_builder::SqlQuery: diesel::query_builder::QueryFragment<C::Backend>,
{
    /// Takes a connection from `pool` and relaxes its commits (a connection that could not
    /// be relaxed is closed: its state is unknown).
    pub async fn checkout(pool: &Pool<C>, backend: Backend) -> Result<Self> {
        let (relax, restore) = async_commit_statements(backend);
        let mut lease = Lease::checkout(pool).await?;
        lease
            .conn()?
            .batch_execute(relax)
            .await
            .map_err(|e| Error::unavailable("database", e))?;
        Ok(Self { lease, restore })
    }

    /// The connection.
    pub fn conn(&mut self) -> Result<&mut C> {
        self.lease.conn()
    }

    /// Restores the usual durability and hands the connection back to the pool (or closes it
    /// when that fails).
    pub async fn release(mut self) {
        let restored = match self.lease.conn() {
            Ok(conn) => conn
                .batch_execute(self.restore)
                .await
                .map_err(|e| Error::unavailable("database", e)),
            Err(e) => Err(e),
        };
        match restored {
            Ok(()) => self.lease.release(),
            // Logged like every other database failure (kind and cause); dropping the lease
            // closes the connection.
            Err(error) => {
                tracing::warn!(%error, "connection dropped: its commit setting could not be restored")
            }
        }
    }
}

#[derive(Debug)]
struct PoolFailure(String);

impl std::fmt::Display for PoolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PoolFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        assert_eq!(
            DbTarget::parse("sqlite://./data/steward.db"),
            Ok(DbTarget::Sqlite(PathBuf::from("./data/steward.db")))
        );
        assert_eq!(
            DbTarget::parse("sqlite:///var/lib/steward/s.db"),
            Ok(DbTarget::Sqlite(PathBuf::from("/var/lib/steward/s.db")))
        );
        assert_eq!(
            DbTarget::parse("postgresql://u@h/db").map(|t| t.backend()),
            Ok(Backend::Postgres)
        );
        assert!(DbTarget::parse("mysql://u@h/db").is_err());
        // Malformed: refused at once, without the password in the message.
        let e = DbTarget::parse("postgres://u:hunter2@[::1/db").unwrap_err();
        assert!(
            e.contains("not a valid PostgreSQL URL") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(DbTarget::parse("postgres://u@h1:5432,h2:5432/db").is_ok());
        assert!(DbTarget::parse("postgres://u@[::1]:5432/db?sslmode=disable").is_ok());
        assert!(DbTarget::parse("sqlite://").is_err());
        assert!(DbTarget::parse("").is_err());
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        let q = redact_url("postgres://u@h/db?sslmode=require&password=secret&sslpassword=s2");
        assert!(!q.contains("secret") && !q.contains("s2"), "{q}");
        assert!(q.contains("sslmode=require"), "{q}");
    }
}
