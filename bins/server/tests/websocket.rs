//! The WebSocket channel over a real socket: handshake, counters, events by tenant,
//! ping/pong, and termination on block (contract 20). SQLite; the cross-instance counts and
//! fan-out over Redis are exercised by `.ci/e2e/hitl_multi_instance.sh`.

mod common;

use std::time::Duration;

use common::{Cred, TestApp, User};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Serves `app` on a free loopback port with its event fan-out; answers the address.
async fn serve(app: &TestApp) -> String {
    let state = app.state.clone();
    actix_web::rt::spawn(state.ws.clone().run(state.bus.clone()));
    let server = actix_web::HttpServer::new(move || steward_server::build_app(state.clone()))
        .workers(1)
        .bind(("127.0.0.1", 0))
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = server.addrs()[0];
    actix_web::rt::spawn(server.run());
    format!("127.0.0.1:{}", addr.port())
}

/// An app on a fresh SQLite database with `env`, served on a free loopback port.
async fn served(env: &[(&str, &str)]) -> (TestApp, String) {
    let db = steward_store::testing::TestDb::sqlite()
        .await
        .unwrap_or_else(|e| panic!("sqlite: {e}"));
    let app = TestApp::on(db, env).await;
    let addr = serve(&app).await;
    (app, addr)
}

async fn open(addr: &str, token: &str) -> Result<Socket, tungstenite::Error> {
    tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/ws?token={token}"))
        .await
        .map(|(s, _)| s)
}

