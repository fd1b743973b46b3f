//! The outermost middleware: request id, tracing span and access log, the early body-size
//! check (413 from `Content-Length` alone), and the rule that every error is a problem document.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use steward_core::ErrorKind;
use tracing::Instrument;

use crate::error::{problem_response, PROBLEM_JSON, REQUEST_ID};
use crate::state::AppState;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request id of a request (also in the `X-Request-Id` response header).
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// A client-supplied id is kept when it is short and printable; otherwise a new one is made.
fn request_id_of(req: &ServiceRequest) -> String {
    req.headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// Paths whose error bodies are not problem documents (readiness answers its own body).
fn keeps_own_error_body(path: &str) -> bool {
    matches!(path, "/health/ready" | "/api/v1/health/ready")
}

fn declared_length(req: &ServiceRequest) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

fn fallback_detail(kind: ErrorKind, method: &str, path: &str) -> String {
    match kind {
        ErrorKind::NotFound => format!("no resource at {path}"),
        ErrorKind::MethodNotAllowed => format!("{method} is not allowed on {path}"),
        ErrorKind::PayloadTooLarge => "the request body is too large".to_owned(),
        ErrorKind::BadRequest => "the request could not be understood".to_owned(),
        ErrorKind::Internal => "an unexpected error occurred".to_owned(),
        other => other.title().to_owned(),
    }
}

pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let id = request_id_of(&req);
    req.extensions_mut().insert(RequestId(id.clone()));
    let method = req.method().to_string();
    let path = req.path().to_owned();
    let credentialed = carries_credential(&req);
    let span = tracing::info_span!("request", request_id = %id, method = %method, path = %path);
    let limit = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.settings.max_request_body_bytes as u64);

    let mut res: ServiceResponse<BoxBody> = REQUEST_ID
        .scope(id.clone(), async {
            if let (Some(limit), Some(len)) = (limit, declared_length(&req)) {
                if len > limit {
                    let detail = format!(
                        "the request body of {len} bytes exceeds the limit of {limit} bytes"
                    );
                    let res = problem_response(ErrorKind::PayloadTooLarge, &detail, &[]);
                    return Ok(req.into_response(res));
                }
            }
            // Handler and extractor errors arrive as responses; an `Err` here comes from a
            // middleware and is turned into a response by actix itself.
            next.call(req)
                .await
                .map(|res| normalize(res.map_into_boxed_body(), &method, &path))
        })
        .instrument(span.clone())
        .await?;

    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), v);
    }
    security_headers(res.headers_mut(), credentialed, &path);
    json_charset(res.headers_mut());
    let status = res.status().as_u16();
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(status, elapsed_ms, "request served");
        } else {
            tracing::info!(status, elapsed_ms, "request served");
        }
    });
    Ok(res)
}

/// Whether the request carries a credential of any kind (headers, or the WebSocket's `?token=`).
fn carries_credential(req: &ServiceRequest) -> bool {
    let h = req.headers();
    h.contains_key("x-api-key")
        || h.contains_key(header::AUTHORIZATION)
        || h.contains_key("x-admin-key")
        || req
            .query_string()
            .split('&')
            .any(|pair| pair.starts_with("token="))
}

/// The headers every response carries unless its handler set its own (the console sets a
/// stricter set): no MIME sniffing, no framing, no referrer; a response that is not an HTML page
/// (JSON, problems, exports, metrics) gets a CSP that allows nothing, so that a body rendered by
/// mistake runs nothing, and an HTML page without its own CSP gets `PAGE_CSP`; API answers and every answer to a credentialed request are never
/// stored by a cache (tokens, keys and tenant data).
fn security_headers(headers: &mut header::HeaderMap, credentialed: bool, path: &str) {
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    let html = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        let csp = if html { PAGE_CSP } else { API_CSP };
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(csp),
        );
    }
    let api = path.starts_with("/api/") || path.starts_with("/webhooks/");
    if (api || credentialed) && !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// The Content-Security-Policy of responses that are data, not pages.
pub const API_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// The Content-Security-Policy of HTML pages that set none of their own (the API reference at
/// `/docs/`; the console sets a stricter one): scripts, styles and data from this server only
/// (inline styles allowed, which Swagger UI sets from its script), images also as `data:`.
pub const PAGE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Contract 2: JSON responses are `application/json; charset=utf-8` (actix's `.json()` names
/// no charset).
fn json_charset(headers: &mut actix_web::http::header::HeaderMap) {
    let plain = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if plain {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
    }
}

/// Turns any error response that is not already a problem document into one.
fn normalize(res: ServiceResponse<BoxBody>, method: &str, path: &str) -> ServiceResponse<BoxBody> {
    let status = res.status().as_u16();
    if status < 400 || keeps_own_error_body(path) {
        return res;
    }
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(PROBLEM_JSON));
    if is_problem {
        return res;
    }
    let kind = ErrorKind::from_status(status);
    if kind == ErrorKind::Internal {
        if let Some(e) = res.response().error() {
            tracing::error!(error = %e, "request failed");
        }
    }
    let detail = fallback_detail(kind, method, path);
    let (req, old) = res.into_parts();
    // Statuses outside the contract's table become the nearest one of it (400 or 500).
    let mut new = problem_response(kind, &detail, &[]);
    for name in [header::ALLOW, header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
        if let Some(v) = old.headers().get(&name) {
            new.headers_mut().insert(name.clone(), v.clone());
        }
    }
    ServiceResponse::new(req, new)
}

/// `HEAD` on any route that answers `GET` (RFC 9110 §9.3.2: a server that answers `GET`
/// answers `HEAD`): the request is routed as `GET` and answered with the same status and
/// headers and no body. Health checkers and proxies that probe with `HEAD` then see the same
/// answer as a `GET`, not 405.
pub async fn head_as_get(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let head = req.method() == actix_web::http::Method::HEAD;
    if head {
        req.head_mut().method = actix_web::http::Method::GET;
    }
    let res = next.call(req).await?;
    Ok(if head {
        res.map_body(|_, _| BoxBody::new(()))
    } else {
        res.map_into_boxed_body()
    })
}
