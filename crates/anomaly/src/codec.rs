//! [`AnomalyCodec`]: the service's [`ModelCodec`] over the feature definition
//! ([`crate::features`]), the isolation forest ([`crate::iforest`]), the supervised model
//! ([`crate::supervised`]) and the optional ONNX artifact ([`crate::onnx`]).
//!
//! A trained [`Model`] holds the history's statistics, an isolation forest fitted on the
//! history's features (leave-one-out), the calibration of its score, and — when labelled
//! anomalies exist — a logistic regression of labelled anomalies against the history
//! (labelled normals plus a sample of the unlabelled history), fed with the payload features,
//! the forest's score and a hashed trigram bag. The ML score is the unsupervised score, or
//! — with the supervised part — that score's log-odds plus the regression's evidence above
//! its reference (see [`Model::score_features`]).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use steward_core::{Error, Result};
use steward_store::training::{StoredModel, TrainHandle, TrainedModel};

use crate::features::{Vocab, Window, WindowValues, BAG, DENSE, FEATURE_VERSION, WINDOWED};

/// The feature definition recorded with each model (re-exported).
pub const FEATURE_VERSION_OF: &str = FEATURE_VERSION;
use crate::iforest::{IsolationForest, Params};
use crate::onnx::OnnxModel;
use crate::scorer::LoadedModel;
use crate::seen::Seen;
use crate::service::ModelCodec;
use crate::supervised::{Supervised, SupervisedKind};

/// The model format and libraries; a stored model of another one is refused at load.
pub const LIBRARY_VERSION: &str =
    "steward-anomaly-model/2 (iforest/1, smartcore/0.4 logistic, serde_json)";

/// Dense features where a value beyond the history's range means "more unusual", with the
/// smallest scale of an excess (shares 0.05, rarities and surprises 0.5, counts 0.5).
const TAIL: [(usize, f32); 24] = [
    (0, 0.5),
    (1, 0.5),
    (2, 0.5),
    (3, 0.5),
    (4, 0.5),
    (5, 0.05),
    (6, 0.5),
    (8, 0.5),
    (9, 0.05),
    (10, 0.5),
    (11, 0.5),
    (12, 0.5),
    (14, 0.5),
    (15, 0.05),
    (16, 1.0),
    (17, 0.5),
    (21, 0.5),
    (22, 0.05),
    (26, 0.5),
    (27, 0.5),
    (28, 0.5),
    (29, 1.0),
    (30, 0.5),
    (31, 0.5),
];

/// Dense features the supervised model reads: the payload and history-rarity ones, not
/// those an event's origin changes (hour, approval, reasoning, agent pairs), which differ
/// between audit entries and report/feedback `event_data`. The agent window ([`WINDOWED`]) is
/// read: a labelled event gets the values it was scored with ([`Seen`]), else the history's
/// medians.
const SUPERVISED_DENSE: [usize; 26] = [
    0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 26, 27, 28, 30, 31,
];
/// Inputs of the supervised model: those features, the forest score, the bag.
pub const SUPERVISED_INPUTS: usize = SUPERVISED_DENSE.len() + 1 + BAG;
/// Labelled anomalies needed for the supervised part.
pub const MIN_POSITIVES: usize = 5;
/// Quantile of the supervised model's probability over the history rows it was fitted
/// against that serves as its reference (see [`Model::score_features`]).
const REFERENCE_QUANTILE: f64 = 0.9;
/// Unlabelled history rows sampled as normals for the supervised part.
const NEGATIVE_SAMPLE: usize = 3000;

/// A trained model (serialised with `serde_json` into the model store).
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Model {
    pub vocab: Vocab,
    pub forest: IsolationForest,
    /// Median, `1 - contamination` quantile and maximum of the forest score on the history.
    calib: [f64; 3],
    /// Per dense feature where larger means more unusual: the history's 99.9th percentile
    /// and the scale of an excess beyond it (see [`Model::tail`]).
    tail: Vec<(usize, f32, f32)>,
    supervised: Option<Supervised>,
    /// The supervised model's probability on the history it was fitted against, at
    /// [`REFERENCE_QUANTILE`]: below it a probability is no evidence either way.
    reference: f64,
}

