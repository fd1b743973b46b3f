//! The error type every service returns. The server maps it to an RFC 9457 problem document;
//! `kind` decides status and stable code, `detail` is safe to show, `source` only goes to the log.

use std::fmt;

use serde::Serialize;

/// The stable error kinds of the API (contract 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    BadRequest,
    MissingCredentials,
    InvalidCredentials,
    InvalidSignature,
    Forbidden,
    UserBlocked,
    AgentSuspended,
    PromptBlocked,
    NotFound,
    MethodNotAllowed,
    /// The request body did not arrive in time (`REQUEST_BODY_TIMEOUT_SECONDS`).
    RequestTimeout,
    Conflict,
    PayloadTooLarge,
    ValidationFailed,
    InvalidRego,
    ExportTooLarge,
    InsufficientSamples,
    /// A dependency (database, cache) is unreachable: 503, no internals.
    Unavailable,
    Internal,
}

impl ErrorKind {
    pub fn status(&self) -> u16 {
        use ErrorKind::*;
        match self {
            BadRequest => 400,
            MissingCredentials | InvalidCredentials | InvalidSignature => 401,
            Forbidden | UserBlocked | AgentSuspended | PromptBlocked => 403,
            NotFound => 404,
            MethodNotAllowed => 405,
            RequestTimeout => 408,
            Conflict => 409,
            PayloadTooLarge => 413,
            ValidationFailed | InvalidRego | ExportTooLarge | InsufficientSamples => 422,
            Internal => 500,
            Unavailable => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        use ErrorKind::*;
        match self {
            BadRequest => "bad_request",
            MissingCredentials => "missing_credentials",
            InvalidCredentials => "invalid_credentials",
            InvalidSignature => "invalid_signature",
            Forbidden => "forbidden",
            UserBlocked => "user_blocked",
            AgentSuspended => "agent_suspended",
            PromptBlocked => "prompt_blocked",
            NotFound => "not_found",
            MethodNotAllowed => "method_not_allowed",
            RequestTimeout => "request_timeout",
            Conflict => "conflict",
            PayloadTooLarge => "payload_too_large",
            ValidationFailed => "validation_failed",
            InvalidRego => "invalid_rego",
            ExportTooLarge => "export_too_large",
            InsufficientSamples => "insufficient_samples",
            Unavailable => "service_unavailable",
            Internal => "internal_error",
        }
    }

    pub fn title(&self) -> &'static str {
        use ErrorKind::*;
        match self {
            BadRequest => "Bad Request",
            MissingCredentials => "Missing Credentials",
            InvalidCredentials => "Invalid Credentials",
            InvalidSignature => "Invalid Signature",
            Forbidden => "Forbidden",
            UserBlocked => "User Blocked",
            AgentSuspended => "Agent Suspended",
            PromptBlocked => "Prompt Blocked",
            NotFound => "Not Found",
            MethodNotAllowed => "Method Not Allowed",
            RequestTimeout => "Request Timeout",
            Conflict => "Conflict",
            PayloadTooLarge => "Payload Too Large",
            ValidationFailed => "Validation Failed",
            InvalidRego => "Invalid Rego",
            ExportTooLarge => "Export Too Large",
            InsufficientSamples => "Insufficient Samples",
            Unavailable => "Service Unavailable",
            Internal => "Internal Server Error",
        }
    }

    /// The kind for a bare HTTP status (used for errors produced outside the services).
    pub fn from_status(status: u16) -> ErrorKind {
        use ErrorKind::*;
        match status {
            401 => MissingCredentials,
            403 => Forbidden,
            404 => NotFound,
            405 => MethodNotAllowed,
            408 => RequestTimeout,
            409 => Conflict,
            413 => PayloadTooLarge,
            422 => ValidationFailed,
            503 => Unavailable,
            400..=499 => BadRequest,
            _ => Internal,
        }
    }
}

/// One invalid input: `field` in dotted form with `[i]` indexes, `message` for humans.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A service error.
pub struct Error {
    pub kind: ErrorKind,
    pub detail: String,
    pub errors: Vec<FieldError>,
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            errors: Vec::new(),
            source: None,
        }
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// An unexpected failure. The cause is kept for the log; the response says nothing of it.
    pub fn internal(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::new(ErrorKind::Internal, "an unexpected error occurred").with_source(source)
    }

    /// An internal failure described by a message (for the log only).
    pub fn internal_msg(message: impl Into<String>) -> Self {
        Self::internal(Message(message.into()))
    }

    pub fn unavailable(what: &str, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::new(ErrorKind::Unavailable, format!("the {what} is unavailable")).with_source(source)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, detail)
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, detail)
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, detail)
    }

    pub fn missing_credentials(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::MissingCredentials, detail)
    }

    pub fn invalid_credentials(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidCredentials, detail)
    }

    /// A 422 for one field.
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, message)])
    }

    /// A 422 listing every invalid field.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            many => format!("{} fields are invalid", many.len()),
        };
        Self {
            kind: ErrorKind::ValidationFailed,
            detail,
            errors,
            source: None,
        }
    }

    /// A 422 of another code (`invalid_rego`, `export_too_large`, …) naming its field.
    pub fn unprocessable(kind: ErrorKind, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            kind,
            detail: message.clone(),
            errors: vec![FieldError::new(field, message)],
            source: None,
        }
    }

    pub fn status(&self) -> u16 {
        self.kind.status()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("detail", &self.detail);
        if !self.errors.is_empty() {
            d.field("errors", &self.errors);
        }
        if let Some(source) = &self.source {
            d.field("source", &format_args!("{source}"));
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.detail)?;
        if let Some(source) = &self.source {
            write!(f, " ({source})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// A plain message used as an error source.
#[derive(Debug)]
pub struct Message(pub String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_reveals_nothing() {
        let e = Error::internal(Message("password column missing".into()));
        assert_eq!(e.status(), 500);
        assert!(!e.detail.contains("password"));
        assert!(e.to_string().contains("password column missing"));
    }

    #[test]
    fn validation_lists_every_field() {
        let e = Error::validation(vec![
            FieldError::new("name", "must not be empty"),
            FieldError::new("type", "unknown type"),
        ]);
        assert_eq!(e.kind.code(), "validation_failed");
        assert_eq!(e.errors.len(), 2);
    }
}
