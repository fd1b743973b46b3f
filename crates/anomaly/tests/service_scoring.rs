//! Live scoring: the hard ML time-out (rules decide, backend `timeout`), the composite, and
//! the refusal of a model stored with another feature definition.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use steward_anomaly::detector::BaselineCodec;
use steward_anomaly::scorer::{LoadedModel, ScoreConfig, Scorer};
use steward_anomaly::service::ModelCodec;
use steward_core::TenantId;
use steward_store::training::{StoredModel, TrainHandle, VersionInfo};

struct Sleepy(Duration);

impl LoadedModel for Sleepy {
    fn score(&self, _e: &Value) -> f64 {
        std::thread::sleep(self.0);
        1.0
    }
    fn backend(&self) -> &'static str {
        "sklearn"
    }
}

struct Fixed(f64);

impl LoadedModel for Fixed {
    fn score(&self, _e: &Value) -> f64 {
        self.0
    }
    fn backend(&self) -> &'static str {
        "sklearn"
    }
}

fn scorer(timeout_ms: u64) -> Scorer {
    Scorer::new(ScoreConfig {
        ml_timeout: Duration::from_millis(timeout_ms),
        ..ScoreConfig::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_past_the_timeout_yields_rules_within_budget() {
    let s = scorer(100);
    let t = TenantId(uuid::Uuid::new_v4());
    s.install(t, 1, Arc::new(Sleepy(Duration::from_secs(2))));
    let started = Instant::now();
    let r = s
        .score(t, &json!({"action": "delete_data", "resource": "tmp/x"}))
        .await;
    let took = started.elapsed();
    assert_eq!(r.backend, "timeout");
    assert_eq!(r.ml, None);
    assert!((r.risk - 0.5).abs() < 1e-9, "rules decide: {r:?}");
    // Far below the model's 2 s: the budget cut the wait short.
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(s.last_backend(t), Some("timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_and_flags() {
    // A budget no loaded machine outlasts: this test is about the composite, not the time-out.
    let s = scorer(30_000);
    let t = TenantId(uuid::Uuid::new_v4());
    // Untrained: rules only.
    let r = s
        .score(t, &json!({"action": "read_data", "resource": "docs"}))
        .await;
    assert_eq!((r.backend, r.risk, r.is_anomaly), ("rules", 0.0, false));
    let r = s
        .score(t, &json!({"action": "x", "context": {"records": 50000}}))
        .await;
    assert!(r.is_anomaly && r.risk == 1.0);
    // With a model: 0.6·ml + 0.4·rules.
    s.install(t, 3, Arc::new(Fixed(0.5)));
    let r = s
        .score(t, &json!({"action": "delete_data", "resource": "r"}))
        .await;
    assert_eq!(r.backend, "sklearn");
    assert!((r.risk - (0.6 * 0.5 + 0.4 * 0.5)).abs() < 1e-9);
    assert_eq!(s.loaded_version(t), Some(3));
}

#[test]
fn mismatched_feature_version_is_refused() {
    let events: Vec<Value> = (0..20)
        .map(|i| json!({"action": if i % 2 == 0 { "read" } else { "write" }, "resource": "crm/x"}))
        .collect();
    let trained = BaselineCodec
        .train(&events, None, 0.1, &TrainHandle::default())
        .unwrap();
    let mut stored = StoredModel {
        tenant_id: uuid::Uuid::new_v4(),
        detector: "anomaly".into(),
        info: VersionInfo {
            version: 1,
            feature_version: trained.feature_version.clone(),
            library_version: trained.library_version.clone(),
            metrics: trained.metrics.clone(),
            sample_count: trained.sample_count,
            task_id: None,
            created_at: steward_core::clock::now(),
            active: true,
        },
        bytes: trained.bytes,
    };
    let m = BaselineCodec.load(&stored).unwrap();
    assert!(
        m.score(&json!({"action": "drop_tables"}))
            > m.score(&json!({"action": "read", "resource": "crm/x"}))
    );
    stored.info.feature_version = "other-9".into();
    let err = BaselineCodec.load(&stored).err().unwrap();
    assert!(err.detail.contains("other-9"), "{}", err.detail);
}

#[test]
fn training_stops_when_cancelled() {
    let h = TrainHandle::default();
    h.cancel();
    let events = vec![json!({"action": "a"})];
    assert!(BaselineCodec.train(&events, None, 0.1, &h).is_err());
}
