//! The write path: appends grouped per tenant into one transaction (group commit).
//!
//! Appends queue in this instance (one queue on PostgreSQL, one per tenant on SQLite, whose
//! writes serialise anyway); one writer task per queue drains it, writing everything queued
//! (up to `MAX_BATCH`) together. Per tenant, the head row is locked first (an upsert, the
//! transaction's first statement), the entries are chained from it in queue order, inserted
//! in one statement, and the head moves to the last one. Every caller is answered only after
//! the commit. An idle server writes an append at once (a batch of one); under load, the
//! appends that arrive while a write runs go together in the next. Instances still serialise
//! on the head rows, so a chain never forks.
//!
//! The writer tasks run on a thread of their own (see `WriterThread`), so that a batch follows
//! the previous one as soon as its commit returns instead of waiting its turn behind the
//! request tasks of a busy worker. Each batch records its size and duration in the metrics
//! `audit_write_batch_entries` and `audit_write_batch_seconds`.
//!
//! A batch that fails is retried one entry at a time, so that one bad entry fails alone.
//!
//! On PostgreSQL the writer also remembers where it last left each tenant's head. The batch's
//! entries of every tenant whose head is remembered are written in one statement (one round
//! trip, one commit, atomic on its own): each such head moves from the remembered place to
//! its last entry only if it is still at the remembered place, and a tenant's entries are
//! inserted only if its head moved. A tenant whose head another instance moved in between
//! (nothing of it written) goes through the locking transaction instead, which reads the head
//! afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde_json::json;
use steward_core::clock::{self, format_timestamp};
use steward_core::{AuditId, AuditRecord, Error, Result, TenantId};
use steward_store::schema::{audit_entries, audit_heads};
use steward_store::{DbPool, DbResultExt, Id, Json, Ts};
use tokio::sync::oneshot;

use crate::chain::{canonical_bytes, ChainHasher, GENESIS_HASH};
use crate::service::{AuditEntry, EntryRow};

/// Most entries written together.
pub const MAX_BATCH: usize = 1024;

struct Pending {
    record: AuditRecord,
    reply: oneshot::Sender<Result<EntryRow>>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    /// A writer task is draining this queue.
    draining: bool,
}

/// A queue of appends with its own writer task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Lane {
    /// Every tenant (PostgreSQL). One statement in flight at a time: measured, spreading the
    /// tenants over several concurrent writers was slower (more commits, more contention).
    All,
    /// One tenant (SQLite).
    Tenant(TenantId),
}

/// The queues and their writer tasks.
#[derive(Clone)]
pub(crate) struct Writer {
    db: DbPool,
    hasher: ChainHasher,
    queues: Arc<Mutex<HashMap<Lane, Queue>>>,
    /// Per tenant, the head (seq, hash) this instance last wrote or read (PostgreSQL).
    heads: Arc<Mutex<HashMap<TenantId, (i64, String)>>>,
    /// Where the writer tasks run.
    thread: Arc<WriterThread>,
}

/// A thread of its own for the writer tasks (a single-threaded runtime). On the request
/// workers' runtimes a woken writer waits behind every request task queued there; on its own
/// thread the operating system schedules it as soon as its statement returns, so batches
/// follow each other without that delay. Stops when the last `Writer` clone is dropped.
struct WriterThread {
    handle: tokio::runtime::Handle,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl WriterThread {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("audit-writer")
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(Self {
            handle,
            stop: Mutex::new(Some(stop)),
        })
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
    }
}

/// Tenants whose head is remembered at most; beyond it the memory is cleared.
const MAX_HEADS: usize = 100_000;

