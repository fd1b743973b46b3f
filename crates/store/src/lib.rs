//! Storage for Steward: one diesel schema over PostgreSQL and SQLite, connection pools,
//! embedded migrations, and the Redis implementations of the kernel's `Cache` and `EventBus`.

pub mod external;
pub mod jobs;
pub mod migrate;
pub mod pool;
pub mod redis;
pub mod schedule;
pub mod schema;
pub mod testing;
pub mod training;
pub mod types;

pub use pool::{Backend, DbPool, DbSettings, DbTarget};
pub use types::{Id, Json, RawJson, Ts};

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use steward_core::{Error, ErrorKind};

/// Maps a diesel error to a service error: unique violations are conflicts, a lost or
/// refused connection (at whatever moment it happens) is "unavailable" (503), the rest is
/// internal (the cause goes to the log only).
pub fn db_error(e: DieselError) -> Error {
    if is_unavailable(&e) {
        return Error::unavailable("database", e);
    }
    match &e {
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => Error::new(
            ErrorKind::Conflict,
            "a record with the same unique value already exists",
        )
        .with_source(e),
        DieselError::NotFound => Error::not_found("the record was not found").with_source(e),
        DieselError::DatabaseError(_, info) if is_unstorable_text(info.message()) => Error::new(
            ErrorKind::BadRequest,
            "a text value contains a character the database cannot store (NUL, U+0000)",
        )
        .with_source(e),
        _ => Error::internal(e),
    }
}

/// Whether a database error says a bound text value cannot be stored or compared: PostgreSQL
/// refuses NUL in text (22021 `invalid byte sequence for encoding "UTF8": 0x00`) and in JSON
/// (22P05 `unsupported Unicode escape sequence`). The value came from the request, so this is
/// the request's fault (400), whichever query it reached.
fn is_unstorable_text(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("invalid byte sequence for encoding") || m.contains("unsupported unicode escape")
}

/// Messages (lower case, matched as substrings) of server errors that mean the database
/// cannot serve the request now rather than that the request is wrong. diesel-async reports
/// PostgreSQL errors without their SQLSTATE (kind `Unknown` with the server's message), so
/// the message is what is left to go by:
/// - PostgreSQL 57P01 `terminating connection due to administrator command` (a fast or
///   immediate shutdown while a statement runs), 57P02 (`… because of crash of another
///   server process`), 57P05 and the idle time-outs: every `terminating connection …`;
/// - 57P03 `the database system is shutting down` / `is starting up` / `is in recovery
///   mode` / `is not yet accepting connections`;
/// - 53300 `sorry, too many clients already`, `remaining connection slots are reserved …`;
/// - lost connections as the drivers word them (`server closed the connection
///   unexpectedly`, `connection closed`, I/O errors);
/// - SQLite `database is locked` (SQLITE_BUSY after `busy_timeout`), `database table is
///   locked` (SQLITE_LOCKED), `disk I/O error`, `unable to open database file`.
const UNAVAILABLE_MESSAGES: &[&str] = &[
    "terminating connection",
    "the database system is",
    "too many clients already",
    "remaining connection slots are reserved",
    "server closed the connection",
    "connection closed",
    "connection reset",
    "broken pipe",
    "i/o error",
    "error communicating with",
    "could not receive data",
    "could not send data",
    "ssl connection has been closed",
    "database is locked",
    "database table is locked",
    "database is busy",
    "unable to open database file",
];

/// Whether a diesel error means the database is unreachable, going away or overloaded at
/// this moment (a retry later may succeed), as opposed to a fault of the request or of the
/// code.
pub fn is_unavailable(e: &DieselError) -> bool {
    match e {
        DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection
            | DatabaseErrorKind::UnableToSendCommand
            | DatabaseErrorKind::ReadOnlyTransaction,
            _,
        ) => true,
        DieselError::DatabaseError(_, info) => {
            let message = info.message().to_ascii_lowercase();
            UNAVAILABLE_MESSAGES.iter().any(|m| message.contains(m))
        }
        // A transaction whose commit and rollback both failed, or whose manager gave up
        // (a rollback that could not be sent): the connection is gone.
        DieselError::RollbackErrorOnCommit {
            rollback_error,
            commit_error,
        } => is_unavailable(commit_error) || is_unavailable(rollback_error),
        DieselError::BrokenTransactionManager => true,
        _ => false,
    }
}

/// `.db()?` on diesel results.
pub trait DbResultExt<T> {
    fn db(self) -> Result<T, Error>;
}

impl<T> DbResultExt<T> for Result<T, DieselError> {
    fn db(self) -> Result<T, Error> {
        self.map_err(db_error)
    }
}

/// Runs `$body` with `$conn` bound to a pooled connection of whichever backend `$pool` is.
/// The body is compiled once per backend, so one query text serves both.
///
/// ```ignore
/// let n: i64 = with_conn!(&pool, conn => tenants::table.count().get_result(conn).await.db())?;
/// ```
#[macro_export]
macro_rules! with_conn {
    ($pool:expr, $conn:ident => $body:expr) => {
        match $pool {
            $crate::DbPool::Pg(pool) => {
                let mut object = $crate::pool::checkout(pool).await?;
                let $conn = &mut *object;
                $body
            }
            $crate::DbPool::Sqlite(pool) => {
                // Back to the pool only when `$body` ran to its end (see `pool::Lease`).
                let mut lease = $crate::pool::Lease::checkout(pool).await?;
                let result = {
                    let $conn = lease.conn()?;
                    $body
                };
                lease.release();
                result
            }
        }
    };
}

