//! Training tasks and the model store, shared by every trainable detector (anomaly, guard).
//! Generic: no domain rules here; a detector plugs in a [`Trainer`]. Decision record:
//! `docs/adr/0003-training-tasks-and-model-store.md`.
//!
//! # Model store
//! - Every trained model is a row of `model_versions` keyed by (tenant, detector, version):
//!   the bytes (`bytea`/`BLOB`), `feature_version`, `library_version`, `metrics` (JSON),
//!   `sample_count`, the producing `task_id` and `created_at`. Versions count from 1 per
//!   (tenant, detector) and are never overwritten; the newest [`KEPT_VERSIONS`] are kept.
//! - `model_active` holds one pointer per (tenant, detector). [`active`] reads the active
//!   version with its bytes, [`versions`] lists metadata (no bytes), [`load`] reads one version,
//!   [`rollback`] moves the pointer to any stored version (404 unknown, 409 while training).
//! - Every change of the pointer publishes [`ModelChange`] on the bus channel
//!   [`MODEL_CHANGES`]; each instance subscribes and reloads that (tenant, detector).
//!
//! # Training tasks
//! - A task is a row of the leased job queue (`jobs`, see `jobs.rs`) of kind
//!   `train:<detector>` ([`kind`]). [`enqueue`] answers 409 when a task of that
//!   (tenant, detector) is queued or running (a partial unique index makes this race-free).
//! - [`Runner`] (one per instance, started by the server's background workers) claims
//!   tasks of its registered detectors with a lease; of several instances, one wins. While
//!   the trainer works, a watcher renews the lease and writes progress every 200 ms and sets
//!   the cancel flag when the row is no longer running under this instance (cancelled, or
//!   taken over). A task whose instance died (lease expired) is claimed again by another
//!   instance and trained from the start (up to `jobs::MAX_ATTEMPTS`).
//! - The trainer reports progress and observes cancellation through [`TrainHandle`]
//!   (`progress(p)` returns `Err` once cancelled; call it at least every ~200 ms of work;
//!   it is cheap: two atomics). [`cancel`] marks the task `cancelled` at once; the work stops
//!   within the watcher period plus the trainer's check interval (well under a second).
//! - On success the version (previous highest + 1) is inserted and the pointer flipped in ONE
//!   transaction that first completes the task conditionally (still running, still owned by
//!   this instance). A cancelled, failed, taken-over or killed task therefore never leaves a
//!   model active, and the previously active version keeps serving meanwhile.
//! - States (contract 23): `queued` -> `running` -> `completed` | `failed` | `cancelled`.
//!   [`Task`] is the contract's task object (`kind` = the detector name).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::scoped_futures::ScopedFutureExt;
use diesel_async::{AsyncConnection, RunQueryDsl};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use steward_core::bus::EventBus;
use steward_core::{clock, Error, Result, TenantId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::jobs::JobRow;
use crate::schema::{jobs, model_active, model_versions};
use crate::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

/// Model versions kept per tenant and detector: the newest ones; older versions are deleted
/// when a training completes (a rollback reaches back this far).
pub const KEPT_VERSIONS: i32 = 20;

/// Bus channel of active-version changes ([`ModelChange`] JSON).
pub const MODEL_CHANGES: &str = "model-changes";

/// How often the watcher renews the lease, writes progress and looks for a cancel.
pub const WATCH_PERIOD: Duration = Duration::from_millis(200);

/// The job kind of a detector's training tasks.
pub fn kind(detector: &str) -> String {
    format!("train:{detector}")
}

/// The notice published on [`MODEL_CHANGES`] when a (tenant, detector) gets a new active
/// version (training completed or rollback).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelChange {
    pub tenant_id: Uuid,
    pub detector: String,
    pub version: i32,
}

/// The contract's task object (section 15.3).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Task {
    pub task_id: Uuid,
    pub kind: String,
    #[schema(schema_with = crate::jobs::statuses)]
    pub status: String,
    pub progress: f64,
    pub model_version: Option<i32>,
    pub error: Option<String>,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub created_at: OffsetDateTime,
    #[serde(with = "steward_core::clock::serde_ts::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "steward_core::clock::serde_ts::option")]
    pub finished_at: Option<OffsetDateTime>,
}

