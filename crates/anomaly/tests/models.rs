//! The codec over the real models: unsupervised training and scoring, the supervised part
//! from labelled anomalies, refusal of models of another feature/library version, cancel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use steward_anomaly::codec::{AnomalyCodec, FEATURE_VERSION_OF, LIBRARY_VERSION};
use steward_anomaly::service::ModelCodec;
use steward_store::training::{StoredModel, TrainHandle, TrainedModel, VersionInfo};

fn normal(i: usize) -> Value {
    let paths = ["/api/v1/products", "/api/v1/search", "/api/v1/cart/items"];
    json!({
        "agent_id": "11111111-1111-4111-8111-111111111111",
        "action": if i.is_multiple_of(4) { "POST" } else { "GET" },
        "resource": format!("{}?page={}", paths[i % 3], i % 9),
        "input": {"query": {"q": (["red shoes", "coffee beans", "desk lamp"][i % 3])}, "headers": {"user_agent": "okhttp/4.12.0"}},
        "output": {"status": if i.is_multiple_of(50) { 404 } else { 200 }, "latency_ms": 30 + (i * 7) % 40, "bytes": 4000 + (i * 13) % 900},
    })
}

fn attacks() -> Vec<Value> {
    let mut a = Vec::new();
    for (k, p) in [
        "' OR '1'='1",
        "<script>alert(1)</script>",
        "../../../../etc/passwd",
        "1; DROP TABLE x--",
    ]
    .iter()
    .enumerate()
    {
        let mut e = normal(k + 1);
        e["input"]["query"]["q"] = json!(p);
        a.push(e);
    }
    let mut slow = normal(5);
    slow["output"]["latency_ms"] = json!(25_000);
    a.push(slow);
    let mut odd = normal(6);
    odd["action"] = json!("DELETE");
    odd["resource"] = json!("/api/v1/users/42");
    a.push(odd);
    a
}

fn stored(t: TrainedModel) -> StoredModel {
    StoredModel {
        tenant_id: uuid::Uuid::new_v4(),
        detector: "anomaly".into(),
        info: VersionInfo {
            version: 1,
            feature_version: t.feature_version,
            library_version: t.library_version,
            metrics: t.metrics,
            sample_count: t.sample_count,
            task_id: None,
            created_at: steward_core::clock::now(),
            active: true,
        },
        bytes: t.bytes,
    }
}

#[test]
fn unsupervised_model_ranks_attacks_above_normal_traffic() {
    let history: Vec<Value> = (0..1500).map(normal).collect();
    let codec = AnomalyCodec::new("sklearn", None);
    let t = codec
        .train(&history, None, 0.1, &TrainHandle::default())
        .unwrap();
    assert_eq!(t.metrics["supervised"], false);
    assert_eq!(t.library_version, LIBRARY_VERSION);
    let m = codec.load(&stored(t)).unwrap();
    assert_eq!(m.backend(), "sklearn");
    let normals: Vec<f64> = (2000..2100).map(|i| m.score(&normal(i))).collect();
    let worst_normal = normals.iter().cloned().fold(0.0, f64::max);
    let median_normal = {
        let mut s = normals.clone();
        s.sort_by(f64::total_cmp);
        s[50]
    };
    for a in attacks() {
        let s = m.score(&a);
        assert!((0.0..=1.0).contains(&s));
        assert!(
            s > median_normal + 0.1,
            "{a}: {s} vs median {median_normal}"
        );
    }
    assert!(worst_normal < 1.0);
}

