//! The window values an event had when it was scored, by event: a label given later through
//! feedback (whose `event_data` carries no window) gets back the agent's recent rate and mix
//! the event was scored with, so that the supervised part can learn bursts. Kept in memory
//! per instance (bounded); a label for an event this instance never scored falls back to the
//! history's medians.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::features::WindowValues;

/// Members left out of an event's identity (they differ between a report, its feedback and
/// the audit entry, or are the server's).
const VOLATILE: [&str; 15] = [
    "agent_id",
    "agent_name",
    "timestamp",
    "is_approved",
    "risk_score",
    "reason",
    "id",
    "seq",
    "tenant_id",
    "user_id",
    "hash",
    "prev_hash",
    "signature",
    "source",
    "report_id",
];

const FNV: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn mix(h: u64, k: u64) -> u64 {
    let x = (h ^ k.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 31)
}

fn key_of(v: &Value, top: bool) -> u64 {
    match v {
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| !(top && VOLATILE.contains(&k.as_str())))
            .fold(0x51, |acc, (k, v)| {
                acc.wrapping_add(mix(fnv(FNV, k.as_bytes()), key_of(v, false)))
            }),
        Value::Array(a) => a.iter().fold(FNV ^ 4, |h, v| mix(h, key_of(v, false))),
        Value::String(s) => fnv(FNV ^ 1, s.as_bytes()),
        Value::Number(n) => fnv(FNV ^ 2, &n.as_f64().unwrap_or(0.0).to_le_bytes()),
        Value::Bool(b) => FNV ^ (6 + u64::from(*b)),
        Value::Null => FNV ^ 5,
    }
}

/// The identity of an event (member order does not matter; volatile members ignored).
pub fn event_key(e: &Value) -> u64 {
    key_of(e, true)
}

/// Bounded map event → window values at scoring time.
#[derive(Debug, Default)]
pub struct Seen {
    map: Mutex<HashMap<u64, WindowValues>>,
}

/// Entries kept before the map starts again.
const CAPACITY: usize = 200_000;

impl Seen {
    pub fn record(&self, e: &Value, window: WindowValues) {
        let k = event_key(e);
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= CAPACITY {
            m.clear();
        }
        m.insert(k, window);
    }

    pub fn get(&self, e: &Value) -> Option<WindowValues> {
        let m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&event_key(e)).copied()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_ignores_order_and_volatile_members() {
        let a = json!({"action": "GET", "resource": "/x", "input": {"a": 1, "b": "c"}});
        let b = json!({"input": {"b": "c", "a": 1}, "resource": "/x", "action": "GET",
                       "agent_id": "u", "risk_score": 0.3});
        assert_eq!(event_key(&a), event_key(&b));
        let c = json!({"action": "GET", "resource": "/y", "input": {"a": 1, "b": "c"}});
        assert_ne!(event_key(&a), event_key(&c));
        let s = Seen::default();
        s.record(&a, [3.0, 0.5, 0.0, 1.0]);
        assert_eq!(s.get(&b), Some([3.0, 0.5, 0.0, 1.0]));
        assert_eq!(s.get(&c), None);
    }
}
