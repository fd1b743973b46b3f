//! The anomaly detector service (contract 15.3): status, metrics, versions, training through
//! the shared training mechanism (`steward_store::training`), cancel, rollback, model
//! loading per tenant (active version, reloaded on the bus notice), auto-retrain.
//! The model itself is behind [`ModelCodec`] (an adapter over the model types).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;
use serde_json::{json, Value};
use steward_core::page::Page;
use steward_core::{Error, ErrorKind, EventBus, Op, Principal, Result, TenantId};
use steward_store::schema::audit_entries as ae;
use steward_store::training::{
    self, StoredModel, Task, TrainCtx, TrainHandle, TrainedModel, Trainer,
};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};
use time::OffsetDateTime;

use crate::reports::Reports;
use crate::scorer::{LoadedModel, Scorer};

/// The detector name in the model store and the task `kind`.
pub const DETECTOR: &str = "anomaly";
/// Most recent audit entries used for training.
pub const MAX_TRAINING_ROWS: i64 = 100_000;
/// The default of the most bytes of audit entries (their strings and JSON members, as text)
/// a training reads (`ANOMALY_TRAINING_MAX_BYTES`): the newest entries up to this size, so
/// that a history of large entries costs a bounded reading (100,000 ordinary entries of
/// about 1 KiB fit).
pub const MAX_TRAINING_BYTES: usize = 128 << 20;
/// Audit entries read per query while the training set is gathered.
const TRAINING_PAGE: i64 = 256;

/// The size of a JSON value as text, about (strings and numbers by length, a few bytes per
/// member): what a training's byte budget counts.
fn json_bytes(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| json_bytes(x) + 1).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, x)| k.len() + 4 + json_bytes(x))
                .sum::<usize>()
        }
    }
}

/// Samples since a tenant's last automatic retraining, and when that one started.
type NewSamples = (u64, Option<Instant>);

/// Least time between two automatic retrainings of a tenant (in one instance).
pub const AUTO_RETRAIN_MIN_INTERVAL: Duration = Duration::from_secs(600);