#[test]
fn labelled_anomalies_add_the_supervised_part() {
    let mut events: Vec<Value> = (0..1500).map(normal).collect();
    let mut labels = vec![None; events.len()];
    for k in 0..8 {
        let mut e = normal(k);
        e["input"]["query"]["q"] = json!(format!("x' UNION SELECT name, pass FROM users{k}--"));
        events.push(e);
        labels.push(Some(true));
    }
    let codec = AnomalyCodec::new("sklearn", None);
    let t = codec
        .train_mixed(&events, &labels, 0.1, &TrainHandle::default())
        .unwrap();
    assert_eq!(t.metrics["supervised"], true);
    assert_eq!(t.metrics["labelled_anomalies"], 8);
    assert!(t.metrics["recall"].as_f64().unwrap() > 0.5);
    let m = codec.load(&stored(t)).unwrap();
    let mut unseen = normal(3);
    unseen["input"]["query"]["q"] = json!("shoes' UNION SELECT card, cvv FROM payments--");
    let s = m.score(&unseen);
    let n = m.score(&normal(2001));
    assert!(s > n + 0.3, "{s} vs {n}");
}

#[test]
fn models_of_another_feature_or_library_version_are_refused() {
    let history: Vec<Value> = (0..100).map(normal).collect();
    let codec = AnomalyCodec::new("sklearn", None);
    let t = codec
        .train(&history, None, 0.1, &TrainHandle::default())
        .unwrap();
    assert_eq!(t.feature_version, FEATURE_VERSION_OF);
    let mut s = stored(t);
    assert!(codec.load(&s).is_ok());
    s.info.feature_version = "steward-anomaly-features-1".into();
    let e = codec.load(&s).err().unwrap();
    assert!(
        e.detail.contains("steward-anomaly-features-1") && e.detail.contains("train"),
        "{}",
        e.detail
    );
    s.info.feature_version = FEATURE_VERSION_OF.into();
    s.info.library_version = "steward-anomaly-model/0".into();
    let e = codec.load(&s).err().unwrap();
    assert!(e.detail.contains("steward-anomaly-model/0"), "{}", e.detail);
    // Corrupt bytes are refused too.
    s.info.library_version = LIBRARY_VERSION.into();
    s.bytes.truncate(10);
    assert!(codec.load(&s).is_err());
}

#[test]
fn cancel_stops_training_within_a_second() {
    let history: Vec<Value> = (0..100_000).map(normal).collect();
    let codec = Arc::new(AnomalyCodec::new("sklearn", None));
    let h = TrainHandle::default();
    let (c2, h2) = (codec.clone(), h.clone());
    let worker = std::thread::spawn(move || {
        let r = c2.train(&history, None, 0.1, &h2);
        (r.is_err(), Instant::now())
    });
    std::thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    h.cancel();
    let (failed, ended) = worker.join().unwrap();
    assert!(failed, "a cancelled training must not produce a model");
    // Well within a second on an idle machine; the bound leaves room for a loaded one.
    assert!(ended.duration_since(cancelled_at) < Duration::from_secs(3));
}

#[test]
fn native_model_scores_small_events_inline_and_large_ones_on_the_pool() {
    let history: Vec<Value> = (0..200).map(normal).collect();
    let codec = AnomalyCodec::new("hybrid", None);
    let t = codec
        .train(&history, None, 0.1, &TrainHandle::default())
        .unwrap();
    let m = codec.load(&stored(t)).unwrap();
    assert!(m.inline(&normal(1)));
    let mut big = normal(2);
    big["input"]["blob"] = json!("x".repeat(64 * 1024));
    assert!(
        !m.inline(&big),
        "a large event goes through the time-out path"
    );
    let many: Vec<Value> = (0..2000).map(|i| json!(i)).collect();
    let mut wide = normal(3);
    wide["input"]["items"] = json!(many);
    assert!(!m.inline(&wide));
    // Both still score.
    assert!((0.0..=1.0).contains(&m.score(&big)));
}

/// Whether ordinary request `i` is the quiet agent's (one in ten, scattered).
fn quiet_turn(i: usize) -> bool {
    (i.wrapping_mul(2_654_435_761) >> 9) % 10 == 3
}

