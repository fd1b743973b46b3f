//! `WS /api/v1/ws?token=<JWT>`: live events (contract 20). See docs/websocket.md.
//!
//! - One bus subscription per instance (`events`) feeds a hub that keeps this instance's
//!   connections by tenant; an event is serialised once and handed to each connection of its
//!   tenant with a non-blocking `try_send` into a bounded queue. A connection whose queue is
//!   full is closed (1013 "send queue full"): a slow client never slows the others, the
//!   publisher, or the request that caused the event.
//! - `user.blocked` / `user.deleted` events close that user's connections on every instance
//!   (1008 "user blocked").
//! - Connection counts are summed over instances through `Presence` (Redis when set).
//! - A connection holds no database connection: the token is checked once, in the handshake.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{CloseCode, CloseReason, Message};
use bytestring::ByteString;
use futures_util::StreamExt;
use serde_json::{json, Value};
use steward_core::clock::{self, format_timestamp};
use steward_core::event::EVENTS_CHANNEL;
use steward_core::{Error, ErrorKind, Event, EventBus, Presence, TenantId, UserId};
use tokio::sync::{mpsc, watch};

use crate::error::ApiResult;
use crate::state::AppState;

/// The events delivered to clients (contract 20); other bus events are internal.
const DELIVERED: [&str; 5] = [
    "policy.violated",
    "anomaly.detected",
    "hitl.requested",
    "hitl.resolved",
    "audit.created",
];

/// Settings of the WebSocket channel.
#[derive(Clone, Copy, Debug)]
pub struct WsSettings {
    /// Messages queued for one connection before it is dropped as too slow.
    pub queue: usize,
    /// A connection from which nothing (not even a pong) arrived for this long is closed.
    pub idle_timeout: Duration,
    /// How often the server pings each connection.
    pub ping_interval: Duration,
    /// Open connections on this instance at most (each holds a file descriptor).
    pub max_connections: usize,
    /// Open connections of one tenant on this instance at most.
    pub max_per_tenant: usize,
    /// Open connections of one user (or one tenant key) on this instance at most.
    pub max_per_user: usize,
}

impl Default for WsSettings {
    fn default() -> Self {
        Self {
            queue: 1024,
            idle_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(30),
            max_connections: 10_000,
            max_per_tenant: 2_000,
            max_per_user: 2_000,
        }
    }
}

/// Why the server closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closing {
    Open,
    UserBlocked,
    TooSlow,
    /// One of the user's credentials was logged out or its password changed: check this
    /// connection's credential now rather than at the next ping.
    Recheck,
    /// The server is stopping: close with 1001 so that the client reconnects elsewhere and
    /// the drain does not wait for the connection.
    Stopping,
}

struct Conn {
    user: Option<UserId>,
    events: mpsc::Sender<ByteString>,
    close: watch::Sender<Closing>,
}

/// This instance's connections, by tenant.
pub struct WsHub {
    conns: Mutex<HashMap<TenantId, HashMap<u64, Conn>>>,
    next: AtomicU64,
    presence: Arc<dyn Presence>,
    settings: WsSettings,
}

/// What a new connection receives from the hub.
struct Registration {
    id: u64,
    events: mpsc::Receiver<ByteString>,
    close: watch::Receiver<Closing>,
    tenant_local: i64,
    user_local: i64,
}

fn tenant_key(t: TenantId) -> String {
    format!("ws:tenant:{t}")
}

fn user_key(u: Option<UserId>) -> Option<String> {
    u.map(|u| format!("ws:user:{u}"))
}

