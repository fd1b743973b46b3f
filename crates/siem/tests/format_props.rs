//! Property tests: every formatter's output parses back (with small parsers written here from
//! the format specifications) to the event's values, for arbitrary field values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use steward_core::event::{Event, Severity};
use steward_core::TenantId;
use steward_siem::format::{record, LEEF_DELIMITER, LEEF_DELIMITER_DECLARED};
use steward_siem::Format;

fn event(kind: &str, data: Map<String, Value>) -> Value {
    record(&Event::new(
        kind,
        TenantId(uuid::Uuid::now_v7()),
        Severity::Warning,
        Value::Object(data),
    ))
}

/// Splits on unescaped `sep` (backslash escapes), keeping escapes in the pieces.
fn split_unescaped(s: &str, sep: char, max: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let cur = out.last_mut().unwrap();
            cur.push(c);
            if let Some(n) = chars.next() {
                cur.push(n);
            }
        } else if c == sep && out.len() < max {
            out.push(String::new());
        } else {
            out.last_mut().unwrap().push(c);
        }
    }
    out
}

/// Undoes backslash escapes: `\n`, `\r`, `\t` as control characters, `\x` as `x`.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// CEF: 7 header fields after `CEF:0`, then `key=value` pairs where a key starts after a
/// space and is followed by an unescaped `=`.
fn parse_cef(line: &str) -> (Vec<String>, Vec<(String, String)>) {
    let parts = split_unescaped(line, '|', 8);
    assert_eq!(parts.len(), 8, "{line}");
    let header: Vec<String> = parts[..7].iter().map(|p| unescape(p)).collect();
    let ext = &parts[7];
    // Positions of unescaped '=' and the key before each.
    let chars: Vec<char> = ext.chars().collect();
    let mut eqs = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == '=' {
            eqs.push(i);
        }
        i += 1;
    }
    let mut pairs = Vec::new();
    let mut key_starts = Vec::new();
    for &e in &eqs {
        let mut k = e;
        while k > 0 && chars[k - 1].is_ascii_alphanumeric() {
            k -= 1;
        }
        key_starts.push(k);
    }
    for (n, &e) in eqs.iter().enumerate() {
        let key: String = chars[key_starts[n]..e].iter().collect();
        let end = if n + 1 < eqs.len() {
            key_starts[n + 1].saturating_sub(1)
        } else {
            chars.len()
        };
        let raw: String = chars[e + 1..end].iter().collect();
        pairs.push((key, unescape(&raw)));
    }
    (header, pairs)
}

/// LEEF 2.0: 6 header fields (the 6th the delimiter, a character or its hex form `xHH`), then
/// attributes split on EVERY occurrence of the delimiter (LEEF has no escape for it, and
/// readers such as QRadar split so), each `key=value` at the first `=`.
fn parse_leef(line: &str) -> (Vec<String>, Vec<(String, String)>) {
    let parts = split_unescaped(line, '|', 7);
    assert_eq!(parts.len(), 7, "{line}");
    let header: Vec<String> = parts[..6].iter().map(|p| unescape(p)).collect();
    let delim = match header[5].strip_prefix('x') {
        Some(hex) => char::from(u8::from_str_radix(hex, 16).unwrap()),
        None => header[5].chars().next().unwrap(),
    };
    let attrs = parts[6]
        .split(delim)
        .map(|a| {
            let (k, v) = a.split_once('=').unwrap();
            (k.to_owned(), unescape(v))
        })
        .collect();
    (header, attrs)
}

