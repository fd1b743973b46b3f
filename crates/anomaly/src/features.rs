//! Features of one audit event (or report / feedback `event_data`): one definition, used for
//! training and for scoring ([`FEATURE_VERSION`]).
//!
//! An event is a JSON object: `action`, `resource`, optional `agent_id`, `timestamp`,
//! `is_approved`, `reasoning`, and any other members (`input`, `output`, `context`, …)
//! whose leaves are read wherever they sit (a status code counts the same under `output`
//! as under `context`). The features are computed against [`Vocab`], the statistics of the
//! tenant's history that the model stores:
//!
//! - rarity (`ln((n+1)/(c+1))`) of the action, (action, resource prefix), (agent, action)
//!   and (agent, action, resource prefix);
//! - hashed character trigrams (lowercase, digits folded) of the resource and of the string
//!   leaves: mean surprise under the history's trigram model, share and number of trigrams the
//!   history never showed, the rarest token, the rarest (key, value) of short strings — where
//!   injections, traversal and markup show;
//! - meta-character count and punctuation share, string and resource length;
//! - numeric leaves: the largest deviation (in standard deviations of `ln(1+|v|)`) from the
//!   history of the same key, the rarest (key, value) of small integers (status codes);
//! - shape: leaf count, depth, rarity of the key set, share of keys the history never showed;
//! - reasoning length, rarity of the hour of day (over all events and for the agent), the
//!   approval flag; the hour is the event's own time when its payload carries one (an
//!   imported log), else its `timestamp`;
//! - the agent's recent rate against its own typical share of the traffic: a scan over the
//!   windows of the last 1, 2, 4, …, [`WINDOW`] events before this one, each scored by the
//!   binomial log-likelihood ratio `n·KL(k/n ‖ p)` of the agent's `k` events in it against its
//!   history share `p` (the largest), and the rarity of the action among the agent's last
//!   [`AGENT_WINDOW`] actions — counted in events, so independent of the pace; the run of
//!   equal small steps between the ids of the agent's consecutive requests to one endpoint
//!   (enumeration); the mean outcome rarity (status codes) of the agent's last
//!   [`OUTCOME_WINDOW`] events;
//! - the rarity of each string's shape (character classes and length) under its key, query
//!   parameters of the resource and of form-encoded strings included (a letter in a numeric
//!   field, a long value).
//!
//! Strings are percent-decoded before they are read.
//!
//! Training computes each event's features leave-one-out (its own counts removed), so that
//! an event seen once in the history looks as rare as an unseen one at scoring time.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod build;
mod text;

pub use text::IdHasher;
use text::{
    decode, fnv, fold, form, is_meta, kind, mix, pairs, query, shape, trigram, value_hash, IdMap,
    FNV,
};

/// The feature definition; a stored model built with another one is refused at load.
pub const FEATURE_VERSION: &str = "steward-anomaly-features-8 (dense 32, bag 128)";
/// Number of dense features.
pub const DENSE: usize = 32;
/// The dense features taken from the live window of recent events (not from the event
/// alone), in the order of [`WindowValues`].
pub const WINDOWED: [usize; 4] = [26, 27, 30, 31];
/// The window values of one event: `agent_rate_scan`, `agent_action_mix_rarity`,
/// `agent_id_step_run`, `agent_outcome_rarity`.
pub type WindowValues = [f32; 4];
/// Recent events of an agent over which the rarity of their outcomes is averaged.
pub const OUTCOME_WINDOW: usize = 8;
/// The largest step between two ids that counts as walking a sequence.
const MAX_ID_STEP: i64 = 100;
/// Number of hashed trigram buckets of the supervised model's bag.
pub const BAG: usize = 128;
/// Trigram table size of the history's character model.
const TRIGRAMS: usize = 1 << 16;
/// Most categories (actions, keys, values, tokens… as salted hashes) a model keeps: about
/// 4 MB serialised whatever the history holds (see `Vocab::bound`).
pub const MAX_CATEGORIES: usize = 1 << 17;
/// Most numeric keys a model keeps statistics of.
pub const MAX_NUMERIC_KEYS: usize = 1 << 14;
/// Recent events over which the agent's rate is scanned (windows of 1, 2, 4, … of them).
pub const WINDOW: usize = 64;
/// A history spanning less than this many seconds says nothing about the hour of day: the
/// hour feature is then 0 for every event (a replayed log's audit times are its ingestion
/// times, a few minutes; scoring an hour later would make every event look rare).
const HOURS_SPAN_SECONDS: i64 = 2 * 86_400;
/// Recent actions of an agent over which the action mix is taken.
pub const AGENT_WINDOW: usize = 32;

/// Dense features and (when asked) bags of a history.
pub type HistoryFeatures = (Vec<[f32; DENSE]>, Vec<[f32; BAG]>);

/// Names of the dense features, in order.
pub const NAMES: [&str; DENSE] = [
    "action_rarity",
    "action_prefix_rarity",
    "agent_action_rarity",
    "agent_action_prefix_rarity",
    "resource_trigram_surprise",
    "resource_unseen_trigram_share",
    "resource_token_rarity_max",
    "resource_length",
    "strings_trigram_surprise",
    "strings_unseen_trigram_share",
    "strings_unseen_trigrams",
    "strings_token_rarity_max",
    "string_value_rarity_max",
    "strings_length",
    "meta_characters",
    "punctuation_share",
    "numeric_deviation_max",
    "numeric_value_rarity_max",
    "numeric_leaves",
    "leaves",
    "depth",
    "key_set_rarity",
    "unseen_key_share",
    "reasoning_length",
    "hour_rarity",
    "approved",
    "agent_rate_scan",
    "agent_action_mix_rarity",
    "string_shape_rarity_max",
    "agent_hour_rarity",
    "agent_id_step_run",
    "agent_outcome_rarity",
];

