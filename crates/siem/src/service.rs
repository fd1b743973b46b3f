//! The export pipeline: bus decorator -> in-memory queue -> durable outbox -> one sender
//! across instances (lease in `schedules`) -> transport. See docs/adr/0006-siem-outbox.md.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde::Serialize;
use serde_json::Value;
use steward_core::event::{Event, Severity, EVENTS_CHANNEL};
use steward_core::{clock, Error, EventBus, Result, TenantId};
use steward_store::schema::{schedules, siem_outbox as ob, siem_stats as st, users};
use steward_store::{with_conn, with_conn_async_commit, DbPool, DbResultExt, Id, Json, Ts};
use tokio::sync::broadcast;

use crate::format::record;
use crate::transport::{Outcome, Transport, TransportConfig};

/// The lease name of the sender in `schedules`.
const LEASE: &str = "siem.sender";
/// How long a sender's lease lasts without renewal (`JOB_LEASE_SECONDS` when set).
const LEASE_DEFAULT: Duration = Duration::from_secs(15);

/// Most events held in memory while the outbox cannot be written (about 100 MB).
pub const MAX_MEMORY_QUEUE: usize = 100_000;

fn lease() -> Duration {
    steward_store::jobs::lease(LEASE_DEFAULT)
}
/// Bus events that are internal notifications, not security events: not exported
/// (`audit.created` only mirrors an audit entry whose source event is exported itself).
const NOT_EXPORTED: &[&str] = &["audit.created"];
/// The stats row.
const STATS: &str = "default";
/// Rows written to the outbox per INSERT.
const WRITE_CHUNK: usize = 500;
/// How long the outbox writer gathers events before writing fewer than a batch: the most an
/// event waits in memory (lost only if the process dies without a graceful shutdown). Each
/// write is one transaction; on SQLite it holds the database's one write lock while it commits,
/// so fewer, larger writes keep the requests' own writes from queueing behind export.
const WRITE_GATHER: Duration = Duration::from_millis(100);
/// Back-off bounds between retries of a failed batch.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The SIEM settings the service needs.
#[derive(Clone, Debug)]
pub struct SiemConfig {
    pub enabled: bool,
    pub batch_size: usize,
    pub batch_timeout: Duration,
    pub max_retries: u32,
    pub transport: TransportConfig,
}

/// `GET /siem/status` (contract 22), plus `duplicates` and `retries`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SiemStatus {
    pub enabled: bool,
    pub format: &'static str,
    pub transport: &'static str,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub batch_size: usize,
    pub batch_timeout: f64,
    pub max_retries: u32,
    pub connect_timeout: f64,
    pub queued: i64,
    pub sent: i64,
    pub failed: i64,
    /// Events delivered twice because a failed batch that may have arrived was retried.
    pub duplicates: i64,
    /// Failed delivery attempts of batches (each retried or parked).
    pub retries: i64,
    pub last_error: Option<String>,
}

/// `POST /siem/test`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SiemTestResult {
    pub enabled: bool,
    pub event_type: &'static str,
    pub delivered: bool,
    pub error: Option<String>,
}

/// Inserts the stats row when missing (inside a `with_conn!` body).
macro_rules! ensure_stats {
    ($conn:ident) => {
        diesel::insert_into(st::table)
            .values(st::name.eq(STATS))
            .on_conflict_do_nothing()
            .execute($conn)
            .await
    };
}

struct Inner {
    db: DbPool,
    config: SiemConfig,
    transport: Option<Transport>,
    transport_error: Option<String>,
    queue: Mutex<VecDeque<Value>>,
    queued_signal: tokio::sync::Notify,
    outbox_signal: tokio::sync::Notify,
    /// One delivery round at a time in this process.
    sending: tokio::sync::Mutex<()>,
    stopping: AtomicBool,
    /// This exporter's name in the sender lease.
    owner: String,
}

/// The SIEM exporter. Cheap to clone.
#[derive(Clone)]
pub struct Siem(Arc<Inner>);