impl Task {
    fn from_row(row: JobRow) -> Task {
        let detector = row
            .kind
            .strip_prefix("train:")
            .unwrap_or(&row.kind)
            .to_owned();
        let model_version = row
            .result
            .as_ref()
            .and_then(|r| r.0.get("model_version"))
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok());
        let progress = if row.status == "completed" {
            1.0
        } else {
            row.progress.clamp(0.0, 1.0)
        };
        Task {
            task_id: row.id.0,
            kind: detector,
            status: row.status,
            progress,
            model_version: if model_version.is_some() && row.result.is_some() {
                model_version
            } else {
                None
            },
            error: row.error,
            created_at: row.created_at.0,
            started_at: row.started_at.map(|t| t.0),
            finished_at: row.finished_at.map(|t| t.0),
        }
    }

    /// Queued or running.
    pub fn is_active(&self) -> bool {
        self.status == "queued" || self.status == "running"
    }
}

/// A stored version's metadata (no bytes).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct VersionInfo {
    pub version: i32,
    pub feature_version: String,
    pub library_version: String,
    pub metrics: Value,
    pub sample_count: i64,
    pub task_id: Option<Uuid>,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub created_at: OffsetDateTime,
    pub active: bool,
}

/// One row of a detector's `versions` list (anomaly and guard alike).
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct VersionView {
    pub version: i32,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub created_at: OffsetDateTime,
    pub sample_count: i64,
    pub contamination: Option<f64>,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub active: bool,
}

/// A page of the tenant's versions of `detector`, version descending (`skip`/`offset`/`limit`
/// as every list).
pub async fn version_page(
    db: &DbPool,
    tenant: TenantId,
    detector: &str,
    pairs: &[(String, String)],
) -> Result<steward_core::Page<VersionView>> {
    let mut q = steward_core::validate::Query::new(pairs);
    let page = steward_core::page::PageRequest::from_query(&mut q, steward_core::page::MAX_LIMIT)?;
    let all = versions(db, tenant, detector).await?;
    let total = all.len() as i64;
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let items = all
        .into_iter()
        .skip(usize::try_from(page.skip).unwrap_or(usize::MAX))
        .take(usize::try_from(page.limit).unwrap_or(0))
        .map(|v| VersionView {
            version: v.version,
            created_at: v.created_at,
            sample_count: v.sample_count,
            contamination: num(&v.metrics, "contamination"),
            precision: num(&v.metrics, "precision"),
            recall: num(&v.metrics, "recall"),
            active: v.active,
        })
        .collect();
    Ok(steward_core::Page::new(items, total, page))
}

/// A stored version with its bytes.
#[derive(Clone, Debug)]
pub struct StoredModel {
    pub tenant_id: Uuid,
    pub detector: String,
    pub info: VersionInfo,
    pub bytes: Vec<u8>,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = model_versions)]
struct VersionRow {
    tenant_id: Id,
    detector: String,
    version: i32,
    model: Vec<u8>,
    feature_version: String,
    library_version: String,
    metrics: Json,
    sample_count: i64,
    task_id: Option<Id>,
    created_at: Ts,
}

impl VersionRow {
    fn into_stored(self, active: Option<i32>) -> StoredModel {
        StoredModel {
            tenant_id: self.tenant_id.0,
            detector: self.detector,
            info: VersionInfo {
                version: self.version,
                feature_version: self.feature_version,
                library_version: self.library_version,
                metrics: self.metrics.0,
                sample_count: self.sample_count,
                task_id: self.task_id.map(|i| i.0),
                created_at: self.created_at.0,
                active: active == Some(self.version),
            },
            bytes: self.model,
        }
    }
}

/// What a trainer produces.
#[derive(Clone, Debug)]
pub struct TrainedModel {
    pub bytes: Vec<u8>,
    pub feature_version: String,
    pub library_version: String,
    pub metrics: Value,
    pub sample_count: i64,
}

/// Progress and cancellation of one running task, shared with the trainer (cheap to clone,
/// usable from blocking code).
#[derive(Clone, Debug, Default)]
pub struct TrainHandle {
    progress: Arc<AtomicU64>,
    cancelled: Arc<AtomicBool>,
}

