//! External escalation of the composite score (contract 15.2) against a real local HTTP
//! responder: a composite in [0.4, 0.7) is sent as `{tenant_id, event}` and the answer's score
//! is used with backend `external`; scores outside the band are never sent; a time-out, a
//! server error, an answer that is not JSON, and a score out of range or not a number leave
//! the composite standing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use steward_anomaly::scorer::{LoadedModel, ScoreConfig, Scored, Scorer};
use steward_core::TenantId;
use steward_store::external::stub::{StubReply, StubScorer};
use steward_store::external::ExternalScorer;

struct Fixed(f64);

impl LoadedModel for Fixed {
    fn score(&self, _e: &Value) -> f64 {
        self.0
    }
    fn backend(&self) -> &'static str {
        "sklearn"
    }
}

/// A scorer escalating to `stub` with a short time-out (the contract's is 2 s).
fn scorer(stub: &StubScorer, timeout: Duration) -> Scorer {
    Scorer::new(ScoreConfig {
        ml_weight: 0.4,
        threshold: 0.6,
        // The local model's budget: no loaded machine outlasts it (these tests are about
        // the escalation, not the model's time-out).
        ml_timeout: Duration::from_secs(30),
        ..ScoreConfig::default()
    })
    .with_external(Some(ExternalScorer::new(stub.url(), timeout).unwrap()))
}

fn tenant() -> TenantId {
    TenantId(uuid::Uuid::new_v4())
}

/// `delete_data` is a critical action: rules 0.5, so the composite (rules only) is 0.5.
fn critical() -> Value {
    json!({"action": "delete_data", "resource": "crm/contacts", "context": {"records": 3}})
}

fn assert_local(r: &Scored, risk: f64, backend: &str) {
    assert!((r.risk - risk).abs() < 1e-9, "{r:?}");
    assert_eq!(r.backend, backend, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_band_uses_the_external_score() {
    let stub = StubScorer::start(StubReply::score(0.92)).await.unwrap();
    let s = scorer(&stub, Duration::from_secs(2));
    let t = tenant();
    let r = s.score(t, &critical()).await;
    assert_local(&r, 0.92, "external");
    assert!(r.is_anomaly, "0.92 ≥ the threshold: {r:?}");
    assert!((r.rules - 0.5).abs() < 1e-9);
    assert!(r.reasons.iter().any(|x| x.starts_with("external scorer")));
    assert_eq!(
        stub.received(),
        vec![json!({"tenant_id": t.0.to_string(), "event": critical()})]
    );
    assert_eq!(s.last_backend(t), Some("external"));

    // A low external score clears the flag the composite would not have raised either.
    let low = StubScorer::start(StubReply::score(0.05)).await.unwrap();
    let r = scorer(&low, Duration::from_secs(2))
        .score(tenant(), &critical())
        .await;
    assert_local(&r, 0.05, "external");
    assert!(!r.is_anomaly);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_with_the_model_in_band_is_escalated() {
    let stub = StubScorer::start(StubReply::score(0.1)).await.unwrap();
    let s = scorer(&stub, Duration::from_secs(2));
    let t = tenant();
    // 0.4·0.9 + 0.6·0.5 = 0.66: in the band; the model's backend gives way to `external`.
    s.install(t, 1, Arc::new(Fixed(0.9)));
    let r = s.score(t, &critical()).await;
    assert_local(&r, 0.1, "external");
    assert_eq!(r.ml, Some(0.9));
    assert!(!r.is_anomaly);
    assert_eq!(stub.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_band_is_never_sent() {
    let stub = StubScorer::start(StubReply::score(0.5)).await.unwrap();
    let s = scorer(&stub, Duration::from_secs(2));
    let t = tenant();
    // 0.0 (no rule), 0.8 (sensitive resource), 1.0 (privileged action, bulk volume).
    for (event, risk) in [
        (json!({"action": "read_data", "resource": "docs"}), 0.0),
        (
            json!({"action": "read_data", "resource": "vault/secret"}),
            0.8,
        ),
        (json!({"action": "disable_audit", "resource": "audit"}), 1.0),
        (json!({"action": "x", "context": {"records": 50000}}), 1.0),
    ] {
        let r = s.score(t, &event).await;
        assert_local(&r, risk, "rules");
    }
    // With the model: 0.4·0.95 + 0.6·0.5 = 0.68 is in, 0.4·1 + 0.6·0.5 = 0.7 is not.
    s.install(t, 1, Arc::new(Fixed(1.0)));
    let r = s.score(t, &critical()).await;
    assert_local(&r, 0.7, "sklearn");
    assert_eq!(stub.count(), 0);
    s.install(t, 2, Arc::new(Fixed(0.95)));
    assert_local(&s.score(t, &critical()).await, 0.5, "external");
    assert_eq!(stub.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_scorer_leaves_the_composite_within_the_time_out() {
    let stub = StubScorer::start(StubReply::score(0.9).after(Duration::from_secs(30)))
        .await
        .unwrap();
    let s = scorer(&stub, Duration::from_millis(300));
    let started = Instant::now();
    let r = s.score(tenant(), &critical()).await;
    let took = started.elapsed();
    assert_local(&r, 0.5, "rules");
    assert!(!r.is_anomaly);
    assert!(took >= Duration::from_millis(290), "{took:?}");
    // Far below the stub's 30 s: the time-out cut the wait short.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(stub.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_answers_leave_the_composite() {
    for reply in [
        StubReply::raw(500, r#"{"score": 0.9}"#),
        StubReply::raw(200, "{not json"),
        StubReply::raw(200, r#"{"score": 1.7}"#),
        StubReply::raw(200, r#"{"score": -0.2}"#),
        StubReply::raw(200, r#"{"score": "high"}"#),
        StubReply::raw(200, r#"{}"#),
    ] {
        let shown = format!("{} {}", reply.status, reply.body);
        let stub = StubScorer::start(reply).await.unwrap();
        let r = scorer(&stub, Duration::from_secs(2))
            .score(tenant(), &critical())
            .await;
        assert_local(&r, 0.5, "rules");
        assert_eq!(stub.count(), 1, "{shown}");
    }
    // Nobody listening: refused at once, the composite stands.
    let gone = {
        let stub = StubScorer::start(StubReply::score(0.9)).await.unwrap();
        ExternalScorer::new(stub.url(), Duration::from_secs(2)).unwrap()
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let s = Scorer::new(ScoreConfig::default()).with_external(Some(gone));
    assert_local(&s.score(tenant(), &critical()).await, 0.5, "rules");
}