/// `ln(x / (1 − x))`, `x` kept inside (0, 1).
fn logit(x: f64) -> f64 {
    let x = x.clamp(1e-9, 1.0 - 1e-9);
    (x / (1.0 - x)).ln()
}

fn interp(x: f64, pts: &[(f64, f64)]) -> f64 {
    for w in pts.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x <= x1 {
            if x1 - x0 <= f64::EPSILON {
                return y1;
            }
            return y0 + (y1 - y0) * ((x - x0) / (x1 - x0)).clamp(0.0, 1.0);
        }
    }
    1.0
}

fn supervised_row(dense: &[f32; DENSE], forest: f64, bag: &[f32; BAG]) -> [f32; SUPERVISED_INPUTS] {
    let mut row = [0f32; SUPERVISED_INPUTS];
    for (i, j) in SUPERVISED_DENSE.iter().enumerate() {
        row[i] = dense[*j];
    }
    row[SUPERVISED_DENSE.len()] = forest as f32;
    row[SUPERVISED_DENSE.len() + 1..].copy_from_slice(bag);
    row
}

/// Training report of [`Model::train`].
#[derive(Debug, Clone)]
pub struct TrainReport {
    pub history: usize,
    pub positives: usize,
    pub supervised: bool,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    pub evaluated: usize,
}

impl Model {
    /// Trains on `events` with optional labels (`None` = unlabelled history). The history
    /// is every event not labelled an anomaly. `progress(p)` is called regularly with the
    /// fraction done and stops the work on error.
    pub fn train(
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        seed: u64,
        progress: &mut dyn FnMut(f64) -> Result<()>,
    ) -> Result<(Model, TrainReport)> {
        Model::train_with(events, labels, contamination, seed, None, progress)
    }

    /// [`Model::train`], the labelled anomalies taking their window values from `seen`.
    pub fn train_with(
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        seed: u64,
        seen: Option<&Seen>,
        progress: &mut dyn FnMut(f64) -> Result<()>,
    ) -> Result<(Model, TrainReport)> {
        Model::train_kind(
            events,
            labels,
            contamination,
            seed,
            seen,
            SupervisedKind::default(),
            progress,
        )
    }