impl TrainHandle {
    /// Records progress in [0, 1]; `Err` (kind conflict, "cancelled") once the task was
    /// cancelled or lost: the trainer must stop and return that error.
    pub fn progress(&self, p: f64) -> Result<()> {
        let p = if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.progress.store(p.to_bits(), Ordering::Relaxed);
        self.check()
    }

    /// `Err` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::conflict("the training task was cancelled"))
        } else {
            Ok(())
        }
    }

    pub fn is_cancelled(&self) -> bool {
        AtomicBool::load(&self.cancelled, Ordering::Relaxed)
    }

    /// Sets the cancel flag (the runner does this; tests may too).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub fn current(&self) -> f64 {
        f64::from_bits(AtomicU64::load(&self.progress, Ordering::Relaxed))
    }
}

/// What a trainer gets for one task.
#[derive(Clone, Debug)]
pub struct TrainCtx {
    pub tenant: TenantId,
    pub task_id: Uuid,
    pub detector: String,
    /// The payload given to [`enqueue`].
    pub payload: Value,
    pub handle: TrainHandle,
}

/// A detector's training. Registered with the [`Runner`] under its detector name.
#[async_trait]
pub trait Trainer: Send + Sync + 'static {
    /// Trains a model for `ctx.tenant`. Calls `ctx.handle.progress(p)?` at least every
    /// ~200 ms of work so that a cancel stops it within a second.
    async fn train(&self, ctx: TrainCtx) -> Result<TrainedModel>;
}

fn now() -> Ts {
    Ts(clock::now())
}

/// Queues a training task; 409 when one of this (tenant, detector) is queued or running.
pub async fn enqueue(
    db: &DbPool,
    tenant: TenantId,
    detector: &str,
    payload: Value,
) -> Result<Task> {
    if active_task(db, tenant, detector).await?.is_some() {
        return Err(Error::conflict(format!(
            "a {detector} training task is already queued or running"
        )));
    }
    match crate::jobs::enqueue(db, tenant, &kind(detector), payload).await {
        Ok(row) => Ok(Task::from_row(row)),
        Err(e) if e.kind == steward_core::ErrorKind::Conflict => Err(Error::conflict(format!(
            "a {detector} training task is already queued or running"
        ))),
        Err(e) => Err(e),
    }
}

/// A tenant's task of this detector; `None` when unknown or another tenant's.
pub async fn task(db: &DbPool, tenant: TenantId, detector: &str, id: Uuid) -> Result<Option<Task>> {
    Ok(crate::jobs::get(db, tenant, &kind(detector), id)
        .await?
        .map(Task::from_row))
}