/// Trains and loads models (implemented over the model crate's types).
pub trait ModelCodec: Send + Sync + 'static {
    /// Trains on events; `labels` (same length) for the supervised case. Calls
    /// `handle.progress(p)?` regularly so a cancel stops the work within a second.
    fn train(
        &self,
        events: &[Value],
        labels: Option<&[bool]>,
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel>;
    /// Trains on all samples, `labels[i]` being the label of event `i` when it has one.
    /// The default is the contract's rule (15.3): the supervised model on the labelled
    /// samples when at least 20 with both labels exist, else the unsupervised one on all.
    fn train_mixed(
        &self,
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel> {
        let (ev, ls): (Vec<Value>, Vec<bool>) = events
            .iter()
            .zip(labels)
            .filter_map(|(e, l)| l.map(|l| (e.clone(), l)))
            .unzip();
        let positives = ls.iter().filter(|l| **l).count();
        if ls.len() >= 20 && positives > 0 && positives < ls.len() {
            self.train(&ev, Some(&ls), contamination, handle)
        } else {
            self.train(events, None, contamination, handle)
        }
    }
    /// Loads a stored version; refuses mismatched feature/library versions.
    fn load(&self, stored: &StoredModel) -> Result<Arc<dyn LoadedModel>>;
}

/// Detector settings.
#[derive(Clone, Debug)]
pub struct DetectorConfig {
    pub contamination: f64,
    pub min_training_samples: i64,
    pub auto_retrain_events: u64,
    pub onnx_loaded: bool,
    /// Most bytes of audit entries one training reads ([`MAX_TRAINING_BYTES`] by default).
    pub training_max_bytes: usize,
}

/// `GET /anomalies/detector/status`.
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct DetectorStatus {
    pub model_version: Option<i32>,
    pub backend: String,
    pub training_status: String,
    pub sample_count: i64,
    pub contamination: f64,
    pub onnx_loaded: bool,
    #[serde(with = "steward_core::clock::serde_ts::option")]
    pub last_trained_at: Option<OffsetDateTime>,
    pub min_training_samples: i64,
}

/// `GET /anomalies/detector/metrics`.
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct DetectorMetrics {
    pub model_version: Option<i32>,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    pub evaluated_samples: Option<i64>,
}

/// One row of `GET /anomalies/detector/versions` (shared with the guard detector).
pub use steward_store::training::VersionView;

/// The anomaly detector of every tenant.
#[derive(Clone)]
pub struct Detector {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    pub reports: Reports,
    pub scorer: Arc<Scorer>,
    codec: Arc<dyn ModelCodec>,
    config: DetectorConfig,
    /// New samples per tenant since the last auto-retrain.
    /// Per tenant: samples since the last automatic retraining, and when it started.
    new_samples: Arc<Mutex<HashMap<TenantId, NewSamples>>>,
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

impl Detector {
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        reports: Reports,
        scorer: Arc<Scorer>,
        codec: Arc<dyn ModelCodec>,
        config: DetectorConfig,
    ) -> Detector {
        Detector {
            db,
            bus,
            reports,
            scorer,
            codec,
            config,
            new_samples: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The trainer to register with the instance's training runner.
    pub fn trainer(&self) -> Arc<dyn Trainer> {
        Arc::new(AnomalyTrainer {
            detector: self.clone(),
        })
    }

    /// The tenant's audit entries with an agent id.
    async fn audit_samples(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            ae::table
                .filter(ae::tenant_id.eq(Id(tenant.0)))
                .filter(ae::agent_id.is_not_null())
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    /// Labelled samples plus audit entries with an agent id.
    pub async fn sample_count(&self, tenant: TenantId) -> Result<i64> {
        Ok(self.audit_samples(tenant).await? + self.reports.labelled_count(tenant).await?)
    }

    async fn status_of(&self, tenant: TenantId) -> Result<DetectorStatus> {
        let active = training::active_version(&self.db, tenant, DETECTOR).await?;
        let task = training::active_task(&self.db, tenant, DETECTOR).await?;
        let versions = training::versions(&self.db, tenant, DETECTOR).await?;
        let training_status = if task.is_some() {
            "training"
        } else if active.is_some() {
            "trained"
        } else {
            "untrained"
        };
        let backend = match active {
            None => "rules",
            Some(_) => match self.scorer.last_backend(tenant) {
                Some(b) if b != "rules" => b,
                _ => self.scorer.backend_name(),
            },
        };
        Ok(DetectorStatus {
            model_version: active,
            backend: backend.to_owned(),
            training_status: training_status.to_owned(),
            sample_count: self.sample_count(tenant).await?,
            contamination: self.config.contamination,
            onnx_loaded: self.config.onnx_loaded,
            last_trained_at: versions.iter().map(|v| v.created_at).max(),
            min_training_samples: self.config.min_training_samples,
        })
    }

    /// `GET /anomalies/detector/status`.
    pub async fn status(&self, p: &Principal) -> Result<DetectorStatus> {
        p.authorize(Op::AnomaliesRead)?;
        self.status_of(p.tenant).await
    }

    /// `GET /anomalies/detector/metrics`.
    pub async fn metrics(&self, p: &Principal) -> Result<DetectorMetrics> {
        p.authorize(Op::AnomaliesRead)?;
        let active = training::versions(&self.db, p.tenant, DETECTOR)
            .await?
            .into_iter()
            .find(|v| v.active);
        Ok(match active {
            None => DetectorMetrics {
                model_version: None,
                precision: None,
                recall: None,
                f1: None,
                evaluated_samples: None,
            },
            Some(v) => DetectorMetrics {
                model_version: Some(v.version),
                precision: num(&v.metrics, "precision"),
                recall: num(&v.metrics, "recall"),
                f1: num(&v.metrics, "f1"),
                evaluated_samples: v.metrics.get("evaluated_samples").and_then(Value::as_i64),
            },
        })
    }

    /// `GET /anomalies/detector/versions`, version descending.
    pub async fn versions(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<VersionView>> {
        p.authorize(Op::AnomaliesRead)?;
        training::version_page(&self.db, p.tenant, DETECTOR, pairs).await
    }

    /// Starts a task (the endpoint and auto-retrain).
    async fn start(&self, tenant: TenantId) -> Result<Task> {
        let samples = self.sample_count(tenant).await?;
        if samples < self.config.min_training_samples {
            return Err(Error::unprocessable(
                ErrorKind::InsufficientSamples,
                "samples",
                format!(
                    "{samples} samples; training needs at least {}",
                    self.config.min_training_samples
                ),
            ));
        }
        training::enqueue(&self.db, tenant, DETECTOR, json!({})).await
    }

    /// `POST /anomalies/detector/train` → 202 task.
    pub async fn train(&self, p: &Principal) -> Result<Task> {
        p.authorize(Op::AnomaliesManage)?;
        self.start(p.tenant).await
    }

    /// `GET /anomalies/detector/training-status/{task_id}`.
    pub async fn task(&self, p: &Principal, id: &str) -> Result<Task> {
        p.authorize(Op::AnomaliesRead)?;
        let not_found = || Error::not_found("the training task was not found");
        let id = uuid::Uuid::parse_str(id).map_err(|_| not_found())?;
        training::task(&self.db, p.tenant, DETECTOR, id)
            .await?
            .ok_or_else(not_found)
    }

    /// `GET /anomalies/detector/training/status`: the most recent task.
    pub async fn latest_task(&self, p: &Principal) -> Result<Task> {
        p.authorize(Op::AnomaliesRead)?;
        training::latest_task(&self.db, p.tenant, DETECTOR)
            .await?
            .ok_or_else(|| Error::not_found("the tenant never trained the anomaly detector"))
    }

    /// `DELETE /anomalies/detector/cancel`.
    pub async fn cancel(&self, p: &Principal) -> Result<Task> {
        p.authorize(Op::AnomaliesManage)?;
        training::cancel(&self.db, p.tenant, DETECTOR).await
    }

    /// `POST /anomalies/detector/rollback/{version}` → status.
    pub async fn rollback(&self, p: &Principal, version: &str) -> Result<DetectorStatus> {
        p.authorize(Op::AnomaliesManage)?;
        let Ok(version) = version.parse::<i32>() else {
            return Err(Error::not_found("the model version was not found"));
        };
        let stored =
            training::rollback(&self.db, self.bus.as_ref(), p.tenant, DETECTOR, version).await?;
        // This instance installs at once; the others on the bus notice.
        self.install(&stored);
        self.status_of(p.tenant).await
    }

    fn install(&self, stored: &StoredModel) {
        match ModelCodec::load(self.codec.as_ref(), stored) {
            Ok(model) => {
                self.scorer
                    .install(TenantId(stored.tenant_id), stored.info.version, model)
            }
            Err(e) => tracing::warn!(
                error = %e,
                tenant = %stored.tenant_id,
                version = stored.info.version,
                "anomaly model not loaded; rules decide for this tenant"
            ),
        }
    }

    /// Loads every tenant's active version (start-up).
    pub async fn load_all(&self) -> Result<usize> {
        let all = training::all_active(&self.db, DETECTOR).await?;
        for m in &all {
            self.install(m);
        }
        Ok(all.len())
    }

    /// Reloads a tenant's active version.
    pub async fn reload(&self, tenant: TenantId) -> Result<()> {
        match training::active(&self.db, tenant, DETECTOR).await? {
            Some(m) => self.install(&m),
            None => self.scorer.remove(tenant),
        }
        Ok(())
    }

    /// Loads all, then follows the bus notices (a background worker).
    pub async fn run_model_listener(self) {
        if let Err(e) = self.load_all().await {
            tracing::warn!(error = %e, "anomaly models not loaded at start");
        }
        let this = self.clone();
        let again = self.clone();
        let handle = tokio::runtime::Handle::current();
        let handle_again = handle.clone();
        training::listen(
            self.bus.clone(),
            DETECTOR,
            move |change| {
                let this = this.clone();
                handle.spawn(async move {
                    if let Err(e) = this.reload(TenantId(change.tenant_id)).await {
                        tracing::warn!(error = %e, "anomaly model reload failed");
                    }
                });
            },
            move || {
                let this = again.clone();
                handle_again.spawn(async move {
                    if let Err(e) = this.load_all().await {
                        tracing::warn!(error = %e, "anomaly models not reloaded");
                    }
                });
            },
        )
        .await;
    }

    /// `POST /anomalies/detector/feedback`: stores the label and counts it towards
    /// auto-retraining.
    pub async fn feedback(
        &self,
        p: &Principal,
        body: &steward_core::Body,
    ) -> Result<crate::reports::Feedback> {
        let fb = self.reports.feedback(p, body).await?;
        self.sample_added(p.tenant).await;
        Ok(fb)
    }

    /// Counts a new sample and starts a task every `auto_retrain_events` samples (silently
    /// skipped while one runs or below the minimum), at most once per
    /// `AUTO_RETRAIN_MIN_INTERVAL` per tenant: a tenant writing thousands of events a second
    /// would otherwise retrain (and store a model version) without pause.
    pub async fn sample_added(&self, tenant: TenantId) {
        let every = self.config.auto_retrain_events;
        if every == 0 {
            return;
        }
        let due = {
            let mut m = self.new_samples.lock().unwrap_or_else(|p| p.into_inner());
            let (n, last) = m.entry(tenant).or_insert((0, None));
            *n += 1;
            let rested = last.is_none_or(|at: Instant| at.elapsed() >= AUTO_RETRAIN_MIN_INTERVAL);
            if *n >= every && rested {
                *n = 0;
                *last = Some(Instant::now());
                true
            } else {
                false
            }
        };
        if due {
            match self.start(tenant).await {
                Ok(_) => tracing::info!(tenant = %tenant.0, "anomaly auto-retrain started"),
                Err(e) => tracing::debug!(error = %e, "anomaly auto-retrain skipped"),
            }
        }
    }

    /// The events and labels of a tenant's training set: its newest audit entries with an
    /// agent, at most [`MAX_TRAINING_ROWS`] of them and `training_max_bytes` in all, read
    /// page by page, then the labelled feedback samples.
    async fn training_set(&self, tenant: TenantId) -> Result<(Vec<Value>, Vec<Option<bool>>)> {
        #[allow(clippy::type_complexity)]
        let mut rows: Vec<(Option<Id>, String, String, Json, Json, Json, f64, bool, Ts)> =
            Vec::new();
        let mut before = i64::MAX;
        let mut bytes = 0usize;
        'pages: while (rows.len() as i64) < MAX_TRAINING_ROWS {
            let limit = TRAINING_PAGE.min(MAX_TRAINING_ROWS - rows.len() as i64);
            #[allow(clippy::type_complexity)]
            let page: Vec<(
                i64,
                (Option<Id>, String, String, Json, Json, Json, f64, bool, Ts),
            )> = with_conn!(&self.db, conn => {
                ae::table
                    .filter(ae::tenant_id.eq(Id(tenant.0)))
                    .filter(ae::agent_id.is_not_null())
                    .filter(ae::seq.lt(before))
                    .order(ae::seq.desc())
                    .limit(limit)
                    .select((
                        ae::seq,
                        (
                            ae::agent_id,
                            ae::action,
                            ae::resource,
                            ae::input,
                            ae::output,
                            ae::reasoning,
                            ae::risk_score,
                            ae::is_approved,
                            ae::timestamp,
                        ),
                    ))
                    .load(conn)
                    .await
                    .db()
            })?;
            let full = page.len() as i64 == limit;
            for (seq, row) in page {
                bytes += row.1.len()
                    + row.2.len()
                    + json_bytes(&row.3 .0)
                    + json_bytes(&row.4 .0)
                    + json_bytes(&row.5 .0);
                // The newest entry is always read, whatever its size.
                if bytes > self.config.training_max_bytes && !rows.is_empty() {
                    tracing::info!(
                        tenant = %tenant.0,
                        entries = rows.len(),
                        "anomaly training reads the newest audit entries up to its byte budget"
                    );
                    break 'pages;
                }
                before = seq;
                rows.push(row);
            }
            if !full {
                break;
            }
        }
        let mut events = Vec::with_capacity(rows.len());
        let mut labels = Vec::with_capacity(rows.len());
        for (agent, action, resource, input, output, reasoning, risk, approved, ts) in
            rows.into_iter().rev()
        {
            events.push(json!({
                "agent_id": agent.map(|a| a.0),
                "action": action,
                "resource": resource,
                "input": input.0,
                "output": output.0,
                "reasoning": reasoning.0,
                "risk_score": risk,
                "is_approved": approved,
                "timestamp": ts.0.format(&time::format_description::well_known::Rfc3339).ok(),
            }));
            labels.push(None);
        }
        for f in self.reports.labelled(tenant).await? {
            events.push(f.event_data.0);
            labels.push(Some(f.label == 1));
        }
        Ok((events, labels))
    }
}

struct AnomalyTrainer {
    detector: Detector,
}

#[async_trait]
impl Trainer for AnomalyTrainer {
    async fn train(&self, ctx: TrainCtx) -> Result<TrainedModel> {
        let (events, labels) = self.detector.training_set(ctx.tenant).await?;
        ctx.handle.progress(0.05)?;
        // The codec decides between supervised and unsupervised (`train_mixed`).
        let codec = self.detector.codec.clone();
        let contamination = self.detector.config.contamination;
        let handle = ctx.handle.clone();
        tokio::task::spawn_blocking(move || {
            codec.train_mixed(&events, &labels, contamination, &handle)
        })
        .await
        .map_err(|e| Error::internal_msg(format!("anomaly training panicked: {e}")))?
    }
}