    /// [`Model::train_with`] with the supervised model of `kind` when labels suffice.
    pub fn train_kind(
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        seed: u64,
        seen: Option<&Seen>,
        kind: SupervisedKind,
        progress: &mut dyn FnMut(f64) -> Result<()>,
    ) -> Result<(Model, TrainReport)> {
        let label = |i: usize| labels.get(i).copied().flatten();
        let history: Vec<&Value> = events
            .iter()
            .enumerate()
            .filter(|(i, _)| label(*i) != Some(true))
            .map(|(_, e)| e)
            .collect();
        let positives: Vec<&Value> = events
            .iter()
            .enumerate()
            .filter(|(i, _)| label(*i) == Some(true))
            .map(|(_, e)| e)
            .collect();
        let labelled_normal: Vec<usize> = {
            let mut k = 0;
            let mut out = Vec::new();
            for (i, _) in events.iter().enumerate() {
                match label(i) {
                    Some(true) => {}
                    Some(false) => {
                        out.push(k);
                        k += 1;
                    }
                    None => k += 1,
                }
            }
            out
        };
        if history.is_empty() {
            return Err(Error::internal_msg(
                "anomaly training needs at least one event that is not labelled an anomaly",
            ));
        }
        let mut vocab = Vocab::build(&history, |p| progress(0.05 + 0.2 * p))?;
        let (dense, _) = vocab.featurize_history(&history, false, |p| progress(0.25 + 0.3 * p))?;
        vocab.seed_outcomes(&dense);
        let flat: Vec<f32> = dense.iter().flatten().copied().collect();
        let forest = IsolationForest::fit(
            &flat,
            DENSE,
            Params {
                seed,
                ..Params::default()
            },
            |p| progress(0.55 + 0.25 * p),
        )?;
        let mut scores: Vec<f64> = dense.iter().map(|r| forest.score(r)).collect();
        progress(0.85)?;
        let mut sorted = scores.clone();
        sorted.sort_by(f64::total_cmp);
        let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
        let calib = [q(0.5), q(1.0 - contamination.clamp(0.0001, 0.5)), q(1.0)];
        let mut tail = Vec::with_capacity(TAIL.len());
        let mut col: Vec<f32> = Vec::with_capacity(dense.len());
        for (j, floor) in TAIL {
            col.clear();
            col.extend(dense.iter().map(|r| r[j]));
            let hi_at = ((col.len() - 1) as f64 * 0.999).round() as usize;
            let (_, hi, _) = col.select_nth_unstable_by(hi_at, f32::total_cmp);
            let hi = *hi;
            let mid_at = (col.len() - 1) / 2;
            let (_, mid, _) = col.select_nth_unstable_by(mid_at, f32::total_cmp);
            tail.push((j, hi, (hi - *mid).max(floor)));
        }
        let mut model = Model {
            vocab,
            forest,
            calib,
            tail,
            supervised: None,
            reference: 0.5,
        };
        let supervised = positives.len() >= MIN_POSITIVES;
        if supervised {
            // Window features of the labelled anomalies: the history's medians.
            let mut window: WindowValues = [0f32; WINDOWED.len()];
            for (w, j) in window.iter_mut().zip(WINDOWED) {
                let mut col: Vec<f32> = dense.iter().map(|r| r[j]).collect();
                col.sort_by(f32::total_cmp);
                *w = col[col.len() / 2];
            }
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
            let mut rows: Vec<usize> = if history.len() > NEGATIVE_SAMPLE {
                sample(&mut rng, history.len(), NEGATIVE_SAMPLE).into_vec()
            } else {
                (0..history.len()).collect()
            };
            rows.extend(labelled_normal.iter().copied());
            rows.sort_unstable();
            rows.dedup();
            let mut x = Vec::with_capacity((rows.len() + positives.len() * 4) * SUPERVISED_INPUTS);
            let mut y = Vec::new();
            for (n, &i) in rows.iter().enumerate() {
                if n % 512 == 0 {
                    progress(0.86 + 0.04 * n as f64 / rows.len() as f64)?;
                }
                let mut d = [0f32; DENSE];
                let mut bag = [0f32; BAG];
                model.vocab.featurize_loo(history[i], &mut d, &mut bag);
                for j in WINDOWED {
                    d[j] = dense[i][j];
                }
                x.extend(supervised_row(&d, scores[i], &bag));
                y.push(false);
            }
            let repeat = (rows.len() / (3 * positives.len())).clamp(1, 20);
            for e in &positives {
                let mut d = [0f32; DENSE];
                let mut bag = [0f32; BAG];
                match seen.and_then(|s| s.get(e)) {
                    Some(w) => model.vocab.featurize_with(e, w, &mut d, Some(&mut bag)),
                    None => {
                        model.vocab.featurize_detached(e, &mut d, &mut bag);
                        for (j, w) in WINDOWED.iter().zip(window) {
                            d[*j] = w;
                        }
                    }
                }
                let row = supervised_row(&d, model.forest.score(&d), &bag);
                for _ in 0..repeat {
                    x.extend(row);
                }
                y.extend(std::iter::repeat_n(true, repeat));
            }
            progress(0.9)?;
            let m = Supervised::fit(kind, &x, SUPERVISED_INPUTS, &y, seed, |p| {
                progress(0.9 + 0.05 * p)
            })?;
            let mut probs: Vec<f64> = x
                .chunks(SUPERVISED_INPUTS)
                .zip(&y)
                .filter(|(_, l)| !**l)
                .map(|(r, _)| m.prob(r))
                .collect();
            if !probs.is_empty() {
                let at = ((probs.len() - 1) as f64 * REFERENCE_QUANTILE).round() as usize;
                let (_, r, _) = probs.select_nth_unstable_by(at, f64::total_cmp);
                model.reference = *r;
            }
            model.supervised = Some(m);
        }
        progress(0.95)?;
        // Precision/recall on the labelled samples (threshold 0.5 of the ML score).
        let mut tp = 0usize;
        let mut fp = 0usize;
        let mut fneg = 0usize;
        let mut evaluated = 0usize;
        for (i, e) in events.iter().enumerate() {
            let Some(l) = label(i) else { continue };
            evaluated += 1;
            let s = model.score_event(e, None);
            match (s >= 0.5, l) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fneg += 1,
                _ => {}
            }
        }
        scores.clear();
        let precision = (tp + fp > 0).then(|| tp as f64 / (tp + fp) as f64);
        let recall = (tp + fneg > 0).then(|| tp as f64 / (tp + fneg) as f64);
        let f1 = match (precision, recall) {
            (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
        let report = TrainReport {
            history: history.len(),
            positives: positives.len(),
            supervised,
            precision,
            recall,
            f1,
            evaluated,
        };
        Ok((model, report))
    }

    /// The calibrated forest score: median → 0.25, the contamination quantile → 0.5, the
    /// history's maximum → 0.9 (monotone, so rankings are the forest's).
    pub fn calibrated(&self, raw: f64) -> f64 {
        let [m, c, x] = self.calib;
        let c = c.max(m + 1e-9);
        let x = x.max(c + 1e-9);
        let pts = [
            (0.0, 0.0),
            (m, 0.25),
            (c, 0.5),
            (x, 0.9),
            (x.max(1.0) + 1e-9, 1.0),
        ];
        interp(raw, &pts)
    }

    /// How far an event lies beyond the history's range on the features where larger is
    /// more unusual, in [0, 1): `1 - exp(-Σ excess)`, excess = (x − p99.9) / scale. The
    /// forest never splits on a feature that is constant in the history (an injection
    /// where the history has no unusual characters at all); this catches it.
    pub fn tail(&self, dense: &[f32; DENSE]) -> f64 {
        let mut sum = 0f32;
        for &(j, hi, scale) in &self.tail {
            let x = dense[j];
            if x > hi {
                sum += (x - hi) / scale;
            }
        }
        1.0 - (-f64::from(sum)).exp()
    }

    /// The unsupervised score: the calibrated forest score and the tail, combined as
    /// independent evidence (`1 − (1 − q)(1 − t)`).
    pub fn unsupervised(&self, dense: &[f32; DENSE]) -> (f64, f64) {
        let raw = self.forest.score(dense);
        let q = self.calibrated(raw);
        let t = self.tail(dense);
        (raw, 1.0 - (1.0 - q) * (1.0 - t))
    }

    /// The ML score of features already computed: the unsupervised score `q`, or with the
    /// supervised part `σ(logit q + logit max(p, r) − logit r)`, `p` the supervised
    /// probability and `r` its [`REFERENCE_QUANTILE`] quantile over the history rows it was
    /// fitted against. The regression adds evidence where it sees an event as more like the
    /// labelled anomalies than nine in ten history events, and is silent below: its spread
    /// among ordinary events (how far from *those* anomalies each lies) is no evidence about
    /// kinds of anomaly nobody labelled, which keep the unsupervised ranking. Pooling in
    /// log-odds rather than averaging probabilities lets a probability of 0.05 against a
    /// reference of 0.001 count, where an average would drown it in the unsupervised score's
    /// spread.
    pub fn score_features(&self, dense: &[f32; DENSE], bag: &[f32; BAG]) -> f64 {
        let (raw, q) = self.unsupervised(dense);
        match &self.supervised {
            Some(m) => {
                let p = m.prob(&supervised_row(dense, raw, bag)).max(self.reference);
                let z = logit(q) + logit(p) - logit(self.reference);
                1.0 / (1.0 + (-z).exp())
            }
            None => q,
        }
    }

    /// The ML score of an event; `window` = the live window (None: detached, medians 0).
    pub fn score_event(&self, e: &Value, window: Option<&Mutex<Window>>) -> f64 {
        let mut dense = [0f32; DENSE];
        let mut bag = [0f32; BAG];
        self.features(e, window, &mut dense, &mut bag);
        self.score_features(&dense, &bag)
    }

    /// The features of an event (the bag only when the supervised part exists); returns the
    /// window values used.
    pub fn features(
        &self,
        e: &Value,
        window: Option<&Mutex<Window>>,
        dense: &mut [f32; DENSE],
        bag: &mut [f32; BAG],
    ) -> WindowValues {
        let w = match window {
            Some(w) => self
                .vocab
                .observe(&mut w.lock().unwrap_or_else(|p| p.into_inner()), e),
            None => [0.0; WINDOWED.len()],
        };
        let bag = self.supervised.as_ref().map(|_| bag);
        self.vocab.featurize_with(e, w, dense, bag);
        if let Some(window) = window {
            Vocab::record_outcome(
                &mut window.lock().unwrap_or_else(|p| p.into_inner()),
                e,
                dense,
            );
        }
        w
    }

    /// The tail thresholds `(feature, p99.9, scale)` (diagnostics).
    pub fn tail_thresholds(&self) -> &[(usize, f32, f32)] {
        &self.tail
    }

    /// Whether the supervised part exists.
    pub fn is_supervised(&self) -> bool {
        self.supervised.is_some()
    }

    /// The kind of the supervised part, if any.
    pub fn supervised_kind(&self) -> Option<SupervisedKind> {
        self.supervised.as_ref().map(Supervised::kind)
    }
}

pub use steward_onnx::Backend;

/// A tenant's model in memory, with the live window of its agents.
pub struct Live {
    model: Model,
    window: Mutex<Window>,
    onnx: Option<Arc<OnnxModel>>,
    backend: Backend,
    seen: Option<Arc<Seen>>,
}

impl Live {
    pub fn new(model: Model, onnx: Option<Arc<OnnxModel>>, backend: Backend) -> Live {
        let window = Mutex::new(model.vocab.window());
        Live {
            model,
            window,
            onnx,
            backend,
            seen: None,
        }
    }

