//! The operator console (issue 18): static files under `bins/server/dashboard/`, embedded in
//! the binary at compile time and served at `/dashboard` (docs/dashboard.md, ADR 0014).
//!
//! The console is a client of the public API only; this module serves files and nothing else.
//! `DASHBOARD_DIR` (development only) serves the same names from a directory instead, so the
//! JavaScript can be changed without rebuilding.

use std::collections::HashMap;
use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};
use steward_core::Error;

use crate::error::ApiError;

/// Every file of the console: (name under `dashboard/`, contents). A unit test checks that
/// this table and the directory hold the same files.
const FILES: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../dashboard/index.html")),
    ("app.css", include_bytes!("../dashboard/app.css")),
    ("app.js", include_bytes!("../dashboard/app.js")),
    ("api.js", include_bytes!("../dashboard/api.js")),
    ("ui.js", include_bytes!("../dashboard/ui.js")),
    ("live.js", include_bytes!("../dashboard/live.js")),
    ("views.js", include_bytes!("../dashboard/views.js")),
    ("favicon.svg", include_bytes!("../dashboard/favicon.svg")),
];

/// The Content-Security-Policy of every console response: nothing inline, nothing foreign.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; \
form-action 'self'";

/// Serves the console: `/dashboard`, `/dashboard/{path}` and `/login` (where the SSO callback
/// sends its failures, contract 7.3). These are pages, not API operations: like `/docs`, they
/// are registered outside the OpenAPI registrar.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/dashboard")
            .route(web::get().to(page))
            .route(web::head().to(page)),
    )
    .service(
        web::resource("/dashboard/{path:.*}")
            .route(web::get().to(asset))
            .route(web::head().to(asset)),
    )
    .service(
        web::resource("/login")
            .route(web::get().to(page))
            .route(web::head().to(page)),
    );
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

fn etag_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// The embedded files with their ETags, computed once.
fn embedded() -> &'static HashMap<&'static str, (&'static [u8], String)> {
    static TABLE: OnceLock<HashMap<&'static str, (&'static [u8], String)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        FILES
            .iter()
            .map(|(name, bytes)| (*name, (*bytes, etag_of(bytes))))
            .collect()
    })
}

/// The development override directory, when `DASHBOARD_DIR` is set.
fn override_dir() -> Option<&'static std::path::Path> {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("DASHBOARD_DIR")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    })
    .as_deref()
}

/// A safe file name: path segments of `[A-Za-z0-9._-]`, none starting with a dot.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('/').all(|seg| {
            !seg.is_empty()
                && !seg.starts_with('.')
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

/// The contents and ETag of a console file, from the override directory or the binary.
async fn load(name: &str) -> Option<(Vec<u8>, String)> {
    if !safe_name(name) {
        return None;
    }
    if let Some(dir) = override_dir() {
        let bytes = tokio::fs::read(dir.join(name)).await.ok()?;
        let etag = etag_of(&bytes);
        return Some((bytes, etag));
    }
    embedded()
        .get(name)
        .map(|(bytes, etag)| (bytes.to_vec(), etag.clone()))
}

fn not_modified(req: &HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        })
}

fn respond(req: &HttpRequest, name: &str, bytes: Vec<u8>, etag: String) -> HttpResponse {
    let status = if not_modified(req, &etag) {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut res = HttpResponse::build(status);
    res.insert_header((header::ETAG, etag))
        // Revalidate every time: names are not fingerprinted, an unchanged file costs a 304.
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"));
    if status == StatusCode::NOT_MODIFIED {
        return res.finish();
    }
    res.insert_header((
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    ));
    res.body(bytes)
}

async fn serve(req: &HttpRequest, name: &str) -> Result<HttpResponse, ApiError> {
    match load(name).await {
        Some((bytes, etag)) => Ok(respond(req, name, bytes, etag)),
        None => Err(Error::not_found(format!("no resource at {}", req.path())).into()),
    }
}

/// The console's page (`index.html`); the client reads its route from the URL fragment.
async fn page(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    serve(&req, "index.html").await
}

/// A console file; a path without an extension is a client-side route and answers the page.
async fn asset(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let path = path.into_inner();
    let path = path.trim_end_matches('/');
    let last = path.rsplit('/').next().unwrap_or_default();
    if path.is_empty() || !last.contains('.') {
        return serve(&req, "index.html").await;
    }
    serve(&req, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded table lists exactly the files of the directory.
    #[test]
    fn table_matches_the_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboard");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
        for (name, _) in FILES {
            assert_ne!(content_type(name), "application/octet-stream", "{name}");
        }
    }

    #[test]
    fn names_outside_the_directory_are_refused() {
        assert!(safe_name("app.js"));
        assert!(safe_name("img/logo.svg"));
        for bad in [
            "",
            "../Cargo.toml",
            "a//b",
            ".env",
            "x/../y",
            "a\\b",
            "/etc/passwd",
        ] {
            assert!(!safe_name(bad), "{bad}");
        }
    }

    #[test]
    fn etags_match_with_and_without_weak_prefix() {
        let tag = etag_of(b"x");
        let req = actix_web::test::TestRequest::default()
            .insert_header((header::IF_NONE_MATCH, format!("W/{tag}")))
            .to_http_request();
        assert!(not_modified(&req, &tag));
        let req = actix_web::test::TestRequest::default()
            .insert_header((header::IF_NONE_MATCH, "\"other\""))
            .to_http_request();
        assert!(!not_modified(&req, &tag));
    }
}
