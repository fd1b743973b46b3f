//! The ML detector's ONNX backend (`GUARD_MODEL_BACKEND` `onnx` or `hybrid`, with an `.onnx`
//! `GUARD_MODEL_PATH`). Two interfaces (docs/guard.md, "ONNX backend"):
//!
//! - (a) an artifact that reads the detector's own feature vector — the hashed n-grams of
//!   [`crate::ml::features`], `float [1, DIM]` (DIM = 2^19), L2-normalised — and gives the
//!   attack probability, as `float [1, 2]` class probabilities (a classifier exported
//!   without ZipMap, column 1 = attack) or one value ([`OnnxGuardModel`]);
//! - (b) a transformer classifier as Hugging Face exports it — `input_ids`,
//!   `attention_mask` and optionally `token_type_ids` in, logits out — with its
//!   `tokenizer.json` (and optionally `config.json`) beside the model file
//!   ([`TokenizedOnnxModel`]).
//!
//! Loading and running are `steward_onnx`'s (shared with the anomaly detector). The engine
//! sees either through [`TextClassifier`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use steward_onnx::{TokenClassifier, Tokens, VectorClassifier};
use tokenizers::{Tokenizer, TruncationParams};

use crate::engine::{AggregateConfig, Analysis, Detection, DetectorKind};
use crate::ml::{features_of_canonical, DIM};

pub use steward_onnx::Backend;

/// A second classifier of canonical texts beside the native model: the attack probability
/// in [0, 1], or why it failed. Called on the blocking pool under the guard's time-out.
pub trait TextClassifier: Send + Sync + 'static {
    fn score_canonical(&self, canon: &str) -> Result<f64, String>;

    /// The scores of several texts, in order (a model that batches overrides it).
    fn score_many(&self, canons: &[&str]) -> Result<Vec<f64>, String> {
        canons.iter().map(|c| self.score_canonical(c)).collect()
    }
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

/// The tokenizer's file beside a transformer model (as Hugging Face exports write it).
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The model's configuration beside it (read for `id2label` and `max_position_embeddings`).
pub const CONFIG_FILE: &str = "config.json";
/// The longest input given to a transformer, in tokens, when its files say nothing shorter.
pub const MAX_TOKENS: usize = 512;

/// Words in a class label that name the attack class (`id2label` of `config.json`).
const ATTACK_LABELS: [&str; 7] = [
    "INJECT",
    "JAILBREAK",
    "ATTACK",
    "UNSAFE",
    "MALICIOUS",
    "HARMFUL",
    "SUSPICIOUS",
];

/// A transformer classifier over token ids (interface (b)), with its tokenizer.
pub struct TokenizedOnnxModel {
    tokenizer: Tokenizer,
    model: TokenClassifier,
    /// The attack classes and their labels (for the start-up log).
    positive: Vec<(usize, Option<String>)>,
    max_tokens: usize,
}

impl std::fmt::Debug for TokenizedOnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenizedOnnxModel")
            .field("model", &self.model)
            .field("positive", &self.positive)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// The attack classes and their labels.
type AttackClasses = Vec<(usize, Option<String>)>;

/// Whether a class label names an attack: it holds one of [`ATTACK_LABELS`] and is not
/// negated (`NOT_INJECTION`, `no-jailbreak`, `NON_MALICIOUS`).
fn names_an_attack(label: &str) -> bool {
    let up = label.to_uppercase();
    let negated = up.starts_with("NON")
        || up.starts_with("NOT")
        || up
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| matches!(w, "NO" | "NOT" | "NON"));
    !negated && ATTACK_LABELS.iter().any(|w| up.contains(w))
}

