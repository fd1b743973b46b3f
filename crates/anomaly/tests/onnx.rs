//! The shipped ONNX test artifact (fixtures/anomaly, a logistic regression exported without
//! ZipMap) loads through tract and scores like the reference runtime.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use steward_anomaly::codec::AnomalyCodec;
use steward_anomaly::features::DENSE;
use steward_anomaly::onnx::OnnxModel;

fn artifact() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/anomaly/anomaly_linear.onnx")
}

#[test]
fn artifact_scores_through_tract() {
    let m = OnnxModel::load(&artifact()).unwrap();
    let quiet = m.score(&[0.0; DENSE]).unwrap();
    let mut row = [0f32; DENSE];
    row[4] = 5.0;
    row[9] = 5.0;
    row[16] = 5.0;
    let loud = m.score(&row).unwrap();
    // onnx.reference.ReferenceEvaluator on the same rows: 5.8151e-7 and 0.983208.
    assert!((quiet - 5.815_142_6e-7).abs() < 1e-7, "{quiet}");
    assert!((loud - 0.983_208).abs() < 1e-4, "{loud}");
}

#[test]
fn codec_reports_onnx_loaded_per_backend() {
    let p = artifact();
    assert!(AnomalyCodec::new("onnx", Some(&p)).onnx_loaded());
    assert!(AnomalyCodec::new("hybrid", Some(&p)).onnx_loaded());
    assert!(!AnomalyCodec::new("sklearn", Some(&p)).onnx_loaded());
    assert!(!AnomalyCodec::new("hybrid", Some(&p.with_extension("missing"))).onnx_loaded());
    // A file that is not ONNX is refused (not loaded), not a crash.
    let readme = p.with_file_name("README.md");
    assert!(!AnomalyCodec::new("onnx", Some(&readme)).onnx_loaded());
}