/// `(sent, failed, duplicates, retries, last_error)`.
type StatsRow = (i64, i64, i64, i64, Option<String>);

/// Rows read back from the outbox (without their payload, read only for a batch that is sent).
#[derive(Queryable)]
struct OutboxRow {
    id: i64,
    attempts: i32,
    maybe_sent: bool,
    next_attempt_at: Ts,
    created_at: Ts,
}

impl Siem {
    pub fn new(db: DbPool, config: SiemConfig) -> Siem {
        let (transport, transport_error) = if config.enabled {
            match Transport::new(config.transport.clone()) {
                Ok(t) => (Some(t), None),
                Err(e) => {
                    tracing::error!(error = %e, "SIEM transport not usable");
                    (None, Some(e))
                }
            }
        } else {
            (None, None)
        };
        Siem(Arc::new(Inner {
            db,
            config,
            transport,
            transport_error,
            queue: Mutex::new(VecDeque::new()),
            queued_signal: tokio::sync::Notify::new(),
            outbox_signal: tokio::sync::Notify::new(),
            sending: tokio::sync::Mutex::new(()),
            stopping: AtomicBool::new(false),
            owner: format!(
                "{}-siem-{}",
                steward_store::schedule::instance_id(),
                uuid::Uuid::new_v4().simple()
            ),
        }))
    }

    pub fn enabled(&self) -> bool {
        self.0.config.enabled
    }

    /// The bus to hand to the domain services: `inner` itself when SIEM is disabled, else a
    /// decorator that also queues every domain event for export.
    pub fn wrap_bus(&self, inner: Arc<dyn EventBus>) -> Arc<dyn EventBus> {
        if self.enabled() {
            Arc::new(OutboxBus {
                inner,
                siem: self.clone(),
            })
        } else {
            inner
        }
    }

    /// Queues an event for export (never blocks on I/O). At most `MAX_MEMORY_QUEUE` events wait
    /// in memory for the outbox.
    pub fn enqueue(&self, event: &Event) {
        if !self.enabled() || NOT_EXPORTED.contains(&event.kind.as_str()) {
            return;
        }
        let rec = record(event);
        let (len, dropped) = {
            let mut q = self.0.queue.lock().unwrap_or_else(|p| p.into_inner());
            // The queue empties into the outbox at once unless the database refuses the
            // writes; then it is bounded, losing the oldest events rather than the memory.
            let dropped = q.len() >= MAX_MEMORY_QUEUE && q.pop_front().is_some();
            q.push_back(rec);
            (q.len(), dropped)
        };
        if dropped {
            metrics::counter!("siem_events_dropped_total").increment(1);
            tracing::warn!(
                "SIEM queue full (the outbox cannot be written): the oldest event was dropped"
            );
        }
        // Wake the writer when it has something to gather (the first event) and when a whole
        // batch is waiting (it writes at once); not for every event.
        if len == 1 || len == self.0.config.batch_size.max(1) {
            self.0.queued_signal.notify_one();
        }
    }

