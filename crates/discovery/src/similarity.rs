//! Name similarity for clustering (contract 12.3): the Jaccard index of the character
//! trigram sets of normalised names (lowercase, only `a-z0-9` kept), and transitive groups of
//! the pairs at or above a threshold.
//!
//! Pairs are found through an inverted index of trigrams, so only names sharing at least one
//! trigram are ever compared (a pair sharing none has similarity 0, below any threshold).

use std::collections::HashMap;

/// Tolerance of the threshold comparison (`7/10 ≥ 0.7` must hold despite rounding).
const EPSILON: f64 = 1e-9;

/// Lowercase, only `a-z0-9` kept.
pub fn normalise(name: &str) -> String {
    name.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .collect()
}

/// The set of character trigrams of a normalised name, each packed into a `u32`, sorted.
/// A non-empty name shorter than three characters is its own single gram (so that `ab` is
/// similar to `ab`); an empty one has no grams and is similar to nothing.
pub fn trigrams(normalised: &str) -> Vec<u32> {
    let bytes = normalised.as_bytes();
    let pack = |w: &[u8]| w.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
    let mut grams: Vec<u32> = if bytes.len() < 3 {
        if bytes.is_empty() {
            Vec::new()
        } else {
            // Shorter than a trigram: tag the length so that `ab` never equals a real trigram.
            vec![(0xff << 24) | pack(bytes)]
        }
    } else {
        bytes.windows(3).map(pack).collect()
    };
    grams.sort_unstable();
    grams.dedup();
    grams
}

/// Jaccard index of two sorted sets (0 when both are empty).
pub fn jaccard(a: &[u32], b: &[u32]) -> f64 {
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - shared;
    if union == 0 {
        0.0
    } else {
        shared as f64 / union as f64
    }
}

/// The similarity of two names.
pub fn similarity(a: &str, b: &str) -> f64 {
    jaccard(&trigrams(&normalise(a)), &trigrams(&normalise(b)))
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The smaller index is the root: deterministic groups.
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[hi] = lo;
        }
    }
}

/// The groups (indexes into `names`, ascending) of two or more names connected transitively
/// by pairs whose similarity is at least `threshold`; ordered by their first index.
pub fn groups<S: AsRef<str>>(names: &[S], threshold: f64) -> Vec<Vec<usize>> {
    let sets: Vec<Vec<u32>> = names
        .iter()
        .map(|n| trigrams(&normalise(n.as_ref())))
        .collect();
    let mut postings: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        for g in set {
            postings.entry(*g).or_default().push(i);
        }
    }
    let mut uf = UnionFind::new(sets.len());
    let mut shared: HashMap<usize, usize> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        if set.is_empty() {
            continue;
        }
        shared.clear();
        for g in set {
            if let Some(list) = postings.get(g) {
                // Postings are ascending: only look at later names (each pair once).
                let start = list.partition_point(|&j| j <= i);
                for &j in &list[start..] {
                    *shared.entry(j).or_default() += 1;
                }
            }
        }
        for (&j, &common) in &shared {
            let union = set.len() + sets[j].len() - common;
            if union > 0 && common as f64 / union as f64 + EPSILON >= threshold {
                uf.union(i, j);
            }
        }
    }
    let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..sets.len() {
        let root = uf.find(i);
        by_root.entry(root).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = by_root.into_values().filter(|g| g.len() > 1).collect();
    for g in &mut out {
        g.sort_unstable();
    }
    out.sort_unstable_by_key(|g| g[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_keeps_only_lowercase_alphanumerics() {
        assert_eq!(normalise("Sales Helper"), "saleshelper");
        assert_eq!(normalise("sales-helper_2!"), "saleshelper2");
        assert_eq!(normalise("Ünï"), "n");
    }

    #[test]
    fn trigram_jaccard() {
        assert_eq!(similarity("sales-helper", "Sales Helper"), 1.0);
        // 9 shared trigrams of 10.
        assert!((similarity("sales-helper", "saleshelper2") - 0.9).abs() < 1e-12);
        assert!(similarity("sales-helper", "invoice-parser") < 0.2);
        assert_eq!(similarity("", ""), 0.0);
        assert_eq!(similarity("ab", "AB"), 1.0);
        assert_eq!(similarity("ab", "abc"), 0.0);
    }

    #[test]
    fn groups_are_transitive_and_leave_unrelated_alone() {
        let names = [
            "sales-helper",
            "invoice-parser",
            "Sales Helper",
            "saleshelper2",
            "report-bot",
            "invoice parser bot",
        ];
        let g = groups(&names, 0.8);
        assert_eq!(g, vec![vec![0, 2, 3]]);
        // A lower threshold also joins the invoice parsers.
        let g = groups(&names, 0.6);
        assert_eq!(g, vec![vec![0, 2, 3], vec![1, 5]]);
        // Threshold 1: only identical normalised names.
        assert_eq!(groups(&names, 1.0), vec![vec![0, 2]]);
    }

    #[test]
    fn chains_merge_transitively() {
        // a~b and b~c above the threshold, a~c below it: one group.
        let a = "abcdefghij";
        let b = "abcdefghijk";
        let c = "abcdefghijkl";
        let t = similarity(a, b).min(similarity(b, c));
        assert!(similarity(a, c) < t);
        assert_eq!(groups(&[a, b, c], t), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn threshold_is_inclusive() {
        // 4 shared of 5: exactly 0.8.
        let (a, b) = ("abcdef", "abcdefg");
        assert!((similarity(a, b) - 0.8).abs() < 1e-12);
        assert_eq!(groups(&[a, b], 0.8), vec![vec![0, 1]]);
    }
}
