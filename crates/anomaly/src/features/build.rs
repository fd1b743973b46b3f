//! Building the history's statistics ([`Vocab::build`]) and the history's own features.

use serde_json::Value;

use super::text::{
    bump_map, decode, fnv, fold, form, kind, mix, pairs, query, shape, trigram, value_hash, IdMap,
    FNV,
};
use super::{
    event_time, is_timestamp, parts, path_hash, prefix_hash, HistoryFeatures, TailEvent, Vocab,
    Window, BAG, DENSE, HOURS_SPAN_SECONDS, MAX_CATEGORIES, MAX_NUMERIC_KEYS, META, TRIGRAMS,
    WINDOW,
};

/// Seconds between the earliest and the latest time of the events (`event_time`: a time
/// member of the payload, else `timestamp`); 0 when fewer than two carry one.
fn span_seconds(events: &[&Value]) -> i64 {
    let mut lo: Option<i64> = None;
    let mut hi: Option<i64> = None;
    for e in events {
        let Some((t, _)) = event_time(e) else {
            continue;
        };
        lo = Some(lo.map_or(t, |l| l.min(t)));
        hi = Some(hi.map_or(t, |h| h.max(t)));
    }
    match (lo, hi) {
        (Some(l), Some(h)) => h - l,
        _ => 0,
    }
}

impl Vocab {
    fn count_param(&mut self, k: &[u8], val: &[u8]) {
        let kh = fnv(FNV, k);
        bump_map(&mut self.counts, mix(kh, kind::KEY));
        bump_map(&mut self.counts, mix(value_hash(kh, val), kind::STR_VALUE));
        bump_map(&mut self.counts, mix(shape(kh, val), kind::SHAPE));
    }

