//! `cargo bench -p steward-anomaly --bench anomaly`
//!
//! - `score_event` (criterion): features + model + rules of one event, in process;
//! - percentiles of the same over 100,000 single calls, and of `Scorer::score` (what the
//!   policy check awaits: rules, the model on the blocking pool under the time-out, the
//!   composite);
//! - training on 100,000 events (unsupervised, then with 200 labelled anomalies).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, Criterion};
use serde_json::{json, Value};
use steward_anomaly::codec::{Backend, Live, Model};
use steward_anomaly::scorer::{contract_rules, LoadedModel, ScoreConfig, Scorer};
use steward_core::TenantId;

fn event(i: usize) -> Value {
    let agents = [
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333",
    ];
    let paths = [
        "/api/v1/products",
        "/api/v1/search",
        "/api/v1/orders",
        "crm/contacts",
    ];
    let words = [
        "red shoes",
        "coffee beans",
        "desk lamp",
        "winter jacket",
        "usb charger",
    ];
    json!({
        "agent_id": (agents[i % 3]),
        "action": (["GET", "POST", "read_data", "GET"][i % 4]),
        "resource": format!("{}/{}?page={}", paths[i % 4], 1000 + (i * 7919) % 90000, i % 9),
        "input": {"query": {"q": (words[i % 5]), "limit": 20},
                  "headers": {"user_agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0", "client_ip": format!("10.0.{}.{}", i % 200, i % 250)}},
        "output": {"status": if i.is_multiple_of(40) { 404 } else { 200 }, "latency_ms": 20 + (i * 31) % 80, "bytes": 3000 + (i * 131) % 5000},
        "reasoning": ["look up the catalogue"],
    })
}

fn history(n: usize) -> Vec<Value> {
    (0..n).map(event).collect()
}

fn trained(labelled: bool) -> Model {
    let mut events = history(20_000);
    let mut labels = vec![None; events.len()];
    if labelled {
        for k in 0..50 {
            let mut e = event(k);
            e["input"]["query"]["q"] = json!(format!("x' OR '1'='1' -- {k}"));
            events.push(e);
            labels.push(Some(true));
        }
    }
    Model::train(&events, &labels, 0.1, 42, &mut |_| Ok(()))
        .unwrap()
        .0
}

fn pct(mut v: Vec<Duration>, p: f64) -> f64 {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6
}

fn score_event(c: &mut Criterion) {
    for (name, labelled) in [
        ("score_event/unsupervised", false),
        ("score_event/hybrid_supervised", true),
    ] {
        let live = Live::new(trained(labelled), None, Backend::Native);
        let probe = event(123_457);
        c.bench_function(name, |b| {
            b.iter(|| {
                let (rules, _) = contract_rules(black_box(&probe));
                black_box(live.score(black_box(&probe)) + rules)
            })
        });
    }
}

fn percentiles() {
    for (name, labelled) in [("unsupervised", false), ("supervised", true)] {
        let live = Live::new(trained(labelled), None, Backend::Native);
        let probes: Vec<Value> = (200_000..201_000).map(event).collect();
        let mut d = Vec::with_capacity(100_000);
        for i in 0..100_000 {
            let e = &probes[i % probes.len()];
            let t = Instant::now();
            let (rules, _) = contract_rules(e);
            black_box(live.score(e) + rules);
            d.push(t.elapsed());
        }
        println!(
            "score one event in process ({name}): p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs",
            pct(d.clone(), 0.5),
            pct(d.clone(), 0.99),
            pct(d, 0.999)
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scorer = Scorer::new(ScoreConfig::default());
    let tenant = TenantId(uuid::Uuid::new_v4());
    scorer.install(
        tenant,
        1,
        Arc::new(Live::new(trained(false), None, Backend::Native)),
    );
    let probes: Vec<Value> = (300_000..301_000).map(event).collect();
    let (with, without) = rt.block_on(async {
        let none = TenantId(uuid::Uuid::new_v4());
        let mut with = Vec::new();
        let mut without = Vec::new();
        for i in 0..20_000 {
            let e = &probes[i % probes.len()];
            let t = Instant::now();
            black_box(scorer.score(tenant, e).await);
            with.push(t.elapsed());
            let t = Instant::now();
            black_box(scorer.score(none, e).await);
            without.push(t.elapsed());
        }
        (with, without)
    });
    println!(
        "Scorer::score (policy-check path) with the model: p50 {:.1} µs, p99 {:.1} µs; rules only: p50 {:.1} µs, p99 {:.1} µs",
        pct(with.clone(), 0.5),
        pct(with, 0.99),
        pct(without.clone(), 0.5),
        pct(without, 0.99)
    );
}

fn training() {
    let events = history(100_000);
    for (name, positives) in [
        ("unsupervised", 0usize),
        ("with 200 labelled anomalies", 200),
    ] {
        let mut ev = events.clone();
        let mut labels = vec![None; ev.len()];
        for k in 0..positives {
            let mut e = event(k);
            e["output"]["latency_ms"] = json!(20_000 + k);
            ev.push(e);
            labels.push(Some(true));
        }
        let mut runs = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            black_box(Model::train(&ev, &labels, 0.1, 42, &mut |_| Ok(())).unwrap());
            runs.push(t.elapsed().as_secs_f64());
        }
        runs.sort_by(f64::total_cmp);
        println!(
            "train on 100,000 events ({name}): median {:.2} s (runs {:?})",
            runs[1],
            runs.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>()
        );
    }
}

criterion_group!(benches, score_event);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    percentiles();
    training();
}