/// The tenant's most recent task of this detector.
pub async fn latest_task(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Option<Task>> {
    let k = kind(detector);
    let row: Option<JobRow> = with_conn!(db, conn => {
        jobs::table
            .filter(jobs::tenant_id.eq(Id(tenant.0)))
            .filter(jobs::kind.eq(&k))
            .order((jobs::created_at.desc(), jobs::id.desc()))
            .select(JobRow::as_select())
            .first(conn)
            .await
            .optional()
            .db()
    })?;
    Ok(row.map(Task::from_row))
}

/// The queued or running task of this (tenant, detector), if any.
pub async fn active_task(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Option<Task>> {
    let k = kind(detector);
    let row: Option<JobRow> = with_conn!(db, conn => {
        jobs::table
            .filter(jobs::tenant_id.eq(Id(tenant.0)))
            .filter(jobs::kind.eq(&k))
            .filter(jobs::status.eq_any(["queued", "running"]))
            .select(JobRow::as_select())
            .first(conn)
            .await
            .optional()
            .db()
    })?;
    Ok(row.map(Task::from_row))
}

/// Cancels the queued or running task of this (tenant, detector): 200 the cancelled task,
/// 409 when there is none. The runner notices within [`WATCH_PERIOD`] and stops the work.
pub async fn cancel(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Task> {
    let k = kind(detector);
    let t = now();
    let Some(current) = active_task(db, tenant, detector).await? else {
        return Err(Error::conflict(format!(
            "no {detector} training task is queued or running"
        )));
    };
    let id = Id(current.task_id);
    let changed = with_conn!(db, conn => {
        diesel::update(
            jobs::table
                .filter(jobs::id.eq(id))
                .filter(jobs::kind.eq(&k))
                .filter(jobs::status.eq_any(["queued", "running"])),
        )
        .set((
            jobs::status.eq("cancelled"),
            jobs::finished_at.eq(Some(t)),
            jobs::lease_owner.eq(None::<String>),
            jobs::lease_expires_at.eq(None::<Ts>),
        ))
        .execute(conn)
        .await
        .db()
    })?;
    if changed == 0 {
        return Err(Error::conflict(format!(
            "no {detector} training task is queued or running"
        )));
    }
    task(db, tenant, detector, current.task_id)
        .await?
        .ok_or_else(|| Error::internal_msg("the cancelled task vanished"))
}

/// The active version number of a (tenant, detector).
pub async fn active_version(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Option<i32>> {
    let d = detector.to_owned();
    with_conn!(db, conn => {
        model_active::table
            .filter(model_active::tenant_id.eq(Id(tenant.0)))
            .filter(model_active::detector.eq(&d))
            .select(model_active::version)
            .first::<i32>(conn)
            .await
            .optional()
            .db()
    })
}

/// Every stored version's metadata, version descending.
pub async fn versions(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Vec<VersionInfo>> {
    let d = detector.to_owned();
    let active = active_version(db, tenant, detector).await?;
    #[allow(clippy::type_complexity)]
    let rows: Vec<(i32, String, String, Json, i64, Option<Id>, Ts)> = with_conn!(db, conn => {
        model_versions::table
            .filter(model_versions::tenant_id.eq(Id(tenant.0)))
            .filter(model_versions::detector.eq(&d))
            .order(model_versions::version.desc())
            .select((
                model_versions::version,
                model_versions::feature_version,
                model_versions::library_version,
                model_versions::metrics,
                model_versions::sample_count,
                model_versions::task_id,
                model_versions::created_at,
            ))
            .load(conn)
            .await
            .db()
    })?;
    Ok(rows
        .into_iter()
        .map(
            |(version, fv, lv, metrics, sample_count, task_id, created_at)| VersionInfo {
                version,
                feature_version: fv,
                library_version: lv,
                metrics: metrics.0,
                sample_count,
                task_id: task_id.map(|i| i.0),
                created_at: created_at.0,
                active: active == Some(version),
            },
        )
        .collect())
}

/// One stored version with its bytes.
pub async fn load(
    db: &DbPool,
    tenant: TenantId,
    detector: &str,
    version: i32,
) -> Result<Option<StoredModel>> {
    let d = detector.to_owned();
    let active = active_version(db, tenant, detector).await?;
    let row: Option<VersionRow> = with_conn!(db, conn => {
        model_versions::table
            .filter(model_versions::tenant_id.eq(Id(tenant.0)))
            .filter(model_versions::detector.eq(&d))
            .filter(model_versions::version.eq(version))
            .select(VersionRow::as_select())
            .first(conn)
            .await
            .optional()
            .db()
    })?;
    Ok(row.map(|r| r.into_stored(active)))
}

/// The active version with its bytes.
pub async fn active(db: &DbPool, tenant: TenantId, detector: &str) -> Result<Option<StoredModel>> {
    match active_version(db, tenant, detector).await? {
        Some(v) => load(db, tenant, detector, v).await,
        None => Ok(None),
    }
}

/// The active model of every tenant for a detector (an instance's start-up load).
pub async fn all_active(db: &DbPool, detector: &str) -> Result<Vec<StoredModel>> {
    let d = detector.to_owned();
    let pointers: Vec<(Id, i32)> = with_conn!(db, conn => {
        model_active::table
            .filter(model_active::detector.eq(&d))
            .select((model_active::tenant_id, model_active::version))
            .load(conn)
            .await
            .db()
    })?;
    let mut out = Vec::with_capacity(pointers.len());
    for (tenant, version) in pointers {
        if let Some(m) = load(db, TenantId(tenant.0), detector, version).await? {
            out.push(m);
        }
    }
    Ok(out)
}

async fn notify(bus: &dyn EventBus, change: &ModelChange) {
    match serde_json::to_vec(change) {
        Ok(bytes) => {
            if let Err(e) = bus.publish(MODEL_CHANGES, &bytes).await {
                tracing::warn!(error = %e, "model change notice not published");
            }
        }
        Err(e) => tracing::warn!(error = %e, "model change notice not encoded"),
    }
}

/// Makes a stored version active: 404 unknown version, 409 while a task is queued or
/// running. Publishes [`ModelChange`].
pub async fn rollback(
    db: &DbPool,
    bus: &dyn EventBus,
    tenant: TenantId,
    detector: &str,
    version: i32,
) -> Result<StoredModel> {
    let Some(model) = load(db, tenant, detector, version).await? else {
        return Err(Error::not_found(format!(
            "{detector} model version {version} was not found"
        )));
    };
    if active_task(db, tenant, detector).await?.is_some() {
        return Err(Error::conflict(format!(
            "a {detector} training task is queued or running"
        )));
    }
    let d = detector.to_owned();
    let t = now();
    with_conn!(db, conn => {
        diesel::insert_into(model_active::table)
            .values((
                model_active::tenant_id.eq(Id(tenant.0)),
                model_active::detector.eq(&d),
                model_active::version.eq(version),
                model_active::updated_at.eq(t),
            ))
            .on_conflict((model_active::tenant_id, model_active::detector))
            .do_update()
            .set((model_active::version.eq(version), model_active::updated_at.eq(t)))
            .execute(conn)
            .await
            .db()
    })?;
    notify(
        bus,
        &ModelChange {
            tenant_id: tenant.0,
            detector: detector.to_owned(),
            version,
        },
    )
    .await;
    let mut model = model;
    model.info.active = true;
    Ok(model)
}

/// Subscribes to [`MODEL_CHANGES`] and calls `on_change` for each notice of `detector`; runs
/// until the task is aborted. Whenever notices may have been missed (lost subscription, its
/// renewal, a lag), it calls `on_gap`, which reloads every tenant's active model.
pub async fn listen(
    bus: Arc<dyn EventBus>,
    detector: &str,
    on_change: impl Fn(ModelChange) + Send + Sync,
    on_gap: impl Fn() + Send + Sync,
) {
    let mut first = true;
    loop {
        let mut rx = match bus.subscribe(MODEL_CHANGES).await {
            Ok(rx) => rx,
            Err(e) => {
                tracing::warn!(error = %e, "model change subscription failed; retrying");
                first = false;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if !first {
            on_gap();
        }
        first = false;
        loop {
            match rx.recv().await {
                Ok(bytes) => {
                    if let Ok(change) = serde_json::from_slice::<ModelChange>(&bytes) {
                        if change.detector == detector {
                            on_change(change);
                        }
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => on_gap(),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Claims and runs training tasks of its registered detectors (one per instance).
#[derive(Clone)]
pub struct Runner {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    trainers: Arc<HashMap<String, Arc<dyn Trainer>>>,
    owner: String,
    lease: Duration,
    poll: Duration,
}

/// What one [`Runner::run_once`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// No task to claim.
    Idle,
    /// The task completed with this version active.
    Completed { task_id: Uuid, version: i32 },
    /// The task failed (or was cancelled/taken over: `cancelled`).
    Stopped {
        task_id: Uuid,
        cancelled: bool,
        error: String,
    },
}

impl Runner {
    /// A runner with this instance's id as lease owner, a 10 s lease (`JOB_LEASE_SECONDS`
    /// when set) and a 500 ms poll.
    pub fn new(db: DbPool, bus: Arc<dyn EventBus>) -> Runner {
        Runner {
            db,
            bus,
            trainers: Arc::new(HashMap::new()),
            owner: crate::schedule::instance_id(),
            lease: crate::jobs::lease(Duration::from_secs(10)),
            poll: Duration::from_millis(500),
        }
    }

    /// Registers the trainer of a detector.
    pub fn register(mut self, detector: &str, trainer: Arc<dyn Trainer>) -> Runner {
        let mut map = (*self.trainers).clone();
        map.insert(detector.to_owned(), trainer);
        self.trainers = Arc::new(map);
        self
    }

    /// Another lease owner name (tests simulate several instances in one process).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Runner {
        self.owner = owner.into();
        self
    }

    pub fn with_lease(mut self, lease: Duration) -> Runner {
        self.lease = lease;
        self
    }

    pub fn with_poll(mut self, poll: Duration) -> Runner {
        self.poll = poll;
        self
    }

    /// Polls for tasks forever (the server's background worker).
    pub async fn run(self) {
        loop {
            match self.run_once().await {
                Ok(Outcome::Idle) => tokio::time::sleep(self.poll).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "training runner");
                    tokio::time::sleep(self.poll).await;
                }
            }
        }
    }

    fn kinds(&self) -> Vec<String> {
        self.trainers.keys().map(|d| kind(d)).collect()
    }

    fn lease_until(&self) -> Ts {
        Ts(clock::now()
            + time::Duration::try_from(self.lease).unwrap_or(time::Duration::SECOND * 10))
    }

    /// Claims one runnable task (queued, or running with an expired lease) under this
    /// runner's owner; of racing instances one wins.
    pub async fn claim(&self) -> Result<Option<JobRow>> {
        crate::jobs::claim_kinds(
            &self.db,
            &self.kinds(),
            &self.owner,
            self.lease,
            "the training task was interrupted too many times",
        )
        .await
    }

    /// Renews the lease and writes progress; `false` when the row is no longer running
    /// under this owner (cancelled or taken over).
    async fn renew(&self, id: Id, progress: f64) -> Result<bool> {
        let until = self.lease_until();
        let owner = self.owner.clone();
        let changed = with_conn!(&self.db, conn => {
            diesel::update(
                jobs::table
                    .filter(jobs::id.eq(id))
                    .filter(jobs::status.eq("running"))
                    .filter(jobs::lease_owner.eq(owner)),
            )
            .set((
                jobs::progress.eq(progress.clamp(0.0, 0.99)),
                jobs::lease_expires_at.eq(Some(until)),
            ))
            .execute(conn)
            .await
            .db()
        })?;
        Ok(changed == 1)
    }

    /// Marks the task failed if this owner still runs it.
    async fn finish_failed(&self, id: Id, error: &str) -> Result<()> {
        let t = now();
        let msg = error.to_owned();
        with_conn!(&self.db, conn => {
            diesel::update(
                jobs::table
                    .filter(jobs::id.eq(id))
                    .filter(jobs::status.eq_any(["queued", "running"])),
            )
            .set((
                jobs::status.eq("failed"),
                jobs::error.eq(Some(msg)),
                jobs::finished_at.eq(Some(t)),
                jobs::lease_owner.eq(None::<String>),
                jobs::lease_expires_at.eq(None::<Ts>),
            ))
            .execute(conn)
            .await
            .db()
        })?;
        Ok(())
    }

    /// Claims one task and runs it to its end.
    pub async fn run_once(&self) -> Result<Outcome> {
        let Some(job) = self.claim().await? else {
            return Ok(Outcome::Idle);
        };
        self.run_job(job).await
    }

    /// Runs a claimed task: the trainer, a watcher (lease, progress, cancel), then the
    /// conditional completion with the version insert and the pointer flip in one transaction.
    pub async fn run_job(&self, job: JobRow) -> Result<Outcome> {
        let detector = job
            .kind
            .strip_prefix("train:")
            .unwrap_or(&job.kind)
            .to_owned();
        let Some(trainer) = self.trainers.get(&detector).cloned() else {
            return Err(Error::internal_msg(format!("no trainer for {detector}")));
        };
        let handle = TrainHandle::default();
        let ctx = TrainCtx {
            tenant: TenantId(job.tenant_id.0),
            task_id: job.id.0,
            detector: detector.clone(),
            payload: job.payload.0.clone(),
            handle: handle.clone(),
        };
        let mut work = tokio::spawn(async move { trainer.train(ctx).await });
        let mut tick = tokio::time::interval(WATCH_PERIOD);
        let result = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = tick.tick() => {
                    match self.renew(job.id, handle.current()).await {
                        Ok(true) => {}
                        Ok(false) => handle.cancel(),
                        Err(e) => tracing::debug!(error = %e, "training lease renewal failed"),
                    }
                }
            }
        };
        let trained = match result {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return self.stopped(job.id, &handle, e.to_string()).await,
            Err(join) => {
                return self
                    .stopped(job.id, &handle, format!("the trainer panicked: {join}"))
                    .await
            }
        };
        if handle.is_cancelled() {
            return self
                .stopped(job.id, &handle, "the training task was cancelled".into())
                .await;
        }
        match self.commit(&job, &detector, trained).await? {
            Some(version) => {
                notify(
                    self.bus.as_ref(),
                    &ModelChange {
                        tenant_id: job.tenant_id.0,
                        detector,
                        version,
                    },
                )
                .await;
                Ok(Outcome::Completed {
                    task_id: job.id.0,
                    version,
                })
            }
            None => Ok(Outcome::Stopped {
                task_id: job.id.0,
                cancelled: true,
                error: "the task was cancelled or taken over before it completed".into(),
            }),
        }
    }

    async fn stopped(&self, id: Id, handle: &TrainHandle, error: String) -> Result<Outcome> {
        if handle.is_cancelled() {
            // Cancelled (the row says so already) or taken over: leave the row alone.
            return Ok(Outcome::Stopped {
                task_id: id.0,
                cancelled: true,
                error,
            });
        }
        self.finish_failed(id, &error).await?;
        Ok(Outcome::Stopped {
            task_id: id.0,
            cancelled: false,
            error,
        })
    }

    /// One transaction: complete the task if still running under this owner, insert the next
    /// version, flip the pointer. `None` (nothing written) when the task was lost.
    async fn commit(&self, job: &JobRow, detector: &str, m: TrainedModel) -> Result<Option<i32>> {
        let owner = self.owner.clone();
        let id = job.id;
        let tenant = job.tenant_id;
        let t = now();
        let d = detector.to_owned();
        macro_rules! tx {
            ($pool:expr) => {{
                // Back to the pool only when the transaction has ended (`pool::Lease`).
                let mut lease = crate::pool::Lease::checkout($pool).await?;
                let result = lease.conn()?.transaction::<Option<i32>, diesel::result::Error, _>(|conn| {
                    async move {
                        // The conditional write first: it takes the row lock (PostgreSQL) or
                        // the write lock (SQLite) for the rest of the transaction.
                        let won = diesel::update(
                            jobs::table
                                .filter(jobs::id.eq(id))
                                .filter(jobs::status.eq("running"))
                                .filter(jobs::lease_owner.eq(&owner)),
                        )
                        .set(jobs::status.eq("running"))
                        .execute(conn)
                        .await?;
                        if won != 1 {
                            return Ok(None);
                        }
                        let max: Option<i32> = model_versions::table
                            .filter(model_versions::tenant_id.eq(tenant))
                            .filter(model_versions::detector.eq(&d))
                            .select(diesel::dsl::max(model_versions::version))
                            .first(conn)
                            .await?;
                        let version = max.unwrap_or(0) + 1;
                        diesel::insert_into(model_versions::table)
                            .values(VersionRow {
                                tenant_id: tenant,
                                detector: d.clone(),
                                version,
                                model: m.bytes,
                                feature_version: m.feature_version,
                                library_version: m.library_version,
                                metrics: Json(m.metrics),
                                sample_count: m.sample_count,
                                task_id: Some(id),
                                created_at: t,
                            })
                            .execute(conn)
                            .await?;
                        // Only the newest versions are kept (each is a whole model, and
                        // automatic retraining adds one again and again).
                        diesel::delete(
                            model_versions::table
                                .filter(model_versions::tenant_id.eq(tenant))
                                .filter(model_versions::detector.eq(&d))
                                .filter(model_versions::version.le(version - KEPT_VERSIONS)),
                        )
                        .execute(conn)
                        .await?;
                        diesel::insert_into(model_active::table)
                            .values((
                                model_active::tenant_id.eq(tenant),
                                model_active::detector.eq(&d),
                                model_active::version.eq(version),
                                model_active::updated_at.eq(t),
                            ))
                            .on_conflict((model_active::tenant_id, model_active::detector))
                            .do_update()
                            .set((
                                model_active::version.eq(version),
                                model_active::updated_at.eq(t),
                            ))
                            .execute(conn)
                            .await?;
                        diesel::update(jobs::table.filter(jobs::id.eq(id)))
                            .set((
                                jobs::status.eq("completed"),
                                jobs::progress.eq(1.0),
                                jobs::result.eq(Some(Json(json!({ "model_version": version })))),
                                jobs::finished_at.eq(Some(t)),
                                jobs::lease_owner.eq(None::<String>),
                                jobs::lease_expires_at.eq(None::<Ts>),
                            ))
                            .execute(conn)
                            .await?;
                        Ok(Some(version))
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
            DbPool::Pg(pool) => tx!(pool),
            DbPool::Sqlite(pool) => tx!(pool),
        }
    }
}