/// What a CEF or LEEF value carries of `s`: controls other than those the format escapes
/// (`kept`), and the Unicode line and paragraph separators, become spaces.
fn spaced(s: &str, kept: &[char]) -> String {
    s.chars()
        .map(|c| {
            if !kept.contains(&c) && (c.is_control() || c == '\u{2028}' || c == '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// RFC 5424: header, one SD element, and the MSG (JSON).
fn parse_syslog(line: &str) -> (Vec<String>, Vec<(String, String)>, Value) {
    let mut header = Vec::new();
    let mut rest = line;
    for _ in 0..6 {
        let (h, r) = rest.split_once(' ').unwrap();
        header.push(h.to_owned());
        rest = r;
    }
    assert!(rest.starts_with("[steward@32473"), "{rest}");
    let chars: Vec<char> = rest.chars().collect();
    let mut i = "[steward@32473".len();
    let mut params = Vec::new();
    loop {
        match chars[i] {
            ']' => {
                i += 1;
                break;
            }
            ' ' => {
                i += 1;
                let mut name = String::new();
                while chars[i] != '=' {
                    name.push(chars[i]);
                    i += 1;
                }
                assert_eq!(chars[i + 1], '"');
                i += 2;
                let mut value = String::new();
                loop {
                    match chars[i] {
                        '\\' if matches!(chars[i + 1], '"' | '\\' | ']') => {
                            value.push(chars[i + 1]);
                            i += 2;
                        }
                        '"' => {
                            i += 1;
                            break;
                        }
                        ']' => panic!("unescaped ] in a PARAM-VALUE: {line}"),
                        c => {
                            value.push(c);
                            i += 1;
                        }
                    }
                }
                params.push((name, value));
            }
            c => panic!("unexpected {c:?} in SD: {line}"),
        }
    }
    assert_eq!(chars[i], ' ');
    let msg: String = chars[i + 1..].iter().collect();
    (header, params, serde_json::from_str(&msg).unwrap())
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        o => o.to_string(),
    }
}

fn camel(name: &str) -> String {
    let mut out = String::from("steward");
    let mut up = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(if up { c.to_ascii_uppercase() } else { c });
            up = false;
        } else {
            up = true;
        }
    }
    out
}

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z=|\\\\\\]\"^ \n\r\t{}]{0,30}",
        "[a-z=^ \t\u{b}\u{c}\u{1c}\u{1e}\u{85}\u{2028}\u{2029}]{0,30}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_format_parses_back(
        kind in "[a-z]{1,8}\\.[a-z_|\\\\]{1,10}",
        values in proptest::collection::btree_map("[a-z]{1,10}", value_strategy(), 0..5),
    ) {
        let mut data = Map::new();
        for (k, v) in &values {
            data.insert(k.clone(), Value::String(v.clone()));
        }
        data.insert("agent_id".into(), json!("a-1"));
        let rec = event(&kind, data);
        let data = rec["data"].as_object().unwrap().clone();

        for f in [Format::Jsonl, Format::Syslog, Format::Cef, Format::Leef] {
            let line = f.line(&rec);
            prop_assert!(!line.contains('\n'), "{f:?} line has a raw line feed: {line}");
            prop_assert!(
                !line.contains(['\u{2028}', '\u{2029}']),
                "{f:?} line has a raw line separator: {line:?}"
            );
            if matches!(f, Format::Cef | Format::Leef) {
                let delimiter = if f == Format::Leef { LEEF_DELIMITER } else { ' ' };
                prop_assert!(
                    !line.chars().any(|c| c.is_control() && c != delimiter),
                    "{f:?} line has a raw control character: {line:?}"
                );
            }
        }

        // JSONL.
        let back: Value = serde_json::from_str(&Format::Jsonl.line(&rec)).unwrap();
        prop_assert_eq!(&back, &rec);

        // CEF.
        let (h, ext) = parse_cef(&Format::Cef.line(&rec));
        prop_assert_eq!(&h[0], "CEF:0");
        prop_assert_eq!(&h[4], &kind);
        prop_assert_eq!(&h[5], &kind);
        prop_assert_eq!(&h[6], "6");
        for (k, v) in &data {
            let key = camel(k);
            let got = ext.iter().find(|(ek, _)| ek == &key).map(|(_, v)| v.clone());
            prop_assert_eq!(got, Some(spaced(&text(v), &['\n', '\r'])), "CEF member {}", k);
        }
        let tenant = ext.iter().find(|(k, _)| k == "cs1").map(|(_, v)| v.clone());
        prop_assert_eq!(tenant.as_deref(), rec["tenant_id"].as_str());

        // LEEF.
        let (h, attrs) = parse_leef(&Format::Leef.line(&rec));
        prop_assert_eq!(&h[0], "LEEF:2.0");
        prop_assert_eq!(&h[4], &kind);
        prop_assert_eq!(h[5].as_str(), LEEF_DELIMITER_DECLARED);
        // Exactly the record's attributes: no value forged another one.
        prop_assert_eq!(attrs.len(), 5 + data.len(), "LEEF attributes {:?}", attrs);
        for (k, v) in &data {
            let key = camel(k);
            let got = attrs.iter().find(|(ak, _)| ak == &key).map(|(_, v)| v.clone());
            prop_assert_eq!(got, Some(spaced(&text(v), &['\n', '\r', '\t'])), "LEEF member {}", k);
        }

        // Syslog: header, SD parameters (control characters become spaces), MSG.
        let (h, params, msg) = parse_syslog(&Format::Syslog.line(&rec));
        prop_assert_eq!(&h[0], "<84>1");
        prop_assert_eq!(&h[3], "steward");
        prop_assert_eq!(&msg, &rec);
        for (k, v) in &data {
            let expected = spaced(&text(v), &[]);
            let got = params.iter().find(|(pk, _)| pk == k).map(|(_, v)| v.clone());
            prop_assert_eq!(got, Some(expected), "SD param {}", k);
        }
        let et = params.iter().find(|(k, _)| k == "event_type").map(|(_, v)| v.clone());
        prop_assert_eq!(et, Some(kind.clone()));
    }

    #[test]
    fn secrets_never_reach_any_format(secret in "[A-Za-z0-9]{24}") {
        let mut data = Map::new();
        data.insert("password".into(), json!(secret));
        data.insert("access_token".into(), json!(secret));
        data.insert("key".into(), json!(secret));
        data.insert("details".into(), json!({"raw_key": secret, "client_secret": secret, "key_id": "k-1"}));
        let rec = event("api_key.created", data);
        for f in [Format::Jsonl, Format::Syslog, Format::Cef, Format::Leef] {
            let line = f.line(&rec);
            prop_assert!(!line.contains(&secret), "{f:?} carries a secret: {line}");
            prop_assert!(line.contains("k-1"));
        }
    }
}
