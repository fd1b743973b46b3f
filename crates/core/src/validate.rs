//! Input validation that reports every invalid field at once (contract 3: 422 `errors`).
//!
//! `Query` reads typed query parameters; `Fields` reads a JSON body. Both record problems
//! instead of stopping at the first, and `finish()` turns them into one 422.

use serde_json::{Map, Value};

use crate::{Error, FieldError, Result};

/// Splits `a=1&b=x%20y` into decoded pairs.
pub fn parse_query_string(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Typed access to query parameters. Unknown parameters are ignored.
pub struct Query<'a> {
    pairs: &'a [(String, String)],
    errors: Vec<FieldError>,
}

impl<'a> Query<'a> {
    pub fn new(pairs: &'a [(String, String)]) -> Self {
        Self {
            pairs,
            errors: Vec::new(),
        }
    }

    /// The raw value of a parameter (the last one when repeated).
    pub fn raw(&self, name: &str) -> Option<&'a str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn error(&mut self, name: &str, message: impl Into<String>) {
        self.errors.push(FieldError::new(name, message));
    }

    /// A string parameter; empty strings count as absent.
    pub fn string(&self, name: &str) -> Option<&'a str> {
        self.raw(name).filter(|v| !v.is_empty())
    }

    /// An integer parameter within `[min, max]`.
    pub fn int(&mut self, name: &str, min: i64, max: Option<i64>) -> Option<i64> {
        let raw = self.raw(name)?;
        let trimmed = raw.trim();
        // An integer too wide for 64 bits is still an integer: it saturates, and the bounds
        // decide (a `limit` of 10^23 is clamped like one of 10^5, contract 4).
        let parsed = trimmed.parse::<i64>().or_else(|e| {
            let digits = trimmed.strip_prefix('-').unwrap_or(trimmed);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                Ok(if trimmed.starts_with('-') {
                    i64::MIN
                } else {
                    i64::MAX
                })
            } else {
                Err(e)
            }
        });
        match parsed {
            Ok(v) if v < min => {
                self.error(name, format!("must be at least {min}"));
                None
            }
            Ok(v) if max.is_some_and(|m| v > m) => {
                self.error(name, format!("must be at most {}", max.unwrap_or(v)));
                None
            }
            Ok(v) => Some(v),
            Err(_) => {
                self.error(name, "must be an integer");
                None
            }
        }
    }

    /// A boolean parameter: exactly `true`, `false`, `1` or `0` (contract 2; settings read
    /// from the environment are more lenient, `parse_bool`).
    pub fn bool(&mut self, name: &str) -> Option<bool> {
        let raw = self.raw(name)?;
        let value = match raw {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        };
        match value {
            Some(b) => Some(b),
            None => {
                self.error(name, "must be one of true, false, 1, 0");
                None
            }
        }
    }

    /// A parameter from a fixed set of values.
    pub fn one_of(&mut self, name: &str, allowed: &[&str]) -> Option<&'a str> {
        let raw = self.string(name)?;
        if allowed.contains(&raw) {
            Some(raw)
        } else {
            self.error(name, format!("must be one of {}", allowed.join(", ")));
            None
        }
    }

    /// A parameter parsed with `FromStr`.
    pub fn parse<T: std::str::FromStr>(&mut self, name: &str, what: &str) -> Option<T> {
        let raw = self.string(name)?;
        match raw.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                self.error(name, format!("must be {what}"));
                None
            }
        }
    }

    pub fn finish(&mut self) -> Result<()> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Error::validation(std::mem::take(&mut self.errors)))
        }
    }
}

/// `true`/`false`/`1`/`0`, case-insensitive.
pub fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// Characters that show nothing: zero-width spaces and joiners, bidirectional controls, word
/// joiners and invisible operators, the byte-order mark and the soft hyphen. A name or an
/// e-mail holding one looks like another.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// Most JSON values a free-form object member (`context`, `input`, `event_data`, …) may hold,
/// counted at any depth. The body limit bounds bytes, not work: a 1 MiB object of 60,000
/// members costs hundreds of times an ordinary request to copy, convert and store, and again
/// at every listing of it, on the HTTP workers that every tenant shares.
pub const MAX_OBJECT_VALUES: usize = 10_000;

/// Most items of a string array member.
pub const MAX_ARRAY_ITEMS: usize = 10_000;

