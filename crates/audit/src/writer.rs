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
}

impl Writer {
    pub fn new(db: DbPool, hasher: ChainHasher) -> Self {
        Self {
            db,
            hasher,
            queues: Arc::default(),
        }
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
