//! The supervised model (contract 15.3): L2-regularised logistic regression fitted by
//! smartcore (L-BFGS) on standardised features; the coefficients are copied out so that
//! scoring is a dot product without allocation. [`Supervised`] is either that model or the
//! tree option ([`crate::trees::Forest`]), chosen by `ANOMALY_SUPERVISED_MODEL`.

use serde::{Deserialize, Serialize};
use smartcore::linalg::basic::arrays::Array;
use smartcore::linalg::basic::matrix::DenseMatrix;
use smartcore::linear::logistic_regression::{LogisticRegression, LogisticRegressionParameters};
use steward_core::{Error, Result};

/// The smallest standard deviation an input is standardised by. The detector's inputs are
/// logs of counts and ratios, shares and normalised counts: a difference smaller than this
/// is not evidence, yet on an input nearly constant among the training rows a plain
/// standardisation would blow it up into a separating direction (labelled anomalies are
/// featurised as outsiders of the history, its rows leave-one-out: a rarity of a frequent
/// value differs between the two by about one count, ~0.01, and the model learnt "outsider"
/// instead of the anomaly, which every live event is).
pub const MIN_SCALE: f64 = 0.25;

/// A fitted logistic regression over standardised inputs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Logistic {
    mean: Vec<f32>,
    scale: Vec<f32>,
    weights: Vec<f32>,
    bias: f32,
}

impl Logistic {
    /// Fits on `x` (row-major, `d` per row) and labels `y` (the class balance is the
    /// caller's business: repeat rows to weigh them).
    pub fn fit(x: &[f32], d: usize, y: &[bool], alpha: f64) -> Result<Logistic> {
        let n = y.len();
        if d == 0 || x.len() != n * d {
            return Err(Error::internal_msg("supervised model: shape mismatch"));
        }
        let positives = y.iter().filter(|l| **l).count();
        if positives == 0 || positives == n {
            return Err(Error::internal_msg(
                "supervised model: both labels are needed",
            ));
        }
        let mut mean = vec![0f64; d];
        let mut sq = vec![0f64; d];
        for row in x.chunks(d) {
            for (j, v) in row.iter().enumerate() {
                mean[j] += f64::from(*v);
                sq[j] += f64::from(*v) * f64::from(*v);
            }
        }
        let nf = n as f64;
        let mean: Vec<f64> = mean.iter().map(|m| m / nf).collect();
        let scale: Vec<f64> = sq
            .iter()
            .zip(&mean)
            .map(|(s, m)| {
                let sd = (s / nf - m * m).max(0.0).sqrt();
                if sd > 1e-6 {
                    1.0 / sd.max(MIN_SCALE)
                } else {
                    0.0
                }
            })
            .collect();
        // Column-major standardised matrix.
        let mut values = vec![0f64; n * d];
        for (i, row) in x.chunks(d).enumerate() {
            for (j, v) in row.iter().enumerate() {
                values[j * n + i] = (f64::from(*v) - mean[j]) * scale[j];
            }
        }
        let xm = DenseMatrix::new(n, d, values, true).map_err(Error::internal)?;
        let ys: Vec<i32> = y.iter().map(|l| i32::from(*l)).collect();
        let params = LogisticRegressionParameters::default().with_alpha(alpha);
        let lr: LogisticRegression<f64, i32, DenseMatrix<f64>, Vec<i32>> =
            LogisticRegression::fit(&xm, &ys, params).map_err(Error::internal)?;
        let coef = lr.coefficients();
        let weights: Vec<f32> = (0..d).map(|j| *coef.get((0, j)) as f32).collect();
        let bias = *lr.intercept().get((0, 0)) as f32;
        // smartcore orders classes ascending, so the model's class 1 is label 1.
        Ok(Logistic {
            mean: mean.iter().map(|m| *m as f32).collect(),
            scale: scale.iter().map(|s| *s as f32).collect(),
            weights,
            bias,
        })
    }

    /// The decision value `w·z + b` of a row.
    pub fn decision(&self, row: &[f32]) -> f64 {
        let mut s = f64::from(self.bias);
        for (j, v) in row.iter().enumerate().take(self.weights.len()) {
            let z = (v - self.mean[j]) * self.scale[j];
            s += f64::from(z * self.weights[j]);
        }
        s
    }

