//! External escalation of the guard (contract 17.2 [decided], `GUARD_EXTERNAL_*`): a result
//! whose score lies in [`GUARD_THRESHOLD_WARN`, `GUARD_THRESHOLD_BLOCK`) is sent as
//! `{tenant_id, prompt}` to the external classifier (the shared client,
//! `steward_store::external`, 2-second time-out). Its `{score}` answer replaces the ML score
//! and the result is recomputed: the policy engine is asked again (its module reads the ML
//! score) and the detectors are aggregated again. On any failure the local result stands
//! (fail-open). Counted in `guard_external_escalations_total{outcome}`.

use serde_json::json;
use steward_core::TenantId;
use steward_store::external::{in_band, ExternalScorer, Outcome};

use super::Guard;
use crate::engine::{aggregate, AggregateConfig, Detection, DetectorKind, ThreatLevel};

/// The pattern id of an external answer at or above the ML threshold.
const EXTERNAL_PATTERN: &str = "external_classifier";

/// What an escalation did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Escalation {
    /// Disabled, or the score is outside the band.
    NotSent,
    /// The recomputed score and level.
    Scored(f64, ThreatLevel),
    /// Sent, without a usable answer: the local result stands.
    Failed,
}

impl Guard {
    /// Escalates results in [warn, block) to `external` (none: no escalation).
    pub fn with_external(mut self, external: Option<ExternalScorer>) -> Self {
        self.external = external;
        self
    }

    /// See the module documentation. `score` is the local result's; `detections` are
    /// replaced by the recomputed result's.
    pub(super) async fn escalate(
        &self,
        tenant: TenantId,
        prompt: &str,
        normalized: &str,
        rule: f64,
        score: f64,
        detections: &mut Vec<Detection>,
    ) -> Escalation {
        let Some(external) = &self.external else {
            return Escalation::NotSent;
        };
        let cfg = self.config.aggregate;
        if !in_band(score, cfg.threshold_warn, cfg.threshold_block) {
            return Escalation::NotSent;
        }
        let body = json!({"tenant_id": tenant.0.to_string(), "prompt": prompt});
        let ml = match external.score(&body).await {
            Ok(ml) => {
                count(Outcome::Scored);
                ml
            }
            Err(failure) => {
                count(failure.outcome());
                tracing::warn!(
                    tenant = %tenant.0,
                    error = %failure,
                    "guard external classifier failed; the local result stands"
                );
                return Escalation::Failed;
            }
        };
        // The rules' findings stay; the ML detector's and the policy engine's (which read the
        // local ML score) are computed again with the external score.
        detections.retain(|d| d.detector == DetectorKind::Rules);
        if ml >= cfg.ml_threshold {
            detections.push(Detection {
                id: EXTERNAL_PATTERN.to_owned(),
                category: "prompt injection".to_owned(),
                detector: DetectorKind::Ml,
                score: ml,
                reason: format!(
                    "external classifier: the prompt looks like an injection or jailbreak (score {ml:.2})"
                ),
            });
        }
        let pe = self
            .policy_detections(normalized, rule, Some(ml), detections)
            .await;
        // The answer stands in for the ML detector, also when the local one is disabled.
        let cfg = AggregateConfig {
            ml_enabled: true,
            ..cfg
        };
        let (score, level) = aggregate(&cfg, rule, Some(ml), pe);
        Escalation::Scored(score, level)
    }
}

fn count(outcome: Outcome) {
    metrics::counter!("guard_external_escalations_total", "outcome" => outcome.as_str())
        .increment(1);
}