impl WsHub {
    pub fn new(presence: Arc<dyn Presence>, settings: WsSettings) -> Self {
        Self {
            conns: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            presence,
            settings,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, HashMap<u64, Conn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection, or refuses it when a bound of `WsSettings` is reached (409 for
    /// a tenant's or user's own bound, 503 when the instance is full): each connection holds a
    /// file descriptor, and one caller opening thousands must not leave none for the others.
    fn register(&self, tenant: TenantId, user: Option<UserId>) -> Result<Registration, Error> {
        let mut map = self.lock();
        let total: usize = map.values().map(HashMap::len).sum();
        if total >= self.settings.max_connections {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "this instance holds {total} event connections, its maximum; retry later or on another instance"
                ),
            ));
        }
        if let Some(conns) = map.get(&tenant) {
            if conns.len() >= self.settings.max_per_tenant {
                return Err(Error::conflict(format!(
                    "the tenant holds {} event connections on this instance, the maximum; close one first",
                    conns.len()
                )));
            }
            let mine = conns.values().filter(|c| c.user == user).count();
            if mine >= self.settings.max_per_user {
                return Err(Error::conflict(format!(
                    "this credential's user holds {mine} event connections on this instance, the maximum; close one first"
                )));
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.settings.queue.max(1));
        let (close_tx, close_rx) = watch::channel(Closing::Open);
        let conns = map.entry(tenant).or_default();
        conns.insert(
            id,
            Conn {
                user,
                events: tx,
                close: close_tx,
            },
        );
        let tenant_local = conns.len() as i64;
        let user_local = conns.values().filter(|c| c.user == user).count() as i64;
        Ok(Registration {
            id,
            events: rx,
            close: close_rx,
            tenant_local,
            user_local,
        })
    }

    /// Removes a connection; answers the local counts left for its tenant and user.
    fn unregister(&self, tenant: TenantId, id: u64) -> (i64, Option<(Option<UserId>, i64)>) {
        let mut map = self.lock();
        let Some(conns) = map.get_mut(&tenant) else {
            return (0, None);
        };
        let user = conns.remove(&id).map(|c| c.user);
        let tenant_left = conns.len() as i64;
        let user_left = user.map(|u| (u, conns.values().filter(|c| c.user == u).count() as i64));
        if conns.is_empty() {
            map.remove(&tenant);
        }
        (tenant_left, user_left)
    }

    /// Publishes this instance's counts and answers the totals over every instance (local
    /// counts when the shared store does not answer).
    async fn counts(
        &self,
        tenant: TenantId,
        user: Option<UserId>,
        tenant_local: i64,
        user_local: i64,
    ) -> (i64, i64) {
        let p = &self.presence;
        let tk = tenant_key(tenant);
        let shared = async {
            p.set_local(&tk, tenant_local).await?;
            if let Some(uk) = user_key(user) {
                p.set_local(&uk, user_local).await?;
            }
            let t = p.total(&tk).await?;
            let u = match user_key(user) {
                Some(uk) => p.total(&uk).await?,
                None => user_local,
            };
            Ok::<_, Error>((t.max(tenant_local), u.max(user_local)))
        };
        match tokio::time::timeout(Duration::from_secs(2), shared).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "connection counts of other instances unavailable");
                (tenant_local, user_local)
            }
            Err(_) => (tenant_local, user_local),
        }
    }

    async fn publish_counts(
        &self,
        tenant: TenantId,
        tenant_left: i64,
        user: Option<(Option<UserId>, i64)>,
    ) {
        let _ = self
            .presence
            .set_local(&tenant_key(tenant), tenant_left)
            .await;
        if let Some((u, n)) = user {
            if let Some(uk) = user_key(u) {
                let _ = self.presence.set_local(&uk, n).await;
            }
        }
    }

    /// Hands an event to every connection of its tenant (never blocks). Connections whose
    /// queue is full are closed as too slow.
    pub fn deliver(&self, tenant: TenantId, text: ByteString) {
        let map = self.lock();
        let Some(conns) = map.get(&tenant) else {
            return;
        };
        for conn in conns.values() {
            if let Err(mpsc::error::TrySendError::Full(_)) = conn.events.try_send(text.clone()) {
                metrics::counter!("websocket_dropped_total", "reason" => "slow").increment(1);
                let _ = conn.close.send(Closing::TooSlow);
            }
        }
    }

    /// Closes every connection of `user` on this instance.
    fn close_user(&self, user: UserId) {
        self.signal_user(user, Closing::UserBlocked);
    }

    /// Closes every connection of this instance with 1001 "server shutting down" (on SIGTERM or
    /// SIGINT, before the drain).
    pub fn close_all(&self) {
        let map = self.lock();
        for conns in map.values() {
            for conn in conns.values() {
                let _ = conn.close.send(Closing::Stopping);
            }
        }
    }

    fn signal_user(&self, user: UserId, signal: Closing) {
        let map = self.lock();
        for conns in map.values() {
            for conn in conns.values().filter(|c| c.user == Some(user)) {
                let _ = conn.close.send(signal);
            }
        }
    }

    /// The number of open connections on this instance.
    pub fn local_connections(&self) -> usize {
        self.lock().values().map(HashMap::len).sum()
    }

    /// Routes bus events to connections; runs until the task is aborted. One per instance.
    pub async fn run(self: Arc<Self>, bus: Arc<dyn EventBus>) {
        let presence = self.presence.clone();
        actix_web::rt::spawn(async move {
            let mut tick = tokio::time::interval(steward_core::presence::PRESENCE_TTL / 3);
            loop {
                tick.tick().await;
                if let Err(e) = presence.refresh().await {
                    tracing::debug!(error = %e, "presence refresh failed");
                }
            }
        });
        loop {
            match bus.subscribe(EVENTS_CHANNEL).await {
                Ok(mut rx) => loop {
                    match rx.recv().await {
                        Ok(payload) => self.route(&payload),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(
                                missed = n,
                                "WebSocket fan-out fell behind the bus; events were skipped"
                            );
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot subscribe to events for WebSocket delivery")
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn route(&self, payload: &[u8]) {
        let Ok(event) = serde_json::from_slice::<Event>(payload) else {
            return;
        };
        match event.kind.as_str() {
            "user.blocked" | "user.deleted" => {
                if let Some(user) = user_of_event(&event) {
                    self.close_user(user);
                }
            }
            // A session ended (logout, a password changed or reset): that user's connections
            // check their credential at once (probe I F9: a logged-out token kept its socket
            // until the next ping).
            "user.logout" | "user.password_changed" | "user.password_reset" => {
                if let Some(user) = user_of_event(&event) {
                    self.signal_user(user, Closing::Recheck);
                }
            }
            kind if DELIVERED.contains(&kind) => {
                let text = envelope(&event);
                self.deliver(event.tenant_id, ByteString::from(text));
            }
            _ => {}
        }
    }
}

/// The user an identity event is about (`resource` `user:<id>`).
fn user_of_event(event: &Event) -> Option<UserId> {
    event
        .data
        .get("resource")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("user:"))
        .and_then(|id| id.parse::<UserId>().ok())
}

/// `{event, data}` with `tenant_id`, `severity` and `timestamp` in `data` (contract 20).
fn envelope(event: &Event) -> String {
    let mut data = match &event.data {
        Value::Object(m) => m.clone(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("value".to_owned(), other.clone());
            m
        }
    };
    data.insert("tenant_id".to_owned(), json!(event.tenant_id.to_string()));
    data.insert("severity".to_owned(), json!(event.severity));
    data.insert(
        "timestamp".to_owned(),
        json!(format_timestamp(event.timestamp)),
    );
    json!({"event": event.kind, "data": data}).to_string()
}

fn system_message(kind: &str, data: Value) -> ByteString {
    ByteString::from(json!({"event": kind, "data": data}).to_string())
}

/// The handshake: the JWT of `?token=` is checked before the upgrade (401 / 403).
#[utoipa::path(get, path = "/api/v1/ws", tag = "events", security(()),
    params(("token" = String, Query, description = "An access token (JWT) of the user; checked before the upgrade")),
    responses((status = 101, description = "Switching to the WebSocket protocol; the first message is `system.status`, then `{event, data}` messages (docs/websocket.md)"),
              (status = 400, description = "Not a WebSocket upgrade request", content_type = "application/problem+json"),
              (status = 401, description = "Missing, invalid, expired or revoked token", content_type = "application/problem+json"),
              (status = 403, description = "The user is blocked", content_type = "application/problem+json")))]
pub async fn connect(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let token = steward_core::validate::parse_query_string(req.query_string())
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
        .filter(|v| !v.trim().is_empty());
    let Some(token) = token else {
        return Err(Error::missing_credentials("the WebSocket needs ?token=<JWT>").into());
    };
    let principal = state.identity.principal_from_jwt(token.trim()).await?;
    let hub = state.ws.clone();
    let registration = hub.register(principal.tenant, principal.user)?;
    let (response, session, stream) = match actix_ws::handle(&req, body) {
        Ok(handshake) => handshake,
        Err(e) => {
            hub.unregister(principal.tenant, registration.id);
            return Err(Error::bad_request(e.to_string()).into());
        }
    };
    actix_web::rt::spawn(serve(
        hub,
        principal.tenant,
        principal.user,
        registration,
        session,
        stream,
        Recheck {
            identity: state.identity.clone(),
            token: token.trim().to_owned(),
        },
    ));
    Ok(response)
}

/// The handshake's credential, checked again at every ping: a token logged out, expired or
/// revoked since the handshake (or whose user was deleted or blocked on an instance whose
/// event did not arrive) closes the connection with 1008 within one ping interval.
struct Recheck {
    identity: steward_identity::Identity,
    token: String,
}

impl Recheck {
    /// `false` only when the credential is refused; a store that cannot answer keeps the
    /// connection (the next ping asks again).
    async fn still_valid(&self) -> bool {
        match self.identity.principal_from_jwt(&self.token).await {
            Ok(_) => true,
            Err(e) => !matches!(
                e.kind,
                ErrorKind::InvalidCredentials
                    | ErrorKind::MissingCredentials
                    | ErrorKind::UserBlocked
            ),
        }
    }
}

async fn serve(
    hub: Arc<WsHub>,
    tenant: TenantId,
    user: Option<UserId>,
    mut reg: Registration,
    mut session: actix_ws::Session,
    mut stream: actix_ws::MessageStream,
    recheck: Recheck,
) {
    metrics::gauge!("websocket_connections").increment(1.0);
    let (connections, user_connections) = hub
        .counts(tenant, user, reg.tenant_local, reg.user_local)
        .await;
    let hello = system_message(
        "system.status",
        json!({
            "status": "connected",
            "connections": connections,
            "user_connections": user_connections,
            "tenant_id": tenant.to_string(),
            "severity": "info",
            "timestamp": format_timestamp(clock::now()),
        }),
    );
    let mut closing = None;
    if session.text(hello).await.is_ok() {
        let settings = hub.settings;
        let mut last_heard = Instant::now();
        let mut ping = tokio::time::interval(settings.ping_interval);
        ping.tick().await;
        closing = loop {
            tokio::select! {
                biased;
                changed = reg.close.changed() => {
                    if changed.is_err() { break None; }
                    match *reg.close.borrow() {
                        Closing::UserBlocked => break Some(CloseReason { code: CloseCode::Policy, description: Some("user blocked".into()) }),
                        Closing::TooSlow => break Some(CloseReason { code: CloseCode::Again, description: Some("send queue full".into()) }),
                        Closing::Stopping => break Some(CloseReason { code: CloseCode::Away, description: Some("server shutting down".into()) }),
                        Closing::Recheck => {
                            // The revocation's notice to the other instances' caches travels
                            // beside this event: give it a moment.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            if !recheck.still_valid().await {
                                break Some(CloseReason { code: CloseCode::Policy, description: Some("credential no longer valid".into()) });
                            }
                        }
                        Closing::Open => {}
                    }
                }
                msg = stream.next() => {
                    match msg {
                        Some(Ok(Message::Text(text))) => {
                            last_heard = Instant::now();
                            if is_ping(&text) {
                                let pong = system_message("pong", json!({"timestamp": format_timestamp(clock::now())}));
                                if session.text(pong).await.is_err() { break None; }
                            }
                        }
                        Some(Ok(Message::Ping(bytes))) => {
                            last_heard = Instant::now();
                            if session.pong(&bytes).await.is_err() { break None; }
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                        Some(Ok(_)) => last_heard = Instant::now(),
                    }
                }
                event = reg.events.recv() => {
                    match event {
                        Some(text) => {
                            // Hand everything already queued to the writer before yielding, so
                            // that a burst leaves in few socket writes; but stop at a close
                            // (block, delete) so that nothing more leaves after it, and give up
                            // on a client that takes no frame within WRITE_TIMEOUT: while a
                            // write waits, neither closes nor the idle and credential checks
                            // below can run.
                            let mut sent = write(session.text(text)).await;
                            while sent == Written::Ok && !reg.close.has_changed().unwrap_or(true) {
                                match reg.events.try_recv() {
                                    Ok(more) => sent = write(session.text(more)).await,
                                    Err(_) => break,
                                }
                            }
                            match sent {
                                Written::Ok => {}
                                Written::Failed => break None,
                                Written::Stalled => break Some(CloseReason { code: CloseCode::Again, description: Some("client not reading".into()) }),
                            }
                        }
                        None => break None,
                    }
                }
                _ = ping.tick() => {
                    if last_heard.elapsed() > settings.idle_timeout {
                        break Some(CloseReason { code: CloseCode::Normal, description: Some("idle timeout".into()) });
                    }
                    if !recheck.still_valid().await {
                        break Some(CloseReason { code: CloseCode::Policy, description: Some("credential no longer valid".into()) });
                    }
                    match write(session.ping(b"")).await {
                        Written::Ok => {}
                        Written::Failed => break None,
                        Written::Stalled => break Some(CloseReason { code: CloseCode::Again, description: Some("client not reading".into()) }),
                    }
                }
            }
        };
    }
    let (tenant_left, user_left) = hub.unregister(tenant, reg.id);
    metrics::gauge!("websocket_connections").decrement(1.0);
    if let Some(reason) = closing {
        // A client that reads nothing would hold the close frame (and this task) forever.
        let _ = tokio::time::timeout(WRITE_TIMEOUT, session.close(Some(reason))).await;
    }
    hub.publish_counts(tenant, tenant_left, user_left).await;
}

fn is_ping(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("event").and_then(Value::as_str).map(|e| e == "ping"))
        .unwrap_or(false)
}