/// Whether `v` holds more than `max` values (itself included), counted until `max` is passed.
pub fn json_values_over(v: &Value, max: usize) -> bool {
    fn count(v: &Value, left: &mut usize) -> bool {
        if *left == 0 {
            return true;
        }
        *left -= 1;
        match v {
            Value::Array(items) => items.iter().any(|i| count(i, left)),
            Value::Object(members) => members.values().any(|m| count(m, left)),
            _ => false,
        }
    }
    let mut left = max;
    count(v, &mut left)
}

/// Typed access to the members of a JSON object, collecting every problem.
///
/// ```
/// use steward_core::validate::Fields;
/// let body = serde_json::json!({"name": "", "type": "robot"});
/// let mut f = Fields::root(&body);
/// let _name = f.required_str("name", 1, 200);
/// let _type = f.optional_enum("type", &["llm", "tool"]);
/// assert_eq!(f.finish().unwrap_err().errors.len(), 2);
/// ```
pub struct Fields<'a> {
    object: Option<&'a Map<String, Value>>,
    prefix: String,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    /// The request body as a whole; a body that is not an object is an error on `body`.
    pub fn root(value: &'a Value) -> Self {
        let mut fields = Self {
            object: value.as_object(),
            prefix: String::new(),
            errors: Vec::new(),
        };
        if fields.object.is_none() {
            fields
                .errors
                .push(FieldError::new("body", "must be a JSON object"));
        }
        fields
    }

    /// A nested object at `path` (errors are reported with that prefix).
    pub fn nested(value: &'a Value, path: impl Into<String>) -> Self {
        let path = path.into();
        let mut fields = Self {
            object: value.as_object(),
            prefix: format!("{path}."),
            errors: Vec::new(),
        };
        if fields.object.is_none() {
            fields
                .errors
                .push(FieldError::new(path, "must be a JSON object"));
        }
        fields
    }

    pub fn path(&self, name: &str) -> String {
        format!("{}{}", self.prefix, name)
    }

    pub fn error(&mut self, name: &str, message: impl Into<String>) {
        let path = self.path(name);
        self.errors.push(FieldError::new(path, message));
    }

    /// Adds errors found elsewhere (for example in a nested `Fields`).
    pub fn absorb(&mut self, other: Fields<'_>) {
        self.errors.extend(other.errors);
    }

    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The member, treating JSON `null` as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.object?.get(name).filter(|v| !v.is_null())
    }

    pub fn present(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn string_checked(
        &mut self,
        name: &str,
        v: &'a Value,
        min: usize,
        max: usize,
    ) -> Option<&'a str> {
        match v.as_str() {
            None => {
                self.error(name, "must be a string");
                None
            }
            Some(s) => {
                let len = s.chars().count();
                if len < min {
                    if min == 1 {
                        self.error(name, "must not be empty");
                    } else {
                        self.error(name, format!("must be at least {min} characters"));
                    }
                    None
                } else if len > max {
                    self.error(name, format!("must be at most {max} characters"));
                    None
                } else {
                    Some(s)
                }
            }
        }
    }

    /// A required string of `min..=max` characters.
    pub fn required_str(&mut self, name: &str, min: usize, max: usize) -> Option<&'a str> {
        match self.get(name) {
            None => {
                if self.object.is_some() {
                    self.error(name, "is required");
                }
                None
            }
            Some(v) => self.string_checked(name, v, min, max),
        }
    }

    /// An optional string of `min..=max` characters.
    pub fn optional_str(&mut self, name: &str, min: usize, max: usize) -> Option<&'a str> {
        let v = self.get(name)?;
        self.string_checked(name, v, min, max)
    }

    /// An optional string from a fixed set.
    pub fn optional_enum(&mut self, name: &str, allowed: &[&str]) -> Option<&'a str> {
        let v = self.get(name)?;
        let s = self.string_checked(name, v, 0, usize::MAX)?;
        if allowed.contains(&s) {
            Some(s)
        } else {
            self.error(name, format!("must be one of {}", allowed.join(", ")));
            None
        }
    }

    /// A required string from a fixed set.
    pub fn required_enum(&mut self, name: &str, allowed: &[&str]) -> Option<&'a str> {
        if self.get(name).is_none() {
            if self.object.is_some() {
                self.error(name, "is required");
            }
            return None;
        }
        self.optional_enum(name, allowed)
    }

    pub fn optional_bool(&mut self, name: &str) -> Option<bool> {
        let v = self.get(name)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.error(name, "must be a boolean");
                None
            }
        }
    }

    /// An optional number within `[min, max]`.
    pub fn optional_f64(&mut self, name: &str, min: f64, max: f64) -> Option<f64> {
        let v = self.get(name)?;
        match v.as_f64() {
            Some(n) if n >= min && n <= max => Some(n),
            Some(_) => {
                self.error(name, format!("must be between {min} and {max}"));
                None
            }
            None => {
                self.error(name, "must be a number");
                None
            }
        }
    }

    /// An optional integer within `[min, max]`.
    pub fn optional_i64(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let v = self.get(name)?;
        match v.as_i64() {
            Some(n) if n >= min && n <= max => Some(n),
            Some(_) => {
                self.error(name, format!("must be between {min} and {max}"));
                None
            }
            None => {
                self.error(name, "must be an integer");
                None
            }
        }
    }

    /// An optional JSON object.
    pub fn optional_object(&mut self, name: &str) -> Option<&'a Map<String, Value>> {
        let v = self.get(name)?;
        match v.as_object() {
            Some(_) if json_values_over(v, MAX_OBJECT_VALUES) => {
                self.error(
                    name,
                    format!("must hold at most {MAX_OBJECT_VALUES} JSON values (members and items at any depth)"),
                );
                None
            }
            Some(o) => Some(o),
            None => {
                self.error(name, "must be a JSON object");
                None
            }
        }
    }

    /// A required JSON object.
    pub fn required_object(&mut self, name: &str) -> Option<&'a Map<String, Value>> {
        if self.get(name).is_none() {
            if self.object.is_some() {
                self.error(name, "is required");
            }
            return None;
        }
        self.optional_object(name)
    }

    /// An optional array of strings, each of `1..=max_len` characters.
    pub fn optional_str_array(&mut self, name: &str, max_len: usize) -> Option<Vec<String>> {
        let v = self.get(name)?;
        let Some(items) = v.as_array() else {
            self.error(name, "must be an array of strings");
            return None;
        };
        if items.len() > MAX_ARRAY_ITEMS {
            self.error(name, format!("must hold at most {MAX_ARRAY_ITEMS} items"));
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let item_name = format!("{name}[{i}]");
            match item.as_str() {
                Some(s) if !s.is_empty() && s.chars().count() <= max_len => out.push(s.to_owned()),
                Some(_) => {
                    self.error(&item_name, format!("must be 1 to {max_len} characters"));
                    ok = false;
                }
                None => {
                    self.error(&item_name, "must be a string");
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// An optional array; returns each element with its path for nested validation.
    pub fn optional_array(&mut self, name: &str) -> Option<Vec<(String, &'a Value)>> {
        let v = self.get(name)?;
        match v.as_array() {
            Some(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (format!("{}[{i}]", self.path(name)), item))
                    .collect(),
            ),
            None => {
                self.error(name, "must be an array");
                None
            }
        }
    }

    /// An optional UUID string.
    pub fn optional_uuid(&mut self, name: &str) -> Option<uuid::Uuid> {
        let v = self.get(name)?;
        match v.as_str().map(uuid::Uuid::parse_str) {
            Some(Ok(id)) => Some(id),
            _ => {
                self.error(name, "must be a UUID string");
                None
            }
        }
    }

    /// A required UUID string.
    pub fn required_uuid(&mut self, name: &str) -> Option<uuid::Uuid> {
        if self.get(name).is_none() {
            if self.object.is_some() {
                self.error(name, "is required");
            }
            return None;
        }
        self.optional_uuid(name)
    }

    /// A name a person gives (agents, policies, tenants, keys): `value` trimmed, not blank,
    /// without control or invisible characters ([`is_invisible`]), which would let two names
    /// look alike (a probe registered `agent\u{200B}A` beside `agentA`). `None` (and the
    /// error on `name`) when it is not one; `None` without an error when `value` is.
    pub fn name(&mut self, name: &str, value: Option<&str>) -> Option<String> {
        let v = value?.trim();
        if v.is_empty() {
            self.error(name, "must not be blank");
            return None;
        }
        if v.chars().any(|c| c.is_control() || is_invisible(c)) {
            self.error(name, "must not contain control or invisible characters");
            return None;
        }
        Some(v.to_owned())
    }

    /// Ends validation: `Ok` when nothing was wrong, else one 422 naming every field.
    pub fn finish(self) -> Result<()> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Error::validation(self.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_trimmed_and_visible() {
        let body = json!({});
        let mut f = Fields::root(&body);
        assert_eq!(
            f.name("name", Some("  crm agent ")).as_deref(),
            Some("crm agent")
        );
        assert_eq!(f.name("name", Some("Ägent Σ")).as_deref(), Some("Ägent Σ"));
        assert_eq!(f.name("name", None), None);
        assert!(!f.has_errors());
        for bad in [
            "",
            "   ",
            "\u{200B}",
            "agent\u{200B}A",
            "a\u{202E}b",
            "a\u{0}b",
            "a\nb",
            "\u{FEFF}x",
        ] {
            let mut f = Fields::root(&body);
            assert_eq!(f.name("name", Some(bad)), None, "{bad:?}");
            assert!(f.has_errors(), "{bad:?}");
        }
    }

    #[test]
    fn wide_objects_and_long_arrays_are_refused() {
        let wide: Map<String, Value> = (0..MAX_OBJECT_VALUES)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        let nested = json!({"a": [[1, 2], {"b": [3, 4]}]});
        assert!(!json_values_over(&nested, 9) && json_values_over(&nested, 8));
        let body =
            json!({"context": wide, "small": {"a": 1}, "tags": vec!["t"; MAX_ARRAY_ITEMS + 1]});
        let mut f = Fields::root(&body);
        assert!(f.optional_object("context").is_none());
        assert!(f.optional_object("small").is_some());
        assert!(f.optional_str_array("tags", 10).is_none());
        let errors = fields_of(f.finish());
        assert_eq!(errors, ["context", "tags"]);
    }

    fn fields_of(r: Result<()>) -> Vec<String> {
        match r {
            Ok(()) => vec![],
            Err(e) => e.errors.into_iter().map(|e| e.field).collect(),
        }
    }

    #[test]
    fn collects_every_field() {
        let body = json!({"name": 5, "enabled": "yes", "tags": ["a", 3]});
        let mut f = Fields::root(&body);
        f.required_str("name", 1, 10);
        f.optional_bool("enabled");
        f.optional_str_array("tags", 10);
        f.required_str("missing", 1, 10);
        assert_eq!(
            fields_of(f.finish()),
            ["name", "enabled", "tags[1]", "missing"]
        );
    }

    #[test]
    fn non_object_body_is_a_body_error() {
        let body = json!([1, 2]);
        let mut f = Fields::root(&body);
        f.required_str("name", 1, 10);
        assert_eq!(fields_of(f.finish()), ["body"]);
    }

    #[test]
    fn nested_paths() {
        let body = json!({"events": [{"name": "ok"}, {"name": 7}]});
        let mut f = Fields::root(&body);
        let items = f.optional_array("events").unwrap_or_default();
        for (path, item) in items {
            let mut inner = Fields::nested(item, path);
            inner.required_str("name", 1, 10);
            f.absorb(inner);
        }
        assert_eq!(fields_of(f.finish()), ["events[1].name"]);
    }

    #[test]
    fn null_counts_as_absent() {
        let body = json!({"name": null});
        let mut f = Fields::root(&body);
        assert_eq!(f.optional_str("name", 1, 5), None);
        assert!(f.finish().is_ok());
    }

    #[test]
    fn query_bool_forms() {
        // Exactly `true`, `false`, `1`, `0` (contract 2): other spellings answer 422.
        let pairs = parse_query_string("a=true&b=0&c=maybe&e=TRUE&f=%20true");
        let mut q = Query::new(&pairs);
        assert_eq!(q.bool("a"), Some(true));
        assert_eq!(q.bool("b"), Some(false));
        assert_eq!(q.bool("c"), None);
        assert_eq!(q.bool("d"), None);
        assert_eq!(q.bool("e"), None);
        assert_eq!(q.bool("f"), None);
        assert_eq!(fields_of(q.finish()), ["c", "e", "f"]);
        // The environment's settings stay lenient.
        assert_eq!(parse_bool("TRUE"), Some(true));
    }

    #[test]
    fn integers_wider_than_64_bits_saturate() {
        let pairs =
            parse_query_string("limit=99999999999999999999999&skip=-99999999999999999999&x=1e3");
        let mut q = Query::new(&pairs);
        assert_eq!(q.int("limit", 1, None), Some(i64::MAX));
        assert_eq!(q.int("skip", 0, None), None);
        assert_eq!(q.int("x", 0, None), None);
        assert_eq!(fields_of(q.finish()), ["skip", "x"]);
    }
}
