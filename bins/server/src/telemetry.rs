//! Structured logs: text by default, one JSON object per line with `LOG_JSON_FORMAT=true`
//! (`timestamp`, `level`, `logger`, `message`, the event's fields and the request's span fields,
//! among them `request_id`).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::settings::LogLevel;

/// `LOG_LEVEL` for Steward and its libraries, except two sources of noise: actix-server's
/// worker start-up lines, and actix-http's codec, which logs every request it cannot parse
/// (a URI over 64 KiB, conflicting lengths, a NUL in a header) at ERROR although the client
/// is at fault and was answered 400/431/408: anyone could otherwise fill the log at ERROR
/// level without a credential. `LOG_LEVEL=debug` shows them again.
fn default_directives(level: LogLevel) -> String {
    // The PostgreSQL driver logs every query's parameters at DEBUG (password and key hashes,
    // tenants' audit data): never below INFO, whatever LOG_LEVEL says.
    let mut d = format!("{},actix_server=warn,tokio_postgres=info", level.filter());
    if !matches!(level, LogLevel::Debug) {
        d.push_str(",actix_http::h1::dispatcher=off");
    }
    d
}

/// Installs the global subscriber. `RUST_LOG`, when set, refines `LOG_LEVEL`.
pub fn init_logging(level: LogLevel, json: bool) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(default_directives(level)));
    let result = if json {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_writer(std::io::stdout)
            .try_init()
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .fmt_fields(text_fields())
            .with_target(true)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_writer(std::io::stdout)
            .try_init()
    };
    // A subscriber already installed (tests) is fine.
    let _ = result;
}

/// The text log's fields: `name=value` (the message bare), with control characters and the
/// Unicode line separators in values escaped (`\n`, `\u{1b}`), so that a value taken from a
/// request (`%` fields format with `Display`, which tracing writes raw) can neither start a
/// forged log line nor send escape sequences to a terminal.
fn text_fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let raw = format!("{value:?}");
        let text = escape_controls(&raw);
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ")
}

/// `text` with every control character and U+2028/U+2029 written as Rust escapes.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if !text.contains(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.fields
                .insert(field.name().to_owned(), Value::from(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields
            .insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields
            .insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fields
            .insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields
            .insert(field.name().to_owned(), Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = Some(text);
        } else {
            self.fields
                .insert(field.name().to_owned(), Value::from(text));
        }
    }
}

/// The JSON line format.
pub struct JsonLines;

fn level_name(level: &tracing::Level) -> &'static str {
    match *level {
        tracing::Level::ERROR => "ERROR",
        tracing::Level::WARN => "WARNING",
        tracing::Level::INFO => "INFO",
        tracing::Level::DEBUG => "DEBUG",
        tracing::Level::TRACE => "TRACE",
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            Value::from(steward_core::clock::format_timestamp(
                time::OffsetDateTime::now_utc(),
            )),
        );
        line.insert(
            "level".into(),
            Value::from(level_name(event.metadata().level())),
        );
        line.insert("logger".into(), Value::from(event.metadata().target()));
        line.insert(
            "message".into(),
            Value::from(visitor.message.unwrap_or_default()),
        );
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if let Ok(Value::Object(map)) =
                        serde_json::from_str::<Value>(fields.fields.as_str())
                    {
                        for (k, v) in map {
                            line.entry(k).or_insert(v);
                        }
                    }
                }
            }
        }
        for (k, v) in visitor.fields {
            line.entry(k).or_insert(v);
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_driver_never_logs_query_parameters() {
        // tokio_postgres logs every parameter at DEBUG (probe J: password and key hashes).
        for level in [LogLevel::Debug, LogLevel::Info] {
            let d = default_directives(level);
            let filter = EnvFilter::new(&d);
            assert!(d.contains("tokio_postgres=info"), "{d}");
            assert!(
                filter.to_string().contains("tokio_postgres=info"),
                "{filter}"
            );
        }
    }

    #[test]
    fn codec_errors_are_hidden_below_debug() {
        assert!(default_directives(LogLevel::Info).contains("actix_http::h1::dispatcher=off"));
        assert!(default_directives(LogLevel::Error).contains("actix_http::h1::dispatcher=off"));
        assert!(!default_directives(LogLevel::Debug).contains("actix_http"));
        assert!(default_directives(LogLevel::Info).starts_with("info,"));
    }

    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // A value from a request cannot forge a second log line or reach the terminal raw.
    #[test]
    fn text_log_values_are_one_line() {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(text_fields())
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let forged = "x\n2026-11-28T00:00:00Z  INFO steward: admin logged in\u{1b}[2J\u{2028}";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(detail = %forged, plain = forged, "refused {}", forged);
        });
        let out = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.matches('\n').count(), 1, "{out}");
        assert!(!out.contains(['\u{1b}', '\u{2028}']), "{out}");
        assert!(out.contains("detail=x\\n2026"), "{out}");
        assert!(out.contains("refused x\\n2026"), "{out}");
    }
}