/// Members that are not payload.
const META: [&str; 17] = [
    "agent_id",
    "agent_name",
    "action",
    "resource",
    "timestamp",
    "is_approved",
    "risk_score",
    "reasoning",
    "reason",
    "id",
    "seq",
    "tenant_id",
    "user_id",
    "hash",
    "prev_hash",
    "signature",
    "source",
];

/// Streaming statistics of a numeric key.
#[derive(Serialize, Deserialize, Clone, Copy, Default, Debug)]
struct NumStat {
    n: f64,
    sum: f64,
    sq: f64,
}

/// The statistics of a tenant's history the features are computed against.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Vocab {
    /// Events in the history.
    n: f64,
    /// Counts of categories (salted hashes).
    #[serde(with = "pairs")]
    counts: IdMap<u32>,
    /// Trigram counts (hashed), and their total.
    #[serde(with = "sparse")]
    trigrams: Vec<u32>,
    trigram_total: f64,
    /// Per numeric key: statistics of `ln(1+|v|)`.
    #[serde(with = "pairs")]
    numbers: IdMap<NumStat>,
    hours: [u32; 24],
    /// Whether the history spans enough time for the hour of day to mean something
    /// ([`HOURS_SPAN_SECONDS`]).
    hours_known: bool,
    /// The approval flag imputed when an event has none.
    approved_default: f32,
    /// The reasoning-length feature imputed when an event has no `reasoning` (the history's
    /// median): reports and policy checks carry none.
    reasoning_default: f32,
    /// The last events of the history, seeding the live window.
    tail: Vec<TailEvent>,
}

mod pairs {
    use super::IdMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, V: Serialize + Copy>(
        m: &IdMap<V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut v: Vec<(u64, V)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_by_key(|p| p.0);
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<IdMap<V>, D::Error> {
        let v: Vec<(u64, V)> = Vec::deserialize(d)?;
        Ok(v.into_iter().collect())
    }
}

mod sparse {
    use super::TRIGRAMS;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(t: &[u32], s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(u32, u32)> = t
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (i as u32, *c))
            .collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        let v: Vec<(u32, u32)> = Vec::deserialize(d)?;
        let mut t = vec![0u32; TRIGRAMS];
        for (i, c) in v {
            if let Some(slot) = t.get_mut(i as usize) {
                *slot = c;
            }
        }
        Ok(t)
    }
}

/// The parts of an event the features need (borrowed, no allocation).
struct Parts<'a> {
    action: &'a str,
    resource: &'a str,
    agent: u64,
    hour: usize,
    approved: Option<bool>,
    /// None when the event has no `reasoning` (a report or a policy check).
    reasoning_len: Option<usize>,
}

fn agent_hash(e: &Value) -> u64 {
    match e.get("agent_id") {
        Some(Value::String(s)) => fnv(FNV, s.as_bytes()),
        Some(Value::Number(n)) => fnv(FNV, &n.as_f64().unwrap_or(0.0).to_le_bytes()),
        _ => 0,
    }
}

/// Members of a payload that carry the time of the event itself.
const TIME_KEYS: [&str; 6] = [
    "timestamp",
    "@timestamp",
    "event_time",
    "occurred_at",
    "time",
    "ts",
];
/// The top-level members searched for them, before the event's own `timestamp`.
const TIME_CONTAINERS: [&str; 4] = ["input", "context", "metadata", "output"];

/// `YYYY-MM-DD` at the start of `b`: (year, month, day).
fn date_prefix(b: &[u8]) -> Option<(i32, u8, u8)> {
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .filter(|d| d.iter().all(u8::is_ascii_digit))
            .map(|d| d.iter().fold(0u32, |n, c| n * 10 + u32::from(c - b'0')))
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    Some((y as i32, u8::try_from(m).ok()?, u8::try_from(d).ok()?))
}

/// A time value: an ISO 8601 / RFC 3339 string (`YYYY-MM-DDTHH:MM…` or with a space; the
/// clock as written, offsets not applied, so that an agent's hours are its own) or Unix
/// seconds or milliseconds. Returns seconds since the epoch (of the clock as written) and
/// the hour of day.
fn time_value(v: &Value) -> Option<(i64, usize)> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            let (y, m, d) = date_prefix(b)?;
            if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
                return None;
            }
            let two = |i: usize| -> Option<u8> {
                let (a, c) = (*b.get(i)?, *b.get(i + 1)?);
                (a.is_ascii_digit() && c.is_ascii_digit()).then(|| (a - b'0') * 10 + (c - b'0'))
            };
            let h = two(11).filter(|h| *h < 24)?;
            let min = if b.get(13) == Some(&b':') {
                two(14).unwrap_or(0)
            } else {
                0
            };
            let date = time::Date::from_calendar_date(y, time::Month::try_from(m).ok()?, d).ok()?;
            let day = i64::from(date.to_julian_day());
            Some((
                day * 86_400 + i64::from(h) * 3600 + i64::from(min) * 60,
                usize::from(h),
            ))
        }
        Value::Number(n) => {
            let x = n.as_f64()?;
            let secs = if (1e9..1e10).contains(&x) {
                x
            } else if (1e12..1e13).contains(&x) {
                x / 1000.0
            } else {
                return None;
            };
            let secs = secs as i64;
            Some((secs, (secs.rem_euclid(86_400) / 3600) as usize))
        }
        _ => None,
    }
}

