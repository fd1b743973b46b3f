//! The transports: syslog over TCP (optionally TLS), Splunk HEC and Elasticsearch/OpenSearch
//! `_bulk`. A transport sends one batch and reports, per event, whether it was accepted.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::format::Format;

/// `SIEM_TRANSPORT` after resolving `auto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Syslog,
    Splunk,
    Elk,
}

impl TransportKind {
    /// `auto`: the HEC collector when `SPLUNK_HEC_URL` is set, else the search index when
    /// `ELK_URL` is set, else syslog (SPEC "SIEM export").
    pub fn resolve(setting: &str, hec_url: Option<&str>, elk_url: Option<&str>) -> TransportKind {
        match setting {
            "splunk" => TransportKind::Splunk,
            "elk" => TransportKind::Elk,
            "syslog" => TransportKind::Syslog,
            _ if hec_url.is_some() => TransportKind::Splunk,
            _ if elk_url.is_some() => TransportKind::Elk,
            _ => TransportKind::Syslog,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            TransportKind::Syslog => "syslog",
            TransportKind::Splunk => "splunk",
            TransportKind::Elk => "elk",
        }
    }
}

/// Everything the transports need (from the `SIEM_*`, `SPLUNK_*`, `ELK_*` settings).
#[derive(Clone, Debug)]
pub struct TransportConfig {
    pub kind: TransportKind,
    pub format: Format,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    /// PEM file of the CA(s) trusted for syslog TLS and HTTPS; the system bundle otherwise.
    pub ca_file: Option<String>,
    pub connect_timeout: Duration,
    pub hec_url: Option<String>,
    pub hec_token: Option<String>,
    pub hec_sourcetype: String,
    pub elk_url: Option<String>,
    pub elk_index: String,
    pub elk_username: Option<String>,
    pub elk_password: Option<String>,
}

/// The outcome of sending one batch.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Every event was accepted.
    Delivered,
    /// The whole batch failed; the first `maybe_sent` events may have reached the receiver.
    Failed { error: String, maybe_sent: usize },
    /// Some events were rejected (index in the batch, error); the others were accepted.
    Partial { rejected: Vec<(usize, String)> },
}

