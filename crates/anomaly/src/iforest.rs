//! A compact isolation forest (Liu, Ting and Zhou, ICDM 2008), built the way scikit-learn's
//! `IsolationForest` builds it so that the scores rank alike: each tree is grown on a
//! sub-sample of `min(256, n)` rows drawn without replacement, to depth
//! `ceil(log2(sub-sample))`; a node picks a random feature among those not constant in it
//! and a split drawn uniformly between the feature's minimum and maximum in the node
//! (`x <= split` goes left); a leaf's path length is its depth plus `c(n)` of the rows it
//! holds; the score is `2^(-E(h(x)) / c(sub-sample))`. Features are `f32`, as scikit-learn's
//! trees read them. Nodes live in flat arrays (no pointers), the RNG is seeded (ChaCha8),
//! and the whole forest is `serde`.

use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Marks a leaf in [`IsolationForest::feature`].
const LEAF: u32 = u32::MAX;

/// Training parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub trees: usize,
    pub sub_sample: usize,
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            trees: 100,
            sub_sample: 256,
            seed: 42,
        }
    }
}

/// The trained forest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IsolationForest {
    pub features: usize,
    /// The sub-sample size the trees were grown on (normalises the score).
    pub sub_sample: usize,
    /// First node of each tree.
    roots: Vec<u32>,
    /// Split feature of each node, [`LEAF`] for leaves.
    feature: Vec<u32>,
    /// Split value of an inner node; path length (depth + c(n)) of a leaf.
    value: Vec<f32>,
    /// Left child (the right one follows it) of an inner node.
    left: Vec<u32>,
}

/// Average path length of an unsuccessful search in a binary search tree of `n` nodes.
pub fn c(n: usize) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => 1.0,
        _ => {
            let n = n as f64;
            2.0 * ((n - 1.0).ln() + 0.577_215_664_901_532_9) - 2.0 * (n - 1.0) / n
        }
    }
}

struct Builder<'a> {
    x: &'a [f32],
    d: usize,
    max_depth: usize,
    rng: ChaCha8Rng,
    forest: &'a mut IsolationForest,
    order: Vec<usize>,
}

impl Builder<'_> {
    fn push_leaf(&mut self, at: usize, depth: usize, n: usize) {
        self.forest.feature[at] = LEAF;
        self.forest.value[at] = (depth as f64 + c(n)) as f32;
    }

    fn node(&mut self, at: usize, lo: usize, hi: usize, depth: usize) {
        let n = hi - lo;
        if depth >= self.max_depth || n < 2 {
            self.push_leaf(at, depth, n);
            return;
        }
        // Features in random order until one is not constant in the node.
        let mut candidates: Vec<usize> = (0..self.d).collect();
        let mut split = None;
        while !candidates.is_empty() {
            let k = self.rng.gen_range(0..candidates.len());
            let f = candidates.swap_remove(k);
            let (mut mn, mut mx) = (f32::INFINITY, f32::NEG_INFINITY);
            for &r in &self.order[lo..hi] {
                let v = self.x[r * self.d + f];
                mn = mn.min(v);
                mx = mx.max(v);
            }
            if f64::from(mx) <= f64::from(mn) + 1e-7 {
                continue;
            }
            let mut t = self.rng.gen_range(f64::from(mn)..f64::from(mx)) as f32;
            if t >= mx {
                t = mn;
            }
            split = Some((f, t));
            break;
        }
        let Some((f, t)) = split else {
            self.push_leaf(at, depth, n);
            return;
        };
        // Partition order[lo..hi] by x[f] <= t.
        let mut i = lo;
        let mut j = hi;
        while i < j {
            if self.x[self.order[i] * self.d + f] <= t {
                i += 1;
            } else {
                j -= 1;
                self.order.swap(i, j);
            }
        }
        let left = self.forest.feature.len();
        self.forest.feature.extend([LEAF, LEAF]);
        self.forest.value.extend([0.0, 0.0]);
        self.forest.left.extend([0, 0]);
        self.forest.feature[at] = f as u32;
        self.forest.value[at] = t;
        self.forest.left[at] = left as u32;
        self.node(left, lo, i, depth + 1);
        self.node(left + 1, i, hi, depth + 1);
    }
}

