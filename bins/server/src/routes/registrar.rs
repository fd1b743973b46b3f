//! One registration for a route and its documentation: a handler is registered by its
//! `#[utoipa::path]`, whose method and path become the actix route and whose operation becomes
//! the OpenAPI document's. A route therefore cannot exist undocumented, and the document
//! cannot describe a route that does not exist (ADR 0013).

use std::collections::BTreeSet;

use actix_web::http::Method;
use actix_web::web;
use utoipa::openapi::path::{HttpMethod, Paths};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

/// Routes gathered in registration order, with their documentation.
#[derive(Default)]
pub struct Registrar {
    routes: Vec<(Method, String, actix_web::Route)>,
    paths: Paths,
    schemas: Vec<(String, RefOr<Schema>)>,
}

fn actix_method(m: &HttpMethod) -> Method {
    match m {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Delete => Method::DELETE,
        HttpMethod::Patch => Method::PATCH,
        HttpMethod::Options => Method::OPTIONS,
        HttpMethod::Head => Method::HEAD,
        HttpMethod::Trace => Method::TRACE,
    }
}

impl Registrar {
    /// Registers `route` (`web::to(handler)`) at the method and path of the handler's
    /// documentation `P` (the `__path_handler` struct `#[utoipa::path]` generates), and adds
    /// the operation, its tags and the schemas it refers to, to the document.
    pub fn add<P>(&mut self, route: actix_web::Route) -> &mut Self
    where
        P: utoipa::Path + for<'t> utoipa::__dev::Tags<'t> + utoipa::__dev::SchemaReferences,
    {
        let path = P::path();
        let methods = P::methods();
        // One handler, one method: `actix_web::Route` cannot be shared between methods.
        let method = match methods.as_slice() {
            [m] => actix_method(m),
            _ => panic!("{path}: a handler documents exactly one method"),
        };
        let mut operation = P::operation();
        let tags: Vec<String> = P::tags().into_iter().map(str::to_owned).collect();
        if !tags.is_empty() {
            operation.tags = Some(tags);
        }
        self.paths.add_path_operation(&path, methods, operation);
        P::schemas(&mut self.schemas);
        self.routes
            .push((method.clone(), path, route.method(method)));
        self
    }

    /// The registered routes as (METHOD, path), in registration order.
    pub fn operations(&self) -> Vec<(String, String)> {
        self.routes
            .iter()
            .map(|(m, p, _)| (m.as_str().to_owned(), p.clone()))
            .collect()
    }

    /// The documented operations and the schemas they use.
    pub fn into_documentation(self) -> (Paths, Vec<(String, RefOr<Schema>)>) {
        (self.paths, self.schemas)
    }

    /// The distinct paths in resource order (see [`Registrar::register`]).
    fn resource_order(routes: &[(Method, String, actix_web::Route)]) -> Vec<String> {
        let mut order: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        for (_, path, _) in routes {
            if seen.insert(path.clone()) {
                order.push(path.clone());
            }
        }
        let (mut literal, patterns): (Vec<String>, Vec<String>) =
            order.into_iter().partition(|p| !p.contains('{'));
        literal.extend(patterns);
        literal
    }

    /// Hands the routes to actix: one resource per path (so that another method answers
    /// 405). Literal paths come first, then paths with `{…}` segments, each in the order the
    /// paths were first registered: a literal path is never shadowed by a pattern (`/x/bulk`
    /// before `/x/{id}`), and the router, which tries resources in order, answers a literal
    /// path with string comparisons only instead of a regular expression per earlier pattern.
    pub fn register(self, cfg: &mut web::ServiceConfig) {
        let order = Self::resource_order(&self.routes);
        let mut routes = self.routes;
        for path in order {
            let mut resource = web::resource(path.as_str());
            let mut rest = Vec::new();
            for (m, p, r) in routes {
                if p == path {
                    resource = resource.route(r);
                } else {
                    rest.push((m, p, r));
                }
            }
            routes = rest;
            cfg.service(resource);
        }
    }
}

/// An operation: (METHOD, path).
pub type Op = (String, String);

/// The differences between the registered routes and the document's operations:
/// (registered but undocumented, documented but not registered).
pub fn compare(registered: &[Op], documented: &[Op]) -> (Vec<Op>, Vec<Op>) {
    let r: BTreeSet<_> = registered.iter().cloned().collect();
    let d: BTreeSet<_> = documented.iter().cloned().collect();
    (
        r.difference(&d).cloned().collect(),
        d.difference(&r).cloned().collect(),
    )
}

/// The document's operations as (METHOD, path).
pub fn documented(openapi: &utoipa::openapi::OpenApi) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in &openapi.paths.paths {
        for (m, op) in [
            ("GET", &item.get),
            ("PUT", &item.put),
            ("POST", &item.post),
            ("DELETE", &item.delete),
            ("PATCH", &item.patch),
            ("OPTIONS", &item.options),
            ("HEAD", &item.head),
            ("TRACE", &item.trace),
        ] {
            if op.is_some() {
                out.push((m.to_owned(), path.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
            .collect()
    }

    /// The comparison reports a route added without documentation, and documentation of a
    /// route that does not exist.
    #[test]
    fn the_comparison_finds_both_kinds_of_difference() {
        let documented = ops(&[("GET", "/a"), ("POST", "/a"), ("GET", "/b/{id}")]);
        let registered = ops(&[("GET", "/a"), ("POST", "/a"), ("GET", "/b/{id}")]);
        assert_eq!(compare(&registered, &documented), (vec![], vec![]));
        let mut added = registered.clone();
        added.push(("DELETE".into(), "/b/{id}".into()));
        assert_eq!(
            compare(&added, &documented),
            (ops(&[("DELETE", "/b/{id}")]), vec![])
        );
        let fewer = ops(&[("GET", "/a"), ("GET", "/b/{id}")]);
        assert_eq!(
            compare(&fewer, &documented),
            (vec![], ops(&[("POST", "/a")]))
        );
    }

    /// Literal paths are handed to the router before patterns, each group in registration
    /// order, and a path registered for two methods is one resource.
    #[test]
    fn literal_paths_come_before_patterns() {
        let routes: Vec<(Method, String, actix_web::Route)> = [
            (Method::GET, "/x/{id}"),
            (Method::GET, "/health"),
            (Method::DELETE, "/x/{id}"),
            (Method::POST, "/x/bulk"),
            (Method::GET, "/y/{id}/z"),
            (Method::GET, "/y"),
        ]
        .into_iter()
        .map(|(m, p)| (m, p.to_owned(), web::route()))
        .collect();
        assert_eq!(
            Registrar::resource_order(&routes),
            ["/health", "/x/bulk", "/y", "/x/{id}", "/y/{id}/z"]
        );
    }
}
