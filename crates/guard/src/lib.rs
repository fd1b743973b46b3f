//! The prompt guard (contract 17): normalisation, the rule and ML detectors and their
//! aggregation (`engine`), and the service that adds the policy-engine detector, the cache,
//! statistics, feedback and audit entries. See docs/guard.md.

pub mod engine;
pub mod ml;
pub mod normalize;
pub mod onnx;
pub mod policy;
pub mod rules;

pub use engine::{
    aggregate, AggregateConfig, Analysis, Detection, DetectorKind, GuardEngine, ThreatLevel,
};
pub use ml::{Metrics, MlModel, TrainOptions, FEATURE_VERSION};
pub mod service;

pub use service::{AgentResolver, Gateway, Guard, GuardConfig, GuardResult};

/// The built-in model shipped in `fixtures/guard/model.bin` (see fixtures/guard/README.md),
/// else one trained at start-up on the built-in corpus `fixtures/guard/corpus.jsonl`.
pub fn bootstrap_model() -> Option<MlModel> {
    static SHIPPED: &[u8] = include_bytes!("../../../fixtures/guard/model.bin");
    match MlModel::from_bytes(SHIPPED) {
        Ok(m) => return Some(m),
        Err(e) if !SHIPPED.is_empty() => {
            tracing::warn!(error = %e, "the shipped guard model is unusable; training on the built-in corpus")
        }
        Err(_) => {}
    }
    let samples = builtin_corpus();
    MlModel::train(&samples, &mut |_| true).ok()
}

/// The built-in corpus: attacks of every category and hard benign prompts.
pub fn builtin_corpus() -> Vec<(String, bool)> {
    parse_corpus(include_str!("../../../fixtures/guard/corpus.jsonl"))
}

/// The built-in corpus with a calibration group per prompt: the rounds of writers who never
/// saw the guard (category `… (benign-train-N)` / `… (attacks-train-N)`) fall into groups 1–4
/// by `N`, everything else into group 0, so that a tenant model's calibration scores prompts
/// of writers its fit has not seen (ADR 0017).
pub fn builtin_corpus_grouped() -> Vec<(String, bool, u32)> {
    include_str!("../../../fixtures/guard/corpus.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let category = v.get("category").and_then(|c| c.as_str()).unwrap_or("");
            let round = category
                .rsplit_once("-train-")
                .and_then(|(_, n)| n.trim_end_matches(')').trim().parse::<u32>().ok());
            Some((
                v.get("text")?.as_str()?.to_owned(),
                v.get("label")?.as_i64()? == 1,
                round.map_or(0, |n| 1 + n % 4),
            ))
        })
        .collect()
}

/// Labelled prompts of a JSON-lines corpus (`{text, label}` per line, label 1 = attack);
/// lines that are not such an object are skipped.
pub fn parse_corpus(jsonl: &str) -> Vec<(String, bool)> {
    jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some((
                v.get("text")?.as_str()?.to_owned(),
                v.get("label")?.as_i64()? == 1,
            ))
        })
        .collect()
}
