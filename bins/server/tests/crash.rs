//! Durability: the real server binary is killed with SIGKILL during a burst of audit writes,
//! restarted on the same database, and every acknowledged entry must be there with the chain
//! valid. SQLite always; PostgreSQL with `TEST_DATABASE_URL` (a schema of its own).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process::{create_tenant, free_port, request, start};
use serde_json::{json, Value};

fn crash_and_recover(database_url: &str) {
    let dir = std::env::temp_dir().join(format!("steward-crash-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let mut server = start(database_url, port, &dir, &[]);

    let key = create_tenant(port, "crash");
    let (status, agent) = request(
        port,
        "POST",
        "/api/v1/agents/register",
        &[("X-API-Key", &key)],
        Some(&json!({"name": "writer"})),
    )
    .unwrap_or_else(|| panic!("agent registration failed"));
    assert_eq!(status, 201, "{agent}");
    let agent_id = agent["id"].as_str().unwrap_or_default().to_owned();

    // A burst from 8 writers; the server is killed while they write.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (acked, stop, key, agent_id) = (acked.clone(), stop.clone(), key.clone(), agent_id.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"agent_id": agent_id, "action": "write", "resource": format!("w{w}/{i}")});
                    if let Some((201, entry)) = request(port, "POST", "/api/v1/audit/log", &[("X-API-Key", &key)], Some(&body)) {
                        if let Some(id) = entry["id"].as_str() {
                            acked.lock().unwrap_or_else(|p| p.into_inner()).push(id.to_owned());
                        }
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // Kill mid-burst: once at least 20 writes were acknowledged (and a little more has been
    // sent since), however slow the machine; at most 30 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap_or_else(|p| p.into_inner()).len() < 20
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    server
        .kill()
        .unwrap_or_else(|e| panic!("SIGKILL failed: {e}"));
    let _ = server.wait();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.join();
    }
    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(
        acked.len() > 10,
        "too few writes before the kill: {}",
        acked.len()
    );

    let mut server = start(database_url, port, &dir, &[]);
    let auth = [("X-API-Key", key.as_str())];
    for id in &acked {
        let (status, _) = request(port, "GET", &format!("/api/v1/audit/{id}"), &auth, None)
            .unwrap_or((0, Value::Null));
        assert_eq!(
            status, 200,
            "acknowledged entry {id} is missing after the crash"
        );
    }
    let (status, verify) =
        request(port, "GET", "/api/v1/audit/verify", &auth, None).unwrap_or((0, Value::Null));
    assert_eq!(status, 200);
    assert_eq!(verify["valid"], true, "{verify}");
    assert!(verify["checked"].as_i64().unwrap_or(0) >= acked.len() as i64);
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_during_writes_loses_no_acknowledged_entry_sqlite() {
    let dir = std::env::temp_dir().join(format!(
        "steward-crash-db-{}",
        uuid::Uuid::new_v4().simple()
    ));
    crash_and_recover(&format!("sqlite://{}/steward.db", dir.display()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigkill_during_writes_loses_no_acknowledged_entry_postgres() {
    let Some(created) = steward_store::testing::TestDb::postgres_target() else {
        eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL crash test not run");
        return;
    };
    let (target, base, schema) = created.unwrap_or_else(|e| panic!("{e}"));
    let steward_store::DbTarget::Postgres(url) = &target else {
        panic!("not a PostgreSQL target");
    };
    crash_and_recover(url);
    steward_store::testing::drop_schema(base, schema);
}
