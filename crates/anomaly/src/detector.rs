//! [`BaselineCodec`]: a small, self-contained [`ModelCodec`] (rarity of the action and of
//! the (action, resource prefix) pair in the tenant's history, or per-action label rates when
//! supervised). It keeps the service whole until the model crate's isolation forest and
//! supervised models are adapted here; the stored `feature_version` tells them apart and a
//! mismatched version is refused at load.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use steward_core::{Error, Result};
use steward_store::training::{StoredModel, TrainHandle, TrainedModel};

use crate::scorer::LoadedModel;
use crate::service::ModelCodec;

/// The feature definition of this codec.
pub const BASELINE_FEATURE_VERSION: &str = "baseline-1";
/// The library version recorded with each model.
pub const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Serialize, Deserialize, Default, Debug)]
struct Baseline {
    total: f64,
    actions: HashMap<String, f64>,
    pairs: HashMap<String, f64>,
    /// Supervised: per-action anomaly rate among labelled samples.
    rates: Option<HashMap<String, f64>>,
}

fn action(e: &Value) -> &str {
    e.get("action").and_then(Value::as_str).unwrap_or("")
}

fn pair(e: &Value) -> String {
    let resource = e.get("resource").and_then(Value::as_str).unwrap_or("");
    let prefix = resource.split('/').next().unwrap_or("");
    format!("{}\u{1f}{}", action(e), prefix)
}

impl LoadedModel for Baseline {
    fn score(&self, e: &Value) -> f64 {
        if let Some(rates) = &self.rates {
            return rates.get(action(e)).copied().unwrap_or(0.5);
        }
        if self.total <= 0.0 {
            return 0.0;
        }
        let a = self.actions.get(action(e)).copied().unwrap_or(0.0) / self.total;
        let p = self.pairs.get(&pair(e)).copied().unwrap_or(0.0) / self.total;
        (1.0 - (a + p) / 2.0).clamp(0.0, 1.0)
    }

    fn backend(&self) -> &'static str {
        "sklearn"
    }
}

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct BaselineCodec;

impl ModelCodec for BaselineCodec {
    fn train(
        &self,
        events: &[Value],
        labels: Option<&[bool]>,
        contamination: f64,
        handle: &TrainHandle,
    ) -> Result<TrainedModel> {
        let mut m = Baseline::default();
        let n = events.len().max(1);
        for (i, e) in events.iter().enumerate() {
            if i % 4096 == 0 {
                handle.progress(0.1 + 0.8 * i as f64 / n as f64)?;
            }
            m.total += 1.0;
            *m.actions.entry(action(e).to_owned()).or_default() += 1.0;
            *m.pairs.entry(pair(e)).or_default() += 1.0;
        }
        if let Some(labels) = labels {
            let mut counts: HashMap<String, (f64, f64)> = HashMap::new();
            for (e, l) in events.iter().zip(labels) {
                let c = counts.entry(action(e).to_owned()).or_default();
                c.0 += f64::from(u8::from(*l));
                c.1 += 1.0;
            }
            m.rates = Some(counts.into_iter().map(|(k, (p, t))| (k, p / t)).collect());
        }
        handle.progress(0.95)?;
        let bytes = serde_json::to_vec(&m).map_err(Error::internal)?;
        Ok(TrainedModel {
            bytes,
            feature_version: BASELINE_FEATURE_VERSION.into(),
            library_version: LIBRARY_VERSION.into(),
            metrics: json!({
                "contamination": contamination,
                "precision": null, "recall": null, "f1": null,
                "evaluated_samples": events.len(),
                "supervised": labels.is_some(),
            }),
            sample_count: events.len() as i64,
        })
    }

    fn load(&self, stored: &StoredModel) -> Result<Arc<dyn LoadedModel>> {
        if stored.info.feature_version != BASELINE_FEATURE_VERSION {
            return Err(Error::conflict(format!(
                "model version {} was built with features {}, this server has {}",
                stored.info.version, stored.info.feature_version, BASELINE_FEATURE_VERSION
            )));
        }
        let m: Baseline = serde_json::from_slice(&stored.bytes).map_err(Error::internal)?;
        Ok(Arc::new(m))
    }
}