    fn memory_len(&self) -> usize {
        self.0.queue.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Moves the in-memory queue into the outbox. On a database error the events stay queued.
    pub async fn drain_queue(&self) -> Result<usize> {
        let mut total = 0;
        loop {
            let chunk: Vec<Value> = {
                let mut q = self.0.queue.lock().unwrap_or_else(|p| p.into_inner());
                let n = q.len().min(WRITE_CHUNK);
                q.drain(..n).collect()
            };
            if chunk.is_empty() {
                return Ok(total);
            }
            if let Err(e) = self.insert(&chunk).await {
                // Put them back in front, in order.
                let mut q = self.0.queue.lock().unwrap_or_else(|p| p.into_inner());
                for rec in chunk.into_iter().rev() {
                    q.push_front(rec);
                }
                return Err(e);
            }
            total += chunk.len();
            self.0.outbox_signal.notify_one();
        }
    }

    /// Adds `data.email` to user events that carry only the `user_id` (one query per chunk,
    /// in the background writer, never on the request path).
    async fn add_emails(&self, records: &mut [Value]) -> Result<()> {
        let wanted: Vec<uuid::Uuid> = records
            .iter()
            .filter(|r| r["data"].get("email").is_none())
            .filter_map(|r| r["data"].get("user_id").and_then(Value::as_str))
            .filter_map(|u| uuid::Uuid::parse_str(u).ok())
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let ids: Vec<Id> = wanted.into_iter().map(Id).collect();
        let found: Vec<(Id, String)> = with_conn!(&self.0.db, conn => {
            users::table
                .filter(users::id.eq_any(&ids))
                .select((users::id, users::email))
                .load(conn)
                .await
                .db()
        })?;
        let emails: std::collections::HashMap<String, String> = found
            .into_iter()
            .map(|(id, e)| (id.0.to_string(), e))
            .collect();
        for r in records.iter_mut() {
            let user = r["data"]
                .get("user_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let (Some(u), Some(Value::Object(data))) = (user, r.get_mut("data")) {
                if let Some(email) = emails.get(&u) {
                    data.entry("email")
                        .or_insert_with(|| Value::String(email.clone()));
                }
            }
        }
        Ok(())
    }

    async fn insert(&self, records: &[Value]) -> Result<()> {
        let mut records = records.to_vec();
        if let Err(e) = self.add_emails(&mut records).await {
            tracing::debug!(error = %e, "SIEM events exported without e-mails");
        }
        let records = &records[..];
        let now = Ts(clock::now());
        let rows: Vec<_> = records
            .iter()
            .map(|r| {
                let tenant = r
                    .get("tenant_id")
                    .and_then(Value::as_str)
                    .and_then(|t| uuid::Uuid::parse_str(t).ok())
                    .unwrap_or_default();
                let kind = r
                    .get("event_type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                (
                    ob::tenant_id.eq(Id(tenant)),
                    ob::event_type.eq(kind),
                    ob::payload.eq(Json(r.clone())),
                    ob::next_attempt_at.eq(now),
                    ob::created_at.eq(now),
                )
            })
            .collect();
        // The commit does not wait for the disk (an operating-system crash may lose the last
        // writes, as a process crash loses what is still in memory); it must not hold the
        // requests' own writes up behind SQLite's write lock while it syncs.
        with_conn_async_commit!(&self.0.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    // One statement per row (diesel-async has no multi-row insert on SQLite),
                    // one commit for the chunk.
                    for row in rows {
                        diesel::insert_into(ob::table).values(row).execute(conn).await?;
                    }
                    Ok(())
                }
                .scope_boxed()
            })
            .await
            .db()
        })
    }

    /// Writes queued events to the outbox until the process stops.
    pub async fn run_writer(self) {
        if !self.enabled() {
            return;
        }
        let batch = self.0.config.batch_size.max(1);
        loop {
            if self.memory_len() == 0 {
                let _ = tokio::time::timeout(
                    Duration::from_millis(200),
                    self.0.queued_signal.notified(),
                )
                .await;
            }
            // Group commit: events gather for up to WRITE_GATHER, or until a whole batch is
            // waiting, into one transaction instead of one transaction each.
            // (A wake-up may be a stale one: the length decides.)
            let deadline = tokio::time::Instant::now() + WRITE_GATHER;
            while self.memory_len() < batch
                && !AtomicBool::load(&self.0.stopping, Ordering::SeqCst)
                && tokio::time::Instant::now() < deadline
            {
                let _ = tokio::time::timeout_at(deadline, self.0.queued_signal.notified()).await;
            }
            if let Err(e) = self.drain_queue().await {
                tracing::warn!(error = %e, "SIEM events not written to the outbox yet; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }

    /// Graceful shutdown: writes what is still queued in memory to the outbox.
    pub async fn shutdown(&self) {
        self.0.stopping.store(true, Ordering::SeqCst);
        if !self.enabled() {
            return;
        }
        for _ in 0..5 {
            match self.drain_queue().await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "SIEM queue not flushed at shutdown; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// Takes or renews the sender lease: true when this instance is the sender.
    async fn claim_lease(&self) -> Result<bool> {
        let now = clock::now();
        let until =
            Ts(now + time::Duration::try_from(lease()).unwrap_or(time::Duration::SECOND * 15));
        let me = self.0.owner.clone();
        with_conn!(&self.0.db, conn => {
            diesel::insert_into(schedules::table)
                .values((
                    schedules::name.eq(LEASE),
                    schedules::owner.eq(None::<String>),
                    schedules::next_run_at.eq(Ts(now)),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .await
                .db()?;
            let won = diesel::update(
                schedules::table.filter(schedules::name.eq(LEASE)).filter(
                    schedules::next_run_at
                        .le(Ts(now))
                        .or(schedules::owner.eq(Some(me.clone()))),
                ),
            )
            .set((schedules::next_run_at.eq(until), schedules::owner.eq(Some(me.clone()))))
            .execute(conn)
            .await
            .db()?;
            Ok(won == 1)
        })
    }

    /// Sends outbox batches while this instance holds the lease, until the process stops.
    pub async fn run_sender(self) {
        if !self.enabled() {
            return;
        }
        // The lease is renewed once a third of it has passed, not on every round (two
        // statements per round were most of the sender's database work under load).
        let mut held_until: Option<std::time::Instant> = None;
        let renew_after = lease() / 3;
        loop {
            let holding = held_until.is_some_and(|t| std::time::Instant::now() < t);
            let claimed = if holding {
                Ok(true)
            } else {
                let r = self.claim_lease().await;
                held_until = match r {
                    Ok(true) => Some(std::time::Instant::now() + renew_after),
                    _ => None,
                };
                r
            };
            let wait = match claimed {
                Ok(true) => match self.round(false).await {
                    Ok(Some(w)) => w,
                    Ok(None) => Duration::ZERO,
                    Err(e) => {
                        tracing::warn!(error = %e, "SIEM delivery round failed");
                        Duration::from_secs(1)
                    }
                },
                Ok(false) => lease() / 3,
                Err(e) => {
                    tracing::warn!(error = %e, "SIEM sender lease not taken");
                    Duration::from_secs(2)
                }
            };
            if wait.is_zero() {
                continue;
            }
            // Renew the lease well before it lapses; wake early when events are written.
            let wait = wait.min(lease() / 3);
            let _ = tokio::time::timeout(wait, self.0.outbox_signal.notified()).await;
        }
    }

    /// One delivery attempt of the oldest pending batch. `Ok(None)`: go on at once;
    /// `Ok(Some(d))`: nothing to do for `d`. `force` sends a partial batch now.
    async fn round(&self, force: bool) -> Result<Option<Duration>> {
        let _guard = self.0.sending.lock().await;
        let Some(transport) = &self.0.transport else {
            return Ok(Some(Duration::from_secs(5)));
        };
        let cfg = &self.0.config;
        let limit = cfg.batch_size as i64;
        let rows: Vec<OutboxRow> = with_conn!(&self.0.db, conn => {
            ob::table
                .filter(ob::status.eq("pending"))
                .order(ob::id.asc())
                .limit(limit)
                .select((ob::id, ob::attempts, ob::maybe_sent, ob::next_attempt_at, ob::created_at))
                .load(conn)
                .await
                .db()
        })?;
        let Some(head) = <[OutboxRow]>::first(&rows) else {
            return Ok(Some(cfg.batch_timeout));
        };
        let now = clock::now();
        if head.attempts > 0 && head.next_attempt_at.0 > now {
            return Ok(Some(to_std(head.next_attempt_at.0 - now)));
        }
        if !force
            && rows.len() < cfg.batch_size
            && !AtomicBool::load(&self.0.stopping, Ordering::SeqCst)
        {
            let due =
                head.created_at.0 + time::Duration::try_from(cfg.batch_timeout).unwrap_or_default();
            if due > now {
                return Ok(Some(to_std(due - now).max(Duration::from_millis(20))));
            }
        }
        let (rows, records) = self.payloads(rows).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let outcome = transport.send(&records).await;
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        match outcome {
            Outcome::Delivered => {
                let dups = rows.iter().filter(|r| r.maybe_sent).count() as i64;
                self.delivered(&ids, dups).await?;
                Ok(None)
            }
            Outcome::Partial { rejected } => {
                let bad: Vec<usize> = rejected.iter().map(|(i, _)| *i).collect();
                let good: Vec<i64> = rows
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !bad.contains(i))
                    .map(|(_, r)| r.id)
                    .collect();
                let dups = rows
                    .iter()
                    .enumerate()
                    .filter(|(i, r)| !bad.contains(i) && r.maybe_sent)
                    .count() as i64;
                self.delivered(&good, dups).await?;
                let failed: Vec<&OutboxRow> = bad.iter().filter_map(|i| rows.get(*i)).collect();
                let error = rejected
                    .iter()
                    .map(|(_, e)| e.clone())
                    .next()
                    .unwrap_or_default();
                self.attempt_failed(&failed, &error, 0).await?;
                Ok(None)
            }
            Outcome::Failed { error, maybe_sent } => {
                tracing::warn!(error = %error, events = rows.len(), "SIEM batch not delivered");
                let all: Vec<&OutboxRow> = rows.iter().collect();
                self.attempt_failed(&all, &error, maybe_sent).await?;
                Ok(None)
            }
        }
    }

    /// The payloads of a batch about to be sent, in the batch's order (a row gone since it was
    /// listed is left out of the batch).
    async fn payloads(&self, rows: Vec<OutboxRow>) -> Result<(Vec<OutboxRow>, Vec<Value>)> {
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let found: Vec<(i64, Json)> = with_conn!(&self.0.db, conn => {
            ob::table
                .filter(ob::id.eq_any(&ids))
                .select((ob::id, ob::payload))
                .load(conn)
                .await
                .db()
        })?;
        let mut by_id: std::collections::HashMap<i64, Value> =
            found.into_iter().map(|(id, p)| (id, p.0)).collect();
        let mut kept = Vec::with_capacity(rows.len());
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(p) = by_id.remove(&row.id) {
                records.push(p);
                kept.push(row);
            }
        }
        Ok((kept, records))
    }

    async fn delivered(&self, ids: &[i64], dups: i64) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let n = ids.len() as i64;
        let ids = ids.to_vec();
        // With the full wait (ADR 0018): the duplicate accounting depends on this commit.
        with_conn!(&self.0.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    diesel::delete(ob::table.filter(ob::id.eq_any(&ids))).execute(conn).await?;
                    ensure_stats!(conn)?;
                    diesel::update(st::table.filter(st::name.eq(STATS)))
                        .set((st::sent.eq(st::sent + n), st::duplicates.eq(st::duplicates + dups)))
                        .execute(conn)
                        .await?;
                    Ok(())
                }
                .scope_boxed()
            })
            .await
            .db()
        })
    }

    /// Counts a failed attempt of `rows`: each is retried after a back-off, or parked as
    /// failed once it used up `SIEM_MAX_RETRIES`. The first `maybe_sent` may have arrived.
    async fn attempt_failed(
        &self,
        rows: &[&OutboxRow],
        error: &str,
        maybe_sent: usize,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let max = self.0.config.max_retries as i32;
        let attempts = rows.iter().map(|r| r.attempts).max().unwrap_or(0) + 1;
        let park = attempts > max;
        let delay = backoff(attempts as u32);
        let next = Ts(clock::now() + time::Duration::try_from(delay).unwrap_or_default());
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let maybe: Vec<i64> = rows.iter().take(maybe_sent).map(|r| r.id).collect();
        let n = ids.len() as i64;
        let error = error.to_owned();
        with_conn!(&self.0.db, conn => {
            let error = error.clone();
            let ids = ids.clone();
            let maybe = maybe.clone();
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    let status = if park { "failed" } else { "pending" };
                    diesel::update(ob::table.filter(ob::id.eq_any(&ids)))
                        .set((
                            ob::attempts.eq(attempts),
                            ob::status.eq(status),
                            ob::next_attempt_at.eq(next),
                            ob::last_error.eq(Some(error.clone())),
                        ))
                        .execute(conn)
                        .await?;
                    if !maybe.is_empty() && !park {
                        diesel::update(ob::table.filter(ob::id.eq_any(&maybe)))
                            .set(ob::maybe_sent.eq(true))
                            .execute(conn)
                            .await?;
                    }
                    ensure_stats!(conn)?;
                    let failed = if park { n } else { 0 };
                    diesel::update(st::table.filter(st::name.eq(STATS)))
                        .set((
                            st::failed.eq(st::failed + failed),
                            st::retries.eq(st::retries + 1),
                            st::last_error.eq(Some(error.clone())),
                        ))
                        .execute(conn)
                        .await?;
                    Ok(())
                }
                .scope_boxed()
            })
            .await
            .db()
        })
    }

    /// `GET /siem/status`.
    pub async fn status(&self) -> Result<SiemStatus> {
        let cfg = &self.0.config;
        let t = &cfg.transport;
        // The counters first, then the outbox: the sender marks a batch sent and adds it to
        // the counters in one transaction, so a batch committed between the two reads is
        // counted in neither (an answer a moment old), never in both `sent` and `queued`.
        let (pending, stats): (i64, Option<StatsRow>) = with_conn!(&self.0.db, conn => {
            let stats = st::table
                .filter(st::name.eq(STATS))
                .select((st::sent, st::failed, st::duplicates, st::retries, st::last_error))
                .first(conn)
                .await
                .optional()
                .db()?;
            let pending = ob::table
                .filter(ob::status.eq("pending"))
                .count()
                .get_result::<i64>(conn)
                .await
                .db()?;
            Ok::<_, Error>((pending, stats))
        })?;
        let (sent, failed, duplicates, retries, last_error) = stats.unwrap_or((0, 0, 0, 0, None));
        Ok(SiemStatus {
            enabled: cfg.enabled,
            format: t.format.as_str(),
            transport: t.kind.as_str(),
            host: t.host.clone(),
            port: t.port,
            tls: t.tls,
            batch_size: cfg.batch_size,
            batch_timeout: cfg.batch_timeout.as_secs_f64(),
            max_retries: cfg.max_retries,
            connect_timeout: t.connect_timeout.as_secs_f64(),
            queued: pending + self.memory_len() as i64,
            sent,
            failed,
            duplicates,
            retries,
            last_error: last_error.or_else(|| self.0.transport_error.clone()),
        })
    }

    /// `POST /siem/test`: a `siem.test` event sent synchronously (bounded by
    /// `SIEM_CONNECT_TIMEOUT`); pending outbox events are then flushed in the background.
    pub async fn send_test(&self, tenant: TenantId) -> Result<SiemTestResult> {
        let result = |delivered, error| SiemTestResult {
            enabled: self.enabled(),
            event_type: "siem.test",
            delivered,
            error,
        };
        if !self.enabled() {
            return Ok(result(false, Some("SIEM export is disabled".into())));
        }
        let Some(transport) = &self.0.transport else {
            return Ok(result(false, self.0.transport_error.clone()));
        };
        let event = Event::new(
            "siem.test",
            tenant,
            Severity::Info,
            serde_json::json!({"message": "Steward SIEM test event"}),
        );
        let rec = record(&event);
        let bound = self.0.config.transport.connect_timeout * 2;
        let outcome = tokio::time::timeout(bound, transport.send(std::slice::from_ref(&rec))).await;
        let error = match outcome {
            Ok(Outcome::Delivered) => None,
            Ok(Outcome::Failed { error, .. }) => Some(error),
            Ok(Outcome::Partial { rejected }) => Some(
                rejected
                    .into_iter()
                    .next()
                    .map(|(_, e)| e)
                    .unwrap_or_default(),
            ),
            Err(_) => Some("timed out".into()),
        };
        let delivered = error.is_none();
        with_conn!(&self.0.db, conn => {
            ensure_stats!(conn).db()?;
            if delivered {
                diesel::update(st::table.filter(st::name.eq(STATS)))
                    .set(st::sent.eq(st::sent + 1))
                    .execute(conn)
                    .await
                    .db()
            } else {
                diesel::update(st::table.filter(st::name.eq(STATS)))
                    .set((st::failed.eq(st::failed + 1), st::last_error.eq(error.clone())))
                    .execute(conn)
                    .await
                    .db()
            }
        })?;
        // Flush what is queued so far (the sender delivers it).
        if let Err(e) = self.drain_queue().await {
            tracing::warn!(error = %e, "SIEM queue not flushed");
        }
        Ok(result(delivered, error))
    }

    /// Delivers everything pending now, ignoring the batch timeout (tests, benchmarks).
    /// Stops at the first batch that must wait for a back-off.
    pub async fn flush_now(&self) -> Result<()> {
        self.drain_queue().await?;
        loop {
            match self.round(true).await? {
                None => continue,
                Some(_) => return Ok(()),
            }
        }
    }
}

