//! Hashed feature vectors (contract 11.2) and type prediction by nearest centroid.
//!
//! The text of an agent is the lowercase alphanumeric words of its name, type, capabilities
//! and recent action names. Each word is hashed (FNV-1a) into one of `DIM` buckets; name
//! words count twice. Vectors are L2-normalised, so the dot product is the cosine.

pub const DIM: usize = 128;

/// The agent types (contract 11.1).
pub const AGENT_TYPES: [&str; 7] = [
    "llm",
    "tool",
    "workflow",
    "custom",
    "rag",
    "action",
    "orchestrator",
];

/// Lowercase alphanumeric words, split on any other character.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

fn bucket(word: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in word.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % DIM as u64) as usize
}

/// An L2-normalised hashed vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding(pub Vec<f32>);

/// The parts of an agent that make its embedding.
pub struct Profile<'a> {
    pub name: &'a str,
    pub agent_type: &'a str,
    pub capabilities: &'a [String],
    pub actions: &'a [String],
}

impl Embedding {
    fn from_weighted<'a>(parts: impl Iterator<Item = (&'a str, f32)>) -> Embedding {
        let mut v = vec![0f32; DIM];
        for (text, weight) in parts {
            for w in words(text) {
                v[bucket(&w)] += weight;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        }
        Embedding(v)
    }

    pub fn of_agent(p: &Profile<'_>) -> Embedding {
        let caps = p.capabilities.iter().map(|c| (c.as_str(), 1.0));
        let acts = p.actions.iter().map(|a| (a.as_str(), 0.5));
        Self::from_weighted(
            [(p.name, 2.0), (p.agent_type, 1.0)]
                .into_iter()
                .chain(caps)
                .chain(acts),
        )
    }

    /// A search query.
    pub fn of_query(q: &str) -> Embedding {
        Self::from_weighted(std::iter::once((q, 1.0)))
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|x| *x == 0.0)
    }

    pub fn cosine(&self, other: &Embedding) -> f32 {
        self.0.iter().zip(&other.0).map(|(a, b)| a * b).sum()
    }

    /// Little-endian `f32`s (the stored form).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Embedding> {
        if bytes.len() != DIM * 4 {
            return None;
        }
        Some(Embedding(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    }
}

/// Built-in labelled examples: the seed of the type predictor.
const SEED: &[(&str, &str)] = &[
    ("llm", "chat assistant llm language model gpt claude respond generate answer summarize text completion"),
    ("llm", "support bot conversational assistant respond"),
    ("tool", "tool api call function calculator lookup fetch http client execute"),
    ("tool", "parser converter extractor invoice pdf tool"),
    ("workflow", "workflow pipeline steps schedule etl batch job process approval flow"),
    ("rag", "rag retrieval search documents knowledge base index embeddings vector qa"),
    ("action", "action executor automate perform task write update delete deploy"),
    ("orchestrator", "orchestrator coordinator planner manager supervisor multi agent delegate route"),
    ("custom", "custom agent"),
];

/// Sums of the embeddings of a tenant's agents per declared type: the tenant's labelled
/// examples.
pub type TypeSums = std::collections::HashMap<String, Vec<f32>>;

/// Adds (`sign` 1.0) or removes (-1.0) an example.
pub fn add_example(sums: &mut TypeSums, agent_type: &str, e: &Embedding, sign: f32) {
    let sum = sums
        .entry(agent_type.to_owned())
        .or_insert_with(|| vec![0f32; DIM]);
    for (s, x) in sum.iter_mut().zip(&e.0) {
        *s += sign * x;
    }
}

fn normalised(mut v: Vec<f32>) -> Embedding {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    Embedding(v)
}

