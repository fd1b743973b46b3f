//! Name similarity for clustering (contract 12.3): the Jaccard index of the character
//! trigram sets of normalised names (lowercase, only `a-z0-9` kept), and transitive groups of
//! the pairs at or above a threshold.
//!
//! Pairs are found through an inverted index of the rarest trigrams of each name (prefix
//! filtering, `groups`), so only names that can reach the threshold are ever compared (a pair
//! sharing no trigram has similarity 0, below any threshold).

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

    /// The sets of two or more members (ascending), ordered by their first member.
    fn groups(&mut self) -> Vec<Vec<usize>> {
        let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
        for i in 0..self.parent.len() {
            let root = self.find(i);
            by_root.entry(root).or_default().push(i);
        }
        let mut out: Vec<Vec<usize>> = by_root.into_values().filter(|g| g.len() > 1).collect();
        for g in &mut out {
            g.sort_unstable();
        }
        out.sort_unstable_by_key(|g| g[0]);
        out
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

/// The shortest overlap (shared grams) a set of `n` grams needs with another for their
/// Jaccard index to reach `threshold` (as compared with `EPSILON`): `J ≥ t` means
/// `shared ≥ t·|x ∪ y| ≥ t·n`. Rounded down generously, so that a prefix is never too short.
fn min_overlap(n: usize, threshold: f64) -> usize {
    let need = ((threshold - EPSILON) * n as f64 - 1e-6).ceil();
    if need.is_nan() || need < 1.0 {
        1
    } else {
        (need as usize).min(n)
    }
}

/// The groups (indexes into `names`, ascending) of two or more names connected transitively
/// by pairs whose similarity is at least `threshold`; ordered by their first index.
///
/// Prefix filtering (the AllPairs similarity join): every set's grams are ordered rarest
/// first, and only the first `n − overlap + 1` of them are indexed and probed — two sets
/// sharing at least `overlap` grams share one in those prefixes. A candidate pair is then
/// dropped when its sizes alone rule the threshold out, or when the two names are already in
/// one group, before the exact index is computed. Names that share many common grams (built
/// alike) thus cost one probe each instead of a comparison with every other.
pub fn groups<S: AsRef<str>>(names: &[S], threshold: f64) -> Vec<Vec<usize>> {
    let sets: Vec<Vec<u32>> = names
        .iter()
        .map(|n| trigrams(&normalise(n.as_ref())))
        .collect();
    let mut frequency: HashMap<u32, u32> = HashMap::new();
    for set in &sets {
        for g in set {
            *frequency.entry(*g).or_default() += 1;
        }
    }
    let prefixes: Vec<Vec<u32>> = sets
        .iter()
        .map(|set| {
            let mut ordered = set.clone();
            ordered.sort_unstable_by_key(|g| (frequency.get(g).copied().unwrap_or(0), *g));
            ordered.truncate(set.len() + 1 - min_overlap(set.len(), threshold).max(1));
            ordered
        })
        .collect();
    let mut postings: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, prefix) in prefixes.iter().enumerate() {
        for g in prefix {
            postings.entry(*g).or_default().push(i);
        }
    }
    let mut uf = UnionFind::new(sets.len());
    // The last name a candidate was checked against (each pair once per probe).
    let mut checked = vec![usize::MAX; sets.len()];
    for (i, prefix) in prefixes.iter().enumerate() {
        for g in prefix {
            let Some(list) = postings.get(g) else {
                continue;
            };
            // Postings are ascending: only later names (each pair once).
            let start = list.partition_point(|&j| j <= i);
            for &j in &list[start..] {
                if checked[j] == i {
                    continue;
                }
                checked[j] = i;
                let (a, b) = (sets[i].len(), sets[j].len());
                let (lo, hi) = (a.min(b), a.max(b));
                // J ≤ lo / hi.
                if lo as f64 / hi as f64 + EPSILON < threshold {
                    continue;
                }
                if uf.find(i) == uf.find(j) {
                    continue;
                }
                if jaccard(&sets[i], &sets[j]) + EPSILON >= threshold {
                    uf.union(i, j);
                }
            }
        }
    }
    uf.groups()
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

    /// Every pair compared: what `groups` must find.
    fn groups_by_every_pair(names: &[String], threshold: f64) -> Vec<Vec<usize>> {
        let mut uf = UnionFind::new(names.len());
        for i in 0..names.len() {
            for j in i + 1..names.len() {
                let (a, b) = (
                    trigrams(&normalise(&names[i])),
                    trigrams(&normalise(&names[j])),
                );
                let shared = a.iter().filter(|g| b.contains(g)).count();
                if shared > 0 && jaccard(&a, &b) + EPSILON >= threshold {
                    uf.union(i, j);
                }
            }
        }
        uf.groups()
    }

    #[test]
    fn prefix_filtering_finds_every_group_that_comparing_every_pair_finds() {
        // Names over a small alphabet share many trigrams: many near misses, many groups.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |m: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % m
        };
        for alphabet in [&b"abc"[..], &b"abcdefgh-"[..]] {
            let names: Vec<String> = (0..400)
                .map(|_| {
                    let len = 1 + next(14) as usize;
                    (0..len)
                        .map(|_| char::from(alphabet[next(alphabet.len() as u64) as usize]))
                        .collect()
                })
                .collect();
            for t in [0.05, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0] {
                assert_eq!(
                    groups(&names, t),
                    groups_by_every_pair(&names, t),
                    "alphabet {:?}, threshold {t}",
                    String::from_utf8_lossy(alphabet)
                );
            }
        }
    }

    #[test]
    fn names_built_alike_form_one_group_without_comparing_every_pair() {
        // 3,000 names sharing most of their trigrams: one group, found in one pass.
        let names: Vec<String> = (0..3_000)
            .map(|i| format!("shadow-agent-name-{i:05}"))
            .collect();
        let g = groups(&names, 0.5);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].len(), 3_000);
        assert_eq!(groups(&names, 0.95), Vec::<Vec<usize>>::new());
    }

    #[test]
    fn threshold_is_inclusive() {
        // 4 shared of 5: exactly 0.8.
        let (a, b) = ("abcdef", "abcdefg");
        assert!((similarity(a, b) - 0.8).abs() < 1e-12);
        assert_eq!(groups(&[a, b], 0.8), vec![vec![0, 1]]);
    }
}
