//! Anomalies over HTTP (contract 15): reports, the automatic report of a policy check,
//! feedback, training through the shared task mechanism, versions, rollback, cancel.
//! Every test runs on SQLite, and on PostgreSQL with `TEST_DATABASE_URL`.

mod common;

use common::{Cred, TestApp};
use serde_json::json;
use steward_store::training::{Outcome, Runner};

fn runner(app: &TestApp) -> Runner {
    Runner::new(app.state.db.clone(), app.state.bus.clone()).register(
        steward_anomaly::service::DETECTOR,
        app.state.anomaly.trainer(),
    )
}

async fn seed(app: &TestApp, key: &Cred, agent: &str, n: usize) {
    for i in 0..n {
        let action = if i % 2 == 0 {
            "read_data"
        } else {
            "write_data"
        };
        let r = app
            .call(
                "POST",
                "/api/v1/audit/log",
                key,
                Some(json!({"agent_id": agent, "action": action, "resource": "crm/contacts"})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
}

app_test!(reports_and_auto_report, |app| {
    let t = app.tenant("anomaly-reports").await;
    let key = Cred::Key(t.key.clone());
    let agent = app.agent(&t.key).await;
    // A privileged action in a policy check is always an anomaly and gets a report.
    let r = app
        .call(
            "POST",
            "/api/v1/policies/check",
            &key,
            Some(json!({"agent_id": agent, "action": "disable_audit", "resource": "audit/config", "context": {}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let check = r.json();
    assert_eq!(check["anomaly"]["is_anomaly"], true);
    let id = check["anomaly"]["report_id"].as_str().unwrap().to_owned();
    let report = app
        .call("GET", &format!("/api/v1/anomalies/{id}"), &key, None)
        .await
        .json();
    assert_eq!(report["source"], "auto");
    assert_eq!(report["agent_id"], agent.as_str());
    // A manual report scored by rules; unknown agent is 422.
    let r = app
        .call(
            "POST",
            "/api/v1/anomalies/report",
            &key,
            Some(json!({"event_data": {"action": "read_data", "resource": "vault/secret"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!((r.json()["risk_score"].as_f64().unwrap() - 0.8).abs() < 1e-9);
    let r = app
        .call(
            "POST",
            "/api/v1/anomalies/report",
            &key,
            Some(json!({"event_data": {}, "agent_id": uuid::Uuid::new_v4()})),
        )
        .await;
    r.problem(422, "validation_failed");
    let stats = app
        .call("GET", "/api/v1/anomalies/stats", &key, None)
        .await
        .json();
    assert_eq!(stats["total"], 2);
    assert_eq!(stats["by_source"]["auto"], 1);
    // Another tenant sees none of it.
    let other = app.tenant("anomaly-other").await;
    app.call(
        "GET",
        &format!("/api/v1/anomalies/{id}"),
        &Cred::Key(other.key),
        None,
    )
    .await
    .problem(404, "not_found");
});

app_test!(
    train_rollback_cancel,
    &[("ANOMALY_MIN_TRAINING_SAMPLES", "10")],
    |app| {
        let t = app.tenant("anomaly-train").await;
        let key = Cred::Key(t.key.clone());
        let agent = app.agent(&t.key).await;
        let problem = app
            .call("POST", "/api/v1/anomalies/detector/train", &key, None)
            .await
            .problem(422, "insufficient_samples");
        // Contract 3: `insufficient_samples` names `samples`.
        assert_eq!(problem["errors"][0]["field"], "samples", "{problem}");
        seed(&app, &key, &agent, 10).await;
        let r = runner(&app);
        for v in 1..=2 {
            let task = app
                .call("POST", "/api/v1/anomalies/detector/train", &key, None)
                .await;
            assert_eq!(task.status, 202, "{}", task.text());
            app.call("POST", "/api/v1/anomalies/detector/train", &key, None)
                .await
                .problem(409, "conflict");
            let out = r.run_once().await.unwrap();
            assert!(
                matches!(out, Outcome::Completed { version, .. } if version == v),
                "{out:?}"
            );
        }
        let status = app
            .call("GET", "/api/v1/anomalies/detector/status", &key, None)
            .await
            .json();
        assert_eq!(status["model_version"], 2);
        assert_eq!(status["training_status"], "trained");
        let rolled = app
            .call("POST", "/api/v1/anomalies/detector/rollback/1", &key, None)
            .await;
        assert_eq!(rolled.status, 200, "{}", rolled.text());
        assert_eq!(rolled.json()["model_version"], 1);
        let versions = app
            .call("GET", "/api/v1/anomalies/detector/versions", &key, None)
            .await
            .json();
        assert_eq!(versions["items"][0]["version"], 2);
        assert_eq!(versions["items"][0]["active"], false);
        assert_eq!(versions["items"][1]["active"], true);
        // Cancel a queued task: the active version stays.
        let task = app
            .call("POST", "/api/v1/anomalies/detector/train", &key, None)
            .await
            .json();
        let c = app
            .call("DELETE", "/api/v1/anomalies/detector/cancel", &key, None)
            .await;
        assert_eq!(c.status, 200, "{}", c.text());
        assert_eq!(c.json()["status"], "cancelled");
        assert_eq!(c.json()["task_id"], task["task_id"]);
        assert_eq!(r.run_once().await.unwrap(), Outcome::Idle);
        let status = app
            .call("GET", "/api/v1/anomalies/detector/status", &key, None)
            .await
            .json();
        assert_eq!(status["model_version"], 1);
        app.call("DELETE", "/api/v1/anomalies/detector/cancel", &key, None)
            .await
            .problem(409, "conflict");
    }
);

app_test!(
    auto_retrain_every_n_samples,
    &[
        ("ANOMALY_MIN_TRAINING_SAMPLES", "4"),
        ("ANOMALY_AUTO_RETRAIN_EVENTS", "4")
    ],
    |app| {
        let t = app.tenant("anomaly-auto").await;
        let key = Cred::Key(t.key.clone());
        let agent = app.agent(&t.key).await;
        seed(&app, &key, &agent, 4).await;
        let mut task = None;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let r = app
                .call(
                    "GET",
                    "/api/v1/anomalies/detector/training/status",
                    &key,
                    None,
                )
                .await;
            if r.status == 200 {
                task = Some(r.json());
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let task = task.expect("an automatic training task");
        assert_eq!(task["kind"], "anomaly");
        assert!(matches!(
            runner(&app).run_once().await.unwrap(),
            Outcome::Completed { version: 1, .. }
        ));
    }
);

app_test!(
    training_reads_the_newest_entries_up_to_its_byte_budget,
    &[
        ("ANOMALY_MIN_TRAINING_SAMPLES", "10"),
        ("ANOMALY_TRAINING_MAX_BYTES", "30000"),
        ("ANOMALY_AUTO_RETRAIN_EVENTS", "0"),
    ],
    |app| {
        let t = app.tenant("anomaly-budget").await;
        let key = Cred::Key(t.key.clone());
        let agent = app.agent(&t.key).await;
        // 300 entries of about 500 bytes each: 150,000 bytes, five times the budget, over
        // more than one page of the reading.
        let note = "x".repeat(450);
        for i in 0..300 {
            let r = app
                .call(
                    "POST",
                    "/api/v1/audit/log",
                    &key,
                    Some(json!({"agent_id": agent, "action": "read_data",
                                "resource": format!("crm/contacts/{i}"), "input": {"note": note}})),
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
        let r = runner(&app);
        let task = app
            .call("POST", "/api/v1/anomalies/detector/train", &key, None)
            .await;
        assert_eq!(task.status, 202, "{}", task.text());
        let out = r.run_once().await.unwrap();
        assert!(
            matches!(out, Outcome::Completed { version: 1, .. }),
            "{out:?}"
        );
        let versions = app
            .call("GET", "/api/v1/anomalies/detector/versions", &key, None)
            .await
            .json();
        let history = versions["items"][0]["sample_count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{versions}"));
        assert!(
            (40..=70).contains(&history),
            "{history} of 300 entries read"
        );
    }
);

app_test!(the_audit_list_names_the_agents, |app| {
    // Probe I F1: `GET /audit` carried `agent_name: null` on every item.
    let t = app.tenant("audit-names").await;
    let key = Cred::Key(t.key.clone());
    let agent = app.agent(&t.key).await;
    seed(&app, &key, &agent, 2).await;
    let name = app
        .call("GET", &format!("/api/v1/agents/{agent}"), &key, None)
        .await
        .json()["name"]
        .clone();
    let list = app.call("GET", "/api/v1/audit", &key, None).await.json();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{list}");
    for item in items {
        assert_eq!(item["agent_name"], name, "{list}");
    }
    let filtered = app
        .call(
            "GET",
            &format!("/api/v1/audit?agent_id={agent}&limit=1"),
            &key,
            None,
        )
        .await
        .json();
    assert_eq!(filtered["items"][0]["agent_name"], name, "{filtered}");
});