impl IsolationForest {
    /// Fits a forest on `x` (row-major, `d` features per row). `progress(trees_done / trees)`
    /// is called after every tree and stops the work on error.
    pub fn fit<E>(
        x: &[f32],
        d: usize,
        params: Params,
        mut progress: impl FnMut(f64) -> Result<(), E>,
    ) -> Result<IsolationForest, E> {
        let n = x.len().checked_div(d).unwrap_or(0);
        let sub = params.sub_sample.min(n).max(1);
        let max_depth = (sub as f64).log2().ceil().max(0.0) as usize;
        let mut forest = IsolationForest {
            features: d,
            sub_sample: sub,
            roots: Vec::with_capacity(params.trees),
            feature: Vec::new(),
            value: Vec::new(),
            left: Vec::new(),
        };
        if n == 0 {
            return Ok(forest);
        }
        let mut master = ChaCha8Rng::seed_from_u64(params.seed);
        for t in 0..params.trees {
            let mut rng = ChaCha8Rng::seed_from_u64(master.gen());
            let order: Vec<usize> = sample(&mut rng, n, sub).into_vec();
            let root = forest.feature.len();
            forest.roots.push(root as u32);
            forest.feature.push(LEAF);
            forest.value.push(0.0);
            forest.left.push(0);
            let mut b = Builder {
                x,
                d,
                max_depth,
                rng,
                forest: &mut forest,
                order,
            };
            b.node(root, 0, sub, 0);
            progress((t + 1) as f64 / params.trees as f64)?;
        }
        Ok(forest)
    }

    /// Mean path length of `row` over the trees.
    pub fn path_length(&self, row: &[f32]) -> f64 {
        if self.roots.is_empty() {
            return 0.0;
        }
        let mut total = 0.0f64;
        for &root in &self.roots {
            let mut at = root as usize;
            loop {
                let f = self.feature[at];
                if f == LEAF {
                    total += f64::from(self.value[at]);
                    break;
                }
                let v = row.get(f as usize).copied().unwrap_or(0.0);
                at = self.left[at] as usize + usize::from(v > self.value[at]);
            }
        }
        total / self.roots.len() as f64
    }

    /// The anomaly score `2^(-E(h)/c(sub-sample))` in (0, 1]; higher is more anomalous.
    pub fn score(&self, row: &[f32]) -> f64 {
        let cn = c(self.sub_sample);
        if cn <= 0.0 {
            return 0.5;
        }
        2f64.powf(-self.path_length(row) / cn)
    }

    /// Number of trees.
    pub fn trees(&self) -> usize {
        self.roots.len()
    }
}

/// ROC-AUC of scores against labels (ties counted half), the Mann-Whitney statistic.
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|a, b| scores[*a].total_cmp(&scores[*b]));
    let (mut rank_sum, mut pos) = (0.0f64, 0usize);
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            if labels[k] {
                rank_sum += avg;
                pos += 1;
            }
        }
        i = j + 1;
    }
    let neg = scores.len() - pos;
    if pos == 0 || neg == 0 {
        return 0.5;
    }
    (rank_sum - (pos * (pos + 1)) as f64 / 2.0) / (pos as f64 * neg as f64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn isolates_outliers_and_round_trips() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut x = Vec::new();
        let mut labels = Vec::new();
        for i in 0..2000 {
            let out = i % 100 == 0;
            let s = if out { 6.0 } else { 1.0 };
            x.push(rng.gen_range(-1.0..1.0f32) * s);
            x.push(rng.gen_range(-1.0..1.0f32) * s + if out { 4.0 } else { 0.0 });
            labels.push(out);
        }
        let f = IsolationForest::fit::<()>(&x, 2, Params::default(), |_| Ok(())).unwrap();
        assert_eq!(f.trees(), 100);
        let scores: Vec<f64> = x.chunks(2).map(|r| f.score(r)).collect();
        assert!(roc_auc(&scores, &labels) > 0.95);
        assert!(scores.iter().all(|s| *s > 0.0 && *s <= 1.0));
        let back: IsolationForest =
            serde_json::from_slice(&serde_json::to_vec(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        // Same seed, same forest; another seed, another one.
        let g = IsolationForest::fit::<()>(&x, 2, Params::default(), |_| Ok(())).unwrap();
        assert_eq!(g, f);
        let h = IsolationForest::fit::<()>(
            &x,
            2,
            Params {
                seed: 1,
                ..Params::default()
            },
            |_| Ok(()),
        )
        .unwrap();
        assert_ne!(h, f);
    }

    #[test]
    fn c_matches_the_paper() {
        assert_eq!(c(1), 0.0);
        assert_eq!(c(2), 1.0);
        assert!((c(256) - 10.244_770_920_8).abs() < 1e-6);
        assert_eq!(roc_auc(&[0.1, 0.9, 0.5], &[false, true, false]), 1.0);
    }
}