    /// Records the window values of every scored event in `seen`.
    pub fn with_seen(mut self, seen: Arc<Seen>) -> Live {
        self.seen = Some(seen);
        self
    }
}

impl LoadedModel for Live {
    fn score(&self, e: &Value) -> f64 {
        let mut dense = [0f32; DENSE];
        let mut bag = [0f32; BAG];
        let w = self
            .model
            .features(e, Some(&self.window), &mut dense, &mut bag);
        if let Some(seen) = &self.seen {
            seen.record(e, w);
        }
        let native = || self.model.score_features(&dense, &bag);
        let onnx = || self.onnx.as_ref().and_then(|o| o.score(&dense).ok());
        let artifact = match self.backend {
            Backend::Native => None,
            Backend::Onnx | Backend::Hybrid => onnx(),
        };
        self.backend.combine(native, artifact)
    }

    fn backend(&self) -> &'static str {
        self.backend.name(self.onnx.is_some())
    }

    /// The native models on an event of at most 512 values and 16 KiB of strings cost a few
    /// microseconds (bounded tree walks, a dot product); ONNX artifacts and larger events go
    /// through the blocking pool under the time-out.
    fn inline(&self, event: &Value) -> bool {
        (self.backend == Backend::Native || self.onnx.is_none()) && small(event)
    }
}

