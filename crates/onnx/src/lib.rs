//! ONNX classifiers run by tract-onnx: the one loader and runner behind the anomaly
//! detector's and the prompt guard's ONNX backends. [`VectorClassifier`] reads one float
//! feature vector (both detectors); [`TokenClassifier`] reads token ids, the interface of a
//! transformer classifier exported from Hugging Face (the prompt guard, with its tokenizer).
//!
//! ## Feature vectors
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

/// The dimensions an input declares: a number where it is fixed, `None` where it is symbolic.
fn declared_dims(fact: &InferenceFact) -> Vec<Option<i64>> {
    fact.shape
        .dims()
        .map(|d| d.concretize().and_then(|d| d.as_i64()))
        .collect()
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
        let dims = declared_dims(fact);
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

/// What a [`TokenClassifier`] input carries, recognised by the input's name (the names
/// Hugging Face exports use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InputRole {
    /// `input_ids`: the token ids.
    Ids,
    /// `attention_mask`: 1 for a token, 0 for padding.
    Mask,
    /// `token_type_ids`: the segment of each token (0 for a single text).
    TypeIds,
}

impl InputRole {
    fn of_name(name: &str) -> Option<InputRole> {
        match name {
            "input_ids" => Some(InputRole::Ids),
            "attention_mask" => Some(InputRole::Mask),
            "token_type_ids" => Some(InputRole::TypeIds),
            _ => None,
        }
    }
}

/// One tokenized text for a [`TokenClassifier`]: token ids and their segment ids (the
/// tokenizer's; empty means all 0). The attention mask is 1 for each given token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    pub ids: Vec<i64>,
    pub type_ids: Vec<i64>,
}

/// Most texts run through the model at once (padded to the longest of them).
const MAX_BATCH: usize = 16;

/// A loaded, optimised classifier over token ids: inputs named `input_ids` (required),
/// `attention_mask` and `token_type_ids` (optional), integer `[batch, sequence]`; the first
/// float output read as logits, `[batch, k]` with `k` ≥ 2 (softmax; the sum over the
/// `positive` classes)
/// or one logit per text (`[batch, 1]` or `[batch]`, sigmoid). The sequence axis may be
/// symbolic (any length) or fixed (texts are padded to it); a batch axis fixed at 1 scores
/// one text per run, a symbolic one up to [`MAX_BATCH`] texts per run.
pub struct TokenClassifier {
    plan: Arc<TypedRunnableModel>,
    /// The model's inputs in order.
    inputs: Vec<(InputRole, DatumType)>,
    output: usize,
    positive: Vec<usize>,
    /// The sequence length the model declares, when it declares one.
    fixed_len: Option<usize>,
    batched: bool,
}

impl fmt::Debug for TokenClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenClassifier")
            .field("inputs", &self.inputs)
            .field("output", &self.output)
            .field("positive", &self.positive)
            .field("fixed_len", &self.fixed_len)
            .field("batched", &self.batched)
            .finish()
    }
}

