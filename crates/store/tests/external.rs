//! The external escalation client against a real local HTTP responder: a score is read; a
//! time-out, a refused connection, a non-2xx status, a body that is not JSON, and a score out
//! of range or not a number are failures (the caller keeps its local result).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use steward_store::external::stub::{StubReply, StubScorer};
use steward_store::external::{ExternalScorer, Failure, Outcome, DEFAULT_TIMEOUT};

/// The client's budget where an answer is expected: long enough for a loaded machine.
const ANSWER: Duration = Duration::from_secs(10);
/// The budget of the time-out test.
const SHORT: Duration = Duration::from_millis(300);

async fn ask(reply: StubReply) -> (Result<f64, Failure>, StubScorer) {
    ask_within(reply, ANSWER).await
}

async fn ask_within(reply: StubReply, budget: Duration) -> (Result<f64, Failure>, StubScorer) {
    let stub = StubScorer::start(reply).await.unwrap();
    let client = ExternalScorer::new(stub.url(), budget).unwrap();
    let r = client
        .score(&json!({"tenant_id": "t", "event": {"action": "a"}}))
        .await;
    (r, stub)
}

#[tokio::test]
async fn a_score_is_read_and_the_body_is_sent() {
    let (r, stub) = ask(StubReply::score(0.83)).await;
    assert_eq!(r, Ok(0.83));
    assert_eq!(
        stub.received(),
        vec![json!({"tenant_id": "t", "event": {"action": "a"}})]
    );
}

#[tokio::test]
async fn a_slow_answer_is_a_time_out_within_the_budget() {
    let started = Instant::now();
    let (r, stub) = ask_within(StubReply::score(0.9).after(Duration::from_secs(30)), SHORT).await;
    assert_eq!(r, Err(Failure::Timeout));
    assert_eq!(r.unwrap_err().outcome(), Outcome::Timeout);
    // Far below the stub's 30 s: the budget cut the wait short.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(stub.count(), 1);
}

#[tokio::test]
async fn failures_are_classified() {
    let cases = [
        (StubReply::raw(500, r#"{"score": 0.9}"#), Outcome::BadStatus),
        (StubReply::raw(302, r#"{"score": 0.9}"#), Outcome::BadStatus),
        (StubReply::raw(200, "<html>oops</html>"), Outcome::BadAnswer),
        (
            StubReply::raw(200, r#"{"score": 1.01}"#),
            Outcome::BadAnswer,
        ),
        (StubReply::raw(200, r#"{"score": -1}"#), Outcome::BadAnswer),
        (
            StubReply::raw(200, r#"{"score": "0.9"}"#),
            Outcome::BadAnswer,
        ),
        (
            StubReply::raw(200, r#"{"result": 0.9}"#),
            Outcome::BadAnswer,
        ),
        (
            StubReply::raw(
                200,
                format!(r#"{{"score": 0.5, "pad": "{}"}}"#, "x".repeat(70_000)),
            ),
            Outcome::BadAnswer,
        ),
    ];
    for (reply, outcome) in cases {
        let shown = format!("{} {:.40}", reply.status, reply.body);
        let (r, stub) = ask(reply).await;
        assert_eq!(
            r.as_ref().map_err(Failure::outcome),
            Err(outcome),
            "{shown}"
        );
        assert_eq!(stub.count(), 1, "{shown}");
    }
    assert_eq!(
        ask(StubReply::raw(503, "")).await.0,
        Err(Failure::Status(503))
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    // A port that was just free: nothing listens there any more.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = ExternalScorer::new(&format!("http://127.0.0.1:{port}/score"), ANSWER).unwrap();
    let r = client.score(&json!({})).await;
    assert_eq!(r.map_err(|e| e.outcome()), Err(Outcome::Unreachable));
}

#[tokio::test]
async fn the_default_time_out_is_the_contracts() {
    assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(2));
    let s = ExternalScorer::from_settings("ANOMALY", true, Some("http://127.0.0.1:9/s")).unwrap();
    assert_eq!(s.timeout(), DEFAULT_TIMEOUT);
}
