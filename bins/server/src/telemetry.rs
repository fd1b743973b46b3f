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
    let mut d = format!("{},actix_server=warn", level.filter());
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
            .with_target(true)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_writer(std::io::stdout)
            .try_init()
    };
    // A subscriber already installed (tests) is fine.
    let _ = result;
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
    fn codec_errors_are_hidden_below_debug() {
        assert!(default_directives(LogLevel::Info).contains("actix_http::h1::dispatcher=off"));
        assert!(default_directives(LogLevel::Error).contains("actix_http::h1::dispatcher=off"));
        assert!(!default_directives(LogLevel::Debug).contains("actix_http"));
        assert!(default_directives(LogLevel::Info).starts_with("info,"));
    }
}