impl TokenClassifier {
    /// Loads and checks a token-id classifier whose classes `positive` are the attack (or
    /// anomaly) classes of its logits (ignored for a model with one logit per text, read
    /// through a sigmoid); a probe run on one padding token must succeed and give a usable
    /// output. A file tract cannot read is an error (a panic inside tract is the caller's to
    /// catch).
    pub fn load(path: &Path, positive: &[usize]) -> Result<TokenClassifier, OnnxError> {
        if positive.is_empty() {
            return Err(err("no class is named the positive class"));
        }
        let mut model = tract_onnx::onnx().model_for_path(path).map_err(err)?;
        let outlets = model.input_outlets().map_err(err)?.to_vec();
        let batch = model.sym("batch");
        let seq = model.sym("sequence");
        let mut inputs = Vec::with_capacity(outlets.len());
        let mut fixed_len = None;
        let mut batched = true;
        for (i, outlet) in outlets.iter().enumerate() {
            let name = model.node(outlet.node).name.clone();
            let kind = InputRole::of_name(&name).ok_or_else(|| {
                OnnxError(format!(
                    "the model has an input `{name}`; a token classifier reads input_ids, \
                     attention_mask and token_type_ids"
                ))
            })?;
            let fact = model.input_fact(i).map_err(err)?;
            let dt = match fact.datum_type.concretize() {
                None => i64::datum_type(),
                Some(t) if t == i64::datum_type() || t == i32::datum_type() => t,
                Some(t) => {
                    return Err(OnnxError(format!(
                        "the model's input `{name}` is {t:?}; integer token ids are expected"
                    )))
                }
            };
            let dims = declared_dims(fact);
            match dims.as_slice() {
                [] if fact.shape.is_open() => {}
                [n, l] => {
                    match n {
                        None => {}
                        Some(1) => batched = false,
                        Some(n) => {
                            return Err(OnnxError(format!(
                                "the model's input `{name}` has a fixed batch of {n}; 1 or a \
                                 symbolic batch is expected"
                            )))
                        }
                    }
                    if let Some(l) = l {
                        let l = usize::try_from(*l)
                            .ok()
                            .filter(|l| *l > 0)
                            .ok_or_else(|| err("the model's sequence length is not positive"))?;
                        if fixed_len.is_some_and(|f| f != l) {
                            return Err(err("the model's inputs declare different lengths"));
                        }
                        fixed_len = Some(l);
                    }
                }
                _ => {
                    return Err(OnnxError(format!(
                        "the model's input `{name}` is not [batch, sequence]"
                    )))
                }
            }
            if inputs.iter().any(|(k, _)| *k == kind) {
                return Err(OnnxError(format!("the model has two `{name}` inputs")));
            }
            inputs.push((kind, dt));
        }
        if !inputs.iter().any(|(k, _)| *k == InputRole::Ids) {
            return Err(err(
                "the model has no `input_ids` input; it is not a token classifier",
            ));
        }
        let b: TDim = if batched { batch.into() } else { 1.into() };
        let l: TDim = fixed_len.map_or_else(|| seq.into(), |l| l.into());
        for (i, (_, dt)) in inputs.iter().enumerate() {
            model = model
                .with_input_fact(i, InferenceFact::dt_shape(*dt, tvec!(b.clone(), l.clone())))
                .map_err(err)?;
        }
        let plan = model
            .into_optimized()
            .map_err(err)?
            .into_runnable()
            .map_err(err)?;
        let mut m = TokenClassifier {
            plan,
            inputs,
            output: 0,
            positive: positive.to_vec(),
            fixed_len,
            batched,
        };
        let outs = m.run_padded(&[Tokens {
            ids: vec![0],
            type_ids: vec![],
        }])?;
        m.output = outs
            .iter()
            .position(|t| t.datum_type() == f32::datum_type())
            .ok_or_else(|| err("the model has no float output"))?;
        let width = outs
            .get(m.output)
            .map(|t| t.len())
            .ok_or_else(|| err("the model's output is missing"))?;
        if let Some(p) = positive.iter().find(|&&p| width >= 2 && p >= width) {
            return Err(OnnxError(format!(
                "class {p} is read, the model gives {width} value(s) per text"
            )));
        }
        m.score_batch(&[Tokens {
            ids: vec![0],
            type_ids: vec![],
        }])?;
        Ok(m)
    }

    /// The sequence length the model declares (texts are padded or cut to it), if any.
    pub fn fixed_len(&self) -> Option<usize> {
        self.fixed_len
    }

    /// The positive-class probability of each text, in order. Texts longer than a fixed
    /// sequence length are cut to it; an empty text is scored as one padding token.
    pub fn score_batch(&self, texts: &[Tokens]) -> Result<Vec<f64>, OnnxError> {
        let step = if self.batched { MAX_BATCH } else { 1 };
        // Similar lengths run together, so little padding is computed.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts.get(i).map_or(0, |t| t.ids.len()));
        let mut scores = vec![0.0; texts.len()];
        for group in order.chunks(step) {
            let batch: Vec<Tokens> = group
                .iter()
                .filter_map(|&i| texts.get(i).cloned())
                .collect();
            let outs = self.run_padded(&batch)?;
            let out = outs
                .get(self.output)
                .ok_or_else(|| err("the model's output is missing"))?;
            let view = out.to_plain_array_view::<f32>().map_err(err)?;
            let values: Vec<f32> = view.iter().copied().collect();
            if values.is_empty() || !values.len().is_multiple_of(batch.len()) {
                return Err(OnnxError(format!(
                    "{} output values for {} texts",
                    values.len(),
                    batch.len()
                )));
            }
            let width = values.len() / batch.len();
            for (row, &i) in values.chunks(width).zip(group) {
                let p = probability(row, &self.positive)?;
                if let Some(slot) = scores.get_mut(i) {
                    *slot = p;
                }
            }
        }
        Ok(scores)
    }

