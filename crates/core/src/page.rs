//! Pagination (contract 4): `skip` and `offset` are aliases, `limit` is clamped to a maximum.

use serde::Serialize;

use crate::validate::Query;
use crate::Result;

/// The default page size everywhere.
pub const DEFAULT_LIMIT: i64 = 50;
/// The maximum page size of lists that do not say otherwise.
pub const MAX_LIMIT: i64 = 200;

/// The effective paging of a list request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    pub skip: i64,
    pub limit: i64,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            skip: 0,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl PageRequest {
    /// Reads `skip`/`offset`/`limit` from a query, recording every problem in it.
    /// A `limit` above `max` is clamped, not refused.
    pub fn read(query: &mut Query<'_>, max: i64) -> PageRequest {
        let skip = query.int("skip", 0, None);
        let offset = query.int("offset", 0, None);
        let limit = query.int("limit", 1, None);
        let skip = match (skip, offset) {
            (Some(s), Some(o)) if s != o => {
                query.error(
                    "offset",
                    "conflicts with skip; give one of them or the same value",
                );
                s
            }
            (Some(s), _) => s,
            (None, Some(o)) => o,
            (None, None) => 0,
        };
        PageRequest {
            skip,
            limit: limit.unwrap_or(DEFAULT_LIMIT).min(max),
        }
    }

    /// Convenience: read paging alone from a query and fail on any problem.
    pub fn from_query(query: &mut Query<'_>, max: i64) -> Result<PageRequest> {
        let page = Self::read(query, max);
        query.finish()?;
        Ok(page)
    }
}

/// A page of a collection: `{items, total, skip, limit}`.
#[derive(Clone, Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub skip: i64,
    pub limit: i64,
}

impl<T> Page<T> {
    pub fn new(items: Vec<T>, total: i64, request: PageRequest) -> Self {
        Self {
            items,
            total,
            skip: request.skip,
            limit: request.limit,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
            skip: self.skip,
            limit: self.limit,
        }
    }
}

/// The one list envelope of the document: `Page` is the generic `{items, total, skip, limit}`
/// schema, and a `Page<T>` in an operation is `allOf: [Page, {items: [T]}]`.
impl<T: utoipa::ToSchema> utoipa::__dev::ComposeSchema for Page<T> {
    fn compose(
        generics: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AllOfBuilder, ArrayBuilder, ObjectBuilder};
        use utoipa::openapi::{Ref, RefOr};
        // A reference to the item type (registered by `schemas`), not the inlined copy the
        // derive macro passes in `generics`.
        let _ = generics;
        let item: RefOr<_> = RefOr::Ref(Ref::from_schema_name(T::name()));
        AllOfBuilder::new()
            .item(Ref::from_schema_name("Page"))
            .item(
                ObjectBuilder::new()
                    .property("items", ArrayBuilder::new().items(item))
                    .required("items"),
            )
            .into()
    }
}

impl<T: utoipa::ToSchema> utoipa::ToSchema for Page<T> {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("Page")
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push(("Page".to_owned(), envelope().into()));
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

/// The generic envelope: the items of any type, and the paging figures.
fn envelope() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let int = |description: &str, min: f64| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Int64,
            )))
            .minimum(Some(min))
            .description(Some(description))
    };
    ObjectBuilder::new()
        .description(Some(
            "A page of a collection (contract 4): the items, the total matching the filters, \
             and the effective skip and limit.",
        ))
        .property("items", ArrayBuilder::new().items(ObjectBuilder::new()))
        .property("total", int("items matching the filters, all pages", 0.0))
        .property("skip", int("items skipped", 0.0))
        .property(
            "limit",
            int("the effective page size (after clamping)", 1.0),
        )
        .required("items")
        .required("total")
        .required("skip")
        .required("limit")
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(q: &str, max: i64) -> Result<PageRequest> {
        let pairs = crate::validate::parse_query_string(q);
        let mut query = Query::new(&pairs);
        PageRequest::from_query(&mut query, max)
    }

    fn bad_field(q: &str) -> String {
        match page(q, 200) {
            Ok(p) => panic!("{q} accepted as {p:?}"),
            Err(e) => e.errors[0].field.clone(),
        }
    }

    #[test]
    fn defaults_and_aliases() {
        assert_eq!(page("", 200).ok(), Some(PageRequest { skip: 0, limit: 50 }));
        assert_eq!(page("offset=7", 200).ok().map(|p| p.skip), Some(7));
        assert_eq!(page("skip=3&offset=3", 200).ok().map(|p| p.skip), Some(3));
        assert_eq!(page("limit=1000", 100).ok().map(|p| p.limit), Some(100));
    }

    #[test]
    fn errors_name_the_parameter() {
        assert_eq!(bad_field("limit=0"), "limit");
        assert_eq!(bad_field("limit=-1"), "limit");
        assert_eq!(bad_field("limit=ten"), "limit");
        assert_eq!(bad_field("skip=-5"), "skip");
        assert_eq!(bad_field("offset=x"), "offset");
        assert_eq!(bad_field("skip=1&offset=2"), "offset");
    }
}
