//! Storage for Steward: one diesel schema over PostgreSQL and SQLite, connection pools,
//! embedded migrations, and the Redis implementations of the kernel's `Cache` and `EventBus`.

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

/// Maps a diesel error to a service error: unique violations are conflicts, a lost
/// connection is "unavailable", the rest is internal (the cause goes to the log only).
pub fn db_error(e: DieselError) -> Error {
    match &e {
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => Error::new(
            ErrorKind::Conflict,
            "a record with the same unique value already exists",
        )
        .with_source(e),
        DieselError::DatabaseError(DatabaseErrorKind::ClosedConnection, _)
        | DieselError::DatabaseError(DatabaseErrorKind::UnableToSendCommand, _) => {
            Error::unavailable("database", e)
        }
        DieselError::NotFound => Error::not_found("the record was not found").with_source(e),
        _ => Error::internal(e),
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
                let mut object = $crate::pool::checkout(pool).await?;
                let $conn = &mut *object;
                $body
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
