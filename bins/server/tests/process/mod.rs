//! The real server binary over a raw TCP connection (shared by `crash.rs` and `wire.rs`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18_999)
}

/// A minimal HTTP/1.1 client: one request per connection.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, serde_json::from_str(rest).unwrap_or(Value::Null)))
}

/// Starts the server binary on `database_url` with the admin key `crash-admin` and `env`,
/// and waits until `/health` answers.
pub fn start(database_url: &str, port: u16, dir: &std::path::Path, env: &[(&str, &str)]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env("DATABASE_URL", database_url)
        .env("ADMIN_API_KEY", "crash-admin")
        .env("ENVIRONMENT", "test")
        .env("LOG_LEVEL", "ERROR")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the server: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if request(port, "GET", "/health", &[], None).is_some_and(|(s, _)| s == 200) {
            return child;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not become healthy");
}

/// Sends raw bytes on one connection (after `pause`, `rest`) and returns the status line's
/// code, the headers and the body of the answer, or `None` when the connection fails.
pub fn raw(
    port: u16,
    head_and_start: &[u8],
    pause: Duration,
    rest: &[u8],
) -> Option<(u16, String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .ok()?;
    stream.write_all(head_and_start).ok()?;
    std::thread::sleep(pause);
    // The server may already have answered and closed: a failed write is no failure here.
    let _ = stream.write_all(rest);
    // Read until the answer's declared length is in (the server need not close at once).
    let mut out = Vec::new();
    let mut buf = [0u8; 65_536];
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let declared = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if declared.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_owned(), body.to_owned()))
}

/// Creates a tenant named `name` with the admin key `crash-admin` of [`start`]; answers its
/// API key.
pub fn create_tenant(port: u16, name: &str) -> String {
    let (status, tenant) = request(
        port,
        "POST",
        "/api/v1/tenants",
        &[("X-Admin-Key", "crash-admin")],
        Some(&serde_json::json!({"name": name})),
    )
    .unwrap_or_else(|| panic!("tenant creation failed"));
    assert_eq!(status, 201, "{tenant}");
    tenant["api_key"].as_str().unwrap_or_default().to_owned()
}
