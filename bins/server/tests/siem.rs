//! `GET /siem/status`, `POST /siem/test` (contract 22) and events exported end to end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Cred, TestApp, ADMIN_KEY};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::net::TcpListener;

app_test!(status_and_test_need_platform_administration, |app| {
    let admin = Cred::Admin(ADMIN_KEY.into());
    let r = app.call("GET", "/api/v1/siem/status", &admin, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let b = r.json();
    for k in [
        "enabled",
        "format",
        "transport",
        "host",
        "port",
        "tls",
        "batch_size",
        "batch_timeout",
        "max_retries",
        "connect_timeout",
        "queued",
        "sent",
        "failed",
        "last_error",
    ] {
        assert!(b.get(k).is_some(), "status member {k} missing: {b}");
    }
    assert_eq!(b["enabled"], false);
    assert_eq!(
        b["transport"], "syslog",
        "auto resolves to syslog without HEC/ELK URLs"
    );
    let r = app.call("POST", "/api/v1/siem/test", &admin, None).await;
    assert_eq!(r.status, 200);
    let b = r.json();
    assert_eq!(b["delivered"], false);
    assert_eq!(b["event_type"], "siem.test");
    assert_eq!(b["error"], "SIEM export is disabled");

    let sup = app.super_admin().await;
    let r = app
        .call("GET", "/api/v1/siem/status", &Cred::Jwt(sup.token), None)
        .await;
    assert_eq!(r.status, 200);

    let tenant = app.tenant("siem-t").await;
    app.call("GET", "/api/v1/siem/status", &Cred::None, None)
        .await
        .problem(401, "missing_credentials");
    app.call(
        "GET",
        "/api/v1/siem/status",
        &Cred::Key(tenant.key.clone()),
        None,
    )
    .await
    .problem(401, "missing_credentials");
    app.call(
        "GET",
        "/api/v1/siem/status",
        &Cred::Admin("nope".into()),
        None,
    )
    .await
    .problem(401, "invalid_credentials");
    let admin_user = app.user(&tenant, "admin").await;
    app.call(
        "POST",
        "/api/v1/siem/test",
        &Cred::Jwt(admin_user.token),
        None,
    )
    .await
    .problem(403, "forbidden");
});

#[actix_web::test]
async fn auto_picks_splunk_then_elk() {
    let db = steward_store::testing::TestDb::sqlite().await.unwrap();
    let app = TestApp::on(
        db,
        &[
            ("SPLUNK_HEC_URL", "http://127.0.0.1:9/"),
            ("ELK_URL", "http://127.0.0.1:9/"),
        ],
    )
    .await;
    let r = app
        .call(
            "GET",
            "/api/v1/siem/status",
            &Cred::Admin(ADMIN_KEY.into()),
            None,
        )
        .await;
    assert_eq!(r.json()["transport"], "splunk");
}

/// With SIEM on (syslog, jsonl, batch of 1): domain events reach a TCP receiver, without
/// raw keys, and the test event is delivered synchronously.
#[actix_web::test]
async fn events_are_exported_over_syslog() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut rd = tokio::io::BufReader::new(sock).lines();
                while let Ok(Some(l)) = rd.next_line().await {
                    sink.lock().unwrap().push(l);
                }
            });
        }
    });
    let db = steward_store::testing::TestDb::sqlite().await.unwrap();
    let app = TestApp::on(
        db,
        &[
            ("SIEM_ENABLED", "true"),
            ("SIEM_FORMAT", "jsonl"),
            ("SIEM_TRANSPORT", "syslog"),
            ("SIEM_HOST", "127.0.0.1"),
            ("SIEM_PORT", &port),
            ("SIEM_BATCH_SIZE", "1"),
            ("SIEM_BATCH_TIMEOUT", "1"),
        ],
    )
    .await;
    actix_web::rt::spawn(app.state.siem.clone().run_writer());
    actix_web::rt::spawn(app.state.siem.clone().run_sender());
    let admin = Cred::Admin(ADMIN_KEY.into());
    let r = app.call("POST", "/api/v1/siem/test", &admin, None).await;
    assert_eq!(r.json()["delivered"], true, "{}", r.text());

    let tenant = app.tenant("siem-export").await;
    let agent = app.agent(&tenant.key).await;
    let dev = app.user(&tenant, "developer").await;
    let r = app
        .call(
            "POST",
            "/api/v1/api-keys",
            &Cred::Jwt(dev.token.clone()),
            Some(serde_json::json!({"name": "k"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let raw = r.json()["key"].as_str().unwrap().to_owned();
    let key_id = r.json()["id"].as_str().unwrap().to_owned();

    let find = |pred: &dyn Fn(&Value) -> bool| {
        lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| pred(e))
    };
    let mut found = (None, None);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        found = (
            find(&|e| e["event_type"] == "agent.registered" && e.to_string().contains(&agent)),
            find(&|e| e["event_type"] == "api_key.created" && e.to_string().contains(&key_id)),
        );
        if found.0.is_some() && found.1.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (registered, created) = (
        found.0.expect("agent.registered"),
        found.1.expect("api_key.created"),
    );
    assert_eq!(registered["tenant_id"], tenant.id.as_str());
    assert_eq!(registered["source"], "steward");
    assert!(
        !created.to_string().contains(&raw),
        "raw keys never exported"
    );
    assert!(!lines.lock().unwrap().iter().any(|l| l.contains(&raw)));
    let st = app
        .call("GET", "/api/v1/siem/status", &admin, None)
        .await
        .json();
    assert!(st["sent"].as_i64().unwrap() >= 3, "{st}");
    assert_eq!(st["failed"], 0);
}