/// The one-statement append (PostgreSQL) of several tenants' entries: `$1`-`$5` one element
/// per tenant (tenant, expected seq and hash, new seq and hash), then one array per column of
/// the entries. Answers the tenants whose entries were inserted, with their count.
const APPEND_SQL: &str = "WITH moved AS ( \
       UPDATE audit_heads AS h SET seq = v.new_seq, hash = v.new_hash \
       FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::int8[], $5::text[]) \
         AS v(tenant_id, old_seq, old_hash, new_seq, new_hash) \
       WHERE h.tenant_id = v.tenant_id AND h.seq = v.old_seq AND h.hash = v.old_hash \
       RETURNING h.tenant_id), \
     inserted AS ( \
       INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, \
         input, output, reasoning, risk_score, is_approved, \"timestamp\", prev_hash, hash, \
         signature) \
       SELECT e.* FROM unnest($6::uuid[], $7::uuid[], $8::int8[], $9::uuid[], $10::uuid[], \
         $11::text[], $12::text[], $13::jsonb[], $14::jsonb[], $15::jsonb[], $16::float8[], \
         $17::bool[], $18::timestamptz[], $19::text[], $20::text[], $21::text[]) \
         AS e(id, tenant_id, seq, agent_id, user_id, action, resource, input, output, \
           reasoning, risk_score, is_approved, ts, prev_hash, hash, signature) \
       WHERE e.tenant_id IN (SELECT tenant_id FROM moved) RETURNING tenant_id) \
     SELECT tenant_id, count(*) AS n FROM inserted GROUP BY tenant_id";

#[derive(diesel::QueryableByName)]
struct Inserted {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    tenant_id: uuid::Uuid,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// One tenant's part of a batch: the tenant and the positions of its records, in order.
type Group = (TenantId, Vec<usize>);

impl Writer {
    pub fn new(db: DbPool, hasher: ChainHasher) -> std::io::Result<Self> {
        Ok(Self {
            db,
            hasher,
            queues: Arc::default(),
            heads: Arc::default(),
            thread: Arc::new(WriterThread::start()?),
        })
    }

    fn remembered(&self, tenant: TenantId) -> Option<(i64, String)> {
        self.heads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tenant)
            .cloned()
    }

    fn remember(&self, tenant: TenantId, rows: &[EntryRow]) {
        if let Some(last) = rows.last() {
            let mut heads = self.heads.lock().unwrap_or_else(|p| p.into_inner());
            if heads.len() >= MAX_HEADS {
                heads.clear();
            }
            heads.insert(tenant, (last.seq, last.hash.clone()));
        }
    }

