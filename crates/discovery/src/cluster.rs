//! Clustering of similar pending candidates (contract 12.3) as a background task on the
//! database job queue: `POST /discovery/cluster` queues it, one instance claims and runs it.

use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde::Serialize;
use serde_json::{json, Value};
use steward_core::clock::format_timestamp;
use steward_core::event::Severity;
use steward_core::validate::Fields;
use steward_core::{parse_path_id, Body, Error, ErrorKind, JobId, Op, Principal, Result, TenantId};
use steward_store::jobs::{self, JobRow};
use steward_store::schema::discovery_candidates as dc;
use steward_store::{with_conn, DbResultExt, Id};

use crate::model::{CandidateRow, PENDING};
use crate::similarity;
use crate::Discovery;

/// The job kind of clustering tasks.
pub const JOB_KIND: &str = "discovery_cluster";
/// The similarity threshold when none is given.
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// The lease of a clustering task (`JOB_LEASE_SECONDS` when set).
const LEASE: Duration = Duration::from_secs(30);

fn lease() -> Duration {
    jobs::lease(LEASE)
}
/// Shortest interval between two progress reports.
const REPORT_EVERY: Duration = Duration::from_millis(500);
/// Attempts at merging one group whose members keep changing under it.
const GROUP_ATTEMPTS: usize = 5;
const LOOKUP_CHUNK: usize = 500;

/// A clustering task as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Task {
    pub task_id: String,
    pub kind: String,
    #[schema(schema_with = steward_store::jobs::statuses)]
    pub status: String,
    pub progress: f64,
    /// Candidates absorbed so far.
    pub merged: i64,
    pub error: Option<String>,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub finished_at: Option<String>,
}

impl Task {
    fn from_row(j: &JobRow) -> Task {
        Task {
            task_id: j.id.0.hyphenated().to_string(),
            kind: j.kind.clone(),
            status: j.status.clone(),
            progress: j.progress,
            merged: j
                .result
                .as_ref()
                .and_then(|r| r.0["merged"].as_i64())
                .unwrap_or(0),
            error: j.error.clone(),
            created_at: format_timestamp(j.created_at.0),
            finished_at: j.finished_at.map(|t| format_timestamp(t.0)),
        }
    }
}

/// A pending candidate as clustering first sees it (no evidence: that is read per group).
type Summary = (Id, String);

/// What happened to one group.
enum GroupOutcome {
    /// Merged; the number of candidates absorbed.
    Merged(i64),
    /// A member changed meanwhile: read again and retry.
    Changed,
}

impl Discovery {
    /// Queues a clustering task after an ingest: a task of the tenant still queued covers the
    /// new candidates too, so it is returned instead of queuing another (at most one queued
    /// and one running per tenant).
    pub(crate) async fn enqueue_cluster(&self, tenant: TenantId, threshold: f64) -> Result<Task> {
        match self.enqueue_unless_queued(tenant, threshold).await? {
            jobs::Enqueued::Queued(job) => Ok(Task::from_row(&job)),
            jobs::Enqueued::Refused(active) => active
                .iter()
                .find(|j| j.status == "queued")
                .map(Task::from_row)
                .ok_or_else(|| Error::internal_msg("clustering refused without a queued task")),
        }
    }

    /// Queues a clustering task unless one of the tenant's is queued (atomically, across
    /// instances).
    async fn enqueue_unless_queued(
        &self,
        tenant: TenantId,
        threshold: f64,
    ) -> Result<jobs::Enqueued> {
        jobs::enqueue_unless(
            &self.db,
            tenant,
            JOB_KIND,
            json!({"threshold": threshold}),
            |active| active.iter().any(|j| j.status == "queued"),
        )
        .await
    }

    /// `POST /discovery/cluster` with `{threshold?}` in (0, 1] (default 0.8): queues the task
    /// (202).
    pub async fn start_cluster(&self, p: &Principal, body: &Body) -> Result<Task> {
        p.authorize(Op::DiscoveryWrite)?;
        let value = body.parse_or_empty::<Value>()?;
        let mut f = Fields::root(&value);
        let threshold = match f.get("threshold") {
            None => Some(DEFAULT_THRESHOLD),
            Some(v) => match v.as_f64() {
                Some(t) if t > 0.0 && t <= 1.0 => Some(t),
                Some(_) => {
                    f.error("threshold", "must be greater than 0 and at most 1");
                    None
                }
                None => {
                    f.error("threshold", "must be a number");
                    None
                }
            },
        };
        f.finish()?;
        let threshold = threshold.unwrap_or(DEFAULT_THRESHOLD);
        // At most one queued clustering task per tenant (besides one running): a task costs
        // time quadratic in the pending candidates, and every tenant's tasks wait in one
        // queue. A queued task with the same threshold is the answer to the same request; one
        // with another threshold is a conflict.
        match self.enqueue_unless_queued(p.tenant, threshold).await? {
            jobs::Enqueued::Queued(job) => Ok(Task::from_row(&job)),
            jobs::Enqueued::Refused(active) => {
                let Some(queued) = active.iter().find(|j| j.status == "queued") else {
                    return Err(Error::internal_msg(
                        "clustering refused without a queued task",
                    ));
                };
                if queued.payload.0["threshold"].as_f64() == Some(threshold) {
                    return Ok(Task::from_row(queued));
                }
                Err(Error::conflict(format!(
                    "clustering task {} is queued with another threshold; wait for it to finish",
                    queued.id.0
                )))
            }
        }
    }

