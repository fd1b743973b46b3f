//! The export formats (contract 22): JSONL, RFC 5424 syslog, CEF and LEEF 2.0.
//!
//! Every formatter yields ONE line without a raw line feed (the syslog transport frames events
//! with `\n`, RFC 6587 non-transparent framing). Secrets never reach a formatter: [`record`]
//! scrubs them when the event enters the outbox.

use serde_json::{Map, Value};
use steward_core::event::{Event, Severity};

/// `SIEM_FORMAT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Syslog,
    Cef,
    Leef,
    Jsonl,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "syslog" => Format::Syslog,
            "cef" => Format::Cef,
            "leef" => Format::Leef,
            "jsonl" => Format::Jsonl,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Syslog => "syslog",
            Format::Cef => "cef",
            Format::Leef => "leef",
            Format::Jsonl => "jsonl",
        }
    }

    /// One line for `record` (an export object made by [`record`]).
    pub fn line(self, record: &Value) -> String {
        match self {
            Format::Jsonl => json_line(record),
            Format::Syslog => syslog(record),
            Format::Cef => cef(record),
            Format::Leef => leef(record),
        }
    }
}

/// The record as one JSON line, with U+2028 and U+2029 escaped as well: JSON allows them raw
/// in strings, but JavaScript-based readers and some log shippers take them for line breaks.
fn json_line(record: &Value) -> String {
    let line = record.to_string();
    if line.contains(['\u{2028}', '\u{2029}']) {
        line.replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    } else {
        line
    }
}

/// Characters that some readers take for the end of a line or record besides `\n` and `\r`:
/// the other C0/C1 controls (vertical tab, form feed, the file/group/record separators, NEL…)
/// and the Unicode line and paragraph separators. Formatters replace them by a space.
fn breaks_lines(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Member names whose values are secrets and are never exported.
fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_id") || n == "masked_key" || n == "key_prefix" {
        return false;
    }
    n == "key"
        || n == "raw_key"
        || n == "hash"
        || [
            "password",
            "passwd",
            "secret",
            "token",
            "authorization",
            "api_key",
            "apikey",
            "private_key",
            "cookie",
            "credential",
            "key_hash",
        ]
        .iter()
        .any(|s| n.contains(s))
}

/// A copy of `value` without secret members (at any depth).
pub fn scrub(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !is_secret(k))
                .map(|(k, v)| (k.clone(), scrub(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(scrub).collect()),
        other => other.clone(),
    }
}

/// The export object of an event (the `jsonl` line): `{event_type, timestamp, severity,
/// tenant_id, source: "steward", version, data}`. Members of a nested `details` object are
/// lifted into `data` (without overriding) so that receivers see flat ids and e-mails. Members
/// without a value stay as `null`, as in the WebSocket events (contract 22).
pub fn record(event: &Event) -> Value {
    let mut data = match scrub(&event.data) {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    if let Some(Value::Object(details)) = data.get("details").cloned() {
        for (k, v) in details {
            data.entry(k).or_insert(v);
        }
    }
    serde_json::json!({
        "event_type": event.kind,
        "timestamp": steward_core::clock::format_timestamp(event.timestamp),
        "severity": severity_name(event.severity),
        "tenant_id": event.tenant_id.0.to_string(),
        "source": "steward",
        "version": steward_core::VERSION,
        "data": Value::Object(data),
    })
}

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Error => "error",
    }
}

fn str_of<'a>(record: &'a Value, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// CEF/LEEF severity (0-10).
fn severity_0_10(record: &Value) -> u8 {
    match str_of(record, "severity") {
        "error" => 9,
        "warning" => 6,
        _ => 3,
    }
}

/// Syslog severity (RFC 5424 table 2).
fn syslog_severity(record: &Value) -> u8 {
    match str_of(record, "severity") {
        "error" => 3,
        "warning" => 4,
        _ => 6,
    }
}

/// The scalar members of `data` as text (nested values as JSON), in key order.
fn flat_data(record: &Value) -> Vec<(String, String)> {
    let Some(Value::Object(data)) = record.get("data") else {
        return Vec::new();
    };
    data.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}

/// Printable US-ASCII without `=`, space, `]`, `"` (RFC 5424 SD-NAME), 1-32 characters.
fn sd_name(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| (33..=126).contains(&b) && !matches!(b, b'=' | b']' | b'"'));
    ok.then(|| name.to_owned())
}

/// An RFC 5424 PARAM-VALUE: `"`, `\` and `]` escaped with a backslash; control characters
/// (which would break line framing) become spaces.
pub fn sd_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' | '\\' | ']' => {
                out.push('\\');
                out.push(c);
            }
            c if breaks_lines(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Printable US-ASCII, at most `max` characters, `-` when empty (header fields).
fn header_token(value: &str, max: usize) -> String {
    let s: String = value
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(max)
        .collect();
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

fn hostname() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| header_token(h.trim(), 255))
            .unwrap_or_else(|| "-".into())
    })
    .clone()
}

/// RFC 5424: `<PRI>1 TIMESTAMP HOST steward PROCID MSGID [steward@32473 …] {json}`
/// (facility 10, security/authorization).
fn syslog(record: &Value) -> String {
    let pri = 10 * 8 + u32::from(syslog_severity(record));
    let ts = header_token(str_of(record, "timestamp"), 64);
    let msgid = header_token(str_of(record, "event_type"), 32);
    let mut sd = format!(
        "[steward@32473 event_type=\"{}\" tenant_id=\"{}\"",
        sd_escape(str_of(record, "event_type")),
        sd_escape(str_of(record, "tenant_id"))
    );
    for (k, v) in flat_data(record) {
        if let Some(name) = sd_name(&k) {
            if name == "event_type" || name == "tenant_id" {
                continue;
            }
            sd.push_str(&format!(" {name}=\"{}\"", sd_escape(&v)));
        }
    }
    sd.push(']');
    format!(
        "<{pri}>1 {ts} {} steward {} {msgid} {sd} {}",
        hostname(),
        std::process::id(),
        json_line(record)
    )
}

