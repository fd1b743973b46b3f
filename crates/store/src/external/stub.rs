//! A local external scorer for tests: an HTTP/1.1 responder on a loopback port that answers
//! every request with one fixed reply (after an optional delay), one request per connection,
//! and keeps the JSON bodies it received (so a test can count calls and read what was sent).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Requests larger than this are cut off (the stub reads no further).
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What the stub answers.
#[derive(Clone, Debug)]
pub struct StubReply {
    pub status: u16,
    pub body: String,
    /// Wait before answering (longer than the client's time-out: a time-out).
    pub delay: Duration,
}

impl StubReply {
    /// 200 `{"score": score}`.
    pub fn score(score: f64) -> StubReply {
        StubReply::raw(200, json!({ "score": score }).to_string())
    }

    /// Any status and body (sent as `application/json`).
    pub fn raw(status: u16, body: impl Into<String>) -> StubReply {
        StubReply {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// The same reply after `delay`.
    pub fn after(mut self, delay: Duration) -> StubReply {
        self.delay = delay;
        self
    }
}

/// See the module documentation. Stops when dropped.
pub struct StubScorer {
    url: String,
    received: Arc<Mutex<Vec<Value>>>,
    task: JoinHandle<()>,
}

impl StubScorer {
    /// Listens on `127.0.0.1` (a free port) and answers every request with `reply`.
    pub async fn start(reply: StubReply) -> std::io::Result<StubScorer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/score", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let reply = reply.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    // A client that gave up (time-out) makes the write fail: nothing to do.
                    let _ = answer(stream, &reply, &seen).await;
                });
            }
        });
        Ok(StubScorer {
            url,
            received,
            task,
        })
    }

    /// `http://127.0.0.1:PORT/score`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests received so far (counted when their body was read, before the delay).
    pub fn count(&self) -> usize {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// The JSON bodies received so far (`null` for a body that is not JSON).
    pub fn received(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for StubScorer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    mut stream: TcpStream,
    reply: &StubReply,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let body = read_request(&mut stream).await?;
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let head = format!(
        "HTTP/1.1 {} Stub\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(reply.body.as_bytes()).await?;
    stream.shutdown().await
}

/// Reads one request (headers, then `Content-Length` bytes) and returns its body.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX_REQUEST_BYTES {
            return Ok(Vec::new());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .filter_map(|l| l.strip_prefix("content-length:"))
        .find_map(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let end = buf.len().min(head_end + length);
    Ok(buf[head_end..end].to_vec())
}