/// Whether an event has at most 512 values and 16 KiB of strings (stops counting early).
fn small(event: &Value) -> bool {
    fn walk(v: &Value, budget: &mut (i32, i64)) -> bool {
        budget.0 -= 1;
        if budget.0 < 0 {
            return false;
        }
        match v {
            Value::String(s) => {
                budget.1 -= s.len() as i64;
                budget.1 >= 0
            }
            Value::Array(a) => a.iter().all(|v| walk(v, budget)),
            Value::Object(m) => m.iter().all(|(k, v)| {
                budget.1 -= k.len() as i64;
                walk(v, budget)
            }),
            _ => true,
        }
    }
    walk(event, &mut (512, 16 * 1024))
}

/// The service's codec (see the module documentation).
#[derive(Clone, Debug)]
pub struct AnomalyCodec {
    backend: Backend,
    onnx: Option<Arc<OnnxModel>>,
    /// Window values of the events this instance scored (for labels given later).
    seen: Arc<Seen>,
    /// Seed of the forests (fixed: the same history gives the same model).
    pub seed: u64,
    /// The supervised model built when labels suffice.
    supervised: SupervisedKind,
}

impl AnomalyCodec {
    /// A codec with the configured backend; the ONNX artifact is loaded when the backend is
    /// `onnx` or `hybrid` and `onnx_path` names a readable file (else a warning, native
    /// scoring).
    pub fn new(backend: &str, onnx_path: Option<&Path>) -> AnomalyCodec {
        let backend = Backend::parse(backend);
        let onnx = match (backend, onnx_path) {
            (Backend::Native, _) | (_, None) => None,
            (_, Some(p)) if !p.exists() => {
                tracing::info!(path = %p.display(), "no ONNX anomaly model; native scoring");
                None
            }
            (_, Some(p)) => match OnnxModel::load(p) {
                Ok(m) => Some(Arc::new(m)),
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "ONNX anomaly model not loaded");
                    None
                }
            },
        };
        AnomalyCodec {
            backend,
            onnx,
            seen: Arc::new(Seen::default()),
            seed: 42,
            supervised: SupervisedKind::default(),
        }
    }

    /// The supervised model training builds when labels suffice (`ANOMALY_SUPERVISED_MODEL`).
    pub fn with_supervised(mut self, kind: SupervisedKind) -> AnomalyCodec {
        self.supervised = kind;
        self
    }

    /// The backend reported while a model of this codec serves: the configured `onnx` or
    /// `hybrid` with a loaded artifact, else `sklearn`.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name(self.onnx.is_some())
    }

    /// Whether the ONNX artifact is loaded (`onnx_loaded` of the detector status).
    pub fn onnx_loaded(&self) -> bool {
        self.onnx.is_some()
    }

    /// Trains and encodes.
    fn encode(
        &self,
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel> {
        let mut progress = |p: f64| handle.progress(p);
        let (model, r) = Model::train_kind(
            events,
            labels,
            contamination,
            self.seed,
            Some(&self.seen),
            self.supervised,
            &mut progress,
        )?;
        let bytes = serde_json::to_vec(&model).map_err(Error::internal)?;
        Ok(TrainedModel {
            bytes,
            feature_version: FEATURE_VERSION.into(),
            library_version: LIBRARY_VERSION.into(),
            metrics: json!({
                "contamination": contamination,
                "precision": r.precision, "recall": r.recall, "f1": r.f1,
                "evaluated_samples": r.evaluated,
                "supervised": r.supervised,
                "supervised_model": model.supervised_kind().map(|k| k.as_str()),
                "history": r.history,
                "labelled_anomalies": r.positives,
                "trees": model.forest.trees(),
            }),
            sample_count: events.len() as i64,
        })
    }
}

