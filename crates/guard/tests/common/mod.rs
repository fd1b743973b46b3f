//! What the guard's integration tests share.

use std::time::Instant;

use steward_guard::GuardEngine;

/// The median time of one analysis over `prompts`, in seconds (the `timing` tests print it).
pub fn analysis_p50(engine: &GuardEngine, prompts: &[String]) -> f64 {
    let mut t: Vec<f64> = prompts
        .iter()
        .map(|p| {
            let t = Instant::now();
            engine.analyze(p);
            t.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t.get(t.len() / 2).copied().unwrap_or(0.0)
}
