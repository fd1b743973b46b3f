//! External escalation, one client for both detectors: the anomaly detector (contract 15.2,
//! `ANOMALY_EXTERNAL_*`) and the prompt guard (contract 17.2, `GUARD_EXTERNAL_*`) send an
//! uncertain local score's input to an HTTP scorer and use its `{score}` answer instead.
//!
//! This module only speaks HTTP: `POST <url>` with the caller's JSON body, at most
//! [`DEFAULT_TIMEOUT`] (2 s) for the whole exchange, and an answer that must be a JSON object
//! whose `score` is a number in [0, 1]. Each detector decides its band ([`in_band`]), builds
//! the body, records its own metrics (by [`Outcome`]) and recomputes its result.
//!
//! Fail-open: every failure — time-out, connection refused, a non-2xx status (redirects are not
//! followed), a body that is not JSON, a `score` missing, not a number or outside [0, 1], an
//! answer over [`MAX_ANSWER_BYTES`] — is a [`Failure`] the caller answers by keeping its local
//! result. Nothing here can turn a request into an error.
//!
//! It lives in the store crate, beside the training mechanism, because it is infrastructure
//! that both detector crates share and both already depend on (the kernel, `steward-core`,
//! stays free of I/O clients); no HTTP framework is involved, only the `reqwest` client.
//! [`stub`] is a local HTTP scorer for tests.

pub mod stub;

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// The contract's time-out of one escalation (15.2, 17.2).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer read; a longer one is a [`Failure::BadAnswer`].
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Whether `score` lies in the escalation band `[low, high)`.
pub fn in_band(score: f64, low: f64, high: f64) -> bool {
    score >= low && score < high
}

/// Why an escalation gave no score (the local result stands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No complete answer within the time-out.
    Timeout,
    /// The connection could not be made or broke (refused, reset, DNS, TLS).
    Unreachable(String),
    /// An answer with a status other than 2xx.
    Status(u16),
    /// A 2xx answer without a usable `score`.
    BadAnswer(&'static str),
}

impl Failure {
    /// The `outcome` label of the detectors' escalation counters.
    pub fn outcome(&self) -> Outcome {
        match self {
            Failure::Timeout => Outcome::Timeout,
            Failure::Unreachable(_) => Outcome::Unreachable,
            Failure::Status(_) => Outcome::BadStatus,
            Failure::BadAnswer(_) => Outcome::BadAnswer,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout => write!(f, "no answer within the time-out"),
            Failure::Unreachable(e) => write!(f, "unreachable: {e}"),
            Failure::Status(s) => write!(f, "answered HTTP {s}"),
            Failure::BadAnswer(why) => write!(f, "unusable answer: {why}"),
        }
    }
}

/// How one escalation ended (the `outcome` label of `*_external_escalations_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The external score was used.
    Scored,
    Timeout,
    Unreachable,
    BadStatus,
    BadAnswer,
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Scored => "scored",
            Outcome::Timeout => "timeout",
            Outcome::Unreachable => "unreachable",
            Outcome::BadStatus => "bad_status",
            Outcome::BadAnswer => "bad_answer",
        }
    }
}

/// The `score` of an answer: a JSON object whose `score` is a number in [0, 1].
pub fn parse_score(bytes: &[u8]) -> Result<f64, Failure> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|_| Failure::BadAnswer("the body is not JSON"))?;
    let score = v
        .as_object()
        .ok_or(Failure::BadAnswer("the body is not a JSON object"))?
        .get("score")
        .ok_or(Failure::BadAnswer("no `score` member"))?
        .as_f64()
        .ok_or(Failure::BadAnswer("`score` is not a number"))?;
    if score.is_finite() && (0.0..=1.0).contains(&score) {
        Ok(score)
    } else {
        Err(Failure::BadAnswer("`score` is outside [0, 1]"))
    }
}

/// The client of one external scorer.
#[derive(Clone)]
pub struct ExternalScorer {
    client: reqwest::Client,
    url: String,
    timeout: Duration,
}

