//! ONNX scoring through tract-onnx: an artifact at `ANOMALY_ONNX_MODEL_PATH` that reads the
//! dense feature vector (`float [1, DENSE]`, the order of [`crate::features::NAMES`]) and
//! returns the anomaly probability, either as a `float [1, 2]` probability output (a
//! classifier exported without ZipMap: column 1 is the anomaly class) or as a single
//! `float [1, 1]` / `[1]` score. Linear models (`LinearClassifier`, `LinearRegressor`,
//! MatMul/Add/Sigmoid graphs) and `TreeEnsembleClassifier` run; tract has no
//! `TreeEnsembleRegressor`, so an isolation forest exported to ONNX does not. Loading and
//! running are `steward_onnx::VectorClassifier`'s (shared with the prompt guard).

use std::path::Path;

use steward_core::{Error, Result};
use steward_onnx::{OnnxError, VectorClassifier};

use crate::features::DENSE;

/// A loaded, optimised ONNX model.
#[derive(Debug)]
pub struct OnnxModel(VectorClassifier);

fn err(e: OnnxError) -> Error {
    Error::internal_msg(format!("ONNX anomaly model: {e}"))
}

impl OnnxModel {
    /// Loads and checks an artifact: it must accept `[1, DENSE]` floats and give a float
    /// output.
    pub fn load(path: &Path) -> Result<OnnxModel> {
        VectorClassifier::load(path, DENSE)
            .map(OnnxModel)
            .map_err(err)
    }

    /// The anomaly probability of a feature row.
    pub fn score(&self, row: &[f32; DENSE]) -> Result<f64> {
        self.0.score(row).map_err(err)
    }
}