    /// P(anomaly) of a row.
    pub fn prob(&self, row: &[f32]) -> f64 {
        1.0 / (1.0 + (-self.decision(row)).exp())
    }

    /// Number of inputs.
    pub fn inputs(&self) -> usize {
        self.weights.len()
    }
}

/// Which supervised model training builds (`ANOMALY_SUPERVISED_MODEL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SupervisedKind {
    /// Logistic regression (contract 15.3), the default.
    #[default]
    Logistic,
    /// A random forest of CART trees, output clamped (the tree option).
    Forest,
}

impl SupervisedKind {
    /// `logistic` or `forest` (anything else: logistic).
    pub fn parse(s: &str) -> SupervisedKind {
        match s.trim().to_ascii_lowercase().as_str() {
            "forest" | "random_forest" => SupervisedKind::Forest,
            _ => SupervisedKind::Logistic,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            SupervisedKind::Logistic => "logistic",
            SupervisedKind::Forest => "forest",
        }
    }
}

/// A trained supervised model. Untagged, so models stored before the tree option existed
/// (a bare logistic regression) still load.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Supervised {
    Logistic(Logistic),
    Forest(crate::trees::Forest),
}

impl Supervised {
    /// Fits the model of `kind` on `x` (row-major, `d` per row) and `y`.
    pub fn fit(
        kind: SupervisedKind,
        x: &[f32],
        d: usize,
        y: &[bool],
        seed: u64,
        progress: impl FnMut(f64) -> Result<()>,
    ) -> Result<Supervised> {
        match kind {
            SupervisedKind::Logistic => Logistic::fit(x, d, y, 1.0).map(Supervised::Logistic),
            SupervisedKind::Forest => crate::trees::Forest::fit(
                x,
                d,
                y,
                crate::trees::ForestParams {
                    seed,
                    ..crate::trees::ForestParams::default()
                },
                progress,
            )
            .map(Supervised::Forest),
        }
    }

    /// P(anomaly) of a row.
    pub fn prob(&self, row: &[f32]) -> f64 {
        match self {
            Supervised::Logistic(m) => m.prob(row),
            Supervised::Forest(m) => m.prob(row),
        }
    }

    pub fn kind(&self) -> SupervisedKind {
        match self {
            Supervised::Logistic(_) => SupervisedKind::Logistic,
            Supervised::Forest(_) => SupervisedKind::Forest,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// 200 rows, one in five an anomaly, separable on the first input.
    fn separable() -> (Vec<f32>, Vec<bool>) {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..200 {
            let pos = i % 5 == 0;
            let noise = ((i * 37) % 11) as f32 / 11.0;
            x.extend([if pos { 3.0 } else { 0.0 } + noise, noise * 2.0]);
            y.push(pos);
        }
        (x, y)
    }

    #[test]
    fn separates_and_round_trips() {
        let (x, y) = separable();
        let m = Logistic::fit(&x, 2, &y, 1.0).unwrap();
        assert!(m.prob(&[3.5, 0.5]) > 0.8);
        assert!(m.prob(&[0.2, 0.5]) < 0.2);
        let back: Logistic = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert!(Logistic::fit(&x, 2, &[true; 200], 1.0).is_err());
    }

    #[test]
    fn both_kinds_fit_and_a_stored_logistic_still_loads() {
        let (x, y) = separable();
        for kind in [SupervisedKind::Logistic, SupervisedKind::Forest] {
            let m = Supervised::fit(kind, &x, 2, &y, 7, |_| Ok(())).unwrap();
            assert_eq!(m.kind(), kind);
            assert!(m.prob(&[3.5, 0.5]) > 0.8, "{kind:?}");
            assert!(m.prob(&[0.2, 0.5]) < 0.2, "{kind:?}");
            let back: Supervised =
                serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
            assert_eq!(back, m);
        }
        // The serialised form of a bare logistic regression (models stored earlier).
        let lr = Logistic::fit(&x, 2, &y, 1.0).unwrap();
        let old = serde_json::to_vec(&lr).unwrap();
        let back: Supervised = serde_json::from_slice(&old).unwrap();
        assert_eq!(back, Supervised::Logistic(lr));
        assert_eq!(SupervisedKind::parse("Forest"), SupervisedKind::Forest);
        assert_eq!(SupervisedKind::parse("logistic"), SupervisedKind::Logistic);
    }
}
