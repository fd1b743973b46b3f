//! ONNX classifiers over one float feature vector, run by tract-onnx: the one loader and
//! runner behind the anomaly detector's and the prompt guard's ONNX backends.
//!
//! An artifact qualifies when it has exactly one input, a float tensor whose declared shape
//! (where the file declares one) is `[N, dim]` or `[1, dim]` for the caller's feature
//! dimension, and a float output read as the positive-class probability: `[1, 2]`
//! probabilities (a classifier exported without ZipMap; column 1 is the positive class) or
//! one value (`[1, 1]` / `[1]`). The first float output counts (skl2onnx puts the int64
//! `label` first). Linear models (`LinearClassifier`, `LinearRegressor`, MatMul/Add/Sigmoid
//! graphs) and `TreeEnsembleClassifier` run; tract has no `TreeEnsembleRegressor`.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

/// How a detector combines its native model with an ONNX artifact (`GUARD_MODEL_BACKEND`,
/// `ANOMALY_MODEL_BACKEND`): one definition for both detectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The native models only (reported `sklearn`).
    #[default]
    Native,
    /// The artifact's score (the native model's when no artifact is loaded or it fails).
    Onnx,
    /// The mean of the native and the artifact's score (native alone without it).
    Hybrid,
}

impl Backend {
    /// `onnx`, `hybrid`, anything else native.
    pub fn parse(s: &str) -> Backend {
        match s {
            "onnx" => Backend::Onnx,
            "hybrid" => Backend::Hybrid,
            _ => Backend::Native,
        }
    }

    /// The backend that serves: `onnx` or `hybrid` with a loaded artifact, else `sklearn`.
    pub fn name(self, artifact_loaded: bool) -> &'static str {
        match (self, artifact_loaded) {
            (Backend::Onnx, true) => "onnx",
            (Backend::Hybrid, true) => "hybrid",
            _ => "sklearn",
        }
    }

    /// The score from the native model's (computed only when needed) and the artifact's
    /// (`None`: no artifact, or it failed, so the native score stands).
    pub fn combine(self, native: impl FnOnce() -> f64, artifact: Option<f64>) -> f64 {
        match (self, artifact) {
            (Backend::Onnx, Some(s)) => s.clamp(0.0, 1.0),
            (Backend::Hybrid, Some(s)) => 0.5 * (native() + s.clamp(0.0, 1.0)),
            _ => native(),
        }
    }
}

/// Why an artifact was refused or a run failed (the message names the cause).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnnxError(pub String);

impl fmt::Display for OnnxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OnnxError {}

fn err(e: impl fmt::Display) -> OnnxError {
    OnnxError(e.to_string())
}

/// A loaded, optimised classifier over `float [1, dim]`.
pub struct VectorClassifier {
    plan: Arc<TypedRunnableModel>,
    /// Index of the output read.
    output: usize,
    dim: usize,
}

impl fmt::Debug for VectorClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorClassifier")
            .field("dim", &self.dim)
            .field("output", &self.output)
            .finish()
    }
}

impl VectorClassifier {
    /// Loads and checks an artifact for feature vectors of `dim` floats: one input whose
    /// declared type and shape (if any) fit, a float output of one or two values; a probe
    /// run on a zero row must succeed. Never panics on a bad file.
    pub fn load(path: &Path, dim: usize) -> Result<VectorClassifier, OnnxError> {
        let model = tract_onnx::onnx().model_for_path(path).map_err(err)?;
        let inputs = model.input_outlets().map_err(err)?.len();
        if inputs != 1 {
            return Err(OnnxError(format!(
                "the model has {inputs} inputs; one float feature vector [1, {dim}] is expected"
            )));
        }
        let fact = model.input_fact(0).map_err(err)?;
        if let Some(t) = fact.datum_type.concretize() {
            if t != f32::datum_type() {
                return Err(OnnxError(format!(
                    "the model's input is {t:?}; float [1, {dim}] is expected"
                )));
            }
        }
        let dims: Vec<Option<i64>> = fact
            .shape
            .dims()
            .map(|d| d.concretize().and_then(|d| d.as_i64()))
            .collect();
        let fits = match dims.as_slice() {
            [] => fact.shape.is_open(),
            [n, d] => n.is_none_or(|n| n == 1) && d.is_none_or(|d| d == dim as i64),
            _ => false,
        };
        if !fits {
            let shown: Vec<String> = dims
                .iter()
                .map(|d| d.map_or_else(|| "?".to_owned(), |d| d.to_string()))
                .collect();
            return Err(OnnxError(format!(
                "the model's input has shape [{}]; [1, {dim}] is expected",
                shown.join(", ")
            )));
        }
        let plan = model
            .with_input_fact(0, f32::fact([1, dim]).into())
            .map_err(err)?
            .into_optimized()
            .map_err(err)?
            .into_runnable()
            .map_err(err)?;
        let mut m = VectorClassifier {
            plan,
            output: 0,
            dim,
        };
        // Pick the first float output, probing with a zero row.
        let outs = m
            .plan
            .run(tvec!(Tensor::zero::<f32>(&[1, dim]).map_err(err)?.into()))
            .map_err(err)?;
        m.output = outs
            .iter()
            .position(|t| t.datum_type() == f32::datum_type())
            .ok_or_else(|| err("the model has no float output"))?;
        m.score(&vec![0.0; dim])?;
        Ok(m)
    }

    /// The feature dimension the model was loaded for.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The positive-class probability of a dense row of `dim` floats.
    pub fn score(&self, row: &[f32]) -> Result<f64, OnnxError> {
        if row.len() != self.dim {
            return Err(OnnxError(format!(
                "a row of {} values given, the model reads {}",
                row.len(),
                self.dim
            )));
        }
        let input = Tensor::from_shape(&[1, self.dim], row).map_err(err)?;
        self.run(input)
    }

    /// [`VectorClassifier::score`] of a sparse row (`(index, value)`; indices at or beyond
    /// `dim` are an error, repeated indices add up).
    pub fn score_sparse(&self, entries: &[(u32, f32)]) -> Result<f64, OnnxError> {
        let mut dense = vec![0f32; self.dim];
        for &(i, v) in entries {
            let slot = dense
                .get_mut(i as usize)
                .ok_or_else(|| OnnxError(format!("feature index {i} out of range")))?;
            *slot += v;
        }
        let input = tract_ndarray::Array2::from_shape_vec((1, self.dim), dense)
            .map_err(err)?
            .into_tensor();
        self.run(input)
    }

    fn run(&self, input: Tensor) -> Result<f64, OnnxError> {
        let outs = self.plan.run(tvec!(input.into())).map_err(err)?;
        let t = outs
            .get(self.output)
            .ok_or_else(|| err("the model's output is missing"))?;
        let view = t.to_plain_array_view::<f32>().map_err(err)?;
        let p = match view.len() {
            2 => view.iter().nth(1).copied(),
            1 => view.iter().next().copied(),
            n => return Err(OnnxError(format!("expected 1 or 2 output values, got {n}"))),
        }
        .ok_or_else(|| err("empty output"))?;
        if !p.is_finite() {
            return Err(err("the model's output is not a finite number"));
        }
        Ok(f64::from(p))
    }
}
