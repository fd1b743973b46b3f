//! OpenAPI schema helpers shared by the domain crates: string enumerations drawn from the
//! same constants the validation uses (so the document cannot drift from the rules), and the
//! query parameters of every paginated list (contract 4).
//!
//! Domain types derive `utoipa::ToSchema`; `utoipa` is a description library, not a web
//! framework, so the domain crates stay free of actix.

use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::Object;

/// A string restricted to `values`.
pub fn one_of(values: &[&str]) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .build()
}

/// A string restricted to `values`, or `null`.
pub fn nullable_one_of(values: &[&str]) -> Object {
    let mut all: Vec<serde_json::Value> = values.iter().map(|v| (*v).into()).collect();
    all.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(
            [Type::String, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .enum_values(Some(all))
        .build()
}

/// The role names, lowest first.
pub fn role() -> Object {
    let names: Vec<&str> = crate::Role::ALL.iter().rev().map(|r| r.as_str()).collect();
    one_of(&names)
}

/// An RFC 3339 timestamp.
pub fn timestamp() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::DateTime,
        )))
        .build()
}

/// An RFC 3339 timestamp or `null`.
pub fn nullable_timestamp() -> Object {
    ObjectBuilder::new()
        .schema_type(
            [Type::String, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::DateTime,
        )))
        .build()
}

/// Any JSON value (free-form fields: `input`, `context`, `settings`, …).
pub fn any() -> Object {
    ObjectBuilder::new().build()
}

/// The paging parameters of every list (contract 4). `skip` and `offset` are aliases; a
/// `limit` above the list's maximum is clamped, not refused.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct PageParams {
    /// Items to skip (alias of `offset`).
    #[param(minimum = 0)]
    skip: Option<i64>,
    /// Items to skip (alias of `skip`; when both are given they must be equal).
    #[param(minimum = 0)]
    offset: Option<i64>,
    /// Page size; clamped to the list's maximum (200 unless the operation says otherwise).
    #[param(minimum = 1, example = 50)]
    limit: Option<i64>,
}
