//! The write path: appends grouped per tenant into one transaction (group commit).
//!
//! Appends of a tenant queue in this instance; one writer task per tenant drains the queue,
//! writing everything queued (up to `MAX_BATCH`) in one transaction: the tenant's head row is
//! locked first (an upsert, the transaction's first statement), the entries are chained from
//! it in queue order, inserted in one statement, and the head moves to the last one. Every
//! caller is answered only after the commit. An idle tenant's append is written at once (a
//! batch of one); under load, the appends that arrive while a transaction runs go together in
//! the next. Instances still serialise on the head row, so the chain never forks.
//!
//! A batch that fails is retried one entry at a time, so that one bad entry fails alone.
//!
//! On PostgreSQL the writer also remembers where it last left each tenant's head. While it is
//! still there, a batch is one statement (one round trip, atomic on its own): the head moves
//! from the remembered place to the batch's last entry only if it is still at the remembered
//! place, and the entries are inserted only if it moved. When another instance wrote in
//! between, nothing is written and the batch goes through the locking transaction instead,
//! which reads the head afresh.

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

/// Most entries written in one transaction.
pub const MAX_BATCH: usize = 256;

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

/// Per-tenant queues and their writer tasks.
#[derive(Clone)]
pub(crate) struct Writer {
    db: DbPool,
    hasher: ChainHasher,
    queues: Arc<Mutex<HashMap<TenantId, Queue>>>,
    /// Per tenant, the head (seq, hash) this instance last wrote or read (PostgreSQL).
    heads: Arc<Mutex<HashMap<TenantId, (i64, String)>>>,
}

/// Tenants whose head is remembered at most; beyond it the memory is cleared.
const MAX_HEADS: usize = 100_000;

/// The one-statement append (PostgreSQL): `$1`/`$2` the new head, `$3` the tenant, `$4`/`$5`
/// the expected head, then one array per column of the entries.
const APPEND_SQL: &str = "WITH moved AS ( \
       UPDATE audit_heads SET seq = $1, hash = $2 \
       WHERE tenant_id = $3 AND seq = $4 AND hash = $5 RETURNING 1), \
     inserted AS ( \
       INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, \
         input, output, reasoning, risk_score, is_approved, \"timestamp\", prev_hash, hash, \
         signature) \
       SELECT * FROM unnest($6::uuid[], $7::uuid[], $8::int8[], $9::uuid[], $10::uuid[], \
         $11::text[], $12::text[], $13::jsonb[], $14::jsonb[], $15::jsonb[], $16::float8[], \
         $17::bool[], $18::timestamptz[], $19::text[], $20::text[], $21::text[]) \
       WHERE EXISTS (SELECT 1 FROM moved) RETURNING 1) \
     SELECT count(*) AS n FROM inserted";

#[derive(diesel::QueryableByName)]
struct Inserted {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

impl Writer {
    pub fn new(db: DbPool, hasher: ChainHasher) -> Self {
        Self {
            db,
            hasher,
            queues: Arc::default(),
            heads: Arc::default(),
        }
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

    /// PostgreSQL, the head where this instance left it: the batch in one statement. `None`
    /// when the head was elsewhere (nothing written).
    async fn write_fast(
        &self,
        pool: &diesel_async::pooled_connection::deadpool::Pool<diesel_async::AsyncPgConnection>,
        tenant: TenantId,
        head: (i64, String),
        records: &[AuditRecord],
    ) -> Result<Option<Vec<EntryRow>>> {
        use diesel::sql_types::{
            Array, BigInt, Bool, Double, Jsonb, Nullable, Text, Timestamptz, Uuid,
        };
        let rows = chain(&self.hasher, Id(tenant.0), head.0, head.1.clone(), records);
        let Some(last) = rows.last() else {
            return Ok(Some(rows));
        };
        let col = |f: fn(&EntryRow) -> uuid::Uuid| rows.iter().map(f).collect::<Vec<_>>();
        let opt = |f: fn(&EntryRow) -> Option<uuid::Uuid>| rows.iter().map(f).collect::<Vec<_>>();
        let mut object = steward_store::pool::checkout(pool).await?;
        let conn = &mut *object;
        let inserted: Inserted = diesel::sql_query(APPEND_SQL)
            .bind::<BigInt, _>(last.seq)
            .bind::<Text, _>(&last.hash)
            .bind::<Uuid, _>(tenant.0)
            .bind::<BigInt, _>(head.0)
            .bind::<Text, _>(&head.1)
            .bind::<Array<Uuid>, _>(col(|r| r.id.0))
            .bind::<Array<Uuid>, _>(col(|r| r.tenant_id.0))
            .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
            .bind::<Array<Nullable<Uuid>>, _>(opt(|r| r.agent_id.map(|a| a.0)))
            .bind::<Array<Nullable<Uuid>>, _>(opt(|r| r.user_id.map(|u| u.0)))
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
            .get_result(conn)
            .await
            .db()?;
        Ok((inserted.n == rows.len() as i64).then_some(rows))
    }

    /// Appends a record to its tenant's chain; answers once it is committed.
    pub async fn append(&self, record: AuditRecord) -> Result<EntryRow> {
        let tenant = record.tenant;
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            let q = queues.entry(tenant).or_default();
            q.pending.push(Pending { record, reply });
            !std::mem::replace(&mut q.draining, true)
        };
        if start {
            let writer = self.clone();
            tokio::spawn(async move { writer.drain(tenant).await });
        }
        answer
            .await
            .map_err(|_| Error::internal_msg("the audit writer stopped before answering"))?
    }

