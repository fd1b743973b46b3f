//! The server binary over raw connections: request bodies are limited in size and in time
//! whatever the headers say (`body_limit.rs`), and requests that race on several threads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process;

use std::time::{Duration, Instant};

use process::{create_tenant, free_port, raw, request, start};
use serde_json::{json, Value};

struct Server {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
    key: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server on a fresh SQLite database, with a tenant whose admin key is `key`.
fn server(env: &[(&str, &str)]) -> Server {
    let dir = std::env::temp_dir().join(format!("steward-wire-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let db = format!("sqlite://{}/steward.db", dir.display());
    let child = start(&db, port, &dir, env);
    let key = create_tenant(port, "wire");
    Server {
        child,
        port,
        dir,
        key,
    }
}

/// The id of the tenant `server` created.
fn wire_tenant(port: u16) -> String {
    let (_, tenants) = request(
        port,
        "GET",
        "/api/v1/tenants",
        &[("X-Admin-Key", "crash-admin")],
        None,
    )
    .unwrap();
    tenants["items"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "wire"))
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("{tenants}"))
}

fn problem_code(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap_or(Value::Null)["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_undeclared_body_over_the_limit_is_refused_whatever_the_upgrade_header() {
    let s = server(&[]);
    let (status, agent) = request(
        s.port,
        "POST",
        "/api/v1/agents/register",
        &[("X-API-Key", &s.key)],
        Some(&json!({"name": "target"})),
    )
    .unwrap();
    assert_eq!(status, 201, "{agent}");
    let id = agent["id"].as_str().unwrap().to_owned();
    // 1.5 MiB in one chunk, over the default 1 MiB limit; suspend never reads its body.
    let data = vec![b'z'; 1_572_864];
    for upgrade in [
        "",
        "Upgrade: foo\r\n",
        "Upgrade: websocket\r\nConnection: Upgrade\r\n",
    ] {
        let head = format!(
            "POST /api/v1/agents/{id}/suspend HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {}\r\n{upgrade}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            s.key,
            data.len()
        );
        let mut rest = data.clone();
        rest.extend_from_slice(b"\r\n0\r\n\r\n");
        let (status, _, body) = raw(s.port, head.as_bytes(), Duration::ZERO, &rest)
            .unwrap_or_else(|| panic!("no answer with {upgrade:?}"));
        assert_eq!(status, 413, "{upgrade:?}: {body}");
        assert_eq!(problem_code(&body), "payload_too_large", "{upgrade:?}");
        let (_, now) = request(
            s.port,
            "GET",
            &format!("/api/v1/agents/{id}"),
            &[("X-API-Key", &s.key)],
            None,
        )
        .unwrap();
        assert_eq!(
            now["status"], "active",
            "{upgrade:?}: the refused request acted"
        );
    }
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    let s = server(&[("REQUEST_BODY_TIMEOUT_SECONDS", "1")]);
    let declared = format!(
        "POST /api/v1/guard/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"pro",
        s.key
    );
    let chunked = format!(
        "POST /api/v1/guard/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"pro\r\n",
        s.key
    );
    for head in [declared, chunked] {
        let started = Instant::now();
        let (status, _, body) = raw(s.port, head.as_bytes(), Duration::ZERO, b"")
            .unwrap_or_else(|| panic!("no answer to {head:?}"));
        assert_eq!(status, 408, "{body}");
        assert_eq!(problem_code(&body), "request_timeout");
        assert!(started.elapsed() < Duration::from_secs(15));
    }
    // A body that is slow but complete within the time is served.
    let body = json!({"prompt": "What is the capital of France?"}).to_string();
    let head = format!(
        "POST /api/v1/guard/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        s.key,
        body.len(),
        &body[..10]
    );
    let (status, _, answer) = raw(
        s.port,
        head.as_bytes(),
        Duration::from_millis(300),
        &body.as_bytes()[10..],
    )
    .unwrap();
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn concurrent_blocks_write_one_audit_entry() {
    let s = server(&[
        ("SUPER_ADMIN_EMAIL", "root@wire.test"),
        ("SUPER_ADMIN_PASSWORD", "Wire-password-123"),
    ]);
    let (status, login) = request(
        s.port,
        "POST",
        "/api/v1/auth/login",
        &[],
        Some(&json!({"email": "root@wire.test", "password": "Wire-password-123"})),
    )
    .unwrap();
    assert_eq!(status, 200, "{login}");
    let bearer = format!("Bearer {}", login["access_token"].as_str().unwrap());
    let tenant_id = wire_tenant(s.port);
    let (status, user) = request(
        s.port,
        "POST",
        "/api/v1/users",
        &[("Authorization", &bearer)],
        Some(&json!({"email": "dev@wire.test", "password": "Dev-password-123", "role": "developer", "tenant_id": tenant_id})),
    )
    .unwrap();
    assert_eq!(status, 201, "{user}");
    let path = format!("/api/v1/users/{}/block", user["id"].as_str().unwrap());
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (path, bearer, port) = (path.clone(), bearer.clone(), s.port);
            std::thread::spawn(move || {
                request(port, "POST", &path, &[("Authorization", &bearer)], None)
            })
        })
        .collect();
    for t in threads {
        let (status, body) = t.join().unwrap().unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["is_active"], false);
    }
    let resource = format!("user:{}", user["id"].as_str().unwrap());
    let (_, listed) = request(
        s.port,
        "GET",
        &format!("/api/v1/audit?action=user.blocked&resource={resource}"),
        &[("X-API-Key", &s.key)],
        None,
    )
    .unwrap();
    assert_eq!(listed["total"], 1, "blocking is idempotent: {listed}");
}

