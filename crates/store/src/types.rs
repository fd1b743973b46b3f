//! Portable column types: one `schema.rs` for PostgreSQL and SQLite.
//!
//! | SQL type | PostgreSQL | SQLite | Rust |
//! |---|---|---|---|
//! | `DbUuid` | `uuid` | `BLOB` (16 bytes) | [`Id`] |
//! | `DbTime` | `timestamptz` | `TEXT` (RFC 3339, 6 digits, `Z`) | [`Ts`] |
//! | `DbJson` | `jsonb` | `TEXT` | [`Json`] |
//!
//! Booleans use diesel's `Bool` (SQLite `INTEGER CHECK (x IN (0,1))`).

use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types;
use diesel::sqlite::{Sqlite, SqliteValue};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// UUID column type.
#[derive(
    diesel::sql_types::SqlType, diesel::query_builder::QueryId, Clone, Copy, Debug, Default,
)]
#[diesel(postgres_type(oid = 2950, array_oid = 2951))]
#[diesel(sqlite_type(name = "Binary"))]
pub struct DbUuid;

/// Timestamp column type (UTC, microseconds).
#[derive(
    diesel::sql_types::SqlType, diesel::query_builder::QueryId, Clone, Copy, Debug, Default,
)]
#[diesel(postgres_type(oid = 1184, array_oid = 1185))]
#[diesel(sqlite_type(name = "Text"))]
pub struct DbTime;

/// JSON document column type.
#[derive(
    diesel::sql_types::SqlType, diesel::query_builder::QueryId, Clone, Copy, Debug, Default,
)]
#[diesel(postgres_type(oid = 3802, array_oid = 3807))]
#[diesel(sqlite_type(name = "Text"))]
pub struct DbJson;

/// A UUID value of a `DbUuid` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, AsExpression, FromSqlRow)]
#[diesel(sql_type = DbUuid)]
pub struct Id(pub Uuid);

/// A timestamp value of a `DbTime` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, AsExpression, FromSqlRow)]
#[diesel(sql_type = DbTime)]
pub struct Ts(pub OffsetDateTime);

/// A JSON value of a `DbJson` column.
#[derive(Clone, Debug, PartialEq, AsExpression, FromSqlRow)]
#[diesel(sql_type = DbJson)]
pub struct Json(pub Value);

/// The stored text of a `DbJson` column, unparsed (for streaming it out as it is). On
/// PostgreSQL it is `jsonb`'s text form (`{"a": 1}`), on SQLite the text written.
#[derive(Clone, Debug, PartialEq, FromSqlRow)]
pub struct RawJson(pub String);

impl<T: Into<Uuid>> From<T> for Id {
    fn from(value: T) -> Self {
        Id(value.into())
    }
}

impl Id {
    /// Converts into any identifier newtype of the kernel.
    pub fn into_id<T: From<Uuid>>(self) -> T {
        T::from(self.0)
    }
}

impl From<OffsetDateTime> for Ts {
    fn from(value: OffsetDateTime) -> Self {
        Ts(steward_core::clock::truncate(value))
    }
}

// --- PostgreSQL: delegate to diesel's native types. ---

impl ToSql<DbUuid, Pg> for Id {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <Uuid as ToSql<sql_types::Uuid, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<DbUuid, Pg> for Id {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        <Uuid as FromSql<sql_types::Uuid, Pg>>::from_sql(bytes).map(Id)
    }
}

impl ToSql<DbTime, Pg> for Ts {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <OffsetDateTime as ToSql<sql_types::Timestamptz, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<DbTime, Pg> for Ts {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        <OffsetDateTime as FromSql<sql_types::Timestamptz, Pg>>::from_sql(bytes).map(Ts)
    }
}

impl ToSql<DbJson, Pg> for Json {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <Value as ToSql<sql_types::Jsonb, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<DbJson, Pg> for Json {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        <Value as FromSql<sql_types::Jsonb, Pg>>::from_sql(bytes).map(Json)
    }
}

impl FromSql<DbJson, Pg> for RawJson {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        // jsonb's binary form: a version byte (1), then the text.
        match bytes.as_bytes().split_first() {
            Some((1, text)) => Ok(RawJson(String::from_utf8(text.to_vec())?)),
            _ => Err("unsupported jsonb version".into()),
        }
    }
}

// --- SQLite: bytes and text. ---

impl ToSql<DbUuid, Sqlite> for Id {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(&self.0.as_bytes()[..]);
        Ok(IsNull::No)
    }
}

impl FromSql<DbUuid, Sqlite> for Id {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        let bytes = <Vec<u8> as FromSql<sql_types::Binary, Sqlite>>::from_sql(value)?;
        Ok(Id(Uuid::from_slice(&bytes)?))
    }
}

impl ToSql<DbTime, Sqlite> for Ts {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(steward_core::clock::format_timestamp(self.0));
        Ok(IsNull::No)
    }
}

impl FromSql<DbTime, Sqlite> for Ts {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<sql_types::Text, Sqlite>>::from_sql(value)?;
        steward_core::clock::parse_timestamp(&text)
            .map(Ts)
            .ok_or_else(|| format!("invalid timestamp {text:?}").into())
    }
}

impl ToSql<DbJson, Sqlite> for Json {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}

impl FromSql<DbJson, Sqlite> for RawJson {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        <String as FromSql<sql_types::Text, Sqlite>>::from_sql(value).map(RawJson)
    }
}

impl FromSql<DbJson, Sqlite> for Json {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<sql_types::Text, Sqlite>>::from_sql(value)?;
        Ok(Json(serde_json::from_str(&text)?))
    }
}