/// Live traffic of two agents, `rounds` rounds of 200 ordinary requests (the quiet agent's
/// one in ten) each followed by a run of 8 requests of the quiet agent that look like its
/// ordinary ones. Returns (event, position in the run or None, score).
fn bursts(
    m: &dyn steward_anomaly::scorer::LoadedModel,
    start: usize,
    rounds: usize,
) -> Vec<(Value, Option<usize>, f64)> {
    let mut out = Vec::new();
    let mut i = start;
    for _ in 0..rounds {
        for k in 0..208 {
            let (agent, pos) = if k < 200 {
                (if quiet_turn(i) { QUIET } else { BUSY }, None)
            } else {
                (QUIET, Some(k - 200))
            };
            let e = by(i, agent);
            i += 1;
            let s = m.score(&e);
            out.push((e, pos, s));
        }
    }
    out
}

const BUSY: &str = "11111111-1111-4111-8111-111111111111";
const QUIET: &str = "22222222-2222-4222-8222-222222222222";

fn by(i: usize, agent: &str) -> Value {
    let mut e = normal(i);
    e["agent_id"] = json!(agent);
    e
}

/// ROC-AUC of the requests of the runs at positions `from..` against the quiet agent's
/// ordinary ones (which differ only in the agent's recent rate).
fn burst_auc(rows: &[(Value, Option<usize>, f64)], from: usize) -> f64 {
    let (mut s, mut y) = (Vec::new(), Vec::new());
    for (e, pos, score) in rows {
        match pos {
            None if e["agent_id"] == QUIET => (s.push(*score), y.push(false)),
            None => continue,
            Some(p) if *p >= from => (s.push(*score), y.push(true)),
            Some(_) => continue,
        };
    }
    steward_anomaly::iforest::roc_auc(&s, &y)
}

#[test]
fn bursts_rank_high_and_labelled_bursts_teach_the_supervised_part_the_rate() {
    let history: Vec<Value> = (0..4000)
        .map(|i| by(i, if quiet_turn(i) { QUIET } else { BUSY }))
        .collect();
    let codec = AnomalyCodec::new("sklearn", None);
    let t = codec
        .train(&history, None, 0.1, &TrainHandle::default())
        .unwrap();
    let unsupervised = stored(t);
    // Unsupervised: the agent's rate against its own share shows the runs.
    let live = bursts(codec.load(&unsupervised).unwrap().as_ref(), 10_000, 8);
    for (from, min) in [(1, 0.75), (3, 0.9)] {
        let auc = burst_auc(&live, from);
        assert!(auc > min, "from position {from}: {auc}");
    }
    // Label the runs of the first four rounds through feedback (their event data carry no
    // window: the codec remembers the values each was scored with) and train again.
    let mut events = history.clone();
    let mut labels = vec![None; events.len()];
    for (e, pos, _) in live.iter().take(4 * 208) {
        if pos.is_some() {
            events.push(e.clone());
            labels.push(Some(true));
        }
    }
    let t = codec
        .train_mixed(&events, &labels, 0.1, &TrainHandle::default())
        .unwrap();
    assert_eq!(t.metrics["supervised"], true);
    let supervised = codec.load(&stored(t)).unwrap();
    // Fresh traffic on both models (new events, each model with its own window).
    let before = bursts(codec.load(&unsupervised).unwrap().as_ref(), 12_000, 8);
    let after = bursts(supervised.as_ref(), 12_000, 8);
    let (b, a) = (burst_auc(&before, 1), burst_auc(&after, 1));
    assert!(a > b, "{b} -> {a}");
    // The labels lift the runs, not ordinary traffic (live events are outsiders of the
    // history like the labelled ones: the supervised part must not learn "outsider").
    let median_ordinary = |rows: &[(Value, Option<usize>, f64)]| {
        let mut s: Vec<f64> = rows.iter().filter(|r| r.1.is_none()).map(|r| r.2).collect();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let (mb, ma) = (median_ordinary(&before), median_ordinary(&after));
    assert!(ma < mb + 0.05, "ordinary traffic rose: {mb} -> {ma}");
}