/// Like `with_conn!`, for writes that may be lost in an operating-system crash or power
/// loss but must not hold other writers up while the disk syncs (SQLite has one write lock,
/// held until the commit's fsync returns): the commits of `$body` do not wait for the disk.
/// They become durable with the next ordinary commit (SQLite: of any connection; PostgreSQL:
/// within `wal_writer_delay`). A process crash loses nothing that was committed. The
/// connection returns to the pool only with the usual setting restored.
#[macro_export]
macro_rules! with_conn_async_commit {
    ($pool:expr, $conn:ident => $body:expr) => {
        match $pool {
            $crate::DbPool::Pg(pool) => {
                let mut guard =
                    $crate::pool::AsyncCommitConn::checkout(pool, $crate::Backend::Postgres)
                        .await?;
                let result = {
                    let $conn = guard.conn()?;
                    $body
                };
                guard.release().await;
                result
            }
            $crate::DbPool::Sqlite(pool) => {
                let mut guard =
                    $crate::pool::AsyncCommitConn::checkout(pool, $crate::Backend::Sqlite).await?;
                let result = {
                    let $conn = guard.conn()?;
                    $body
                };
                guard.release().await;
                result
            }
        }
    };
}

/// Counts the rows of a filtered query and loads one page of it, on either backend:
/// `(total, rows)`. `$query` names a local `macro_rules!` that builds the (boxed) filtered
/// query, so that each backend gets its own query type.
///
/// ```ignore
/// macro_rules! filtered { () => { users::table.filter(users::tenant_id.eq(t)).into_boxed() } }
/// let (total, rows): (i64, Vec<UserRow>) =
///     count_and_page!(&db, filtered, users::created_at.desc(), UserRow::as_select(), page)?;
/// ```
#[macro_export]
macro_rules! count_and_page {
    ($pool:expr, $query:ident, $order:expr, $select:expr, $page:expr) => {
        $crate::with_conn!($pool, conn => {
            let total: i64 = $query!()
                .count()
                .get_result(conn)
                .await
                .map_err($crate::db_error)?;
            let rows = $query!()
                .order($order)
                .offset($page.skip)
                .limit($page.limit)
                .select($select)
                .load(conn)
                .await
                .map_err($crate::db_error)?;
            Ok::<_, steward_core::Error>((total, rows))
        })
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(kind: DatabaseErrorKind, message: &str) -> DieselError {
        DieselError::DatabaseError(kind, Box::new(message.to_owned()))
    }

    #[test]
    fn lost_or_refused_connections_are_unavailable() {
        for message in [
            "terminating connection due to administrator command",
            "terminating connection because of crash of another server process",
            "the database system is shutting down",
            "the database system is starting up",
            "the database system is in recovery mode",
            "sorry, too many clients already",
            "server closed the connection unexpectedly",
            "database is locked",
            "database table is locked",
            "disk I/O error",
        ] {
            let e = db_error(server_error(DatabaseErrorKind::Unknown, message));
            assert_eq!(e.status(), 503, "{message}");
            assert_eq!(e.kind.code(), "service_unavailable", "{message}");
            assert_eq!(e.detail, "the database is unavailable");
        }
        for kind in [
            DatabaseErrorKind::ClosedConnection,
            DatabaseErrorKind::UnableToSendCommand,
            DatabaseErrorKind::ReadOnlyTransaction,
        ] {
            assert_eq!(db_error(server_error(kind, "x")).status(), 503);
        }
        assert_eq!(
            db_error(DieselError::BrokenTransactionManager).status(),
            503
        );
        let commit = DieselError::RollbackErrorOnCommit {
            rollback_error: Box::new(server_error(
                DatabaseErrorKind::UnableToSendCommand,
                "connection closed",
            )),
            commit_error: Box::new(server_error(
                DatabaseErrorKind::Unknown,
                "terminating connection due to administrator command",
            )),
        };
        assert_eq!(db_error(commit).status(), 503);
    }

    #[test]
    fn text_the_database_cannot_store_is_a_bad_request() {
        for message in [
            "invalid byte sequence for encoding \"UTF8\": 0x00",
            "unsupported Unicode escape sequence",
        ] {
            let e = db_error(server_error(DatabaseErrorKind::Unknown, message));
            assert_eq!(e.status(), 400, "{message}");
            assert!(e.detail.contains("NUL"), "{message}");
        }
    }

    #[test]
    fn other_errors_keep_their_status() {
        assert_eq!(
            db_error(server_error(
                DatabaseErrorKind::UniqueViolation,
                "duplicate key"
            ))
            .status(),
            409
        );
        assert_eq!(db_error(DieselError::NotFound).status(), 404);
        let e = db_error(server_error(
            DatabaseErrorKind::Unknown,
            "column \"secret\" does not exist",
        ));
        assert_eq!(e.status(), 500);
        assert!(!e.detail.contains("secret"));
        assert_eq!(
            db_error(server_error(DatabaseErrorKind::ForeignKeyViolation, "fk")).status(),
            500
        );
    }
}