/// Most time one frame may wait for the client to take it (a client that stops reading fills
/// the connection's buffers, and a write then waits): beyond it the connection is closed with
/// 1013, like one whose send queue fills.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq, Eq)]
enum Written {
    Ok,
    /// The connection is gone.
    Failed,
    /// The client took nothing within `WRITE_TIMEOUT`.
    Stalled,
}

async fn write<E>(frame: impl std::future::Future<Output = Result<(), E>>) -> Written {
    match tokio::time::timeout(WRITE_TIMEOUT, frame).await {
        Ok(Ok(())) => Written::Ok,
        Ok(Err(_)) => Written::Failed,
        Err(_) => Written::Stalled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steward_core::MemoryPresence;

    fn hub(queue: usize) -> WsHub {
        WsHub::new(
            Arc::new(MemoryPresence::new()),
            WsSettings {
                queue,
                ..WsSettings::default()
            },
        )
    }

    // Probe M: one viewer opened 20,000 connections and the server ran out of file
    // descriptors for everyone. Each bound refuses at the handshake and frees on close.
    #[test]
    fn connections_are_bounded_per_user_tenant_and_instance() {
        let hub = WsHub::new(
            Arc::new(MemoryPresence::new()),
            WsSettings {
                max_connections: 4,
                max_per_tenant: 3,
                max_per_user: 2,
                ..WsSettings::default()
            },
        );
        let (t, other) = (TenantId::new(), TenantId::new());
        let (u, v) = (Some(UserId::new()), Some(UserId::new()));
        let first = hub.register(t, u).unwrap();
        hub.register(t, u).unwrap();
        let e = hub.register(t, u).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Conflict, "{e:?}");
        hub.register(t, v).unwrap();
        let e = hub.register(t, v).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Conflict, "the tenant's bound: {e:?}");
        hub.register(other, v).unwrap();
        let e = hub.register(TenantId::new(), None).err().unwrap();
        assert_eq!(
            e.kind,
            ErrorKind::Unavailable,
            "the instance's bound: {e:?}"
        );
        hub.unregister(t, first.id);
        hub.register(t, u).unwrap();
    }

    #[test]
    fn events_reach_only_their_tenant() {
        let hub = hub(8);
        let (a, b) = (TenantId::new(), TenantId::new());
        let mut ra = hub.register(a, None).unwrap();
        let mut rb = hub.register(b, None).unwrap();
        hub.deliver(a, ByteString::from("x"));
        assert_eq!(ra.events.try_recv().ok().as_deref(), Some("x"));
        assert!(rb.events.try_recv().is_err());
    }

    #[test]
    fn a_slow_connection_is_closed_and_does_not_hold_back_others() {
        let hub = hub(2);
        let t = TenantId::new();
        let slow = hub.register(t, None).unwrap();
        let mut fast = hub.register(t, None).unwrap();
        for i in 0..10 {
            hub.deliver(t, ByteString::from(format!("{i}")));
            // The fast one reads as it goes.
            assert_eq!(
                fast.events.try_recv().ok().map(|s| s.to_string()),
                Some(i.to_string())
            );
        }
        assert_eq!(*slow.close.borrow(), Closing::TooSlow);
        assert_eq!(*fast.close.borrow(), Closing::Open);
    }

    #[test]
    fn blocking_closes_only_that_users_connections() {
        let hub = hub(8);
        let t = TenantId::new();
        let (u, v) = (UserId::new(), UserId::new());
        let ru = hub.register(t, Some(u)).unwrap();
        let rv = hub.register(t, Some(v)).unwrap();
        let event = Event::new(
            "user.blocked",
            t,
            steward_core::Severity::Info,
            json!({"resource": format!("user:{u}")}),
        );
        hub.route(&serde_json::to_vec(&event).unwrap_or_default());
        assert_eq!(*ru.close.borrow(), Closing::UserBlocked);
        assert_eq!(*rv.close.borrow(), Closing::Open);
    }

    #[test]
    fn envelope_carries_tenant_severity_and_timestamp() {
        let t = TenantId::new();
        let e = Event::new(
            "audit.created",
            t,
            steward_core::Severity::Info,
            json!({"audit_id": "a"}),
        );
        let v: Value = serde_json::from_str(&envelope(&e)).unwrap_or_default();
        assert_eq!(v["event"], "audit.created");
        assert_eq!(v["data"]["audit_id"], "a");
        assert_eq!(v["data"]["tenant_id"], t.to_string());
        assert_eq!(v["data"]["severity"], "info");
        assert!(v["data"]["timestamp"].as_str().is_some());
    }

    #[test]
    fn internal_events_are_not_delivered() {
        let hub = hub(8);
        let t = TenantId::new();
        let mut r = hub.register(t, None).unwrap();
        let e = Event::new("user.login", t, steward_core::Severity::Info, json!({}));
        hub.route(&serde_json::to_vec(&e).unwrap_or_default());
        assert!(r.events.try_recv().is_err());
    }
}