/// A transport ready to send batches.
pub struct Transport {
    config: TransportConfig,
    http: reqwest::Client,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Transport {
    pub fn new(config: TransportConfig) -> Result<Transport, String> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.connect_timeout + Duration::from_secs(25));
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("SIEM CA file {path}: {e}"))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("SIEM CA file {path}: {e}"))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| format!("HTTP client: {e}"))?;
        let tls = if config.tls && config.kind == TransportKind::Syslog {
            Some(tls_connector(config.ca_file.as_deref())?)
        } else {
            None
        };
        Ok(Transport { config, http, tls })
    }

    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    /// Sends `records` (export objects) as one batch.
    pub async fn send(&self, records: &[Value]) -> Outcome {
        if records.is_empty() {
            return Outcome::Delivered;
        }
        match self.config.kind {
            TransportKind::Syslog => self.send_syslog(records).await,
            TransportKind::Splunk => self.send_hec(records).await,
            TransportKind::Elk => self.send_bulk(records).await,
        }
    }

    async fn send_syslog(&self, records: &[Value]) -> Outcome {
        let addr = format!("{}:{}", self.config.host, self.config.port);
        let failed = |error: String, maybe_sent| Outcome::Failed { error, maybe_sent };
        let tcp = match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(&addr))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return failed(format!("syslog connect {addr}: {e}"), 0),
            Err(_) => return failed(format!("syslog connect {addr}: timed out"), 0),
        };
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => self.write_lines(tcp, records).await,
            Some(connector) => {
                let name = match rustls::pki_types::ServerName::try_from(self.config.host.clone()) {
                    Ok(n) => n,
                    Err(e) => return failed(format!("syslog TLS server name: {e}"), 0),
                };
                match tokio::time::timeout(
                    self.config.connect_timeout,
                    connector.connect(name, tcp),
                )
                .await
                {
                    Ok(Ok(stream)) => self.write_lines(stream, records).await,
                    Ok(Err(e)) => failed(format!("syslog TLS handshake with {addr}: {e}"), 0),
                    Err(_) => failed(format!("syslog TLS handshake with {addr}: timed out"), 0),
                }
            }
        }
    }

    /// One event per line, `\n`-terminated (RFC 6587 non-transparent framing).
    async fn write_lines<S: AsyncWrite + Unpin>(
        &self,
        mut stream: S,
        records: &[Value],
    ) -> Outcome {
        let write_timeout = self.config.connect_timeout + Duration::from_secs(10);
        let mut buf = Vec::with_capacity(records.len() * 256);
        for r in records {
            buf.extend_from_slice(self.config.format.line(r).as_bytes());
            buf.push(b'\n');
        }
        let result = tokio::time::timeout(write_timeout, async {
            stream.write_all(&buf).await?;
            stream.flush().await?;
            stream.shutdown().await
        })
        .await;
        match result {
            Ok(Ok(())) => Outcome::Delivered,
            // Part of the buffer may have been written: every event may have arrived.
            Ok(Err(e)) => Outcome::Failed {
                error: format!("syslog write: {e}"),
                maybe_sent: records.len(),
            },
            Err(_) => Outcome::Failed {
                error: "syslog write: timed out".into(),
                maybe_sent: records.len(),
            },
        }
    }

    fn hec_endpoint(&self) -> Option<String> {
        let url = self.config.hec_url.as_deref()?.trim_end_matches('/');
        Some(if url.contains("/services/collector") {
            url.to_owned()
        } else {
            format!("{url}/services/collector/event")
        })
    }

    /// Splunk HEC: the batch as concatenated event objects in one request.
    async fn send_hec(&self, records: &[Value]) -> Outcome {
        let Some(url) = self.hec_endpoint() else {
            return Outcome::Failed {
                error: "SPLUNK_HEC_URL is not set".into(),
                maybe_sent: 0,
            };
        };
        let mut body = String::new();
        for r in records {
            let event = match self.config.format {
                Format::Jsonl => r.clone(),
                f => Value::String(f.line(r)),
            };
            let time = r
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(|t| {
                    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map(|t| t.unix_timestamp_nanos() as f64 / 1e9);
            let mut obj = json!({
                "source": "steward",
                "sourcetype": self.config.hec_sourcetype,
                "event": event,
            });
            if let Some(t) = time {
                obj["time"] = json!(t);
            }
            body.push_str(&obj.to_string());
            body.push('\n');
        }
        let mut req = self
            .http
            .post(&url)
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(token) = &self.config.hec_token {
            req = req.header("Authorization", format!("Splunk {token}"));
        }
        match req.send().await {
            Ok(resp) if resp.status().is_success() => Outcome::Delivered,
            Ok(resp) => {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                Outcome::Failed {
                    error: format!("Splunk HEC answered {status}: {}", truncate(&text)),
                    maybe_sent: 0,
                }
            }
            Err(e) => Outcome::Failed {
                error: format!("Splunk HEC {url}: {e}"),
                maybe_sent: if e.is_timeout() { records.len() } else { 0 },
            },
        }
    }

    /// Elasticsearch/OpenSearch `_bulk`: NDJSON index actions; per-item errors inspected.
    async fn send_bulk(&self, records: &[Value]) -> Outcome {
        let Some(base) = self.config.elk_url.as_deref() else {
            return Outcome::Failed {
                error: "ELK_URL is not set".into(),
                maybe_sent: 0,
            };
        };
        let url = format!("{}/_bulk", base.trim_end_matches('/'));
        let action = json!({"index": {"_index": self.config.elk_index}}).to_string();
        let mut body = String::new();
        for r in records {
            let mut doc = r.clone();
            if let Some(ts) = r.get("timestamp").cloned() {
                doc["@timestamp"] = ts;
            }
            if self.config.format != Format::Jsonl {
                doc["message"] = Value::String(self.config.format.line(r));
            }
            body.push_str(&action);
            body.push('\n');
            body.push_str(&doc.to_string());
            body.push('\n');
        }
        let mut req = self
            .http
            .post(&url)
            .header("Content-Type", "application/x-ndjson")
            .body(body);
        if let Some(user) = &self.config.elk_username {
            req = req.basic_auth(user, self.config.elk_password.as_deref());
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                return Outcome::Failed {
                    error: format!("bulk {url}: {e}"),
                    maybe_sent: if e.is_timeout() { records.len() } else { 0 },
                }
            }
        };
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Outcome::Failed {
                error: format!("bulk answered {status}: {}", truncate(&text)),
                maybe_sent: 0,
            };
        }
        bulk_outcome(&text, records.len())
    }
}