/// When the event says it happened: a time member of its payload (the time of an imported
/// log's record), else its `timestamp` (an audit entry's, a report's event time).
pub(crate) fn event_time(e: &Value) -> Option<(i64, usize)> {
    for c in TIME_CONTAINERS {
        if let Some(Value::Object(m)) = e.get(c) {
            for k in TIME_KEYS {
                if let Some(t) = m.get(k).and_then(time_value) {
                    return Some(t);
                }
            }
        }
    }
    ["event_time", "occurred_at", "timestamp"]
        .iter()
        .find_map(|k| e.get(*k).and_then(time_value))
}

fn hour_of(e: &Value) -> usize {
    event_time(e).map_or_else(
        || usize::from(time::OffsetDateTime::now_utc().hour()),
        |t| t.1,
    )
}

/// Whether a string is a date or a time (`YYYY-MM-DD…`): never a rare value, since every
/// event has its own.
fn is_timestamp(s: &[u8]) -> bool {
    s.len() <= 40 && date_prefix(s).is_some()
}

/// The id an event addresses, for the id-step feature: the last run of digits of the
/// resource's path (with the path's shape, digits folded), else an integer `id` or `…_id`
/// member of the query string or of `input` (and its direct members), with its key.
fn event_id(e: &Value, action: u64) -> Option<(u64, i64)> {
    let resource = e.get("resource").and_then(Value::as_str).unwrap_or("");
    let path = resource.split(['?', '#']).next().unwrap_or("");
    let b = path.as_bytes();
    if let Some(last) = b.iter().rposition(u8::is_ascii_digit) {
        let end = last + 1;
        let start = b[..end]
            .iter()
            .rposition(|c| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        if end - start <= 15 {
            if let Ok(id) = path[start..end].parse::<i64>() {
                return Some((mix(action, path_hash(resource, usize::MAX)), id));
            }
        }
    }
    let id_key = |k: &[u8]| {
        k.eq_ignore_ascii_case(b"id")
            || k.ends_with(b"_id")
            || k.ends_with(b"Id")
            || k.ends_with(b"ID")
    };
    for (k, v) in query(resource) {
        if id_key(k) && !v.is_empty() && v.len() <= 15 && v.iter().all(u8::is_ascii_digit) {
            let id = std::str::from_utf8(v).ok()?.parse().ok()?;
            return Some((mix(action, fnv(FNV, k)), id));
        }
    }
    let input = e.get("input")?.as_object()?;
    let nested = input.values().filter_map(Value::as_object);
    for m in std::iter::once(input).chain(nested) {
        for (k, v) in m {
            if id_key(k.as_bytes()) {
                if let Some(id) = v.as_i64() {
                    return Some((mix(action, fnv(FNV, k.as_bytes())), id));
                }
            }
        }
    }
    None
}

fn parts(e: &Value) -> Parts<'_> {
    let reasoning_len = match e.get("reasoning") {
        Some(Value::Array(a)) => Some(a.iter().filter_map(Value::as_str).map(str::len).sum()),
        Some(Value::String(s)) => Some(s.len()),
        _ => None,
    };
    Parts {
        action: e.get("action").and_then(Value::as_str).unwrap_or(""),
        resource: e.get("resource").and_then(Value::as_str).unwrap_or(""),
        agent: agent_hash(e),
        hour: hour_of(e),
        approved: e.get("is_approved").and_then(Value::as_bool),
        reasoning_len,
    }
}

/// The resource prefix: the path before any query, digits folded, its first 3 segments.
fn prefix_hash(resource: &str) -> u64 {
    path_hash(resource, 3)
}

/// The path before any query, digits folded, its first `max` segments.
fn path_hash(resource: &str, max: usize) -> u64 {
    let path = resource.split(['?', '#']).next().unwrap_or("");
    let mut h = FNV;
    let mut segments = 0;
    for b in path.trim_start_matches('/').bytes() {
        if b == b'/' {
            segments += 1;
            if segments == max {
                break;
            }
        }
        h = fnv(h, &[fold(b)]);
    }
    h
}

fn rarity(n: f64, c: f64) -> f32 {
    ((n + 1.0) / (c.max(0.0) + 1.0)).ln() as f32
}

/// What the window keeps of one agent.
#[derive(Clone, Debug, Default)]
struct AgentState {
    /// Its last [`AGENT_WINDOW`] actions.
    actions: VecDeque<u64>,
    /// Its last id-bearing request: the endpoint's shape and the id.
    last_id: Option<(u64, i64)>,
    /// The step from the id before it, and how many steps in a row were that one.
    step: i64,
    run: u32,
    /// The outcome rarity (`numeric_value_rarity_max`) of its last [`OUTCOME_WINDOW`] events.
    outcomes: VecDeque<f32>,
}

/// The live state of the window features: the agents of recent events and what each agent
/// did lately.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// The agents of the last [`WINDOW`] events, oldest first.
    recent: VecDeque<u64>,
    per_agent: IdMap<AgentState>,
}

/// One event of the history's end, seeding the live window.
#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
struct TailEvent {
    agent: u64,
    action: u64,
    id: Option<(u64, i64)>,
    outcome: f32,
}

/// The binomial log-likelihood ratio of `k` events in `n` against the share `p`:
/// `n·KL(k/n ‖ p)` when `k/n > p`, else 0 (a Chernoff bound on `−ln P(X ≥ k)`).
fn rate_llr(k: u32, n: u32, p: f64) -> f64 {
    let q = f64::from(k) / f64::from(n.max(1));
    if q <= p {
        return 0.0;
    }
    let a = q * (q / p).ln();
    let b = if q < 1.0 {
        (1.0 - q) * ((1.0 - q) / (1.0 - p)).ln()
    } else {
        0.0
    };
    f64::from(n) * (a + b)
}