/// Nearest-centroid type prediction: each type's centroid is the sum of the built-in seed
/// examples and, when given, the tenant's labelled agents of that type.
pub struct TypePredictor {
    seed_sums: Vec<(&'static str, Vec<f32>)>,
    centroids: Vec<(&'static str, Embedding)>,
}

impl Default for TypePredictor {
    fn default() -> Self {
        Self::new()
    }
}

impl TypePredictor {
    pub fn new() -> Self {
        let mut seed_sums = Vec::new();
        for t in AGENT_TYPES {
            let mut sum = vec![0f32; DIM];
            for (_, text) in SEED.iter().filter(|(ty, _)| *ty == t) {
                for (i, x) in Embedding::of_query(text).0.iter().enumerate() {
                    sum[i] += x;
                }
            }
            seed_sums.push((t, sum));
        }
        let centroids = seed_sums
            .iter()
            .map(|(t, s)| (*t, normalised(s.clone())))
            .collect();
        Self {
            seed_sums,
            centroids,
        }
    }

    /// The most similar type and a confidence in [0, 1] (the best similarity's share of all
    /// positive similarities). `None` for an empty embedding.
    pub fn predict(&self, e: &Embedding) -> Option<(&'static str, f64)> {
        self.predict_with(e, None)
    }

    /// Like `predict`, with the tenant's labelled agents added to the seed examples.
    pub fn predict_with(
        &self,
        e: &Embedding,
        tenant: Option<&TypeSums>,
    ) -> Option<(&'static str, f64)> {
        if e.is_zero() {
            return None;
        }
        let tenant_centroids: Vec<(&'static str, Embedding)>;
        let centroids = match tenant {
            None => &self.centroids,
            Some(sums) => {
                tenant_centroids = self
                    .seed_sums
                    .iter()
                    .map(|(t, seed)| {
                        let mut v = seed.clone();
                        if let Some(extra) = sums.get(*t) {
                            v.iter_mut().zip(extra).for_each(|(a, b)| *a += b);
                        }
                        (*t, normalised(v))
                    })
                    .collect();
                &tenant_centroids
            }
        };
        let scores: Vec<(&'static str, f32)> =
            centroids.iter().map(|(t, c)| (*t, c.cosine(e))).collect();
        let total: f32 = scores.iter().map(|(_, s)| s.max(0.0)).sum();
        let (best, score) = scores
            .into_iter()
            .max_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))?;
        if score <= 0.0 || total <= 0.0 {
            return Some(("custom", 0.0));
        }
        Some((best, f64::from((score / total).clamp(0.0, 1.0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, ty: &str, caps: &[&str]) -> Embedding {
        let caps: Vec<String> = caps.iter().map(|s| s.to_string()).collect();
        Embedding::of_agent(&Profile {
            name,
            agent_type: ty,
            capabilities: &caps,
            actions: &[],
        })
    }

    #[test]
    fn normalised_and_round_trips() {
        let e = agent("Invoice-Parser v2", "tool", &["observe"]);
        let norm: f32 = e.0.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(Embedding::from_bytes(&e.to_bytes()), Some(e));
        assert!(Embedding::of_query("  --  ").is_zero());
    }

    #[test]
    fn name_match_ranks_first() {
        let q = Embedding::of_query("invoice");
        let hit = agent("invoice-parser", "tool", &["execute"]);
        let miss = agent("weather-bot", "llm", &["respond"]);
        assert!(q.cosine(&hit) > 0.3);
        assert!(q.cosine(&hit) > q.cosine(&miss));
    }

    #[test]
    fn tenant_examples_teach_new_vocabulary() {
        let p = TypePredictor::new();
        let e = agent("zorblax quantifier", "custom", &[]);
        let mut sums = TypeSums::new();
        for name in [
            "zorblax ledger",
            "zorblax quantifier engine",
            "quantifier zorblax",
        ] {
            add_example(&mut sums, "workflow", &agent(name, "workflow", &[]), 1.0);
        }
        assert_eq!(
            p.predict_with(&e, Some(&sums)).map(|(t, _)| t),
            Some("workflow")
        );
        let mut removed = sums.clone();
        for name in [
            "zorblax ledger",
            "zorblax quantifier engine",
            "quantifier zorblax",
        ] {
            add_example(
                &mut removed,
                "workflow",
                &agent(name, "workflow", &[]),
                -1.0,
            );
        }
        assert_ne!(
            p.predict_with(&e, Some(&removed)).map(|(t, _)| t),
            Some("workflow")
        );
    }

    #[test]
    fn predicts_plausible_types() {
        let p = TypePredictor::new();
        let (t, c) = p
            .predict(&agent("support chat assistant", "custom", &["respond"]))
            .unwrap();
        assert_eq!(t, "llm");
        assert!(c > 0.0 && c <= 1.0);
        let (t, _) = p
            .predict(&agent("document retrieval search", "custom", &[]))
            .unwrap();
        assert_eq!(t, "rag");
    }
}