/// Reads a `_bulk` answer: `errors` false means all accepted; else each item's status.
pub fn bulk_outcome(text: &str, n: usize) -> Outcome {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        // A 2xx without a readable body (some proxies): taken as accepted.
        return Outcome::Delivered;
    };
    if v.get("errors").and_then(Value::as_bool) != Some(true) {
        return Outcome::Delivered;
    }
    let items = v
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut rejected = Vec::new();
    for i in 0..n {
        let item = items
            .get(i)
            .and_then(|it| it.as_object())
            .and_then(|o| o.values().next());
        let Some(item) = item else {
            rejected.push((i, "no item in the bulk answer".to_owned()));
            continue;
        };
        let st = item.get("status").and_then(Value::as_u64).unwrap_or(0);
        if !(200..300).contains(&st) {
            let err = item
                .get("error")
                .map(|e| match e.get("reason").and_then(Value::as_str) {
                    Some(r) => format!("{st}: {r}"),
                    None => format!("{st}: {e}"),
                })
                .unwrap_or_else(|| format!("item status {st}"));
            rejected.push((i, err));
        }
    }
    if rejected.is_empty() {
        Outcome::Delivered
    } else {
        Outcome::Partial { rejected }
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(300).collect()
}

/// A rustls connector trusting `ca_file`, or the system bundle.
fn tls_connector(ca_file: Option<&str>) -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    let paths: Vec<&str> = match ca_file {
        Some(p) => vec![p],
        None => vec![
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
            "/etc/ssl/cert.pem",
        ],
    };
    for path in paths {
        let Ok(pem) = std::fs::read(path) else {
            if ca_file.is_some() {
                return Err(format!("SIEM CA file {path} cannot be read"));
            }
            continue;
        };
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("SIEM CA file {path}: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("SIEM CA file {path}: {e}"))?;
        }
        if ca_file.is_none() && !roots.is_empty() {
            break;
        }
    }
    if roots.is_empty() {
        return Err("no CA certificate to verify the syslog TLS receiver".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_resolution() {
        use TransportKind::*;
        assert_eq!(TransportKind::resolve("auto", Some("h"), Some("e")), Splunk);
        assert_eq!(TransportKind::resolve("auto", None, Some("e")), Elk);
        assert_eq!(TransportKind::resolve("auto", None, None), Syslog);
        assert_eq!(TransportKind::resolve("syslog", Some("h"), None), Syslog);
    }

    #[test]
    fn bulk_items_are_inspected() {
        let ok = r#"{"took":1,"errors":false,"items":[{"index":{"status":201}}]}"#;
        assert_eq!(bulk_outcome(ok, 1), Outcome::Delivered);
        let mixed = r#"{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":429,"error":{"type":"es_rejected_execution_exception","reason":"busy"}}}]}"#;
        assert_eq!(
            bulk_outcome(mixed, 2),
            Outcome::Partial {
                rejected: vec![(1, "429: busy".into())]
            }
        );
    }
}
