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
        serde_json::from_slice(&self.bytes)
            .map(Some)
            .map_err(|e| Error::bad_request(format!("the body is not well-formed JSON: {e}")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn kind(r: Result<Option<Value>>) -> Option<ErrorKind> {
        r.err().map(|e| e.kind)
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