    fn forget(&self, tenant: TenantId) {
        self.heads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&tenant);
    }

    /// PostgreSQL: the entries of the `groups` (tenants whose head this instance remembers)
    /// in one statement. Answers the written entries of each tenant whose head was still where
    /// this instance left it; the others had nothing written.
    async fn write_fast(
        &self,
        pool: &diesel_async::pooled_connection::deadpool::Pool<diesel_async::AsyncPgConnection>,
        groups: &[Group],
        records: &[AuditRecord],
    ) -> Result<HashMap<TenantId, Vec<EntryRow>>> {
        use diesel::sql_types::{
            Array, BigInt, Bool, Double, Jsonb, Nullable, Text, Timestamptz, Uuid,
        };
        let mut chained: Vec<(TenantId, (i64, String), Vec<EntryRow>)> = Vec::new();
        for (tenant, idx) in groups {
            let Some(head) = self.remembered(*tenant) else {
                continue;
            };
            let group: Vec<AuditRecord> = idx
                .iter()
                .filter_map(|&i| records.get(i).cloned())
                .collect();
            let rows = chain(&self.hasher, Id(tenant.0), head.0, head.1.clone(), &group);
            chained.push((*tenant, head, rows));
        }
        let old: Vec<(i64, String)> = chained.iter().map(|c| c.1.clone()).collect();
        let new: Vec<(i64, String)> = chained
            .iter()
            .filter_map(|c| c.2.last().map(|r| (r.seq, r.hash.clone())))
            .collect();
        if old.len() != new.len() {
            return Err(Error::internal_msg("an audit group without entries"));
        }
        let rows: Vec<&EntryRow> = chained.iter().flat_map(|c| c.2.iter()).collect();
        let mut object = steward_store::pool::checkout(pool).await?;
        let conn = &mut *object;
        let inserted: Vec<Inserted> = diesel::sql_query(APPEND_SQL)
            .bind::<Array<Uuid>, _>(chained.iter().map(|c| c.0 .0).collect::<Vec<_>>())
            .bind::<Array<BigInt>, _>(old.iter().map(|h| h.0).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(old.iter().map(|h| h.1.as_str()).collect::<Vec<_>>())
            .bind::<Array<BigInt>, _>(new.iter().map(|h| h.0).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(new.iter().map(|h| h.1.as_str()).collect::<Vec<_>>())
            .bind::<Array<Uuid>, _>(rows.iter().map(|r| r.id.0).collect::<Vec<_>>())
            .bind::<Array<Uuid>, _>(rows.iter().map(|r| r.tenant_id.0).collect::<Vec<_>>())
            .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
            .bind::<Array<Nullable<Uuid>>, _>(
                rows.iter()
                    .map(|r| r.agent_id.map(|a| a.0))
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Nullable<Uuid>>, _>(
                rows.iter()
                    .map(|r| r.user_id.map(|u| u.0))
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(rows.iter().map(|r| r.action.as_str()).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(rows.iter().map(|r| r.resource.as_str()).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(rows.iter().map(|r| &r.input.0).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(rows.iter().map(|r| &r.output.0).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(rows.iter().map(|r| &r.reasoning.0).collect::<Vec<_>>())
            .bind::<Array<Double>, _>(rows.iter().map(|r| r.risk_score).collect::<Vec<_>>())
            .bind::<Array<Bool>, _>(rows.iter().map(|r| r.is_approved).collect::<Vec<_>>())
            .bind::<Array<Timestamptz>, _>(rows.iter().map(|r| r.timestamp.0).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(
                rows.iter()
                    .map(|r| r.prev_hash.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(rows.iter().map(|r| r.hash.as_str()).collect::<Vec<_>>())
            .bind::<Array<Nullable<Text>>, _>(
                rows.iter()
                    .map(|r| r.signature.as_deref())
                    .collect::<Vec<_>>(),
            )
            .load(conn)
            .await
            .db()?;
        let mut written = HashMap::new();
        for (tenant, _, rows) in chained {
            let n = inserted
                .iter()
                .find(|i| i.tenant_id == tenant.0)
                .map_or(0, |i| i.n);
            if n == rows.len() as i64 {
                written.insert(tenant, rows);
            }
        }
        Ok(written)
    }

    /// Appends a record to its tenant's chain; answers once it is committed.
    pub async fn append(&self, record: AuditRecord) -> Result<EntryRow> {
        let lane = match self.db {
            DbPool::Pg(_) => Lane::All,
            DbPool::Sqlite(_) => Lane::Tenant(record.tenant),
        };
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            let q = queues.entry(lane).or_default();
            q.pending.push(Pending { record, reply });
            !std::mem::replace(&mut q.draining, true)
        };
        if start {
            let writer = self.clone();
            self.thread
                .handle
                .spawn(async move { writer.drain(lane).await });
        }
        answer
            .await
            .map_err(|_| Error::internal_msg("the audit writer stopped before answering"))?
    }

    /// Writes the lane's queue batch by batch until it is empty.
    async fn drain(self, lane: Lane) {
        let _guard = DrainGuard {
            queues: self.queues.clone(),
            lane,
        };
        loop {
            let batch: Vec<Pending> = {
                let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
                let Some(q) = queues.get_mut(&lane) else {
                    return;
                };
                if q.pending.is_empty() {
                    queues.remove(&lane);
                    return;
                }
                let n = q.pending.len().min(MAX_BATCH);
                q.pending.drain(..n).collect()
            };
            let (records, replies): (Vec<AuditRecord>, Vec<_>) =
                batch.into_iter().map(|p| (p.record, p.reply)).unzip();
            let started = std::time::Instant::now();
            let results = self.write_batch(&records).await;
            metrics::histogram!("audit_write_batch_entries").record(records.len() as f64);
            metrics::histogram!("audit_write_batch_seconds")
                .record(started.elapsed().as_secs_f64());
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
    }

    /// Writes a batch (any tenants); one result per record, in order.
    async fn write_batch(&self, records: &[AuditRecord]) -> Vec<Result<EntryRow>> {
        let mut groups: Vec<Group> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            match groups.iter_mut().find(|(t, _)| *t == r.tenant) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((r.tenant, vec![i])),
            }
        }
        let mut out: Vec<Option<Result<EntryRow>>> = (0..records.len()).map(|_| None).collect();

        let mut rest = groups;
        if let DbPool::Pg(pool) = &self.db {
            let (fast, slow): (Vec<Group>, Vec<Group>) = rest
                .into_iter()
                .partition(|(t, _)| self.remembered(*t).is_some());
            rest = slow;
            if !fast.is_empty() {
                match self.write_fast(pool, &fast, records).await {
                    Ok(mut written) => {
                        for (tenant, idx) in fast {
                            match written.remove(&tenant) {
                                Some(rows) => {
                                    self.remember(tenant, &rows);
                                    fill(&mut out, &idx, rows);
                                }
                                None => {
                                    // Another instance moved the head: lock and read it.
                                    self.forget(tenant);
                                    rest.push((tenant, idx));
                                }
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "audit batch statement failed; writing tenant by tenant");
                        for (tenant, idx) in fast {
                            self.forget(tenant);
                            rest.push((tenant, idx));
                        }
                    }
                }
            }
        }
        for (tenant, idx) in rest {
            let group: Vec<AuditRecord> = idx
                .iter()
                .filter_map(|&i| records.get(i).cloned())
                .collect();
            match self.write_locked(tenant, &group).await {
                Ok(rows) => fill(&mut out, &idx, rows),
                Err(e) if idx.len() == 1 => {
                    if let Some(slot) = <[usize]>::first(&idx).and_then(|&i| out.get_mut(i)) {
                        *slot = Some(Err(e));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, entries = idx.len(), "audit batch failed; writing its entries one by one");
                    for (&i, record) in idx.iter().zip(group) {
                        let result = self
                            .write_locked(tenant, std::slice::from_ref(&record))
                            .await
                            .and_then(|mut rows| {
                                rows.pop().ok_or_else(|| {
                                    Error::internal_msg("the audit write returned no entry")
                                })
                            });
                        if let Some(slot) = out.get_mut(i) {
                            *slot = Some(result);
                        }
                    }
                }
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::internal_msg("audit entry not written"))))
            .collect()
    }

    /// The batch in a transaction that locks the tenant's head row first.
    async fn write_locked(
        &self,
        tenant: TenantId,
        records: &[AuditRecord],
    ) -> Result<Vec<EntryRow>> {
        let tenant = Id(tenant.0);
        let hasher = &self.hasher;
        // PostgreSQL inserts the batch in one statement; SQLite (in process, no round trips)
        // row by row, as diesel has no multi-row insert of nullable columns for it.
        macro_rules! insert_all {
            ($conn:ident, $rows:ident) => {
                diesel::insert_into(audit_entries::table)
                    .values($rows)
                    .execute($conn)
                    .await?
            };
        }
        macro_rules! insert_each {
            ($conn:ident, $rows:ident) => {
                for row in $rows {
                    diesel::insert_into(audit_entries::table)
                        .values(row)
                        .execute($conn)
                        .await?;
                }
            };
        }
        macro_rules! transaction {
            ($pool:ident, $insert:ident) => {{
                // Back to the pool only when the transaction has ended (`pool::Lease`).
                let mut lease = steward_store::pool::Lease::checkout($pool).await?;
                let result = lease
                    .conn()?
                    .transaction::<_, diesel::result::Error, _>(|conn| {
                        async move {
                            // The upsert is the transaction's first statement and a write: it takes
                            // the tenant's head row lock (PostgreSQL) or the write lock (SQLite).
                            let (head_seq, head_hash): (i64, String) =
                                diesel::insert_into(audit_heads::table)
                                    .values((
                                        audit_heads::tenant_id.eq(tenant),
                                        audit_heads::seq.eq(0i64),
                                        audit_heads::hash.eq(GENESIS_HASH),
                                    ))
                                    .on_conflict(audit_heads::tenant_id)
                                    .do_update()
                                    .set(audit_heads::seq.eq(audit_heads::seq))
                                    .returning((audit_heads::seq, audit_heads::hash))
                                    .get_result(conn)
                                    .await?;
                            let rows = chain(hasher, tenant, head_seq, head_hash, records);
                            let all = &rows;
                            $insert!(conn, all);
                            if let Some(last) = rows.last() {
                                diesel::update(
                                    audit_heads::table.filter(audit_heads::tenant_id.eq(tenant)),
                                )
                                .set((
                                    audit_heads::seq.eq(last.seq),
                                    audit_heads::hash.eq(&last.hash),
                                ))
                                .execute(conn)
                                .await?;
                            }
                            Ok(rows)
                        }
                        .scope_boxed()
                    })
                    .await
                    .db();
                lease.release();
                result
            }};
        }
        match &self.db {
            DbPool::Pg(pool) => {
                let rows: Vec<EntryRow> = transaction!(pool, insert_all)?;
                self.remember(tenant.into_id(), &rows);
                Ok(rows)
            }
            DbPool::Sqlite(pool) => transaction!(pool, insert_each),
        }
    }
}

/// Puts each written row in the result slot of its record.
fn fill(out: &mut [Option<Result<EntryRow>>], idx: &[usize], rows: Vec<EntryRow>) {
    for (&i, row) in idx.iter().zip(rows) {
        if let Some(slot) = out.get_mut(i) {
            *slot = Some(Ok(row));
        }
    }
}

/// Should a writer task unwind, its queue is dropped (its callers get an error) rather than
/// left marked as drained by a task that no longer runs.
struct DrainGuard {
    queues: Arc<Mutex<HashMap<Lane, Queue>>>,
    lane: Lane,
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.remove(&self.lane);
        }
    }
}

/// The records chained after (`seq`, `hash`): sequence numbers, previous hashes, hashes and
/// signatures over the canonical form of each entry.
fn chain(
    hasher: &ChainHasher,
    tenant: Id,
    mut seq: i64,
    mut prev_hash: String,
    records: &[AuditRecord],
) -> Vec<EntryRow> {
    let mut rows = Vec::with_capacity(records.len());
    for record in records {
        let id = AuditId::new();
        let now = clock::now();
        seq += 1;
        let mut view = AuditEntry {
            id: id.to_string(),
            seq,
            tenant_id: record.tenant.to_string(),
            agent_id: record.agent_id.map(|a| a.to_string()),
            agent_name: None,
            user_id: record.user_id.map(|u| u.to_string()),
            action: record.action.clone(),
            resource: record.resource.clone(),
            input: record.input.clone(),
            output: record.output.clone(),
            reasoning: json!(record.reasoning),
            risk_score: record.risk_score,
            is_approved: record.is_approved,
            timestamp: format_timestamp(now),
            prev_hash,
            hash: String::new(),
            signature: None,
        };
        let canonical = canonical_bytes(&view.signed_fields());
        view.hash = ChainHasher::hash(&canonical);
        view.signature = hasher.sign(&canonical);
        prev_hash = view.hash.clone();
        rows.push(EntryRow {
            id: Id(id.0),
            tenant_id: tenant,
            seq,
            agent_id: record.agent_id.map(|a| Id(a.0)),
            user_id: record.user_id.map(|u| Id(u.0)),
            action: view.action,
            resource: view.resource,
            input: Json(view.input),
            output: Json(view.output),
            reasoning: Json(view.reasoning),
            risk_score: view.risk_score,
            is_approved: view.is_approved,
            timestamp: Ts(now),
            prev_hash: view.prev_hash,
            hash: view.hash,
            signature: view.signature,
        });
    }
    rows
}
