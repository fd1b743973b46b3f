//! Time: a `Clock` trait (so that tests can move time) and the timestamp format of the API.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> OffsetDateTime;
}

/// The system clock, truncated to microseconds so that both databases round-trip alike.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        now()
    }
}

/// The current UTC time truncated to microseconds.
pub fn now() -> OffsetDateTime {
    truncate(OffsetDateTime::now_utc())
}

/// Truncates to whole microseconds, in UTC.
pub fn truncate(t: OffsetDateTime) -> OffsetDateTime {
    let t = t.to_offset(UtcOffset::UTC);
    let micros = t.microsecond();
    t.replace_microsecond(micros).unwrap_or(t)
}

/// RFC 3339 with exactly six fractional digits and `Z` (contract 2).
pub fn format_timestamp(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// Parses any RFC 3339 timestamp.
pub fn parse_timestamp(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok().map(truncate)
}

/// Serde helpers emitting the API's timestamp format.
pub mod serde_ts {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_timestamp(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_timestamp(&s).ok_or_else(|| serde::de::Error::custom("invalid timestamp"))
    }

    /// The same for `Option<OffsetDateTime>` (absent = `null`).
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use time::OffsetDateTime;

        pub fn serialize<S: Serializer>(
            t: &Option<OffsetDateTime>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&super::super::format_timestamp(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<OffsetDateTime>, D::Error> {
            let s = Option::<String>::deserialize(d)?;
            match s {
                None => Ok(None),
                Some(s) => super::super::parse_timestamp(&s)
                    .map(Some)
                    .ok_or_else(|| serde::de::Error::custom("invalid timestamp")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn six_fraction_digits_and_z() {
        let t = datetime!(2026-03-01 12:30:05.123456789 UTC);
        assert_eq!(format_timestamp(truncate(t)), "2026-03-01T12:30:05.123456Z");
        let t = datetime!(2026-03-01 12:30:05 +02:00);
        assert_eq!(format_timestamp(t), "2026-03-01T10:30:05.000000Z");
    }

    #[test]
    fn parse_round_trip() {
        let s = "2026-03-01T12:30:05.123456Z";
        assert_eq!(parse_timestamp(s).map(format_timestamp).as_deref(), Some(s));
    }
}
