//! The ML detector's ONNX backend (`GUARD_MODEL_BACKEND` `onnx` or `hybrid`, with an `.onnx`
//! `GUARD_MODEL_PATH`): an artifact that reads the detector's own feature vector — the
//! hashed n-grams of [`crate::ml::features`], `float [1, DIM]` (DIM = 2^17), L2-normalised —
//! and gives the attack probability, as `float [1, 2]` class probabilities (a classifier
//! exported without ZipMap, column 1 = attack) or one value. Loading and running are
//! `steward_onnx::VectorClassifier`'s (shared with the anomaly detector). See docs/guard.md.
//!
//! The engine sees the artifact through [`TextClassifier`], so a classifier with another
//! input (token ids for a transformer, which needs a tokenizer) can be added behind the same
//! seam.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use steward_onnx::VectorClassifier;

use crate::engine::{AggregateConfig, Analysis, Detection, DetectorKind};
use crate::ml::{features_of_canonical, DIM};

pub use steward_onnx::Backend;

/// A second classifier of canonical texts beside the native model: the attack probability
/// in [0, 1], or why it failed. Called on the blocking pool under the guard's time-out.
pub trait TextClassifier: Send + Sync + 'static {
    fn score_canonical(&self, canon: &str) -> Result<f64, String>;
}

/// An ONNX artifact over the detector's feature vector.
#[derive(Debug)]
pub struct OnnxGuardModel(VectorClassifier);

impl OnnxGuardModel {
    /// Loads and checks an artifact (one float input `[1, DIM]`, a float output of one or
    /// two values, a probe run).
    pub fn load(path: &Path) -> Result<OnnxGuardModel, String> {
        VectorClassifier::load(path, DIM)
            .map(OnnxGuardModel)
            .map_err(|e| format!("ONNX guard model {}: {e}", path.display()))
    }

    /// The attack probability of a feature vector (sparse, as [`features_of_canonical`]).
    pub fn score_features(&self, x: &[(u32, f32)]) -> Result<f64, String> {
        self.0
            .score_sparse(x)
            .map_err(|e| format!("ONNX guard model: {e}"))
    }
}

impl TextClassifier for OnnxGuardModel {
    fn score_canonical(&self, canon: &str) -> Result<f64, String> {
        self.score_features(&features_of_canonical(canon))
    }
}

/// One text the ML detector scores: what it is (for the reason), its canonical text (kept
/// only when the artifact scores it too) and the native model's score.
#[derive(Clone, Debug)]
pub(crate) struct MlView {
    pub(crate) what: std::borrow::Cow<'static, str>,
    pub(crate) canon: String,
    pub(crate) native: f64,
    /// Subtracted from the logit of the view's score, whichever backend gives it (the
    /// discount of a segment window, `engine::segments::DISCOUNT`; 0 for the other views).
    pub(crate) discount: f64,
}

/// A probability with `discount` taken off its logit.
fn discounted(p: f64, discount: f64) -> f64 {
    if discount == 0.0 {
        return p;
    }
    let p = p.clamp(1e-9, 1.0 - 1e-9);
    let z = (p / (1.0 - p)).ln() - discount;
    1.0 / (1.0 + (-z).exp())
}

/// The ML score of a prompt (the highest over its views, each combined per the backend) and
/// its detection when it reaches the ML threshold.
pub(crate) fn ml_verdict(
    views: &[MlView],
    second: Option<&[f64]>,
    backend: Backend,
    cfg: &AggregateConfig,
) -> (f64, Option<Detection>) {
    let mut best = f64::NEG_INFINITY;
    let mut what: &str = "the prompt";
    for (i, v) in views.iter().enumerate() {
        let s = discounted(
            backend.combine(|| v.native, second.and_then(|s| s.get(i).copied())),
            v.discount,
        );
        if s > best {
            best = s;
            what = &v.what;
        }
    }
    let best = if best.is_finite() { best } else { 0.0 };
    let detection = (best >= cfg.ml_threshold).then(|| Detection {
        id: "ml_classifier".to_owned(),
        category: "prompt injection".to_owned(),
        detector: DetectorKind::Ml,
        score: best,
        reason: format!(
            "ML classifier: {what} looks like an injection or jailbreak (probability {best:.2})"
        ),
    });
    (best, detection)
}

/// The ONNX part of an analysis (from `GuardEngine::analyze_split`), run after the cheap
/// detectors: the artifact scores every view the native model scored, and the ML score is
/// recomputed per the backend.
pub struct OnnxJob {
    pub(crate) model: Arc<dyn TextClassifier>,
    pub(crate) backend: Backend,
    pub(crate) cfg: AggregateConfig,
    pub(crate) views: Vec<MlView>,
}

/// Why the artifact's scores were not used (the native ML score stood).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnnxFallback {
    /// The artifact answered an error or an unusable value (or its thread panicked).
    Error,
    /// The artifact took longer than the time-out.
    Timeout,
}

impl OnnxFallback {
    pub fn as_str(self) -> &'static str {
        match self {
            OnnxFallback::Error => "error",
            OnnxFallback::Timeout => "timeout",
        }
    }
}

