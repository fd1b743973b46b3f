//! Service errors as RFC 9457 problem documents (contract 3).

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Value};
use steward_core::{Error, ErrorKind, FieldError};

tokio::task_local! {
    /// The id of the request being served (set by the request middleware).
    pub static REQUEST_ID: String;
}

/// The current request id, when inside a request.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(|id| id.clone()).ok()
}

pub const PROBLEM_JSON: &str = "application/problem+json";

/// The body of a problem document.
pub fn problem_body(kind: ErrorKind, detail: &str, errors: &[FieldError]) -> Value {
    let mut body = json!({
        "type": format!("urn:steward:error:{}", kind.code()),
        "title": kind.title(),
        "status": kind.status(),
        "detail": detail,
        "code": kind.code(),
    });
    if kind.status() == 422 {
        let errors: Vec<FieldError> = if errors.is_empty() {
            vec![FieldError::new("body", detail)]
        } else {
            errors.to_vec()
        };
        body["errors"] = json!(errors);
    }
    if let Some(id) = current_request_id() {
        body["request_id"] = json!(id);
    }
    body
}

/// A problem response for a kind and detail.
pub fn problem_response(kind: ErrorKind, detail: &str, errors: &[FieldError]) -> HttpResponse {
    let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = problem_body(kind, detail, errors);
    HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)))
        .body(body.to_string())
}

/// The error type of every handler.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let e = &self.0;
        if e.status() == 503 {
            // A dependency down or a bound reached: expected under load and outages, and
            // reachable without a credential (the sign-in bound), so not an ERROR line.
            tracing::warn!(code = e.kind.code(), error = %e, "request refused: unavailable");
        } else if e.status() >= 500 {
            // The cause goes to the log only; the body says nothing of it.
            tracing::error!(code = e.kind.code(), error = %e, "request failed");
        } else if let Some(source) = &e.source {
            tracing::debug!(code = e.kind.code(), cause = %source, "request refused");
        }
        problem_response(e.kind, &e.detail, &e.errors)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
