//! The discovery metrics (contract 19.4): `shadow_candidates_total` counts candidates created
//! (not merges), `shadow_time_to_confirm_seconds` records one value per confirm.
//!
//! A test binary of its own with a single test: the recorder is process-global.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use serde_json::json;
use steward_core::principal::CredentialKind;
use steward_core::{Body, Error, EventBus, MemoryBus, Principal, Role, TenantId};
use steward_discovery::{Discovery, IntegrationSettings};
use steward_registry::{NoActivity, Registry};
use steward_store::schema::tenants;
use steward_store::testing::TestDb;
use steward_store::{with_conn, DbResultExt, Id, Json, Ts};

#[derive(Default)]
struct Count(AtomicU64);

impl CounterFn for Count {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Values(Mutex<Vec<f64>>);

impl HistogramFn for Values {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

#[derive(Clone, Default)]
struct TestRecorder {
    counters: Arc<Mutex<HashMap<String, Arc<Count>>>>,
    histograms: Arc<Mutex<HashMap<String, Arc<Values>>>>,
}

impl TestRecorder {
    fn counter(&self, name: &str) -> u64 {
        let map = self.counters.lock().unwrap();
        map.get(name)
            .map_or(0, |c| AtomicU64::load(&c.0, Ordering::SeqCst))
    }

    fn histogram(&self, name: &str) -> Vec<f64> {
        let map = self.histograms.lock().unwrap();
        map.get(name)
            .map(|h| h.0.lock().unwrap().clone())
            .unwrap_or_default()
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut map = self.counters.lock().unwrap();
        let c = map.entry(key.name().to_owned()).or_default().clone();
        Counter::from_arc(c)
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut map = self.histograms.lock().unwrap();
        let h = map.entry(key.name().to_owned()).or_default().clone();
        Histogram::from_arc(h)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_candidates_and_confirm_latency_are_measured() {
    let recorder = TestRecorder::default();
    metrics::set_global_recorder(recorder.clone()).unwrap();

    let db = TestDb::sqlite().await.unwrap();
    let t = TenantId::new();
    let inserted: Result<usize, Error> = async {
        with_conn!(&db.pool, conn => {
            diesel::insert_into(tenants::table)
                .values((
                    tenants::id.eq(Id(t.0)),
                    tenants::name.eq("metrics"),
                    tenants::settings.eq(Json(json!({}))),
                    tenants::created_at.eq(Ts::from(steward_core::clock::now())),
                ))
                .execute(conn)
                .await
                .db()
        })
    }
    .await;
    inserted.unwrap();
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let registry = Registry::new(
        db.pool.clone(),
        bus.clone(),
        Arc::new(NoActivity),
        Duration::from_secs(300),
    );
    let s = Discovery::new(
        db.pool.clone(),
        bus,
        registry,
        IntegrationSettings::default(),
    );
    let p = Principal {
        tenant: t,
        role: Role::Developer,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    };

    let (first, _) = s
        .ingest(&p, &Body::json(&json!({"name": "a"})))
        .await
        .unwrap();
    s.ingest(&p, &Body::json(&json!({"name": "A"})))
        .await
        .unwrap();
    s.ingest(&p, &Body::json(&json!({"name": "b"})))
        .await
        .unwrap();
    assert_eq!(recorder.counter("shadow_candidates_total"), 2);
    s.ingest_batch(
        &p,
        &Body::json(
            &json!({"events": [{"name": "c"}, {"name": "b"}, {"name": "d"}, {"name": "c"}]}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        recorder.counter("shadow_candidates_total"),
        4,
        "merges are not counted"
    );
    s.feed(t, "e", None, "anomaly", json!({})).await.unwrap();
    assert_eq!(recorder.counter("shadow_candidates_total"), 5);

    assert!(recorder
        .histogram("shadow_time_to_confirm_seconds")
        .is_empty());
    s.confirm(&p, &first.id, &Body::default()).await.unwrap();
    let waited = recorder.histogram("shadow_time_to_confirm_seconds");
    assert_eq!(waited.len(), 1);
    assert!(waited[0] >= 0.0 && waited[0] < 60.0, "{waited:?}");
}