    /// Runs the model on texts padded to one length (the longest, or the fixed length).
    fn run_padded(&self, texts: &[Tokens]) -> Result<TVec<TValue>, OnnxError> {
        let longest = texts.iter().map(|t| t.ids.len()).max().unwrap_or(0).max(1);
        let len = self.fixed_len.unwrap_or(longest);
        let n = texts.len();
        let mut ids = vec![0i64; n * len];
        let mut mask = vec![0i64; n * len];
        let mut types = vec![0i64; n * len];
        for (r, t) in texts.iter().enumerate() {
            let take = t.ids.len().min(len);
            let row = r * len;
            ids[row..row + take].copy_from_slice(&t.ids[..take]);
            mask[row..row + take.max(1)].fill(1);
            let typed = t.type_ids.len().min(take);
            types[row..row + typed].copy_from_slice(&t.type_ids[..typed]);
        }
        let mut values = TVec::new();
        for (kind, dt) in &self.inputs {
            let data = match kind {
                InputRole::Ids => &ids,
                InputRole::Mask => &mask,
                InputRole::TypeIds => &types,
            };
            let t = tract_ndarray::Array2::from_shape_vec((n, len), data.clone())
                .map_err(err)?
                .into_tensor()
                .cast_to_dt(*dt)
                .map_err(err)?
                .into_owned();
            values.push(t.into());
        }
        self.plan.run(values).map_err(err)
    }
}

/// The positive classes' probability from one text's logits: softmax over two or more (the
/// sum over `positive`), sigmoid of one.
fn probability(logits: &[f32], positive: &[usize]) -> Result<f64, OnnxError> {
    if logits.iter().any(|x| !x.is_finite()) {
        return Err(err("the model's output is not a finite number"));
    }
    let p = match logits {
        [] => return Err(err("empty output")),
        [z] => 1.0 / (1.0 + (-f64::from(*z)).exp()),
        _ => {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exps: Vec<f64> = logits.iter().map(|z| f64::from(z - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            let mut e = 0.0;
            for &p in positive {
                e += exps
                    .get(p)
                    .ok_or_else(|| err("the attack class is beyond the model's output"))?;
            }
            (e / sum).min(1.0)
        }
    };
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logits_become_probabilities() {
        assert!((probability(&[0.0, 0.0], &[1]).unwrap() - 0.5).abs() < 1e-12);
        assert!(probability(&[-3.0, 3.0], &[1]).unwrap() > 0.99);
        assert!(probability(&[-3.0, 3.0], &[0]).unwrap() < 0.01);
        assert!((probability(&[0.0], &[0]).unwrap() - 0.5).abs() < 1e-12);
        assert!(probability(&[4.0], &[0]).unwrap() > 0.98);
        // Several attack classes (benign, injection, jailbreak): their sum.
        let p = probability(&[0.0, 0.0, 0.0, 0.0], &[1, 2]).unwrap();
        assert!((p - 0.5).abs() < 1e-12);
        // Large logits do not overflow.
        assert!((probability(&[1000.0, 1000.0], &[1]).unwrap() - 0.5).abs() < 1e-12);
        assert!(probability(&[f32::NAN, 1.0], &[1]).is_err());
        assert!(probability(&[], &[0]).is_err());
        assert!(probability(&[1.0, 2.0], &[2]).is_err());
    }

    #[test]
    fn unreadable_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("steward-onnx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("garbage.onnx");
        std::fs::write(&path, b"not a model").unwrap();
        assert!(TokenClassifier::load(&path, &[1]).is_err());
        assert!(TokenClassifier::load(&dir.join("missing.onnx"), &[1]).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
