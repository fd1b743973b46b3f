//! ONNX scoring through tract-onnx: an artifact at `ANOMALY_ONNX_MODEL_PATH` that reads the
//! dense feature vector (`float [1, DENSE]`, the order of [`crate::features::NAMES`]) and
//! returns the anomaly probability, either as a `float [1, 2]` probability output (a
//! classifier exported without ZipMap: column 1 is the anomaly class) or as a single
//! `float [1, 1]` / `[1]` score. Linear models (`LinearClassifier`, `LinearRegressor`,
//! MatMul/Add/Sigmoid graphs) and `TreeEnsembleClassifier` run; tract has no
//! `TreeEnsembleRegressor`, so an isolation forest exported to ONNX does not.

use std::path::Path;
use std::sync::Arc;

use steward_core::{Error, Result};
use tract_onnx::prelude::*;

use crate::features::DENSE;

/// A loaded, optimised ONNX model.
pub struct OnnxModel {
    plan: Arc<TypedRunnableModel>,
    /// Index of the output read.
    output: usize,
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("output", &self.output)
            .finish()
    }
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::internal_msg(format!("ONNX anomaly model: {e}"))
}

impl OnnxModel {
    /// Loads and checks an artifact: it must accept `[1, DENSE]` floats and give a float
    /// output.
    pub fn load(path: &Path) -> Result<OnnxModel> {
        let model = tract_onnx::onnx()
            .model_for_path(path)
            .map_err(err)?
            .with_input_fact(0, f32::fact([1, DENSE]).into())
            .map_err(err)?
            .into_optimized()
            .map_err(err)?;
        let plan = model.into_runnable().map_err(err)?;
        let mut m = OnnxModel { plan, output: 0 };
        // Pick the first float output, probing with a zero row.
        let outs = m
            .plan
            .run(tvec!(Tensor::zero::<f32>(&[1, DENSE]).map_err(err)?.into()))
            .map_err(err)?;
        m.output = outs
            .iter()
            .position(|t| t.datum_type() == f32::datum_type())
            .ok_or_else(|| err("no float output"))?;
        m.score(&[0.0; DENSE])?;
        Ok(m)
    }

    /// The anomaly probability of a feature row.
    pub fn score(&self, row: &[f32; DENSE]) -> Result<f64> {
        let input = Tensor::from_shape(&[1, DENSE], row).map_err(err)?;
        let outs = self.plan.run(tvec!(input.into())).map_err(err)?;
        let t = outs.get(self.output).ok_or_else(|| err("output missing"))?;
        let view = t.to_plain_array_view::<f32>().map_err(err)?;
        let v: Vec<f32> = view.iter().copied().collect();
        let p = match v.len() {
            2 => v[1],
            1 => v[0],
            n => return Err(err(format!("expected 1 or 2 output values, got {n}"))),
        };
        Ok(f64::from(p))
    }
}