impl fmt::Debug for ExternalScorer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalScorer")
            .field("url", &crate::pool::redact_url(&self.url))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ExternalScorer {
    /// A client of `url` (http or https) whose whole exchange is bounded by `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<ExternalScorer, String> {
        match url::Url::parse(url) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
            _ => return Err("expected an http:// or https:// URL".to_owned()),
        }
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(ExternalScorer {
            client,
            url: url.to_owned(),
            timeout,
        })
    }

    /// The scorer a detector's settings ask for, with the contract's 2-second time-out:
    /// `None` when escalation is disabled, and — with a warning in the log, at start-up —
    /// when it is enabled without a usable URL (the detector then runs without escalation).
    /// `detector` names the settings in the messages (`ANOMALY`, `GUARD`).
    pub fn from_settings(
        detector: &str,
        enabled: bool,
        url: Option<&str>,
    ) -> Option<ExternalScorer> {
        if !enabled {
            return None;
        }
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            tracing::warn!(
                "{detector}_EXTERNAL_ENABLED is true but {detector}_EXTERNAL_URL is not set; \
                 external escalation stays disabled"
            );
            return None;
        };
        match ExternalScorer::new(url, DEFAULT_TIMEOUT) {
            Ok(s) => {
                tracing::info!(url = %crate::pool::redact_url(url), "{detector} external escalation enabled");
                Some(s)
            }
            Err(e) => {
                tracing::warn!(
                    url = %crate::pool::redact_url(url),
                    error = %e,
                    "{detector}_EXTERNAL_URL is unusable; external escalation stays disabled"
                );
                None
            }
        }
    }

    /// The time-out of one exchange.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// POSTs `body` and reads the `score` of the answer, all within the time-out.
    pub async fn score(&self, body: &Value) -> Result<f64, Failure> {
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout),
        }
    }

    async fn exchange(&self, body: &Value) -> Result<f64, Failure> {
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                Failure::Timeout
            } else {
                Failure::Unreachable(e.to_string())
            }
        };
        let mut answer = self
            .client
            .post(&self.url)
            .json(body)
            .send()
            .await
            .map_err(failed)?;
        let status = answer.status();
        if !status.is_success() {
            return Err(Failure::Status(status.as_u16()));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(failed)? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(Failure::BadAnswer("the answer is too large"));
            }
            bytes.extend_from_slice(&chunk);
        }
        parse_score(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_is_closed_below_and_open_above() {
        assert!(in_band(0.4, 0.4, 0.7));
        assert!(in_band(0.69, 0.4, 0.7));
        assert!(!in_band(0.7, 0.4, 0.7));
        assert!(!in_band(0.39, 0.4, 0.7));
        assert!(!in_band(0.5, 0.7, 0.7));
    }

    #[test]
    fn answers_are_checked() {
        assert_eq!(parse_score(br#"{"score": 0.25, "x": 1}"#), Ok(0.25));
        assert_eq!(parse_score(br#"{"score": 1}"#), Ok(1.0));
        assert_eq!(parse_score(br#"{"score": 0}"#), Ok(0.0));
        for bad in [
            &br#"{"score": 1.5}"#[..],
            br#"{"score": -0.1}"#,
            br#"{"score": "0.5"}"#,
            br#"{"score": null}"#,
            br#"{"risk": 0.5}"#,
            br#"[0.5]"#,
            b"0.5",
            b"not json",
            b"",
        ] {
            assert!(
                matches!(parse_score(bad), Err(Failure::BadAnswer(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn settings_without_a_url_disable_escalation() {
        assert!(ExternalScorer::from_settings("GUARD", false, Some("http://x")).is_none());
        assert!(ExternalScorer::from_settings("GUARD", true, None).is_none());
        assert!(ExternalScorer::from_settings("GUARD", true, Some("  ")).is_none());
        assert!(ExternalScorer::from_settings("GUARD", true, Some("ftp://x")).is_none());
        let s = ExternalScorer::from_settings("GUARD", true, Some("http://u:pw@127.0.0.1:9/s"));
        let s = s.map(|s| (format!("{s:?}"), s.timeout()));
        assert!(s.as_ref().is_some_and(|(d, _)| !d.contains("pw")), "{s:?}");
        assert_eq!(s.map(|(_, t)| t), Some(DEFAULT_TIMEOUT));
    }
}
