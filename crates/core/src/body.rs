//! A request body as received: bytes plus the declared content type. Services parse it after
//! their role check, so that 403 precedes 400 and 422 (contract 3.2).

use serde_json::Value;

use crate::{Error, Result};

/// A raw request body.
#[derive(Clone, Debug, Default)]
pub struct Body {
    content_type: Option<String>,
    bytes: Vec<u8>,
}

/// Conversion of a JSON value into a request type, reporting every invalid field.
pub trait FromJson: Sized {
    fn from_json(value: &Value) -> Result<Self>;
}

impl FromJson for Value {
    fn from_json(value: &Value) -> Result<Self> {
        Ok(value.clone())
    }
}

fn is_json_media_type(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

impl Body {
    pub fn new(content_type: Option<String>, bytes: Vec<u8>) -> Self {
        Self {
            content_type,
            bytes,
        }
    }

    /// A JSON body (tests and internal calls).
    pub fn json(value: &Value) -> Self {
        Self {
            content_type: Some("application/json".into()),
            bytes: value.to_string().into_bytes(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.iter().all(u8::is_ascii_whitespace)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The JSON value of the body, `None` when the body is empty.
    /// A body without a content type, with a non-JSON one, or not well-formed is a 400.
    pub fn value(&self) -> Result<Option<Value>> {
        if self.is_empty() {
            return Ok(None);
        }
        match self.content_type.as_deref() {
            None => {
                return Err(Error::bad_request(
                    "the request has a body but no Content-Type; send application/json",
                ))
            }
            Some(ct) if !is_json_media_type(ct) => {
                return Err(Error::bad_request(format!(
                    "unsupported Content-Type {ct:?}; send application/json"
                )))
            }
            Some(_) => {}
        }
        let value: Value = serde_json::from_slice(&self.bytes)
            .map_err(|e| Error::bad_request(format!("the body is not well-formed JSON: {e}")))?;
        // JSON can carry U+0000 only as the escape `\u0000`; neither database stores it in text
        // (PostgreSQL refuses it), so it is refused here, naming where it is.
        if self.bytes.windows(6).any(|w| w == b"\\u0000") {
            if let Some(path) = nul_path(&value, String::new()) {
                let field = if path.is_empty() {
                    "body".to_owned()
                } else {
                    path
                };
                return Err(Error::invalid_field(
                    field,
                    "must not contain the NUL character (U+0000)",
                ));
            }
        }
        Ok(Some(value))
    }

    /// A body the endpoint does not read (an optional body, contract 2): empty, or JSON sent
    /// as JSON; anything else is the 400 of [`Body::value`] (contract 3.1), so a malformed
    /// request changes nothing. Services check it after the role (contract 3.2).
    pub fn unread(&self) -> Result<()> {
        self.value().map(|_| ())
    }

    /// Parses a required body: an empty body is a 422 on `body`.
    pub fn parse<T: FromJson>(&self) -> Result<T> {
        match self.value()? {
            Some(v) => T::from_json(&v),
            None => Err(Error::invalid_field("body", "a JSON body is required")),
        }
    }

    /// Parses an optional body: an empty body gives `T::from_json({})`.
    pub fn parse_or_empty<T: FromJson>(&self) -> Result<T> {
        let v = self
            .value()?
            .unwrap_or_else(|| Value::Object(Default::default()));
        T::from_json(&v)
    }
}

/// The path (`a.b[2]`) of the first string or key holding U+0000.
fn nul_path(v: &Value, at: String) -> Option<String> {
    match v {
        Value::String(s) => s.contains('\0').then_some(at),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_path(item, format!("{at}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(k, item)| {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            if k.contains('\0') {
                Some(here)
            } else {
                nul_path(item, here)
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn kind(r: Result<Option<Value>>) -> Option<ErrorKind> {
        r.err().map(|e| e.kind)
    }

    #[test]
    fn nul_characters_are_refused_with_their_place() {
        let body = Body::json(&serde_json::json!({"a": {"b": ["x", "y\u{0}z"]}}));
        let err = body
            .value()
            .err()
            .map(|e| (e.kind, e.errors[0].field.clone()));
        assert_eq!(
            err,
            Some((ErrorKind::ValidationFailed, "a.b[1]".to_owned()))
        );
        // The escaped text `\u0000` (a backslash, then u0000) is fine.
        let body = Body::json(&serde_json::json!({"a": "\\u0000"}));
        assert!(body.value().is_ok());
    }

    #[test]
    fn content_type_rules() {
        let ok = Body::new(
            Some("application/json; charset=utf-8".into()),
            b"{}".to_vec(),
        );
        assert!(ok.value().is_ok());
        let none = Body::new(None, b"{}".to_vec());
        assert_eq!(kind(none.value()), Some(ErrorKind::BadRequest));
        let text = Body::new(Some("text/plain".into()), b"{}".to_vec());
        assert_eq!(kind(text.value()), Some(ErrorKind::BadRequest));
        let broken = Body::new(Some("application/json".into()), b"{\"a\":".to_vec());
        assert_eq!(kind(broken.value()), Some(ErrorKind::BadRequest));
        let empty = Body::new(None, Vec::new());
        assert!(matches!(empty.value(), Ok(None)));
    }

    #[test]
    fn required_body() {
        let empty = Body::new(Some("application/json".into()), Vec::new());
        let err = empty.parse::<Value>().err().map(|e| e.kind);
        assert_eq!(err, Some(ErrorKind::ValidationFailed));
        assert!(empty.parse_or_empty::<Value>().is_ok());
    }
}