fn status_of(e: tungstenite::Error) -> u16 {
    match e {
        tungstenite::Error::Http(r) => r.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

/// The next JSON text message (5 s at most).
async fn next(s: &mut Socket) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), s.next())
            .await
            .unwrap_or_else(|_| panic!("no message within 5 s"));
        match msg {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap_or_default(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Waits for an event of `kind` matching `pred`.
async fn wait(s: &mut Socket, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let m = next(s).await;
        if m["event"] == kind && pred(&m["data"]) {
            return m;
        }
    }
}

async fn users(app: &TestApp) -> (common::Tenant, User, User) {
    let t = app
        .tenant(&format!("ws-{}", uuid::Uuid::new_v4().simple()))
        .await;
    let analyst = app.user(&t, "security_analyst").await;
    let viewer = app.user(&t, "viewer").await;
    (t, analyst, viewer)
}

#[actix_web::test]
async fn websocket_channel() {
    let (app, addr) = served(&[]).await;
    let (t, analyst, viewer) = users(&app).await;
    let (other, outsider, _) = users(&app).await;

    // Handshake refusals: missing and garbage tokens are 401 (no upgrade).
    let e = tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/ws"))
        .await
        .err()
        .unwrap_or_else(|| panic!("a missing token must be refused"));
    assert_eq!(status_of(e), 401);
    let e = open(&addr, "abc.def.ghi")
        .await
        .err()
        .unwrap_or_else(|| panic!("garbage accepted"));
    assert_eq!(status_of(e), 401);

    // system.status with the counts, both including the new connection.
    let mut first = open(&addr, &analyst.token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = next(&mut first).await;
    assert_eq!(hello["event"], "system.status");
    assert_eq!(hello["data"]["status"], "connected");
    assert_eq!(hello["data"]["user_connections"], 1);
    assert_eq!(hello["data"]["connections"], 1);
    let mut second = open(&addr, &analyst.token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = next(&mut second).await;
    assert_eq!(hello["data"]["user_connections"], 2);
    let mut watcher = open(&addr, &viewer.token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = next(&mut watcher).await;
    assert_eq!(hello["data"]["user_connections"], 1);
    assert_eq!(hello["data"]["connections"], 3);
    drop(second);

    // Ping / pong.
    first
        .send(Message::Text(json!({"event": "ping"}).to_string()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pong = wait(&mut first, "pong", |_| true).await;
    assert!(pong["data"]["timestamp"].is_string());

    // Events reach every role of the tenant, and no other tenant.
    let mut theirs = open(&addr, &outsider.token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    next(&mut theirs).await;
    let agent = app.agent(&t.key).await;
    let r = app
        .call(
            "POST",
            "/api/v1/hitl/request",
            &Cred::Key(t.key.clone()),
            Some(json!({"agent_id": agent, "action": "delete_data", "resource": "r", "context": {"n": 1}})),
        )
        .await;
    let id = r.json()["approval_id"].clone();
    let m = wait(&mut watcher, "hitl.requested", |d| d["approval_id"] == id).await;
    assert_eq!(m["data"]["tenant_id"], json!(t.id));
    assert_eq!(m["data"]["severity"], "info");
    assert_eq!(m["data"]["context"], json!({"n": 1}));
    wait(&mut first, "hitl.requested", |d| d["approval_id"] == id).await;
    let their_agent = app.agent(&other.key).await;
    let r = app
        .call(
            "POST",
            "/api/v1/audit/log",
            &Cred::Key(other.key.clone()),
            Some(json!({"agent_id": their_agent, "action": "read_data", "resource": "sentinel"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let sentinel = r.json()["id"].clone();
    // In publication order: anything of tenant `t` would have arrived before the sentinel.
    loop {
        let m = next(&mut theirs).await;
        assert_ne!(m["data"]["tenant_id"], json!(t.id), "leaked: {m}");
        if m["event"] == "audit.created" && m["data"]["audit_id"] == sentinel {
            break;
        }
    }

    // Blocking closes the user's connections with 1008 within 2 s; the token is then 403.
    let sup = app.super_admin().await;
    let r = app
        .call(
            "POST",
            &format!("/api/v1/users/{}/block", viewer.id),
            &Cred::Jwt(sup.token.clone()),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let frame = closed_within(&mut watcher, 10).await;
    assert_eq!(frame.code, CloseCode::Policy);
    assert_eq!(frame.reason, "user blocked");
    let e = open(&addr, &viewer.token)
        .await
        .err()
        .unwrap_or_else(|| panic!("blocked user accepted"));
    assert_eq!(status_of(e), 403);
    // Others stay connected.
    first
        .send(Message::Text(json!({"event": "ping"}).to_string()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait(&mut first, "pong", |_| true).await;
}

/// The close frame that ends `s` within `secs` seconds.
async fn closed_within(s: &mut Socket, secs: u64) -> tungstenite::protocol::CloseFrame<'_> {
    let frame = tokio::time::timeout(Duration::from_secs(secs), async {
        loop {
            match s.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not closed within {secs} s"));
    frame.unwrap_or_else(|| panic!("closed without a close frame"))
}

#[actix_web::test]
async fn a_logged_out_credential_loses_its_connection() {
    let (app, addr) = served(&[("WS_PING_INTERVAL_SECONDS", "1")]).await;
    let (_, analyst, viewer) = users(&app).await;
    let mut leaving = open(&addr, &viewer.token).await.unwrap();
    let mut staying = open(&addr, &analyst.token).await.unwrap();
    assert_eq!(next(&mut leaving).await["event"], "system.status");
    assert_eq!(next(&mut staying).await["event"], "system.status");
    let r = app
        .call(
            "POST",
            "/api/v1/auth/logout",
            &Cred::Jwt(viewer.token.clone()),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    // Closed at the next ping (every second here), with 1008.
    let frame = closed_within(&mut leaving, 10).await;
    assert_eq!(frame.code, CloseCode::Policy);
    assert_eq!(frame.reason, "credential no longer valid");
    // The other user's connection stays open across several pings.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    staying
        .send(Message::Text(json!({"event": "ping"}).to_string()))
        .await
        .unwrap();
    wait(&mut staying, "pong", |_| true).await;
}

#[actix_web::test]
async fn a_logout_closes_its_socket_at_once_and_only_its_own() {
    // Pings a minute apart: the logout's event, not the ping, closes the connection (probe I
    // F9), and the same user's other session keeps its socket.
    let (app, addr) = served(&[("WS_PING_INTERVAL_SECONDS", "60")]).await;
    let (_, _, viewer) = users(&app).await;
    let me = app
        .call(
            "GET",
            "/api/v1/auth/me",
            &Cred::Jwt(viewer.token.clone()),
            None,
        )
        .await
        .json();
    let email = me["email"].as_str().unwrap_or_default().to_owned();
    let other = app.login(&email, "Test-password-123").await;
    let mut leaving = open(&addr, &viewer.token).await.unwrap();
    let mut staying = open(&addr, &other.token).await.unwrap();
    assert_eq!(next(&mut leaving).await["event"], "system.status");
    assert_eq!(next(&mut staying).await["event"], "system.status");
    let r = app
        .call(
            "POST",
            "/api/v1/auth/logout",
            &Cred::Jwt(viewer.token.clone()),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let frame = closed_within(&mut leaving, 3).await;
    assert_eq!(frame.code, CloseCode::Policy);
    assert_eq!(frame.reason, "credential no longer valid");
    staying
        .send(Message::Text(json!({"event": "ping"}).to_string()))
        .await
        .unwrap();
    wait(&mut staying, "pong", |_| true).await;
}

#[actix_web::test]
async fn a_stopping_server_tells_its_clients_to_go() {
    // On SIGTERM/SIGINT the server closes every connection with 1001 before the drain, so
    // that they neither hold the drain for its 10 s nor see the connection just drop.
    let (app, addr) = served(&[]).await;
    let (_, analyst, _) = users(&app).await;
    let mut s = open(&addr, &analyst.token).await.unwrap();
    assert_eq!(next(&mut s).await["event"], "system.status");
    app.state.ws.close_all();
    let frame = closed_within(&mut s, 3).await;
    assert_eq!(frame.code, CloseCode::Away);
    assert_eq!(frame.reason, "server shutting down");
}

/// The tenant's connection count as a new connection of `user` sees it (that connection
/// included), then closes that connection.
async fn connections_seen(addr: &str, user: &User) -> u64 {
    let mut probe = open(addr, &user.token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = next(&mut probe).await;
    let _ = probe.close(None).await;
    hello["data"]["connections"].as_u64().unwrap_or(0)
}

#[actix_web::test]
async fn a_client_that_stops_reading_is_closed() {
    let (app, addr) = served(&[]).await;
    let (t, analyst, viewer) = users(&app).await;
    // A client with a small receive buffer that reads the handshake and its hello, then
    // nothing more.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let (mut stalled, _) = tokio_tungstenite::client_async(
        format!("ws://{addr}/api/v1/ws?token={}", viewer.token),
        tokio_tungstenite::MaybeTlsStream::Plain(stream),
    )
    .await
    .unwrap();
    assert_eq!(next(&mut stalled).await["event"], "system.status");
    assert_eq!(connections_seen(&addr, &analyst).await, 2);

    // Far more than the socket buffers, the server's body buffer and the session's channel
    // hold: the server's writes to the stalled client soon wait.
    let tenant: steward_core::TenantId = t.id.parse().unwrap();
    let blob = "x".repeat(100_000);
    for i in 0..120 {
        steward_core::event::publish(
            &app.state.bus,
            steward_core::Event::new(
                "audit.created",
                tenant,
                steward_core::Severity::Info,
                json!({"n": i, "resource": blob}),
            ),
        );
        tokio::task::yield_now().await;
    }

    // Within the write limit (5 s) and the close frame's own limit (5 s), the server gives up
    // on the client: only the probe's own connection is left.
    let mut left = u64::MAX;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        left = connections_seen(&addr, &analyst).await;
        if left == 1 {
            break;
        }
    }
    assert_eq!(
        left, 1,
        "the stalled client's connection is still registered"
    );
    drop(stalled);
}