/// What `config.json` says: the attack classes (with their labels) and the longest input.
fn read_config(path: &Path) -> Result<(AttackClasses, Option<usize>), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((vec![(1, None)], None)),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let max = v
        .get("max_position_embeddings")
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| usize::try_from(n).ok());
    let labels: Vec<(usize, String)> = v
        .get("id2label")
        .and_then(serde_json::Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, l)| Some((k.parse().ok()?, l.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let mut named: AttackClasses = labels
        .iter()
        .filter(|(_, l)| names_an_attack(l))
        .map(|(i, l)| (*i, Some(l.clone())))
        .collect();
    named.sort();
    // Every class named an attack says nothing (their sum is 1): class 1, as without names.
    if named.is_empty() || named.len() == labels.len() {
        named.clear();
        named.push((
            1,
            labels.iter().find(|(i, _)| *i == 1).map(|(_, l)| l.clone()),
        ));
    }
    Ok((named, max))
}

impl TokenizedOnnxModel {
    /// Loads a transformer classifier and the `tokenizer.json` (and `config.json`, when
    /// present) in its directory. The attack probability is that of the `id2label` classes
    /// whose labels name an attack (`INJECTION`, `JAILBREAK`, `UNSAFE`, …; summed when there
    /// are several), else of class 1; inputs are cut to
    /// the shortest of [`MAX_TOKENS`], the model's `max_position_embeddings` and its fixed
    /// sequence length.
    pub fn load(path: &Path) -> Result<TokenizedOnnxModel, String> {
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let fail = |what: &Path, e: &dyn std::fmt::Display| {
            if what == path {
                format!("ONNX guard model {}: {e}", path.display())
            } else {
                format!(
                    "ONNX guard model {}: {}: {e}",
                    path.display(),
                    what.display()
                )
            }
        };
        let tok_path = dir.join(TOKENIZER_FILE);
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| fail(&tok_path, &e))?;
        let (positive, max_position) =
            read_config(&dir.join(CONFIG_FILE)).map_err(|e| format!("ONNX guard model: {e}"))?;
        let classes: Vec<usize> = positive.iter().map(|(i, _)| *i).collect();
        let model = TokenClassifier::load(path, &classes).map_err(|e| fail(path, &e))?;
        let max_tokens = [Some(MAX_TOKENS), max_position, model.fixed_len()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(MAX_TOKENS)
            .max(2);
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| fail(&tok_path, &e))?;
        let m = TokenizedOnnxModel {
            tokenizer,
            model,
            positive,
            max_tokens,
        };
        // A probe through the tokenizer and the model.
        m.score_many(&["hello"]).map_err(|e| fail(path, &e))?;
        Ok(m)
    }

    /// The longest input the model is given, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The attack classes the model's output is read at, with their labels where
    /// `config.json` names them, as `1 (INJECTION), 2 (JAILBREAK)`.
    pub fn attack_classes(&self) -> String {
        self.positive
            .iter()
            .map(|(i, l)| match l {
                Some(l) => format!("{i} ({l})"),
                None => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tokens the model reads for a text (special tokens added, cut to
    /// [`TokenizedOnnxModel::max_tokens`]).
    pub fn tokens(&self, text: &str) -> Result<Tokens, String> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        Ok(Tokens {
            ids: enc.get_ids().iter().map(|&i| i64::from(i)).collect(),
            type_ids: enc.get_type_ids().iter().map(|&i| i64::from(i)).collect(),
        })
    }
}

impl TextClassifier for TokenizedOnnxModel {
    fn score_canonical(&self, canon: &str) -> Result<f64, String> {
        self.score_many(&[canon])
            .map(|s| s.first().copied().unwrap_or(0.0))
    }

    fn score_many(&self, canons: &[&str]) -> Result<Vec<f64>, String> {
        let tokens = canons
            .iter()
            .map(|c| self.tokens(c))
            .collect::<Result<Vec<_>, _>>()?;
        self.model
            .score_batch(&tokens)
            .map_err(|e| format!("ONNX guard model: {e}"))
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
        let canons: Vec<&str> = self.views.iter().map(|v| v.canon.as_str()).collect();
        self.model.score_many(&canons)
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

/// `load` with a panic (of tract or the tokenizer on a file they did not expect) turned into
/// an error, so that a bad file never stops the server from starting.
fn unwinding<T>(load: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(load))
        .unwrap_or_else(|_| Err("loading the model panicked".to_owned()))
}

/// Whether `GUARD_MODEL_PATH` names an ONNX artifact: its extension is `.onnx` (any case).
/// Any other path is the server's own model format.
pub fn is_onnx_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Loads an ONNX guard model file (an `.onnx` path that exists): with a `tokenizer.json`
/// beside it a transformer over token ids (interface (b)), else a model of the feature vector
/// (a). Returns the model and what it is, in words, or why it was refused; a panic while
/// loading is a refusal.
pub fn load_file(path: &Path) -> Result<(Arc<dyn TextClassifier>, String), String> {
    let tokenizer = path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(TOKENIZER_FILE);
    if tokenizer.exists() {
        unwinding(|| TokenizedOnnxModel::load(path)).map(|m| {
            let what = format!(
                "a transformer over token ids (attack classes {}, at most {} tokens)",
                m.attack_classes(),
                m.max_tokens()
            );
            (Arc::new(m) as Arc<dyn TextClassifier>, what)
        })
    } else {
        unwinding(|| OnnxGuardModel::load(path))
            .map(|m| {
                (
                    Arc::new(m) as Arc<dyn TextClassifier>,
                    "a model of the feature vector".to_owned(),
                )
            })
            .map_err(|e| {
                format!(
                    "{e} (a transformer over token ids needs its {TOKENIZER_FILE} beside the model)"
                )
            })
    }
}

/// The artifact the settings ask for, loaded once at start-up: only with the `onnx` or
/// `hybrid` backend and an `.onnx` path. With a `tokenizer.json` beside it the file is a
/// transformer over token ids (interface (b)), else a model of the feature vector (a). A
/// missing file is logged (info), an unreadable or unfit one warned about; either way
/// `None` and the native model serves. Never panics.
pub fn load_configured(backend: &str, path: &Path) -> Option<Arc<dyn TextClassifier>> {
    if Backend::parse(backend) == Backend::Native || !is_onnx_path(path) {
        return None;
    }
    if !path.exists() {
        tracing::info!(path = %path.display(), "no ONNX guard model at GUARD_MODEL_PATH; the native model serves");
        return None;
    }
    let loaded = load_file(path).map(|(m, what)| {
        tracing::info!(path = %path.display(), backend, "ONNX guard model loaded: {what}");
        m
    });
    match loaded {
        Ok(m) => Some(m),
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
    fn config_names_the_attack_classes() {
        let dir = std::env::temp_dir().join(format!("steward-guard-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let read = |body: &str| {
            let p = dir.join("config.json");
            std::fs::write(&p, body).unwrap();
            read_config(&p)
        };
        let (c, max) = read(
            r#"{"id2label": {"0": "SAFE", "1": "INJECTION"}, "max_position_embeddings": 512}"#,
        )
        .unwrap();
        assert_eq!(c, vec![(1, Some("INJECTION".to_owned()))]);
        assert_eq!(max, Some(512));
        // The attack class first; several attack classes.
        let (c, _) = read(r#"{"id2label": {"0": "injection", "1": "benign"}}"#).unwrap();
        assert_eq!(c, vec![(0, Some("injection".to_owned()))]);
        let (c, _) =
            read(r#"{"id2label": {"0": "BENIGN", "1": "INJECTION", "2": "JAILBREAK"}}"#).unwrap();
        assert_eq!(c.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 2]);
        // Negated labels are not attacks.
        let (c, _) = read(r#"{"id2label": {"0": "NOT_INJECTION", "1": "INJECTION"}}"#).unwrap();
        assert_eq!(c, vec![(1, Some("INJECTION".to_owned()))]);
        let (c, _) = read(r#"{"id2label": {"0": "unsafe", "1": "non-malicious"}}"#).unwrap();
        assert_eq!(c, vec![(0, Some("unsafe".to_owned()))]);
        for benign in [
            "NO_ATTACK",
            "no jailbreak",
            "NONMALICIOUS",
            "Not harmful",
            "SAFE",
        ] {
            assert!(!names_an_attack(benign), "{benign}");
        }
        for attack in [
            "INJECTION",
            "jailbreak",
            "UNSAFE",
            "prompt_attack",
            "Malicious",
        ] {
            assert!(names_an_attack(attack), "{attack}");
        }
        // Every class an attack: no information, class 1.
        let (c, _) = read(r#"{"id2label": {"0": "INJECTION", "1": "JAILBREAK"}}"#).unwrap();
        assert_eq!(c, vec![(1, Some("JAILBREAK".to_owned()))]);
        // Labels that name nothing: class 1.
        let (c, max) = read(r#"{"id2label": {"0": "LABEL_0", "1": "LABEL_1"}}"#).unwrap();
        assert_eq!(c, vec![(1, Some("LABEL_1".to_owned()))]);
        assert_eq!(max, None);
        assert!(read("{not json").is_err());
        assert_eq!(
            read_config(&dir.join("missing.json")).unwrap(),
            (vec![(1, None)], None)
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_panicking_load_is_an_error() {
        let r: Result<(), String> = unwinding(|| panic!("tract did not expect this file"));
        assert_eq!(r, Err("loading the model panicked".to_owned()));
        assert_eq!(unwinding(|| Ok::<u8, String>(1)), Ok(1));
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
