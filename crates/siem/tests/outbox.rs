//! The outbox and its sender on both backends, against small in-process receivers: events
//! published on the bus arrive in order; an outage loses nothing; exhausted retries park
//! events as failed; one sender across instances; `_bulk` per-item errors are retried.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use steward_core::event::{publish, Event, Severity, EVENTS_CHANNEL};
use steward_core::{EventBus, MemoryBus, TenantId};
use steward_siem::{Format, Siem, SiemConfig, TransportConfig, TransportKind};
use steward_store::{db_test, DbPool};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A TCP line receiver collecting every line.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn events(&self) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

async fn line_receiver(listener: TcpListener, lines: Lines) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            return;
        };
        let lines = lines.clone();
        tokio::spawn(async move {
            let mut rd = BufReader::new(sock).lines();
            while let Ok(Some(l)) = rd.next_line().await {
                lines.0.lock().unwrap().push(l);
            }
        });
    }
}

fn config(
    kind: TransportKind,
    port: u16,
    url: Option<String>,
    batch: usize,
    retries: u32,
) -> SiemConfig {
    SiemConfig {
        enabled: true,
        batch_size: batch,
        batch_timeout: Duration::from_millis(200),
        max_retries: retries,
        transport: TransportConfig {
            kind,
            format: Format::Jsonl,
            host: "127.0.0.1".into(),
            port,
            tls: false,
            ca_file: None,
            connect_timeout: Duration::from_secs(2),
            hec_url: None,
            hec_token: None,
            hec_sourcetype: "steward".into(),
            elk_url: url,
            elk_index: "steward-events".into(),
            elk_username: Some("u".into()),
            elk_password: Some("p".into()),
        },
    }
}

fn ev(tenant: TenantId, i: usize) -> Event {
    Event::new(
        "agent.registered",
        tenant,
        Severity::Info,
        json!({"agent_id": format!("a-{i}"), "seq": i}),
    )
}

async fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Per tenant, the `seq` values in arrival order.
fn seqs(events: &[Value], tenant: TenantId) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["tenant_id"] == tenant.0.to_string())
        .map(|e| e["data"]["seq"].as_u64().unwrap())
        .collect()
}

/// The status once `sent` reached `n` (the receiver sees events before the sender records
/// the batch as delivered).
async fn settled(siem: &Siem, n: i64) -> steward_siem::SiemStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let st = siem.status().await.unwrap();
        if st.sent >= n {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    siem.status().await.unwrap()
}

async fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(siem: &Siem) {
    tokio::spawn(siem.clone().run_writer());
    tokio::spawn(siem.clone().run_sender());
}

db_test!(bus_events_arrive_in_order_per_tenant, |db| {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let lines = Lines::default();
    tokio::spawn(line_receiver(listener, lines.clone()));
    let siem = Siem::new(
        db.pool.clone(),
        config(TransportKind::Syslog, port, None, 10, 3),
    );
    let bus: Arc<dyn EventBus> = siem.wrap_bus(Arc::new(MemoryBus::new()));
    let (a, b) = (TenantId::new(), TenantId::new());
    start(&siem);
    for i in 0..60 {
        // Published one after the other (`event::publish` spawns a task per event, which
        // keeps no order between them on a busy machine).
        let event = ev(if i % 2 == 0 { a } else { b }, i);
        bus.publish(EVENTS_CHANNEL, &serde_json::to_vec(&event).unwrap())
            .await
            .unwrap();
    }
    // Not exported: internal notifications.
    publish(
        &bus,
        Event::new("audit.created", a, Severity::Info, json!({})),
    );
    wait_until("60 events", 20, || lines.0.lock().unwrap().len() >= 60).await;
    let events = lines.events();
    assert_eq!(events.len(), 60);
    assert_eq!(seqs(&events, a), (0..60).step_by(2).collect::<Vec<u64>>());
    assert_eq!(seqs(&events, b), (1..60).step_by(2).collect::<Vec<u64>>());
    let st = settled(&siem, 60).await;
    assert_eq!(
        (st.sent, st.failed, st.duplicates, st.queued),
        (60, 0, 0, 0)
    );
});

db_test!(an_outage_loses_nothing, |db| {
    let port = free_port().await;
    let lines = Lines::default();
    let siem = Siem::new(
        db.pool.clone(),
        config(TransportKind::Syslog, port, None, 5, 20),
    );
    let t = TenantId::new();
    for i in 0..40 {
        siem.enqueue(&ev(t, i));
    }
    start(&siem);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let st = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let st = siem.status().await.unwrap();
        if (st.retries >= 1 && st.last_error.is_some()) || std::time::Instant::now() > deadline {
            break st;
        }
    };
    assert!(st.retries >= 1 && st.last_error.is_some(), "{st:?}");
    assert_eq!(st.sent, 0);
    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    tokio::spawn(line_receiver(listener, lines.clone()));
    wait_until("40 events after the outage", 40, || {
        lines.0.lock().unwrap().len() >= 40
    })
    .await;
    let events = lines.events();
    assert_eq!(seqs(&events, t), (0..40).collect::<Vec<u64>>());
    let st = settled(&siem, 40).await;
    assert_eq!((st.sent, st.failed, st.queued), (40, 0, 0));
});