    /// Writes the tenant's queue batch by batch until it is empty.
    async fn drain(self, tenant: TenantId) {
        let _guard = DrainGuard {
            queues: self.queues.clone(),
            tenant,
        };
        loop {
            let batch: Vec<Pending> = {
                let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
                let Some(q) = queues.get_mut(&tenant) else {
                    return;
                };
                if q.pending.is_empty() {
                    queues.remove(&tenant);
                    return;
                }
                let n = q.pending.len().min(MAX_BATCH);
                q.pending.drain(..n).collect()
            };
            let (records, replies): (Vec<AuditRecord>, Vec<_>) =
                batch.into_iter().map(|p| (p.record, p.reply)).unzip();
            match self.write(tenant, &records).await {
                Ok(rows) => {
                    for (reply, row) in replies.into_iter().zip(rows) {
                        let _ = reply.send(Ok(row));
                    }
                }
                Err(e) if records.len() == 1 => {
                    if let Some(reply) = replies.into_iter().next() {
                        let _ = reply.send(Err(e));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, entries = records.len(), "audit batch failed; writing its entries one by one");
                    for (record, reply) in records.into_iter().zip(replies) {
                        let result = self
                            .write(tenant, std::slice::from_ref(&record))
                            .await
                            .and_then(|mut rows| {
                                rows.pop().ok_or_else(|| {
                                    Error::internal_msg("the audit write returned no entry")
                                })
                            });
                        let _ = reply.send(result);
                    }
                }
            }
        }
    }

    /// Writes `records` (one tenant's) as the next entries of its chain, in one transaction.
    async fn write(&self, tenant: TenantId, records: &[AuditRecord]) -> Result<Vec<EntryRow>> {
        if let (DbPool::Pg(pool), Some(head)) = (&self.db, self.remembered(tenant)) {
            match self.write_fast(pool, tenant, head, records).await {
                Ok(Some(rows)) => {
                    self.remember(tenant, &rows);
                    return Ok(rows);
                }
                Ok(None) => self.forget(tenant), // another instance wrote: lock and read
                Err(e) => {
                    self.forget(tenant);
                    return Err(e);
                }
            }
        }
        let rows = self.write_locked(tenant, records).await?;
        if matches!(self.db, DbPool::Pg(_)) {
            self.remember(tenant, &rows);
        }
        Ok(rows)
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
                let mut object = steward_store::pool::checkout($pool).await?;
                let conn = &mut *object;
                conn.transaction::<_, diesel::result::Error, _>(|conn| {
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
                .db()
            }};
        }
        match &self.db {
            DbPool::Pg(pool) => transaction!(pool, insert_all),
            DbPool::Sqlite(pool) => transaction!(pool, insert_each),
        }
    }
}

/// Should a writer task unwind, its queue is dropped (its callers get an error) rather than
/// left marked as drained by a task that no longer runs.
struct DrainGuard {
    queues: Arc<Mutex<HashMap<TenantId, Queue>>>,
    tenant: TenantId,
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.remove(&self.tenant);
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