impl OnnxJob {
    /// The artifact's score of every view (blocking: the expensive part).
    pub fn run(&self) -> Result<Vec<f64>, String> {
        self.views
            .iter()
            .map(|v| self.model.score_canonical(&v.canon))
            .collect()
    }

    /// Replaces the native ML verdict of `analysis` by the backend's combination with the
    /// artifact's scores. On `Err`, or scores that do not fit, the native verdict stands
    /// (fail-open to the native model) and `false` is returned.
    pub fn apply(&self, analysis: &mut Analysis, scores: Result<Vec<f64>, String>) -> bool {
        let scores = match scores {
            Ok(s) if s.len() == self.views.len() && s.iter().all(|x| x.is_finite()) => s,
            Ok(_) => {
                tracing::debug!("ONNX guard model gave unusable scores; the native score stands");
                return false;
            }
            Err(e) => {
                tracing::debug!(error = %e, "ONNX guard model failed; the native score stands");
                return false;
            }
        };
        let (best, detection) = ml_verdict(&self.views, Some(&scores), self.backend, &self.cfg);
        analysis
            .detections
            .retain(|d| d.detector != DetectorKind::Ml);
        analysis.detections.extend(detection);
        analysis.ml = Some(best);
        true
    }

    /// [`OnnxJob::run`] on the blocking pool, bounded by `timeout`, then
    /// [`OnnxJob::apply`]. A late artifact costs the caller at most `timeout` (its thread
    /// finishes in the background); an error, a panic or a time-out leaves the native
    /// verdict and says which it was.
    pub async fn run_within(
        self,
        analysis: &mut Analysis,
        timeout: Duration,
    ) -> Result<(), OnnxFallback> {
        let job = Arc::new(self);
        let runner = job.clone();
        let outcome =
            tokio::time::timeout(timeout, tokio::task::spawn_blocking(move || runner.run())).await;
        let (scores, fallback) = match outcome {
            Ok(Ok(scores)) => (scores, OnnxFallback::Error),
            Ok(Err(e)) => (
                Err(format!("ONNX guard model panicked: {e}")),
                OnnxFallback::Error,
            ),
            Err(_) => (
                Err("ONNX guard model timed out".to_owned()),
                OnnxFallback::Timeout,
            ),
        };
        if job.apply(analysis, scores) {
            Ok(())
        } else {
            Err(fallback)
        }
    }
}

/// Whether `GUARD_MODEL_PATH` names an ONNX artifact: its extension is `.onnx` (any case).
/// Any other path is the server's own model format.
pub fn is_onnx_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// The artifact the settings ask for, loaded once at start-up: only with the `onnx` or
/// `hybrid` backend and an `.onnx` path. A missing file is logged (info), an unreadable or
/// unfit one warned about; either way `None` and the native model serves. Never panics.
pub fn load_configured(backend: &str, path: &Path) -> Option<Arc<dyn TextClassifier>> {
    if Backend::parse(backend) == Backend::Native || !is_onnx_path(path) {
        return None;
    }
    if !path.exists() {
        tracing::info!(path = %path.display(), "no ONNX guard model at GUARD_MODEL_PATH; the native model serves");
        return None;
    }
    match OnnxGuardModel::load(path) {
        Ok(m) => {
            tracing::info!(path = %path.display(), backend, "ONNX guard model loaded");
            Some(Arc::new(m))
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ONNX guard model not loaded; the native model serves");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_combine_as_documented() {
        assert_eq!(Backend::parse("onnx"), Backend::Onnx);
        assert_eq!(Backend::parse("hybrid"), Backend::Hybrid);
        assert_eq!(Backend::parse("sklearn"), Backend::Native);
        assert_eq!(Backend::Onnx.combine(|| 0.2, Some(0.9)), 0.9);
        assert!((Backend::Hybrid.combine(|| 0.2, Some(0.9)) - 0.55).abs() < 1e-12);
        assert_eq!(Backend::Native.combine(|| 0.2, Some(0.9)), 0.2);
        // A failed or missing artifact: the native score stands.
        assert_eq!(Backend::Onnx.combine(|| 0.2, None), 0.2);
        assert_eq!(Backend::Hybrid.combine(|| 0.2, None), 0.2);
        // Out-of-range artifact output is clamped.
        assert_eq!(Backend::Onnx.combine(|| 0.2, Some(1.5)), 1.0);
        assert_eq!(Backend::Hybrid.name(false), "sklearn");
        assert_eq!(Backend::Hybrid.name(true), "hybrid");
        assert_eq!(Backend::Native.name(true), "sklearn");
    }

    #[test]
    fn onnx_paths_are_recognised_by_extension() {
        assert!(is_onnx_path(Path::new("/m/guard.onnx")));
        assert!(is_onnx_path(Path::new("guard.ONNX")));
        assert!(!is_onnx_path(Path::new("./models/guard/guard_model.pkl")));
        assert!(!is_onnx_path(Path::new("onnx")));
        assert!(load_configured("sklearn", Path::new("/nonexistent/x.onnx")).is_none());
        assert!(load_configured("hybrid", Path::new("/nonexistent/x.onnx")).is_none());
    }
}