db_test!(exhausted_retries_park_events_as_failed, |db| {
    let port = free_port().await;
    let siem = Siem::new(
        db.pool.clone(),
        config(TransportKind::Syslog, port, None, 10, 1),
    );
    let t = TenantId::new();
    for i in 0..3 {
        siem.enqueue(&ev(t, i));
    }
    start(&siem);
    let pool: DbPool = db.pool.clone();
    let _ = pool;
    let mut st = siem.status().await.unwrap();
    for _ in 0..100 {
        if st.failed == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        st = siem.status().await.unwrap();
    }
    assert_eq!((st.failed, st.sent, st.queued), (3, 0, 0), "{st:?}");
    assert!(st.last_error.unwrap().contains("connect"));
});

db_test!(one_sender_across_instances, |db| {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let lines = Lines::default();
    tokio::spawn(line_receiver(listener, lines.clone()));
    let one = Siem::new(
        db.pool.clone(),
        config(TransportKind::Syslog, port, None, 7, 3),
    );
    let two = Siem::new(
        db.pool.clone(),
        config(TransportKind::Syslog, port, None, 7, 3),
    );
    start(&one);
    start(&two);
    let t = TenantId::new();
    for i in 0..50 {
        if i % 2 == 0 {
            one.enqueue(&ev(t, i))
        } else {
            two.enqueue(&ev(t, i))
        }
    }
    wait_until("50 events", 20, || lines.0.lock().unwrap().len() >= 50).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = lines.events();
    assert_eq!(events.len(), 50, "each event delivered once");
    let mut got = seqs(&events, t);
    got.sort_unstable();
    assert_eq!(got, (0..50).collect::<Vec<u64>>());
});

/// A `_bulk` stub: the first request rejects its second item with 429; later ones accept.
async fn bulk_stub(listener: TcpListener, docs: Lines, auth: Arc<Mutex<Vec<String>>>) {
    let mut first = true;
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let (head, body) = loop {
            let n = sock.read(&mut chunk).await.unwrap();
            if n == 0 {
                break (String::new(), String::new());
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some((h, b)) = text.split_once("\r\n\r\n") {
                let len: usize = h
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if b.len() >= len {
                    break (h.to_owned(), b.to_owned());
                }
            }
        };
        if let Some(a) = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
        {
            auth.lock().unwrap().push(a.to_owned());
        }
        let lines: Vec<&str> = body.lines().collect();
        let mut items = Vec::new();
        for (i, pair) in lines.chunks(2).enumerate() {
            let reject = first && i == 1;
            if reject {
                items.push(json!({"index": {"status": 429, "error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}}));
            } else {
                docs.0.lock().unwrap().push(pair[1].to_owned());
                items.push(json!({"index": {"status": 201}}));
            }
        }
        let answer = json!({"took": 1, "errors": first, "items": items}).to_string();
        first = false;
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        sock.write_all(resp.as_bytes()).await.unwrap();
        let _ = sock.shutdown().await;
    }
}

db_test!(bulk_item_errors_are_retried, |db| {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let docs = Lines::default();
    let auth = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(bulk_stub(listener, docs.clone(), auth.clone()));
    let siem = Siem::new(
        db.pool.clone(),
        config(TransportKind::Elk, 0, Some(url), 3, 5),
    );
    let t = TenantId::new();
    for i in 0..3 {
        siem.enqueue(&ev(t, i));
    }
    start(&siem);
    wait_until("3 documents", 20, || docs.0.lock().unwrap().len() >= 3).await;
    let mut got = seqs(&docs.events(), t);
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2]);
    let st = settled(&siem, 3).await;
    assert_eq!((st.sent, st.failed, st.duplicates), (3, 0, 0));
    assert!(st.retries >= 1);
    assert!(st.last_error.unwrap().contains("queue full"));
    assert!(auth.lock().unwrap()[0].contains("Basic "));
});

db_test!(
    a_whole_batch_leaves_without_waiting_for_the_time_out,
    |db| {
        // With a time-out far beyond the test, only a full batch can be sent: the writer writes
        // it as soon as it is complete and the sender sends it; the rest waits for its time-out.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let lines = Lines::default();
        tokio::spawn(line_receiver(listener, lines.clone()));
        let mut cfg = config(TransportKind::Syslog, port, None, 10, 3);
        cfg.batch_timeout = Duration::from_secs(600);
        let siem = Siem::new(db.pool.clone(), cfg);
        let t = TenantId::new();
        start(&siem);
        for i in 0..13 {
            siem.enqueue(&ev(t, i));
        }
        wait_until("a batch of 10", 30, || lines.0.lock().unwrap().len() >= 10).await;
        let st = settled(&siem, 10).await;
        assert_eq!((st.sent, st.queued, st.failed), (10, 3, 0), "{st:?}");
        assert_eq!(seqs(&lines.events(), t), (0..10).collect::<Vec<u64>>());
        // A forced flush sends the partial rest, in order.
        siem.flush_now().await.unwrap();
        wait_until("the other 3", 30, || lines.0.lock().unwrap().len() >= 13).await;
        assert_eq!(seqs(&lines.events(), t), (0..13).collect::<Vec<u64>>());
    }
);