/// CEF header field: `\` and `|` escaped; line breaks and other controls become spaces.
pub fn cef_header(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' | '|' => {
                out.push('\\');
                out.push(c);
            }
            c if breaks_lines(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// CEF extension value: `\`, `=` escaped, line breaks as `\n` / `\r`, other controls and
/// line separators as spaces.
pub fn cef_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' | '=' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if breaks_lines(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// An extension key: letters and digits only (CEF keys cannot be escaped).
fn ext_key(prefix: &str, name: &str) -> String {
    let mut out = String::from(prefix);
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if upper {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    out
}

/// `CEF:0|Steward|Steward|<version>|<event type>|<event type>|<0-10>|ext`.
fn cef(record: &Value) -> String {
    let kind = cef_header(str_of(record, "event_type"));
    let mut ext = vec![
        format!("rt={}", cef_value(str_of(record, "timestamp"))),
        format!(
            "cs1Label=tenantId cs1={}",
            cef_value(str_of(record, "tenant_id"))
        ),
    ];
    for (k, v) in flat_data(record) {
        ext.push(format!("{}={}", ext_key("steward", &k), cef_value(&v)));
    }
    format!(
        "CEF:0|Steward|Steward|{}|{kind}|{kind}|{}|{}",
        cef_header(str_of(record, "version")),
        severity_0_10(record),
        ext.join(" ")
    )
}

/// The LEEF attribute delimiter: a tab, declared in the header as `x09`. LEEF has no escape
/// for the delimiter (readers such as QRadar split on every occurrence), so it must be a
/// character that never occurs in a value: a tab in a value is written as `\t`.
pub const LEEF_DELIMITER: char = '\t';

/// The delimiter as the LEEF 2.0 header declares it (hex form, for a tab).
pub const LEEF_DELIMITER_DECLARED: &str = "x09";

/// LEEF header field: `\` and `|` escaped; line breaks and other controls become spaces.
pub fn leef_header(value: &str) -> String {
    cef_header(value)
}

/// LEEF attribute value: `\` escaped, line breaks and tabs as `\n` / `\r` / `\t` (so the
/// delimiter never occurs), other controls and line separators as spaces.
pub fn leef_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if breaks_lines(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `LEEF:2.0|Steward|Steward|<version>|<event type>|x09|attr=value<TAB>…`.
fn leef(record: &Value) -> String {
    let mut attrs = vec![
        format!("devTime={}", leef_value(str_of(record, "timestamp"))),
        "devTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSSSSX".to_owned(),
        format!("sev={}", severity_0_10(record)),
        format!("cat={}", leef_value(str_of(record, "event_type"))),
        format!("tenantId={}", leef_value(str_of(record, "tenant_id"))),
    ];
    for (k, v) in flat_data(record) {
        attrs.push(format!("{}={}", ext_key("steward", &k), leef_value(&v)));
    }
    format!(
        "LEEF:2.0|Steward|Steward|{}|{}|{LEEF_DELIMITER_DECLARED}|{}",
        leef_header(str_of(record, "version")),
        leef_header(str_of(record, "event_type")),
        attrs.join(&LEEF_DELIMITER.to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use steward_core::TenantId;

    fn ev(data: Value) -> Value {
        record(&Event::new(
            "user.login",
            TenantId(uuid::Uuid::nil()),
            Severity::Info,
            data,
        ))
    }

    #[test]
    fn secrets_are_scrubbed_and_details_lifted() {
        let r = ev(
            json!({"user_id": "u1", "password": "p", "details": {"email": "a@b", "token": "t", "key": "sk"}, "key_id": "k1"}),
        );
        let s = r.to_string();
        assert!(!s.contains("\"p\"") && !s.contains("\"t\"") && !s.contains("sk"));
        assert_eq!(r["data"]["email"], "a@b");
        assert_eq!(r["data"]["key_id"], "k1");
        assert_eq!(r["source"], "steward");
    }

    #[test]
    fn nulls_stay_and_timestamps_have_six_digits() {
        // Probe I F2/F3: `rejection_reason: null` was dropped, and a timestamp whose
        // microseconds end in 0 lost its trailing zeros.
        let mut e = Event::new(
            "hitl.resolved",
            TenantId(uuid::Uuid::nil()),
            Severity::Info,
            json!({"approval_id": "a1", "rejection_reason": null}),
        );
        e.timestamp = time::macros::datetime!(2026-11-28 20:29:49.863350 UTC);
        let r = record(&e);
        assert_eq!(r["timestamp"], "2026-11-28T20:29:49.863350Z");
        assert!(r["data"]
            .as_object()
            .is_some_and(|d| d.contains_key("rejection_reason")));
        assert_eq!(r["data"]["rejection_reason"], json!(null));
    }

    #[test]
    fn every_format_is_one_line() {
        let r = ev(json!({"note": "a\nb|c=d\\e]\"^"}));
        for f in [Format::Syslog, Format::Cef, Format::Leef, Format::Jsonl] {
            let line = f.line(&r);
            assert!(!line.contains('\n'), "{f:?}: {line}");
        }
        assert!(Format::Cef.line(&r).starts_with("CEF:0|Steward|Steward|"));
        assert!(Format::Leef
            .line(&r)
            .starts_with("LEEF:2.0|Steward|Steward|"));
        assert!(Format::Syslog.line(&r).starts_with("<86>1 "));
    }
}