impl ModelCodec for AnomalyCodec {
    fn train(
        &self,
        events: &[Value],
        labels: Option<&[bool]>,
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel> {
        let labels: Vec<Option<bool>> = match labels {
            Some(l) => l.iter().map(|b| Some(*b)).collect(),
            None => vec![None; events.len()],
        };
        self.encode(events, &labels, contamination, handle)
    }

    fn train_mixed(
        &self,
        events: &[Value],
        labels: &[Option<bool>],
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel> {
        self.encode(events, labels, contamination, handle)
    }

    fn load(&self, stored: &StoredModel) -> Result<Arc<dyn LoadedModel>> {
        let info = &stored.info;
        if info.feature_version != FEATURE_VERSION || info.library_version != LIBRARY_VERSION {
            return Err(Error::conflict(format!(
                "anomaly model version {} was built with features \"{}\" and library \"{}\"; \
                 this server has features \"{FEATURE_VERSION}\" and library \"{LIBRARY_VERSION}\": \
                 train the detector again",
                info.version, info.feature_version, info.library_version
            )));
        }
        let model: Model = serde_json::from_slice(&stored.bytes).map_err(Error::internal)?;
        Ok(Arc::new(
            Live::new(model, self.onnx.clone(), self.backend).with_seen(self.seen.clone()),
        ))
    }
}
