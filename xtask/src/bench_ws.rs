//! `cargo xtask bench ws`: `--clients` WebSocket clients of one tenant (default 1,000) receive a
//! burst of `--events` events (default 10,000 `audit.created`, produced by `POST /audit/log`).
//! Reports the delivery latency (receive time minus the event's timestamp, same clock),
//! deliveries missing, clients dropped, and with `--pid` the server's resident memory per idle
//! connection. `--rate N` paces the producers at N events per second (default: as fast as the
//! server answers). Raise the open-file limit first (`ulimit -n 65536`) for the server and this tool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use futures_util::StreamExt;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio_tungstenite::tungstenite::Message;

use crate::bench::{register_agents, tenant, Conn, Options, Samples};

/// The string value after `key` (which ends with the opening quote).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    let len = text[start..].find('"')?;
    Some(&text[start..start + len])
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// A user of the tenant and its JWT (created by the super admin).
async fn listener(o: &Options, tenant_key: &str) -> Result<String> {
    let mut c = Conn::open(&o.addr).await?;
    let (s, me) = c
        .call("GET", "/api/v1/auth/me", &[("X-API-Key", tenant_key)], None)
        .await?;
    let tenant_id = me["tenant_id"]
        .as_str()
        .or_else(|| me["tenant"]["id"].as_str())
        .map(str::to_owned);
    let (s2, login) = c
        .call(
            "POST",
            "/api/v1/auth/login",
            &[],
            Some(&json!({"email": o.super_email, "password": o.super_password})),
        )
        .await?;
    if s2 != 200 {
        bail!("super admin login answered {s2}: {login}");
    }
    let sup = login["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let auth = format!("Bearer {sup}");
    let tenant_id = match tenant_id {
        Some(t) if s == 200 => t,
        _ => {
            let (_, st) = c
                .call("GET", "/api/v1/status", &[("X-API-Key", tenant_key)], None)
                .await?;
            st["tenant"]["id"]
                .as_str()
                .ok_or_else(|| anyhow!("tenant id not found"))?
                .to_owned()
        }
    };
    let email = format!("ws-{}@bench.local", uuid::Uuid::new_v4().simple());
    let (s, b) = c
        .call(
            "POST",
            "/api/v1/users",
            &[("Authorization", &auth)],
            Some(&json!({"email": email, "password": "Bench-password-1", "role": "viewer", "tenant_id": tenant_id})),
        )
        .await?;
    if s != 201 {
        bail!("user creation answered {s}: {b}");
    }
    let (s, b) = c
        .call(
            "POST",
            "/api/v1/auth/login",
            &[],
            Some(&json!({"email": email, "password": "Bench-password-1"})),
        )
        .await?;
    if s != 200 {
        bail!("login answered {s}: {b}");
    }
    Ok(b["access_token"].as_str().unwrap_or_default().to_owned())
}

/// What one burst measured.
pub struct WsResult {
    pub samples: Samples,
    pub produced: Duration,
    pub total: Duration,
    pub delivered: u64,
    pub want: u64,
    pub dropped: u64,
}

pub async fn ws(o: Options) -> Result<()> {
    let r = ws_run(&o).await?;
    println!(
        "burst: {} events produced in {:.1} s; {} of {} deliveries ({} missing) in {:.1} s; {} clients dropped",
        o.events,
        r.produced.as_secs_f64(),
        r.delivered,
        r.want,
        r.want - r.delivered.min(r.want),
        r.total.as_secs_f64(),
        r.dropped
    );
    println!(
        "delivery latency ms: p50 {:.2}, p95 {:.2}, p99 {:.2}, max {:.2}",
        r.samples.pct(50.0),
        r.samples.pct(95.0),
        r.samples.pct(99.0),
        r.samples.pct(100.0)
    );
    Ok(())
}

/// Connects the clients, produces the burst and collects the deliveries.
pub async fn ws_run(o: &Options) -> Result<WsResult> {
    let key = tenant(o).await?;
    let agent = register_agents(o, &key, 1)
        .await?
        .pop()
        .ok_or_else(|| anyhow!("no agent"))?;
    let token = listener(o, &key).await?;
    let before = o.pid.and_then(rss_kib);

    // Connect every client and wait for its system.status.
    let url = format!("ws://{}/api/v1/ws?token={token}", o.addr);
    let mut sockets = Vec::with_capacity(o.clients);
    for _ in 0..o.clients {
        let (mut s, _) = tokio_tungstenite::connect_async(&url).await?;
        match tokio::time::timeout(Duration::from_secs(10), s.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => {}
            other => bail!("no system.status: {other:?}"),
        }
        sockets.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = o.pid.and_then(rss_kib);
    if let (Some(b), Some(a)) = (before, after) {
        println!(
            "idle connections: {} clients, server RSS {} KiB -> {} KiB = {:.1} KiB per connection",
            o.clients,
            b,
            a,
            (a.saturating_sub(b)) as f64 / o.clients as f64
        );
    }

    // Readers: count audit.created events of this run and their latency.
    let expected = o.events as u64;
    let dropped = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for mut s in sockets {
        let dropped = dropped.clone();
        readers.push(tokio::spawn(async move {
            let mut samples = Samples::default();
            let mut got = 0u64;
            let deadline = Instant::now() + Duration::from_secs(120);
            while got < expected && Instant::now() < deadline {
                match tokio::time::timeout(Duration::from_secs(30), s.next()).await {
                    Ok(Some(Ok(Message::Text(t)))) => {
                        // Cheap field reads: the generator shares the server's two cores, so
                        // it must not parse 10 million JSON documents.
                        if !t.starts_with("{\"event\":\"audit.created\"")
                            && !t.contains("\"event\":\"audit.created\"")
                        {
                            continue;
                        }
                        let now = OffsetDateTime::now_utc();
                        got += 1;
                        if let Some(ts) = field(&t, "\"timestamp\":\"")
                            .and_then(|ts| OffsetDateTime::parse(ts, &Rfc3339).ok())
                        {
                            let lag = (now - ts).max(time::Duration::ZERO);
                            samples.push(Duration::from_micros(lag.whole_microseconds() as u64));
                        }
                    }
                    Ok(Some(Ok(_))) => {}
                    _ => {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            (samples, got)
        }));
    }

    // The burst: `events` audit writes from 16 connections.
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    let rate = o.rate;
    for _ in 0..16 {
        let (addr, key, agent, next) = (o.addr.clone(), key.clone(), agent.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            let mut c = Conn::open(&addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= expected {
                    return Ok::<_, anyhow::Error>(());
                }
                if rate > 0.0 {
                    // `--rate`: event i is due at start + i / rate.
                    let due = started + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                let body = json!({"agent_id": agent, "action": "read_data", "resource": format!("ws/{i}")});
                let (s, b) = c
                    .call("POST", "/api/v1/audit/log", &[("X-API-Key", &key)], Some(&body))
                    .await?;
                if s != 201 {
                    bail!("audit log answered {s}: {b}");
                }
            }
        }));
    }
    for w in writers {
        w.await??;
    }
    let produced = started.elapsed();
    let mut all = Samples::default();
    let mut delivered = 0u64;
    for r in readers {
        let (s, got) = r.await?;
        delivered += got;
        all.merge(s);
    }
    let total = started.elapsed();
    let want = expected * o.clients as u64;
    Ok(WsResult {
        samples: all,
        produced,
        total,
        delivered,
        want,
        dropped: dropped.load(Ordering::Relaxed),
    })
}
