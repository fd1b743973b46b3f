//! SIEM export benchmark (harness = false; figures in docs/benchmarks.md):
//! - throughput per transport (events/s) from outbox to receiver, batches of 100, SQLite
//!   outbox; receivers: rsyslog/tenzir when TEST_SYSLOG_TCP/TEST_HEC_URL/TEST_BULK_URL are set,
//!   else in-process sinks;
//! - the cost added to a request that publishes an event: `publish` on the bus with SIEM off
//!   (plain MemoryBus) vs on (OutboxBus decorator), per event.
//!
//! `cargo bench -p steward-siem --bench export`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use steward_core::event::{Event, Severity, EVENTS_CHANNEL};
use steward_core::{EventBus, MemoryBus, TenantId};
use steward_siem::{Format, Siem, SiemConfig, TransportConfig, TransportKind};
use steward_store::testing::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const EVENTS: usize = 20_000;

fn var(n: &str) -> Option<String> {
    std::env::var(n).ok().filter(|v| !v.is_empty())
}

fn config(kind: TransportKind) -> SiemConfig {
    SiemConfig {
        enabled: true,
        batch_size: 100,
        batch_timeout: Duration::from_millis(100),
        max_retries: 3,
        transport: TransportConfig {
            kind,
            format: Format::Jsonl,
            host: "127.0.0.1".into(),
            port: 0,
            tls: false,
            ca_file: None,
            connect_timeout: Duration::from_secs(3),
            hec_url: None,
            hec_token: var("TEST_HEC_TOKEN"),
            hec_sourcetype: "steward".into(),
            elk_url: None,
            elk_index: "bench".into(),
            elk_username: None,
            elk_password: None,
        },
    }
}

fn event(t: TenantId, i: usize) -> Event {
    Event::new(
        "policy.violated",
        t,
        Severity::Warning,
        json!({"agent_id": "a", "seq": i, "action": "delete_data", "resource": "crm/contacts"}),
    )
}

/// A sink: reads and discards TCP bytes; for HTTP, answers every request 200 (`body`).
async fn sink(http_body: Option<&'static str>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut acc = Vec::new();
                loop {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    let Some(body) = http_body else { continue };
                    acc.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&acc).to_string();
                    if let Some((h, b)) = text.split_once("\r\n\r\n") {
                        let len: usize = h
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if b.len() >= len {
                            acc.clear();
                            let r = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                            if s.write_all(r.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn throughput(name: &str, mut c: SiemConfig) {
    let db = TestDb::sqlite().await.unwrap();
    match c.transport.kind {
        TransportKind::Syslog => {
            let addr = match var("TEST_SYSLOG_TCP") {
                Some(a) => a,
                None => sink(None).await,
            };
            let (h, p) = addr.rsplit_once(':').unwrap();
            c.transport.host = h.into();
            c.transport.port = p.parse().unwrap();
        }
        TransportKind::Splunk => {
            c.transport.hec_url = Some(match var("TEST_HEC_URL") {
                Some(u) => u,
                None => format!(
                    "http://{}",
                    sink(Some(r#"{"text":"Success","code":0}"#)).await
                ),
            });
        }
        TransportKind::Elk => {
            c.transport.elk_url = Some(match var("TEST_BULK_URL") {
                Some(u) => u,
                None => format!(
                    "http://{}",
                    sink(Some(r#"{"errors":false,"items":[]}"#)).await
                ),
            });
        }
    }
    let siem = Siem::new(db.pool.clone(), c);
    let t = TenantId::new();
    for i in 0..EVENTS {
        siem.enqueue(&event(t, i));
    }
    siem.drain_queue().await.unwrap();
    let start = Instant::now();
    siem.flush_now().await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let st = siem.status().await.unwrap();
    assert_eq!(st.sent as usize, EVENTS, "{st:?}");
    println!(
        "throughput {name:<8} {EVENTS} events in {secs:.2} s = {:.0} events/s",
        EVENTS as f64 / secs
    );
}

async fn publish_cost(bus: Arc<dyn EventBus>, label: &str) {
    let t = TenantId::new();
    let n = 100_000;
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|i| serde_json::to_vec(&event(t, i)).unwrap())
        .collect();
    let start = Instant::now();
    for p in &payloads {
        bus.publish(EVENTS_CHANNEL, p).await.unwrap();
    }
    let per = start.elapsed().as_secs_f64() / n as f64 * 1e6;
    println!("publish  {label:<4} {per:.2} µs per event");
}

#[tokio::main]
async fn main() {
    for (name, kind) in [
        ("syslog", TransportKind::Syslog),
        ("splunk", TransportKind::Splunk),
        ("elk", TransportKind::Elk),
    ] {
        throughput(name, config(kind)).await;
    }
    let db = TestDb::sqlite().await.unwrap();
    let off: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    publish_cost(off, "off").await;
    let siem = Siem::new(db.pool.clone(), config(TransportKind::Syslog));
    let on = siem.wrap_bus(Arc::new(MemoryBus::new()));
    publish_cost(on, "on").await;
}