impl Window {
    /// The window values ([`WindowValues`]) of an event of `agent` whose history share is
    /// `p`, then records it (its outcome follows with [`Window::outcome`]).
    fn observe(&mut self, agent: u64, action: u64, id: Option<(u64, i64)>, p: f64) -> WindowValues {
        // Windows of the last 1, 2, 4, …, WINDOW events before this one.
        let (mut k, mut n, mut next, mut scan) = (0u32, 0u32, 1u32, 0f64);
        for a in self.recent.iter().rev() {
            n += 1;
            if *a == agent {
                k += 1;
            }
            if n == next {
                scan = scan.max(rate_llr(k, n, p));
                next *= 2;
            }
        }
        let st = self.per_agent.entry(agent).or_default();
        let mine = &mut st.actions;
        let mix = if mine.is_empty() {
            0.0
        } else {
            let same = mine.iter().filter(|a| **a == action).count() as f64;
            rarity(mine.len() as f64, same)
        };
        if mine.len() == AGENT_WINDOW {
            mine.pop_front();
        }
        mine.push_back(action);
        // Equal small steps between the ids of consecutive requests to one endpoint.
        let mut run = 0;
        if let Some((shape, id)) = id {
            match st.last_id {
                Some((s, prev)) if s == shape => {
                    let step = id.saturating_sub(prev);
                    st.run = if step == 0 || step.abs() > MAX_ID_STEP {
                        0
                    } else if step == st.step {
                        st.run.saturating_add(1)
                    } else {
                        1
                    };
                    st.step = step;
                }
                _ => {
                    st.run = 0;
                    st.step = 0;
                }
            }
            st.last_id = Some((shape, id));
            run = st.run;
        }
        // Over a full window (missing events count 0), so that an agent's first events
        // weigh no more than later ones.
        let outcome = st.outcomes.iter().sum::<f32>() / OUTCOME_WINDOW as f32;
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(agent);
        [
            scan.min(100.0) as f32,
            mix,
            (run.min(64) as f32).ln_1p(),
            outcome,
        ]
    }

    /// Records the outcome rarity of the agent's event just observed.
    fn outcome(&mut self, agent: u64, rarity: f32) {
        let st = self.per_agent.entry(agent).or_default();
        if st.outcomes.len() == OUTCOME_WINDOW {
            st.outcomes.pop_front();
        }
        st.outcomes.push_back(rarity);
    }
}

/// Accumulates string statistics of an event.
#[derive(Default)]
struct Text {
    nll: f64,
    grams: u32,
    unseen: u32,
    token_max: f32,
    chars: usize,
    meta: u32,
    punct: u32,
}

/// Feature scratch for one event.
struct Walk<'a> {
    vocab: &'a Vocab,
    /// Hashes of (action, whole path) and (action, resource prefix): numeric leaves are
    /// compared per endpoint.
    endpoint: [u64; 2],
    /// Leave-one-out (training): the event's own counts are removed.
    loo: f64,
    strings: Text,
    value_rarity: f32,
    num_dev: f32,
    num_value_rarity: f32,
    numeric: u32,
    leaves: u32,
    depth: u32,
    key_set: u64,
    keys: u32,
    unseen_keys: u32,
    bag: Option<&'a mut [f32; BAG]>,
    shape_rarity: f32,
}

impl Vocab {
    fn count(&self, h: u64) -> f64 {
        f64::from(self.counts.get(&h).copied().unwrap_or(0))
    }

    fn rare(&self, h: u64, loo: f64) -> f32 {
        rarity(self.n - loo, self.count(h) - loo)
    }

    /// Adds the trigrams and tokens of a string to `t`.
    fn text(&self, s: &str, loo: f64, t: &mut Text, mut bag: Option<&mut [f32; BAG]>) {
        let mut buf = [0u8; 512];
        let bytes = decode(s.as_bytes(), &mut buf);
        t.chars += bytes.len();
        let denom = self.trigram_total - loo + TRIGRAMS as f64 * 0.01;
        let (mut a, mut b) = (b'^', b'^');
        let mut token = FNV;
        let mut token_len = 0;
        for i in 0..=bytes.len() {
            let c = if i < bytes.len() {
                fold(bytes[i])
            } else {
                b'$'
            };
            if i < bytes.len() {
                if is_meta(bytes[i]) {
                    t.meta += 1;
                }
                if bytes[i].is_ascii_punctuation() {
                    t.punct += 1;
                }
            }
            let idx = trigram(a, b, c);
            let cnt = (f64::from(self.trigrams[idx]) - loo).max(0.0);
            t.nll -= ((cnt + 0.01) / denom.max(1.0)).ln();
            t.grams += 1;
            if cnt < 0.5 {
                t.unseen += 1;
            }
            if let Some(bag) = bag.as_deref_mut() {
                bag[idx % BAG] += 1.0;
            }
            a = b;
            b = c;
            if c.is_ascii_alphanumeric() || c >= 0x80 {
                token = fnv(token, &[c]);
                token_len += 1;
            } else if token_len > 0 {
                let r = self.rare(mix(token, kind::TOKEN), loo);
                t.token_max = t.token_max.max(r);
                token = FNV;
                token_len = 0;
            }
        }
    }