    /// `GET /discovery/cluster/{task_id}`.
    pub async fn cluster_status(&self, p: &Principal, task_id: &str) -> Result<Task> {
        p.authorize(Op::DiscoveryRead)?;
        let id: JobId = parse_path_id(task_id, "clustering task")?;
        jobs::get(&self.db, p.tenant, JOB_KIND, id.0)
            .await?
            .map(|j| Task::from_row(&j))
            .ok_or_else(|| Error::not_found(format!("clustering task {id} was not found")))
    }

    /// The worker: claims queued (or abandoned) clustering tasks and runs them, forever.
    pub async fn run_cluster_worker(self) {
        loop {
            match jobs::claim(&self.db, JOB_KIND, lease()).await {
                Ok(Some(job)) => {
                    self.run_claimed(&job).await;
                    if let Ok(n) = jobs::count_active(&self.db).await {
                        metrics::gauge!("background_tasks_in_progress").set(n as f64);
                    }
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(250)).await,
                Err(e) => {
                    tracing::debug!(error = %e, "clustering task claim failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Runs one claimed task to its final state.
    pub async fn run_claimed(&self, job: &JobRow) {
        let outcome = self.run_cluster(job).await;
        let saved = match outcome {
            Ok(merged) => {
                let done = jobs::complete(&self.db, job.id, json!({"merged": merged})).await;
                if done.is_ok() {
                    self.event(
                        "discovery.cluster_completed",
                        job.tenant_id.into_id(),
                        Severity::Info,
                        json!({"task_id": job.id.0.hyphenated().to_string(), "merged": merged}),
                    );
                }
                done
            }
            Err(e) if e.kind == ErrorKind::Conflict => {
                // The lease was lost: another instance owns the task now.
                tracing::info!(task = %job.id.0, "clustering task taken over by another instance");
                Ok(())
            }
            Err(e) => {
                tracing::warn!(task = %job.id.0, error = %e, "clustering failed");
                jobs::fail(&self.db, job.id, "the clustering could not be completed").await
            }
        };
        if let Err(e) = saved {
            tracing::warn!(task = %job.id.0, error = %e, "clustering task state not saved");
        }
    }

    /// Clusters a tenant's pending candidates; returns the number of candidates absorbed.
    async fn run_cluster(&self, job: &JobRow) -> Result<i64> {
        let tenant: TenantId = job.tenant_id.into_id();
        let threshold = job.payload.0["threshold"]
            .as_f64()
            .filter(|t| *t > 0.0 && *t <= 1.0)
            .unwrap_or(DEFAULT_THRESHOLD);
        let summaries: Vec<Summary> = with_conn!(&self.db, conn => {
            dc::table
                .filter(dc::tenant_id.eq(Id(tenant.0)))
                .filter(dc::status.eq(PENDING))
                .order(dc::id.asc())
                .select((dc::id, dc::name))
                .load(conn)
                .await
                .db()
        })?;
        jobs::heartbeat(&self.db, job.id, 0.1, Some(json!({"merged": 0})), lease()).await?;
        let names: Vec<String> = summaries.iter().map(|(_, n)| n.clone()).collect();
        let mut computing =
            tokio::task::spawn_blocking(move || similarity::groups(&names, threshold));
        // The comparison of every pair can outlast the lease: keep renewing it meanwhile, so
        // that no other instance takes over a task whose instance is alive.
        let groups = loop {
            tokio::select! {
                done = &mut computing => break done,
                _ = tokio::time::sleep(REPORT_EVERY) => {
                    jobs::heartbeat(&self.db, job.id, 0.1, Some(json!({"merged": 0})), lease())
                        .await?;
                }
            }
        }
        .map_err(|e| Error::internal_msg(format!("clustering computation failed: {e}")))?;
        let groups: Vec<Vec<Id>> = groups
            .into_iter()
            .map(|g| g.into_iter().map(|i| summaries[i].0).collect())
            .collect();
        jobs::heartbeat(&self.db, job.id, 0.5, Some(json!({"merged": 0})), lease()).await?;
        let mut merged = 0i64;
        let mut reported = Instant::now();
        let count = groups.len().max(1) as f64;
        for (done, ids) in groups.iter().enumerate() {
            merged += self.merge_group(tenant, ids).await?;
            if reported.elapsed() >= REPORT_EVERY {
                reported = Instant::now();
                let progress = 0.5 + 0.49 * (done + 1) as f64 / count;
                jobs::heartbeat(
                    &self.db,
                    job.id,
                    progress,
                    Some(json!({"merged": merged})),
                    lease(),
                )
                .await?;
            }
        }
        Ok(merged)
    }

    /// Merges one group into its survivor (most events, then earliest `first_seen`), retrying
    /// when a member changed meanwhile. Members no longer pending are left out.
    async fn merge_group(&self, tenant: TenantId, ids: &[Id]) -> Result<i64> {
        for attempt in 1..=GROUP_ATTEMPTS {
            let mut rows = self.pending_rows(tenant, ids).await?;
            if rows.len() < 2 {
                return Ok(0);
            }
            rows.sort_by(|a, b| {
                b.event_count
                    .cmp(&a.event_count)
                    .then(a.first_seen.cmp(&b.first_seen))
                    .then(a.id.0.cmp(&b.id.0))
            });
            let absorbed = rows.split_off(1);
            let Some(mut survivor) = rows.pop() else {
                return Ok(0);
            };
            let seen = survivor.event_count;
            survivor.fold(&absorbed);
            match self.save_merge(&survivor, seen, &absorbed).await {
                Ok(GroupOutcome::Merged(n)) => return Ok(n),
                Ok(GroupOutcome::Changed) => continue,
                // A deadlock with a concurrent writer is retried like a change.
                Err(e) if e.kind == ErrorKind::Internal && attempt < GROUP_ATTEMPTS => {
                    tracing::debug!(error = %e, "merging a group failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
        tracing::info!(
            candidates = ids.len(),
            "a group kept changing during clustering; left for the next run"
        );
        Ok(0)
    }

    /// The pending candidates among `ids`.
    async fn pending_rows(&self, tenant: TenantId, ids: &[Id]) -> Result<Vec<CandidateRow>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(LOOKUP_CHUNK) {
            let chunk = chunk.to_vec();
            let rows: Vec<CandidateRow> = with_conn!(&self.db, conn => {
                dc::table
                    .filter(dc::tenant_id.eq(Id(tenant.0)))
                    .filter(dc::status.eq(PENDING))
                    .filter(dc::id.eq_any(chunk))
                    .select(CandidateRow::as_select())
                    .load(conn)
                    .await
                    .db()
            })?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// In one transaction: deletes the absorbed candidates (set-based, checking that none
    /// changed since it was read) and saves the survivor (also unchanged and still pending).
    async fn save_merge(
        &self,
        survivor: &CandidateRow,
        survivor_seen: i64,
        absorbed: &[CandidateRow],
    ) -> Result<GroupOutcome> {
        let expected: Vec<(Id, i64)> = absorbed.iter().map(|r| (r.id, r.event_count)).collect();
        let ids: Vec<Id> = expected.iter().map(|(id, _)| *id).collect();
        let expected = &expected;
        let result = with_conn!(&self.db, conn => {
            let ids = ids.clone();
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    let deleted: Vec<(Id, i64)> = diesel::delete(
                        dc::table
                            .filter(dc::id.eq_any(ids))
                            .filter(dc::status.eq(PENDING)),
                    )
                    .returning((dc::id, dc::event_count))
                    .get_results(conn)
                    .await?;
                    let unchanged = deleted.len() == expected.len()
                        && deleted.iter().all(|d| expected.contains(d));
                    if !unchanged {
                        return Err(diesel::result::Error::RollbackTransaction);
                    }
                    let saved = diesel::update(
                        dc::table
                            .filter(dc::id.eq(survivor.id))
                            .filter(dc::status.eq(PENDING))
                            .filter(dc::event_count.eq(survivor_seen)),
                    )
                    .set(survivor)
                    .execute(conn)
                    .await?;
                    if saved != 1 {
                        return Err(diesel::result::Error::RollbackTransaction);
                    }
                    Ok(deleted.len() as i64)
                }
                .scope_boxed()
            })
            .await
        });
        match result {
            Ok(n) => Ok(GroupOutcome::Merged(n)),
            Err(diesel::result::Error::RollbackTransaction) => Ok(GroupOutcome::Changed),
            Err(e) => Err(e).db(),
        }
    }
}
