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