    /// A parameter of a query string or form-encoded string.
    fn param(&self, w: &mut Walk<'_>, k: &[u8], val: &[u8]) {
        let kh = fnv(FNV, k);
        w.keys += 1;
        if self.count(mix(kh, kind::KEY)) - w.loo < 0.5 {
            w.unseen_keys += 1;
        }
        let r = self.rare(mix(value_hash(kh, val), kind::STR_VALUE), w.loo);
        w.value_rarity = w.value_rarity.max(r);
        let r = self.rare(mix(shape(kh, val), kind::SHAPE), w.loo);
        w.shape_rarity = w.shape_rarity.max(r);
    }

    fn walk(&self, w: &mut Walk<'_>, key: u64, v: &Value, depth: u32) {
        w.depth = w.depth.max(depth);
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if depth == 0 && META.contains(&k.as_str()) {
                        continue;
                    }
                    let kh = fnv(FNV, k.as_bytes());
                    // Top-level members are containers (`input`, `output`, `context`): the
                    // key set and unseen keys are those inside them.
                    if depth > 0 {
                        w.key_set = w.key_set.wrapping_add(mix(kh, u64::from(depth)));
                        w.keys += 1;
                        if self.count(mix(kh, kind::KEY)) - w.loo < 0.5 {
                            w.unseen_keys += 1;
                        }
                    }
                    self.walk(w, kh, v, depth + 1);
                }
            }
            Value::Array(a) => {
                for v in a {
                    self.walk(w, key, v, depth + 1);
                }
            }
            Value::String(s) => {
                w.leaves += 1;
                self.text(s, w.loo, &mut w.strings, w.bag.as_deref_mut());
                if s.len() <= 64 && !is_timestamp(s.as_bytes()) {
                    let r = self.rare(mix(value_hash(key, s.as_bytes()), kind::STR_VALUE), w.loo);
                    w.value_rarity = w.value_rarity.max(r);
                }
                let r = self.rare(mix(shape(key, s.as_bytes()), kind::SHAPE), w.loo);
                w.shape_rarity = w.shape_rarity.max(r);
                if let Some(f) = form(s) {
                    for (k, val) in pairs(f) {
                        self.param(w, k, val);
                    }
                }
            }
            Value::Number(n) => {
                w.leaves += 1;
                w.numeric += 1;
                let x = n.as_f64().unwrap_or(0.0);
                let lx = x.abs().ln_1p();
                // The endpoint's own statistics when it has enough, else the key's.
                let own = |ep: u64| {
                    self.numbers
                        .get(&mix(key, ep))
                        .filter(|st| st.n - w.loo >= 20.0)
                };
                let st = own(w.endpoint[0])
                    .or_else(|| own(w.endpoint[1]))
                    .or_else(|| self.numbers.get(&key));
                if let Some(st) = st {
                    let cnt = st.n - w.loo;
                    if cnt >= 2.0 {
                        let mean = (st.sum - w.loo * lx) / cnt;
                        let var = ((st.sq - w.loo * lx * lx) / cnt - mean * mean).max(0.0);
                        let z = (lx - mean).abs() / (var.sqrt() + 0.05);
                        w.num_dev = w.num_dev.max(z.min(50.0) as f32);
                    }
                }
                if x.fract() == 0.0 && (0.0..1000.0).contains(&x) {
                    let r = self.rare(mix(fnv(key, &x.to_le_bytes()), kind::NUM_VALUE), w.loo);
                    w.num_value_rarity = w.num_value_rarity.max(r);
                }
            }
            Value::Bool(b) => {
                w.leaves += 1;
                let r = self.rare(mix(fnv(key, &[u8::from(*b) + 1]), kind::STR_VALUE), w.loo);
                w.value_rarity = w.value_rarity.max(r);
            }
            Value::Null => w.leaves += 1,
        }
    }

    /// The dense features of `e` (and the trigram bag when asked), given its window values.
    /// `loo` = 1 while featurising the history.
    fn features(
        &self,
        e: &Value,
        window: WindowValues,
        loo: f64,
        out: &mut [f32; DENSE],
        mut bag: Option<&mut [f32; BAG]>,
    ) {
        let p = parts(e);
        let act = fnv(FNV, p.action.as_bytes());
        let pre = prefix_hash(p.resource);
        out[0] = self.rare(mix(act, kind::ACTION), loo);
        out[1] = self.rare(mix(mix(act, pre), kind::ACTION_PREFIX), loo);
        out[2] = self.rare(mix(mix(act, p.agent), kind::AGENT_ACTION), loo);
        out[3] = self.rare(
            mix(mix(mix(act, p.agent), pre), kind::AGENT_ACTION_PREFIX),
            loo,
        );
        let mut res = Text::default();
        self.text(p.resource, loo, &mut res, bag.as_deref_mut());
        out[4] = (res.nll / f64::from(res.grams.max(1))) as f32;
        out[5] = res.unseen as f32 / res.grams.max(1) as f32;
        out[6] = res.token_max;
        out[7] = (p.resource.len() as f32).ln_1p();
        let mut w = Walk {
            vocab: self,
            endpoint: [mix(act, path_hash(p.resource, usize::MAX)), mix(act, pre)],
            loo,
            strings: Text::default(),
            value_rarity: 0.0,
            num_dev: 0.0,
            num_value_rarity: 0.0,
            numeric: 0,
            leaves: 0,
            depth: 0,
            key_set: 0,
            keys: 0,
            unseen_keys: 0,
            bag,
            shape_rarity: 0.0,
        };
        for (k, val) in query(p.resource) {
            self.param(&mut w, k, val);
        }
        self.walk(&mut w, FNV, e, 0);
        let s = &w.strings;
        out[8] = (s.nll / f64::from(s.grams.max(1))) as f32;
        out[9] = s.unseen as f32 / s.grams.max(1) as f32;
        out[10] = (s.unseen as f32).ln_1p();
        out[11] = s.token_max;
        out[12] = w.value_rarity;
        out[13] = (s.chars as f32).ln_1p();
        out[14] = ((s.meta + res.meta) as f32).ln_1p();
        out[15] = (s.punct + res.punct) as f32 / (s.chars + p.resource.len()).max(1) as f32;
        out[16] = w.num_dev;
        out[17] = w.num_value_rarity;
        out[18] = (w.numeric as f32).ln_1p();
        out[19] = (w.leaves as f32).ln_1p();
        out[20] = w.depth as f32;
        out[21] = w.vocab.rare(mix(w.key_set, kind::KEY_SET), loo);
        out[22] = w.unseen_keys as f32 / w.keys.max(1) as f32;
        out[23] = p
            .reasoning_len
            .map_or(self.reasoning_default, |r| (r as f32).ln_1p());
        out[24] = if self.hours_known {
            rarity(self.n - loo, f64::from(self.hours[p.hour]) - loo)
        } else {
            0.0
        };
        out[25] = p
            .approved
            .map_or(self.approved_default, |a| f32::from(u8::from(a)));
        out[28] = w.shape_rarity;
        out[29] = if self.hours_known {
            self.agent_hour_rarity(p.agent, p.hour, loo)
        } else {
            0.0
        };
        for (j, v) in WINDOWED.iter().zip(window) {
            out[*j] = v;
        }
        if let Some(bag) = w.bag {
            let norm = bag.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                bag.iter_mut().for_each(|x| *x /= norm);
            }
        }
    }

    /// The agent hash, action hash and id the window tracks.
    fn window_keys(e: &Value) -> (u64, u64, Option<(u64, i64)>) {
        let action = e.get("action").and_then(Value::as_str).unwrap_or("");
        let act = fnv(FNV, action.as_bytes());
        (agent_hash(e), act, event_id(e, act))
    }

    /// How rare the hour is for the agent: `ln((n + 24) / (c + 1)) − ln 24`, at least 0, `n`
    /// the agent's events and `c` those at this hour, the neighbouring hours counting half
    /// (an agent that works until five is not unusual at ten past five). About 0 for an agent
    /// active at every hour or barely known; `ln(n / 24)` for an hour far from its own.
    fn agent_hour_rarity(&self, agent: u64, hour: usize, loo: f64) -> f32 {
        let at = |h: usize| self.count(mix(mix(agent, h as u64), kind::AGENT_HOUR));
        let c = at(hour) - loo + 0.5 * (at((hour + 23) % 24) + at((hour + 1) % 24));
        let n = self.count(mix(agent, kind::AGENT)) - loo;
        ((((n.max(0.0) + 24.0) / (c.max(0.0) + 1.0)).ln() - 24f64.ln()).max(0.0)) as f32
    }

    /// The agent's share of the history (an agent it never saw: half an event's share).
    fn agent_share(&self, agent: u64) -> f64 {
        let n = self.n.max(1.0);
        ((self.count(mix(agent, kind::AGENT)) + 0.5) / (n + 1.0)).min(0.999)
    }

    /// The window values of a live event: observes it in `window` (its outcome is recorded
    /// by [`Vocab::record_outcome`] once its features are known).
    pub fn observe(&self, window: &mut Window, e: &Value) -> WindowValues {
        let (agent, action, id) = Self::window_keys(e);
        window.observe(agent, action, id, self.agent_share(agent))
    }

    /// Records in `window` the outcome of an event observed there, from its features.
    pub fn record_outcome(window: &mut Window, e: &Value, features: &[f32; DENSE]) {
        window.outcome(agent_hash(e), features[17]);
    }

    /// Features of a live event: observes it in `window`.
    pub fn featurize(
        &self,
        e: &Value,
        window: &mut Window,
        out: &mut [f32; DENSE],
        bag: Option<&mut [f32; BAG]>,
    ) {
        let w = self.observe(window, e);
        self.features(e, w, 0.0, out, bag);
        Self::record_outcome(window, e, out);
    }

    /// Features of a live event whose window values were taken already
    /// ([`Vocab::observe`]).
    pub fn featurize_with(
        &self,
        e: &Value,
        window: WindowValues,
        out: &mut [f32; DENSE],
        bag: Option<&mut [f32; BAG]>,
    ) {
        self.features(e, window, 0.0, out, bag);
    }

    /// A window seeded with the end of the history.
    pub fn window(&self) -> Window {
        let mut w = Window::default();
        for t in &self.tail {
            w.observe(t.agent, t.action, t.id, self.agent_share(t.agent));
            w.outcome(t.agent, t.outcome);
        }
        w
    }

    /// Features of one history event, leave-one-out, outside the window (zeros there).
    pub fn featurize_loo(&self, e: &Value, out: &mut [f32; DENSE], bag: &mut [f32; BAG]) {
        self.features(e, [0.0; 4], 1.0, out, Some(bag));
    }

    /// Features of extra events (labelled samples) without leave-one-out and without
    /// touching a live window.
    pub fn featurize_detached(&self, e: &Value, out: &mut [f32; DENSE], bag: &mut [f32; BAG]) {
        self.features(e, [0.0; 4], 0.0, out, Some(bag));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn history() -> Vec<Value> {
        (0..200)
            .map(|i| {
                json!({"agent_id": "a1", "action": "GET", "resource": format!("/api/items/{i}"),
                       "input": {"q": "shoes", "page": i % 5}, "output": {"status": 200, "latency_ms": 40 + i % 7}})
            })
            .collect()
    }

    #[test]
    fn unusual_payloads_stand_out() {
        let h = history();
        let refs: Vec<&Value> = h.iter().collect();
        let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        let mut w = v.window();
        let mut normal = [0f32; DENSE];
        v.featurize(&h[3], &mut w, &mut normal, None);
        let mut bad = [0f32; DENSE];
        let attack = json!({"agent_id": "a1", "action": "GET", "resource": "/api/items/../../etc/passwd",
            "input": {"q": "' OR 1=1 -- <script>", "page": 1}, "output": {"status": 500, "latency_ms": 9000}});
        v.featurize(&attack, &mut w, &mut bad, None);
        for i in [5, 9, 14, 16, 17] {
            assert!(
                bad[i] > normal[i],
                "{}: {} vs {}",
                NAMES[i],
                bad[i],
                normal[i]
            );
        }
        // Round trip keeps the statistics.
        let back: Vocab = serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
        let mut again = [0f32; DENSE];
        back.featurize(&attack, &mut back.window(), &mut again, None);
        assert_eq!(again[..26], bad[..26]);
    }

    #[test]
    fn a_history_of_ever_new_keys_makes_a_bounded_vocabulary() {
        // 40 events of 5,000 keys and numbers never seen twice: far more categories and
        // numeric keys than a model keeps.
        let h: Vec<Value> = (0..40)
            .map(|i| {
                let input: serde_json::Map<String, Value> = (0..5_000)
                    .flat_map(|k| {
                        [
                            (format!("k{i}_{k}"), json!(format!("v{i}_{k}"))),
                            (format!("n{i}_{k}"), json!(k)),
                        ]
                    })
                    .collect();
                json!({"agent_id": "a1", "action": "write", "resource": "/db/x", "input": input})
            })
            .collect();
        let refs: Vec<&Value> = h.iter().collect();
        let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        assert_eq!(v.counts.len(), MAX_CATEGORIES);
        assert_eq!(v.numbers.len(), MAX_NUMERIC_KEYS);
        // What every event shares is among what is kept.
        let act = fnv(FNV, b"write");
        assert_eq!(v.count(mix(act, kind::ACTION)), 40.0);
        let bytes = serde_json::to_vec(&v).unwrap();
        assert!(bytes.len() < 8 << 20, "{} bytes", bytes.len());
        // An ordinary history keeps everything.
        let h = history();
        let refs: Vec<&Value> = h.iter().collect();
        let small = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        assert!(small.counts.len() < MAX_CATEGORIES);
        assert!(small.counts.values().all(|c| *c >= 1));
    }

    fn plain(agent: &str) -> Value {
        json!({"agent_id": agent, "action": "GET", "resource": "/api/items"})
    }

    #[test]
    fn a_burst_of_a_quiet_agent_raises_the_rate_scan_from_its_second_request() {
        // a2 makes every tenth request of the history.
        let who = |i: usize| if i % 10 == 3 { "a2" } else { "a1" };
        let h: Vec<Value> = (0..2000).map(|i| plain(who(i))).collect();
        let refs: Vec<&Value> = h.iter().collect();
        let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        let mut w = v.window();
        let mut quiet = 0f32;
        for i in 0..300 {
            let scan = v.observe(&mut w, &plain(who(i)))[0];
            if who(i) == "a2" {
                quiet = quiet.max(scan);
            }
        }
        let burst: Vec<f32> = (0..10)
            .map(|_| v.observe(&mut w, &plain("a2"))[0])
            .collect();
        // The first request of the run looks like any other.
        assert!(burst[0] < quiet + 0.5, "{burst:?} vs {quiet}");
        assert!(burst[1] > quiet + 1.5, "{burst:?} vs {quiet}");
        assert!(burst[4] > 3.0 * quiet.max(1.0), "{burst:?} vs {quiet}");
        assert!(burst[9] > burst[4] && burst[4] > burst[1], "{burst:?}");
        // The busy agent's own run of ten is ordinary for its share (0.9).
        let busy: Vec<f32> = (0..10)
            .map(|_| v.observe(&mut w, &plain("a1"))[0])
            .collect();
        assert!(busy.iter().all(|s| *s < burst[4]), "{busy:?} vs {burst:?}");
        // The history's features replay the same window.
        let (dense, _) = v.featurize_history::<()>(&refs, false, |_| Ok(())).unwrap();
        let hist_max = dense.iter().map(|r| r[26]).fold(0f32, f32::max);
        assert!(hist_max < burst[4], "{hist_max} vs {burst:?}");
    }

    #[test]
    fn the_hour_of_day_counts_only_when_the_history_spans_two_days() {
        let at = |day: u32, hour: u32| {
            json!({"agent_id": "a1", "action": "GET", "resource": "/api/items",
                   "timestamp": format!("2026-03-{day:02}T{hour:02}:10:00.000000Z")})
        };
        let hour_feature = |h: &[Value], probe: &Value| {
            let refs: Vec<&Value> = h.iter().collect();
            let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
            let (mut out, mut bag) = ([0f32; DENSE], [0f32; BAG]);
            v.featurize_detached(probe, &mut out, &mut bag);
            out[24]
        };
        // Office hours over five days: 03:00 is rare, 10:00 is not.
        let week: Vec<Value> = (1..=5)
            .flat_map(|d| (9..18).flat_map(move |hr| (0..10).map(move |_| (d, hr))))
            .map(|(d, hr)| at(d, hr))
            .collect();
        assert!(hour_feature(&week, &at(9, 3)) > 3.0);
        assert!(hour_feature(&week, &at(9, 10)) < 3.0);
        // The same number of events within one afternoon (a replayed log): the hour says
        // nothing.
        let afternoon: Vec<Value> = (0..450).map(|i| at(1, 14 + i % 2)).collect();
        assert_eq!(hour_feature(&afternoon, &at(9, 3)), 0.0);
        assert_eq!(hour_feature(&afternoon, &at(1, 14)), 0.0);
    }

    /// A history of two agents over ten days: `day` works 09:00–17:59, `night` 01:00–03:59;
    /// their time sits in `input.timestamp` (an imported log: the audit entry's own
    /// `timestamp` is the minute of the import).
    fn shifts() -> Vec<Value> {
        let mut h = Vec::new();
        for day in 1..=10u32 {
            for (agent, hours) in [("day", 9..18u32), ("night", 1..4u32)] {
                for hour in hours {
                    for m in 0..4u32 {
                        h.push(json!({"agent_id": agent, "action": "GET", "resource": "/api/items",
                            "timestamp": "2026-03-20T12:00:00Z",
                            "input": {"timestamp": format!("2026-03-{day:02}T{hour:02}:{:02}:00Z", m * 15)}}));
                    }
                }
            }
        }
        h
    }

    #[test]
    fn an_agent_outside_its_own_hours_stands_out_with_the_time_in_the_payload() {
        let h = shifts();
        let refs: Vec<&Value> = h.iter().collect();
        let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        assert!(v.hours_known, "the payload's times span ten days");
        let at = |agent: &str, hour: u32| {
            let e = json!({"agent_id": agent, "action": "GET", "resource": "/api/items",
                "input": {"timestamp": format!("2026-03-12T{hour:02}:20:00Z")}});
            let (mut out, mut bag) = ([0f32; DENSE], [0f32; BAG]);
            v.featurize_detached(&e, &mut out, &mut bag);
            out[29]
        };
        // Each agent at its own hours, and at the hour after its last: ordinary.
        assert_eq!(at("day", 10), 0.0);
        assert_eq!(at("day", 18), 0.0);
        assert_eq!(at("night", 2), 0.0);
        // Each at the other's hours: rare for it, though the hour is busy for the tenant.
        assert!(at("day", 2) > 2.0, "{}", at("day", 2));
        assert!(at("night", 11) > 1.0, "{}", at("night", 11));
        // An agent the history never saw has no hours of its own.
        assert_eq!(at("new", 2), 0.0);
        // Unix seconds in `context.ts` read the same: 2026-03-12T02:20:00Z.
        let e = json!({"agent_id": "day", "action": "GET", "resource": "/api/items",
            "context": {"ts": 1_773_282_000}});
        assert_eq!(event_time(&e).map(|t| t.1), Some(2));
    }

    #[test]
    fn a_timestamp_in_the_payload_is_no_rare_value() {
        let h = shifts();
        let refs: Vec<&Value> = h.iter().collect();
        let v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        let e = json!({"agent_id": "day", "action": "GET", "resource": "/api/items",
            "input": {"timestamp": "2026-03-12T10:20:00Z"}});
        let (mut out, mut bag) = ([0f32; DENSE], [0f32; BAG]);
        v.featurize_detached(&e, &mut out, &mut bag);
        assert_eq!(out[12], 0.0, "string_value_rarity_max");
    }

    fn request(id: u64, status: u32) -> Value {
        json!({"agent_id": "a1", "action": "GET", "resource": format!("/api/orders/{id}"),
               "output": {"status": status}})
    }

    #[test]
    fn walking_ids_with_errors_raises_the_step_run_and_the_outcome_rarity() {
        // Ordinary use: ids in no order, one request in 25 a 404.
        let ids = |i: u64| 100_000 + (i * 7_919) % 90_000;
        let h: Vec<Value> = (0..1000)
            .map(|i| request(ids(i), if i % 25 == 0 { 404 } else { 200 }))
            .collect();
        let refs: Vec<&Value> = h.iter().collect();
        let mut v = Vocab::build::<()>(&refs, |_| Ok(())).unwrap();
        let (dense, _) = v.featurize_history::<()>(&refs, false, |_| Ok(())).unwrap();
        v.seed_outcomes(&dense);
        let hist_run = dense.iter().map(|r| r[30]).fold(0f32, f32::max);
        let hist_outcome = dense.iter().map(|r| r[31]).fold(0f32, f32::max);
        let mut w = v.window();
        let mut last = [0f32; DENSE];
        for i in 0..10 {
            v.featurize(&request(500_000 + i, 404), &mut w, &mut last, None);
        }
        assert!(
            last[30] > 2.0 && last[30] > hist_run + 1.0,
            "{} vs {hist_run}",
            last[30]
        );
        assert!(
            last[31] > hist_outcome + 1.0,
            "{} vs {hist_outcome}",
            last[31]
        );
        // Another agent's ordinary requests in between are not its run.
        let mut other = [0f32; DENSE];
        v.featurize(
            &json!({"agent_id": "a2", "action": "GET", "resource": "/api/orders/500011",
                    "output": {"status": 200}}),
            &mut w,
            &mut other,
            None,
        );
        assert_eq!(other[30], 0.0);
        assert_eq!(other[31], 0.0);
        // A jump breaks the run; an id in `input` counts as well.
        let mut out = [0f32; DENSE];
        v.featurize(&request(900_000, 200), &mut w, &mut out, None);
        assert_eq!(out[30], 0.0);
        let by_input = |id: u64| {
            json!({"agent_id": "a3", "action": "read_record", "resource": "crm/contacts",
                   "input": {"record_id": id}})
        };
        for id in 1..=6 {
            v.featurize(&by_input(id), &mut w, &mut out, None);
        }
        assert!(out[30] > 1.5, "{}", out[30]);
    }
}