    /// Builds the statistics of a history. `progress` is called every 4096 events with the
    /// fraction done and stops the work on error.
    pub fn build<E>(
        events: &[&Value],
        mut progress: impl FnMut(f64) -> Result<(), E>,
    ) -> Result<Vocab, E> {
        let mut v = Vocab {
            n: events.len() as f64,
            counts: IdMap::default(),
            trigrams: vec![0; TRIGRAMS],
            trigram_total: 0.0,
            numbers: IdMap::default(),
            hours: [0; 24],
            hours_known: false,
            approved_default: 0.0,
            reasoning_default: 0.0,
            tail: Vec::new(),
        };
        let mut approved = (0u64, 0u64);
        let mut reasoning: Vec<f32> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            if i % 4096 == 0 {
                progress(i as f64 / events.len().max(1) as f64)?;
            }
            let p = parts(e);
            let act = fnv(FNV, p.action.as_bytes());
            let pre = prefix_hash(p.resource);
            let mut bump = |h: u64| *v.counts.entry(h).or_insert(0) += 1;
            bump(mix(act, kind::ACTION));
            bump(mix(mix(act, pre), kind::ACTION_PREFIX));
            bump(mix(mix(act, p.agent), kind::AGENT_ACTION));
            bump(mix(mix(mix(act, p.agent), pre), kind::AGENT_ACTION_PREFIX));
            bump(mix(p.agent, kind::AGENT));
            bump(mix(mix(p.agent, p.hour as u64), kind::AGENT_HOUR));
            for (k, val) in query(p.resource) {
                v.count_param(k, val);
            }
            v.hours[p.hour] += 1;
            if let Some(r) = p.reasoning_len {
                reasoning.push((r as f32).ln_1p());
            }
            if let Some(a) = p.approved {
                if a {
                    approved.0 += 1;
                } else {
                    approved.1 += 1;
                }
            }
            v.count_text(p.resource);
            let mut key_set = 0u64;
            let endpoint = [mix(act, path_hash(p.resource, usize::MAX)), mix(act, pre)];
            v.count_walk(FNV, endpoint, e, 0, &mut key_set);
            bump_map(&mut v.counts, mix(key_set, kind::KEY_SET));
        }
        v.hours_known = span_seconds(events) >= HOURS_SPAN_SECONDS;
        v.approved_default = if approved.0 > approved.1 { 1.0 } else { 0.0 };
        if !reasoning.is_empty() {
            let mid = reasoning.len() / 2;
            let (_, m, _) = reasoning.select_nth_unstable_by(mid, f32::total_cmp);
            v.reasoning_default = *m;
        }
        v.tail = events
            .iter()
            .rev()
            .take(WINDOW)
            .rev()
            .map(|e| {
                let (agent, action, id) = Self::window_keys(e);
                TailEvent {
                    agent,
                    action,
                    id,
                    outcome: 0.0,
                }
            })
            .collect();
        v.bound();
        Ok(v)
    }

    /// Keeps the [`MAX_CATEGORIES`] most frequent categories and the [`MAX_NUMERIC_KEYS`]
    /// most frequent numeric keys (ties by hash, so the result does not depend on the map's
    /// order). A history whose events carry ever new keys or values (ids, random strings)
    /// would otherwise make a model as large as the history; what is left out counts as
    /// unseen, which for a category seen once changes its rarity by `ln 2` at most.
    fn bound(&mut self) {
        if self.counts.len() > MAX_CATEGORIES {
            let mut all: Vec<(u64, u32)> = self.counts.drain().collect();
            all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            all.truncate(MAX_CATEGORIES);
            self.counts = all.into_iter().collect();
        }
        if self.numbers.len() > MAX_NUMERIC_KEYS {
            let mut all: Vec<_> = self.numbers.drain().collect();
            all.sort_unstable_by(|a, b| b.1.n.total_cmp(&a.1.n).then(a.0.cmp(&b.0)));
            all.truncate(MAX_NUMERIC_KEYS);
            self.numbers = all.into_iter().collect();
        }
    }

    fn count_text(&mut self, s: &str) {
        let mut buf = [0u8; 512];
        let bytes = decode(s.as_bytes(), &mut buf);
        let (mut a, mut b) = (b'^', b'^');
        let mut token = FNV;
        let mut token_len = 0;
        for i in 0..=bytes.len() {
            let c = if i < bytes.len() {
                fold(bytes[i])
            } else {
                b'$'
            };
            let idx = trigram(a, b, c);
            self.trigrams[idx] = self.trigrams[idx].saturating_add(1);
            self.trigram_total += 1.0;
            a = b;
            b = c;
            if c.is_ascii_alphanumeric() || c >= 0x80 {
                token = fnv(token, &[c]);
                token_len += 1;
            } else if token_len > 0 {
                bump_map(&mut self.counts, mix(token, kind::TOKEN));
                token = FNV;
                token_len = 0;
            }
        }
    }

    fn count_walk(
        &mut self,
        key: u64,
        endpoint: [u64; 2],
        v: &Value,
        depth: u32,
        key_set: &mut u64,
    ) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if depth == 0 && META.contains(&k.as_str()) {
                        continue;
                    }
                    let kh = fnv(FNV, k.as_bytes());
                    if depth > 0 {
                        *key_set = key_set.wrapping_add(mix(kh, u64::from(depth)));
                        bump_map(&mut self.counts, mix(kh, kind::KEY));
                    }
                    self.count_walk(kh, endpoint, v, depth + 1, key_set);
                }
            }
            Value::Array(a) => {
                for v in a {
                    self.count_walk(key, endpoint, v, depth + 1, key_set);
                }
            }
            Value::String(s) => {
                self.count_text(s);
                if s.len() <= 64 && !is_timestamp(s.as_bytes()) {
                    bump_map(
                        &mut self.counts,
                        mix(value_hash(key, s.as_bytes()), kind::STR_VALUE),
                    );
                }
                bump_map(&mut self.counts, mix(shape(key, s.as_bytes()), kind::SHAPE));
                if let Some(f) = form(s) {
                    for (k, val) in pairs(f) {
                        self.count_param(k, val);
                    }
                }
            }
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(0.0);
                let lx = x.abs().ln_1p();
                for k in [key, mix(key, endpoint[0]), mix(key, endpoint[1])] {
                    let st = self.numbers.entry(k).or_default();
                    st.n += 1.0;
                    st.sum += lx;
                    st.sq += lx * lx;
                }
                if x.fract() == 0.0 && (0.0..1000.0).contains(&x) {
                    bump_map(
                        &mut self.counts,
                        mix(fnv(key, &x.to_le_bytes()), kind::NUM_VALUE),
                    );
                }
            }
            Value::Bool(b) => bump_map(
                &mut self.counts,
                mix(fnv(key, &[u8::from(*b) + 1]), kind::STR_VALUE),
            ),
            Value::Null => {}
        }
    }

    /// Features of the history itself, leave-one-out, in order (the window replayed).
    pub fn featurize_history<E>(
        &self,
        events: &[&Value],
        with_bag: bool,
        mut progress: impl FnMut(f64) -> Result<(), E>,
    ) -> Result<HistoryFeatures, E> {
        let mut window = Window::default();
        let mut dense = Vec::with_capacity(events.len());
        let mut bags = Vec::with_capacity(if with_bag { events.len() } else { 0 });
        for (i, e) in events.iter().enumerate() {
            if i % 4096 == 0 {
                progress(i as f64 / events.len().max(1) as f64)?;
            }
            let (agent, action, id) = Self::window_keys(e);
            let w = window.observe(agent, action, id, self.agent_share(agent));
            let mut out = [0f32; DENSE];
            if with_bag {
                let mut bag = [0f32; BAG];
                self.features(e, w, 1.0, &mut out, Some(&mut bag));
                bags.push(bag);
            } else {
                self.features(e, w, 1.0, &mut out, None);
            }
            window.outcome(agent, out[17]);
            dense.push(out);
        }
        Ok((dense, bags))
    }

    /// Gives the seeding events of the live window their outcomes, from the history's
    /// features ([`Vocab::featurize_history`] of the same events).
    pub fn seed_outcomes(&mut self, dense: &[[f32; DENSE]]) {
        let skip = dense.len().saturating_sub(self.tail.len());
        for (t, row) in self.tail.iter_mut().zip(&dense[skip..]) {
            t.outcome = row[17];
        }
    }
}
