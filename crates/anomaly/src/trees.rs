//! The tree option of the supervised model (`ANOMALY_SUPERVISED_MODEL=forest`): a random
//! forest of CART classification trees (Breiman 2001). Each tree is grown on a bootstrap
//! sample of the rows; each node considers `ceil(sqrt(d))` features drawn at random and takes
//! the threshold with the largest decrease of Gini impurity (midpoint between two adjacent
//! distinct values, `x <= threshold` goes left), until `max_depth`, `min_leaf` rows or a pure
//! node. A leaf holds the fraction of anomalies among its rows; the forest's probability is
//! the mean over trees, clamped to `[CLAMP, 1 - CLAMP]` so that no single vote of fully grown
//! trees reads as certainty.
//!
//! smartcore's `RandomForestClassifier` returns majority votes only (no class probabilities)
//! and keeps its nodes private, so scoring one event through it would allocate a matrix per
//! tree; this forest keeps its nodes in flat arrays like [`crate::iforest`] and scores a row
//! without allocating. The RNG is seeded (ChaCha8); the forest is `serde`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use steward_core::{Error, Result};

/// Marks a leaf in [`Forest::feature`].
const LEAF: u32 = u32::MAX;
/// Bounds of the forest's probability.
pub const CLAMP: f64 = 0.02;

/// Training parameters.
#[derive(Clone, Copy, Debug)]
pub struct ForestParams {
    pub trees: usize,
    pub max_depth: usize,
    pub min_leaf: usize,
    pub seed: u64,
}

impl Default for ForestParams {
    fn default() -> Self {
        ForestParams {
            trees: 64,
            max_depth: 12,
            min_leaf: 2,
            seed: 42,
        }
    }
}

/// A trained forest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Forest {
    inputs: usize,
    /// First node of each tree.
    roots: Vec<u32>,
    /// Split feature of each node, [`LEAF`] for leaves.
    feature: Vec<u32>,
    /// Threshold of an inner node; fraction of anomalies of a leaf.
    value: Vec<f32>,
    /// Left child of an inner node (the right child is `right`).
    left: Vec<u32>,
    right: Vec<u32>,
}

/// Work space of one node being split.
struct Split {
    feature: usize,
    threshold: f32,
    /// Rows going left come first in the node's index slice after partitioning.
    left_len: usize,
}