// Two admins demote each other at the same instant, on real threads: each request's role is read
// at authentication, so before the fix both could pass that check before either change
// committed and both succeeded, leaving the tenant without an admin. Exactly one may succeed.
#[test]
fn admins_demoting_each_other_at_once_leave_one_admin() {
    let s = server(&[
        ("SUPER_ADMIN_EMAIL", "root@wire.test"),
        ("SUPER_ADMIN_PASSWORD", "Wire-password-123"),
    ]);
    let login = |email: &str, password: &str| {
        let (status, body) = request(
            s.port,
            "POST",
            "/api/v1/auth/login",
            &[],
            Some(&json!({"email": email, "password": password})),
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
        format!("Bearer {}", body["access_token"].as_str().unwrap())
    };
    let root = login("root@wire.test", "Wire-password-123");
    let tenant_id = wire_tenant(s.port);
    let mut admins = Vec::new();
    for name in ["ada", "bob"] {
        let (status, user) = request(
            s.port,
            "POST",
            "/api/v1/users",
            &[("Authorization", &root)],
            Some(&json!({"email": format!("{name}@wire.test"), "password": "Admin-password-123", "role": "admin", "tenant_id": tenant_id})),
        )
        .unwrap();
        assert_eq!(status, 201, "{user}");
        let bearer = login(&format!("{name}@wire.test"), "Admin-password-123");
        admins.push((user["id"].as_str().unwrap().to_owned(), bearer));
    }
    for round in 0..8 {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [(0, 1), (1, 0)]
            .into_iter()
            .map(|(actor, target)| {
                let bearer = admins[actor].1.clone();
                let path = format!("/api/v1/users/{}/role", admins[target].0);
                let (port, barrier) = (s.port, barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    request(
                        port,
                        "PUT",
                        &path,
                        &[("Authorization", &bearer)],
                        Some(&json!({"role": "viewer"})),
                    )
                })
            })
            .collect();
        let statuses: Vec<u16> = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap().0)
            .collect();
        assert_eq!(
            statuses.iter().filter(|s| **s == 200).count(),
            1,
            "round {round}: {statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 403),
            "round {round}: {statuses:?}"
        );
        // Both admins again for the next round.
        for (id, _) in &admins {
            let (status, body) = request(
                s.port,
                "PUT",
                &format!("/api/v1/users/{id}/role"),
                &[("Authorization", &root)],
                Some(&json!({"role": "admin"})),
            )
            .unwrap();
            assert_eq!(status, 200, "{body}");
        }
    }
}

#[test]
fn a_connect_request_is_refused_at_once() {
    let s = server(&[("REQUEST_BODY_TIMEOUT_SECONDS", "10")]);
    let started = Instant::now();
    let (status, head, body) = raw(
        s.port,
        b"CONNECT /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        Duration::ZERO,
        b"",
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(status, 405, "{head}\n{body}");
    assert_eq!(problem_code(&body), "method_not_allowed");
    // Not held until the body time-out.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