fn to_std(d: time::Duration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

/// Exponential back-off after `attempts` failures: 0.5 s, 1 s, 2 s, … up to 30 s.
pub fn backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(16);
    (BACKOFF_BASE * 2u32.pow(exp)).min(BACKOFF_MAX)
}

/// The bus decorator: every publish on [`EVENTS_CHANNEL`] is also queued for export.
pub struct OutboxBus {
    inner: Arc<dyn EventBus>,
    siem: Siem,
}

#[async_trait]
impl EventBus for OutboxBus {
    async fn publish(&self, channel: &str, payload: &[u8]) -> Result<()> {
        if channel == EVENTS_CHANNEL {
            match serde_json::from_slice::<Event>(payload) {
                Ok(event) => self.siem.enqueue(&event),
                Err(e) => tracing::warn!(error = %e, "event not exported: unreadable"),
            }
        }
        self.inner.publish(channel, payload).await
    }

    async fn subscribe(&self, channel: &str) -> Result<broadcast::Receiver<Vec<u8>>> {
        self.inner.subscribe(channel).await
    }

    async fn ping(&self) -> Result<()> {
        self.inner.ping().await
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The outbox cannot be written (the writer never runs here): the memory queue is bounded,
    // the oldest events going first.
    #[tokio::test]
    async fn the_memory_queue_is_bounded() {
        let db = steward_store::testing::TestDb::sqlite().await.unwrap();
        let config = SiemConfig {
            enabled: true,
            batch_size: 50,
            batch_timeout: Duration::from_secs(1),
            max_retries: 3,
            transport: crate::transport::TransportConfig {
                kind: crate::transport::TransportKind::Syslog,
                format: crate::Format::Jsonl,
                host: "127.0.0.1".into(),
                port: 9,
                tls: false,
                ca_file: None,
                connect_timeout: Duration::from_secs(1),
                hec_url: None,
                hec_token: None,
                hec_sourcetype: "steward".into(),
                elk_url: None,
                elk_index: "steward-events".into(),
                elk_username: None,
                elk_password: None,
            },
        };
        let siem = Siem::new(db.pool.clone(), config);
        let tenant = steward_core::TenantId::new();
        for seq in 0..MAX_MEMORY_QUEUE + 3 {
            let event = Event::new(
                "policy.violated",
                tenant,
                steward_core::event::Severity::Warning,
                serde_json::json!({"seq": seq}),
            );
            siem.enqueue(&event);
        }
        assert_eq!(siem.memory_len(), MAX_MEMORY_QUEUE);
        let first = siem.0.queue.lock().unwrap().front().cloned().unwrap();
        assert_eq!(first["data"]["seq"], 3);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(40), BACKOFF_MAX);
    }
}