impl Forest {
    /// Fits on `x` (row-major, `d` per row) and labels `y`. Rows may repeat (to weigh a
    /// class). `progress(p)` is called after each tree and stops the work on error.
    pub fn fit(
        x: &[f32],
        d: usize,
        y: &[bool],
        params: ForestParams,
        mut progress: impl FnMut(f64) -> Result<()>,
    ) -> Result<Forest> {
        let n = y.len();
        if d == 0 || n == 0 || x.len() != n * d {
            return Err(Error::internal_msg("forest: shape mismatch"));
        }
        let positives = y.iter().filter(|l| **l).count();
        if positives == 0 || positives == n {
            return Err(Error::internal_msg("forest: both labels are needed"));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        let mtry = ((d as f64).sqrt().ceil() as usize).clamp(1, d);
        let mut forest = Forest {
            inputs: d,
            roots: Vec::with_capacity(params.trees),
            feature: Vec::new(),
            value: Vec::new(),
            left: Vec::new(),
            right: Vec::new(),
        };
        let mut order: Vec<(f32, bool)> = Vec::with_capacity(n);
        let mut candidates: Vec<usize> = (0..d).collect();
        for t in 0..params.trees {
            let mut rows: Vec<u32> = (0..n).map(|_| rng.gen_range(0..n) as u32).collect();
            // A bootstrap sample with one class only teaches nothing: draw again (bounded).
            for _ in 0..8 {
                let pos = rows.iter().filter(|r| y[**r as usize]).count();
                if pos > 0 && pos < rows.len() {
                    break;
                }
                rows = (0..n).map(|_| rng.gen_range(0..n) as u32).collect();
            }
            let root = forest.feature.len() as u32;
            forest.roots.push(root);
            // Depth-first growth with an explicit stack of (node, start, end, depth).
            forest.push_node();
            let mut stack = vec![(root, 0usize, rows.len(), 0usize)];
            while let Some((node, start, end, depth)) = stack.pop() {
                let slice = &mut rows[start..end];
                let pos = slice.iter().filter(|r| y[**r as usize]).count();
                let frac = pos as f32 / slice.len() as f32;
                let pure = pos == 0 || pos == slice.len();
                let split =
                    if pure || depth >= params.max_depth || slice.len() < 2 * params.min_leaf {
                        None
                    } else {
                        best_split(
                            x,
                            d,
                            y,
                            slice,
                            mtry,
                            params.min_leaf,
                            &mut candidates,
                            &mut order,
                            &mut rng,
                        )
                    };
                let Some(s) = split else {
                    forest.feature[node as usize] = LEAF;
                    forest.value[node as usize] = frac;
                    continue;
                };
                // Partition the slice: rows with x <= threshold first.
                let mut i = 0;
                let mut j = slice.len();
                while i < j {
                    if x[slice[i] as usize * d + s.feature] <= s.threshold {
                        i += 1;
                    } else {
                        j -= 1;
                        slice.swap(i, j);
                    }
                }
                debug_assert_eq!(i, s.left_len);
                let l = forest.push_node();
                let r = forest.push_node();
                let k = node as usize;
                forest.feature[k] = s.feature as u32;
                forest.value[k] = s.threshold;
                forest.left[k] = l;
                forest.right[k] = r;
                stack.push((r, start + i, end, depth + 1));
                stack.push((l, start, start + i, depth + 1));
            }
            progress((t + 1) as f64 / params.trees as f64)?;
        }
        Ok(forest)
    }

    fn push_node(&mut self) -> u32 {
        let id = self.feature.len() as u32;
        self.feature.push(LEAF);
        self.value.push(0.0);
        self.left.push(0);
        self.right.push(0);
        id
    }

    /// P(anomaly) of a row: the mean leaf fraction over the trees, clamped.
    pub fn prob(&self, row: &[f32]) -> f64 {
        if self.roots.is_empty() {
            return 0.5;
        }
        let mut sum = 0f64;
        for &root in &self.roots {
            let mut k = root as usize;
            loop {
                let f = self.feature[k];
                if f == LEAF {
                    sum += f64::from(self.value[k]);
                    break;
                }
                let v = row.get(f as usize).copied().unwrap_or(0.0);
                k = if v <= self.value[k] {
                    self.left[k] as usize
                } else {
                    self.right[k] as usize
                };
            }
        }
        (sum / self.roots.len() as f64).clamp(CLAMP, 1.0 - CLAMP)
    }

    /// Number of inputs.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Number of trees.
    pub fn trees(&self) -> usize {
        self.roots.len()
    }
}

/// The best Gini split of `rows` over `mtry` random features, if any reduces impurity and
/// leaves at least `min_leaf` rows on each side.
#[allow(clippy::too_many_arguments)]
fn best_split(
    x: &[f32],
    d: usize,
    y: &[bool],
    rows: &[u32],
    mtry: usize,
    min_leaf: usize,
    candidates: &mut [usize],
    order: &mut Vec<(f32, bool)>,
    rng: &mut ChaCha8Rng,
) -> Option<Split> {
    let n = rows.len();
    let total_pos = rows.iter().filter(|r| y[**r as usize]).count() as f64;
    let nf = n as f64;
    let gini = |pos: f64, count: f64| {
        if count <= 0.0 {
            0.0
        } else {
            let p = pos / count;
            2.0 * p * (1.0 - p) * count
        }
    };
    let parent = gini(total_pos, nf);
    let mut best: Option<(f64, Split)> = None;
    // A partial Fisher-Yates shuffle picks `mtry` distinct features.
    for i in 0..mtry.min(d) {
        let j = rng.gen_range(i..d);
        candidates.swap(i, j);
        let f = candidates[i];
        order.clear();
        order.extend(
            rows.iter()
                .map(|r| (x[*r as usize * d + f], y[*r as usize])),
        );
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        if order[0].0 == order[n - 1].0 {
            continue;
        }
        let mut left_pos = 0f64;
        for k in 0..n - 1 {
            if order[k].1 {
                left_pos += 1.0;
            }
            let left = (k + 1) as f64;
            if order[k].0 == order[k + 1].0 || k + 1 < min_leaf || n - (k + 1) < min_leaf {
                continue;
            }
            let impurity = gini(left_pos, left) + gini(total_pos - left_pos, nf - left);
            let gain = parent - impurity;
            if gain > 1e-12 && best.as_ref().is_none_or(|(g, _)| gain > *g) {
                let lo = order[k].0;
                let hi = order[k + 1].0;
                let mut threshold = lo + (hi - lo) / 2.0;
                // Rounding can land on `hi`; the threshold must keep `hi` on the right.
                if threshold >= hi {
                    threshold = lo;
                }
                best = Some((
                    gain,
                    Split {
                        feature: f,
                        threshold,
                        left_len: k + 1,
                    },
                ));
            }
        }
    }
    best.map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn xor_data() -> (Vec<f32>, Vec<bool>) {
        // Anomalies where exactly one of two features is high: no linear model separates it.
        // The third feature is noise.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut x = Vec::new();
        let mut y = Vec::new();
        for _ in 0..400 {
            let (ha, hb) = (rng.gen_bool(0.5), rng.gen_bool(0.5));
            let a = f32::from(u8::from(ha)) + rng.gen_range(0.0..0.25f32);
            let b = f32::from(u8::from(hb)) + rng.gen_range(0.0..0.25f32);
            x.extend([a, b, rng.gen_range(0.0..10.0f32)]);
            y.push(ha != hb);
        }
        (x, y)
    }

    #[test]
    fn learns_an_interaction_and_round_trips() {
        let (x, y) = xor_data();
        let f = Forest::fit(&x, 3, &y, ForestParams::default(), |_| Ok(())).unwrap();
        assert_eq!(f.trees(), 64);
        assert!(f.prob(&[1.1, 0.1, 3.0]) > 0.8);
        assert!(f.prob(&[0.1, 1.1, 3.0]) > 0.8);
        assert!(f.prob(&[0.1, 0.1, 3.0]) < 0.2);
        assert!(f.prob(&[1.1, 1.1, 3.0]) < 0.2);
        let back: Forest = serde_json::from_slice(&serde_json::to_vec(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn output_is_clamped_and_deterministic() {
        let (x, y) = xor_data();
        let a = Forest::fit(&x, 3, &y, ForestParams::default(), |_| Ok(())).unwrap();
        let b = Forest::fit(&x, 3, &y, ForestParams::default(), |_| Ok(())).unwrap();
        assert_eq!(a, b);
        for row in [[1.1, 0.1, 0.0], [0.0, 0.0, 0.0], [9.0, -9.0, 99.0]] {
            let p = a.prob(&row);
            assert!((CLAMP..=1.0 - CLAMP).contains(&p), "{p}");
        }
        // A short row reads missing inputs as 0 rather than panicking.
        assert!(a.prob(&[1.1]).is_finite());
    }

    #[test]
    fn refuses_one_class_and_bad_shapes_and_stops_on_progress_error() {
        let (x, _) = xor_data();
        assert!(Forest::fit(&x, 3, &[true; 400], ForestParams::default(), |_| Ok(())).is_err());
        assert!(Forest::fit(&x, 4, &[true; 400], ForestParams::default(), |_| Ok(())).is_err());
        let (x, y) = xor_data();
        let mut calls = 0;
        let r = Forest::fit(&x, 3, &y, ForestParams::default(), |_| {
            calls += 1;
            if calls == 3 {
                Err(Error::internal_msg("cancelled"))
            } else {
                Ok(())
            }
        });
        assert!(r.is_err());
        assert_eq!(calls, 3);
    }
}
