//! Candidates and the rules that do not touch storage (contract 12.1): fingerprints, the
//! score, evidence, merging events into a candidate and merging candidates together.

use diesel::prelude::*;
use serde::Serialize;
use serde_json::{json, Value};
use steward_core::clock::format_timestamp;
use steward_core::{CandidateId, TenantId};
use steward_store::schema::discovery_candidates;
use steward_store::{Id, Json, Ts};
use time::OffsetDateTime;

/// Evidence items kept per candidate (the newest).
pub const EVIDENCE_KEPT: usize = 50;
/// Largest `evidence` object of one ingest event, in bytes of compact JSON (422 beyond).
pub const EVIDENCE_DATA_MAX: usize = 8192;
/// Most evidence bytes (compact JSON of the items) kept per candidate: the oldest items go
/// first, the newest always stays. With the 50 items it bounds a candidate's size, and so
/// the answer of a batch that names one candidate a thousand times.
pub const EVIDENCE_BYTES_KEPT: usize = 32_768;
/// Longest candidate name.
pub const NAME_MAX: usize = 128;
/// Longest fingerprint.
pub const FINGERPRINT_MAX: usize = 256;
/// Longest source name.
pub const SOURCE_MAX: usize = 64;

pub const PENDING: &str = "pending";
pub const CONFIRMED: &str = "confirmed";
pub const DISMISSED: &str = "dismissed";

fn statuses() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&[PENDING, CONFIRMED, DISMISSED])
}

/// `score = min(1.0, 0.5 + 0.1 × (event_count − 1))`, computed as `(event_count + 4) / 10`
/// so that the usual values are exact decimals (0.6, not 0.6000000000000001).
pub fn score(event_count: i64) -> f64 {
    (event_count.max(1).saturating_add(4) as f64 / 10.0).min(1.0)
}

/// The merge key of an event without a given fingerprint: the name trimmed and lowercased.
pub fn fingerprint_of_name(name: &str) -> String {
    name.trim().to_lowercase()
}

/// The first `max` characters of `s`.
pub fn truncate_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// One observed event of an unregistered agent, validated and ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub name: String,
    pub fingerprint: String,
    pub source: String,
    pub suggested_type: Option<String>,
    pub capabilities: Vec<String>,
    pub data: Value,
    pub observed_at: OffsetDateTime,
}

impl Observation {
    /// The evidence item `{source, observed_at, data}` of this event.
    pub fn evidence(&self) -> Value {
        json!({
            "source": self.source,
            "observed_at": format_timestamp(self.observed_at),
            "data": self.data,
        })
    }
}

/// A row of `discovery_candidates`.
#[derive(Queryable, Selectable, Insertable, AsChangeset, Clone, Debug, PartialEq)]
#[diesel(table_name = discovery_candidates)]
#[diesel(treat_none_as_null = true, treat_none_as_default_value = false)]
pub struct CandidateRow {
    pub id: Id,
    pub tenant_id: Id,
    pub name: String,
    pub fingerprint: String,
    pub source: String,
    pub suggested_type: Option<String>,
    pub capabilities: Json,
    pub score: f64,
    pub event_count: i64,
    pub evidence: Json,
    pub status: String,
    pub first_seen: Ts,
    pub last_seen: Ts,
    pub agent_id: Option<Id>,
    pub decided_at: Option<Ts>,
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Appends the items of `more` not yet in `list`, keeping the order of first appearance.
fn union_into(list: &mut Vec<String>, more: &[String]) {
    for item in more {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

/// The `EVIDENCE_KEPT` newest items of a list ordered oldest first.
fn keep_newest(mut items: Vec<Value>) -> Vec<Value> {
    if items.len() > EVIDENCE_KEPT {
        items.drain(..items.len() - EVIDENCE_KEPT);
    }
    let sizes: Vec<usize> = items.iter().map(json_len).collect();
    let mut total: usize = sizes.iter().sum();
    let mut drop = 0;
    while total > EVIDENCE_BYTES_KEPT && drop + 1 < items.len() {
        total -= sizes[drop];
        drop += 1;
    }
    items.drain(..drop);
    items
}

/// Bytes of a value as compact JSON.
pub fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// Evidence data from a source Steward does not validate field by field (a webhook's
/// payload, an anomaly report): kept as it is up to `EVIDENCE_DATA_MAX` bytes, else replaced
/// by its size and the start of its JSON text.
pub fn bounded_data(data: Value) -> Value {
    let len = json_len(&data);
    if len <= EVIDENCE_DATA_MAX {
        return data;
    }
    let text = data.to_string();
    let preview: String = text.chars().take(1024).collect();
    json!({"truncated": true, "bytes": len, "preview": preview})
}

impl CandidateRow {
    pub fn candidate_id(&self) -> CandidateId {
        self.id.into_id()
    }

    pub fn tenant(&self) -> TenantId {
        self.tenant_id.into_id()
    }

    pub fn capability_list(&self) -> Vec<String> {
        string_list(&self.capabilities.0)
    }

    fn evidence_items(&self) -> Vec<Value> {
        self.evidence.0.as_array().cloned().unwrap_or_default()
    }

    /// A new pending candidate made of one or more events of the same fingerprint (the first
    /// event names it and gives its source).
    pub fn from_observations(tenant: TenantId, events: &[Observation]) -> Option<CandidateRow> {
        let first = events.first()?;
        let mut row = CandidateRow {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: Id(tenant.0),
            name: first.name.clone(),
            fingerprint: first.fingerprint.clone(),
            source: first.source.clone(),
            suggested_type: None,
            capabilities: Json(json!([])),
            score: 0.0,
            event_count: 0,
            evidence: Json(json!([])),
            status: PENDING.into(),
            first_seen: Ts(first.observed_at),
            last_seen: Ts(first.observed_at),
            agent_id: None,
            decided_at: None,
        };
        row.absorb(events);
        Some(row)
    }

    /// Merges events into the candidate: `event_count` + 1 each, evidence appended (the newest
    /// `EVIDENCE_KEPT` kept), `last_seen` updated, score recomputed. A missing suggested type
    /// is taken from the events; capabilities are united.
    pub fn absorb(&mut self, events: &[Observation]) {
        let mut evidence = self.evidence_items();
        let mut capabilities = self.capability_list();
        for e in events {
            evidence.push(e.evidence());
            union_into(&mut capabilities, &e.capabilities);
            if self.suggested_type.is_none() {
                self.suggested_type.clone_from(&e.suggested_type);
            }
            self.last_seen = self.last_seen.max(Ts(e.observed_at));
            self.first_seen = self.first_seen.min(Ts(e.observed_at));
        }
        self.event_count += events.len() as i64;
        self.score = score(self.event_count);
        self.evidence = Json(Value::Array(keep_newest(evidence)));
        self.capabilities = Json(json!(capabilities));
    }

    /// Folds other candidates into this one (clustering, contract 12.3): event counts summed,
    /// evidence merged by time (the newest kept), `first_seen` the earliest, `last_seen` the
    /// latest, capabilities united, a missing suggested type taken from the others.
    pub fn fold(&mut self, others: &[CandidateRow]) {
        let mut evidence = self.evidence_items();
        let mut capabilities = self.capability_list();
        for o in others {
            evidence.extend(o.evidence_items());
            union_into(&mut capabilities, &o.capability_list());
            if self.suggested_type.is_none() {
                self.suggested_type.clone_from(&o.suggested_type);
            }
            self.event_count += o.event_count;
            self.first_seen = self.first_seen.min(o.first_seen);
            self.last_seen = self.last_seen.max(o.last_seen);
        }
        // Timestamps are fixed-width RFC 3339 strings, so text order is time order; the sort
        // is stable, so items of the same instant keep their order.
        evidence.sort_by(|a, b| {
            let at = |v: &Value| v["observed_at"].as_str().unwrap_or_default().to_owned();
            at(a).cmp(&at(b))
        });
        self.score = score(self.event_count);
        self.evidence = Json(Value::Array(keep_newest(evidence)));
        self.capabilities = Json(json!(capabilities));
    }

    /// The API object.
    pub fn view(&self) -> Candidate {
        Candidate {
            id: self.id.0.hyphenated().to_string(),
            tenant_id: self.tenant_id.0.hyphenated().to_string(),
            name: self.name.clone(),
            fingerprint: self.fingerprint.clone(),
            source: self.source.clone(),
            suggested_type: self.suggested_type.clone(),
            capabilities: self.capabilities.0.clone(),
            score: self.score,
            event_count: self.event_count,
            evidence: self.evidence.0.clone(),
            status: self.status.clone(),
            first_seen: format_timestamp(self.first_seen.0),
            last_seen: format_timestamp(self.last_seen.0),
            agent_id: self.agent_id.map(|a| a.0.hyphenated().to_string()),
            decided_at: self.decided_at.map(|t| format_timestamp(t.0)),
        }
    }
}

/// The candidate object (contract 12.1).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Candidate {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub fingerprint: String,
    pub source: String,
    pub suggested_type: Option<String>,
    pub capabilities: Value,
    pub score: f64,
    pub event_count: i64,
    pub evidence: Value,
    #[schema(schema_with = statuses)]
    pub status: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub first_seen: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub last_seen: String,
    pub agent_id: Option<String>,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub decided_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn obs(name: &str, at: OffsetDateTime, caps: &[&str], ty: Option<&str>) -> Observation {
        Observation {
            name: name.into(),
            fingerprint: fingerprint_of_name(name),
            source: "ingest".into(),
            suggested_type: ty.map(str::to_owned),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            data: json!({"n": name}),
            observed_at: at,
        }
    }

    #[test]
    fn evidence_is_bounded_in_bytes_and_the_newest_stays() {
        let big = |i: usize| json!({"i": i, "blob": "z".repeat(7000)});
        let kept = keep_newest((0..20).map(big).collect());
        let total: usize = kept.iter().map(json_len).sum();
        assert!(total <= EVIDENCE_BYTES_KEPT, "{total}");
        assert_eq!(kept.len(), 4);
        assert_eq!(kept.last().unwrap()["i"], 19, "the newest is kept");
        assert_eq!(kept[0]["i"], 16, "the oldest go first");
        // Small items: only the count bound applies.
        let small = keep_newest((0..60).map(|i| json!({"i": i})).collect());
        assert_eq!(small.len(), EVIDENCE_KEPT);
        // A single item over the byte bound stays: the newest is never dropped.
        let one = keep_newest(vec![json!({"blob": "z".repeat(40_000)})]);
        assert_eq!(one.len(), 1);
    }

    #[test]
    fn unvalidated_data_is_cut_to_a_preview() {
        let small = json!({"a": 1});
        assert_eq!(bounded_data(small.clone()), small);
        let big = bounded_data(json!({"blob": "z".repeat(100_000)}));
        assert_eq!(big["truncated"], true);
        assert!(big["bytes"].as_u64().unwrap() > 100_000);
        assert!(json_len(&big) < 2 * 1024);
    }

    #[test]
    fn score_formula() {
        assert_eq!(score(1), 0.5);
        assert_eq!(score(2), 0.6);
        assert_eq!(score(3), 0.7);
        assert_eq!(score(5), 0.9);
        assert_eq!(score(6), 1.0);
        assert_eq!(score(1000), 1.0);
        for n in 1..20 {
            let expected = (0.5 + 0.1 * (n as f64 - 1.0)).min(1.0);
            assert!((score(n) - expected).abs() < 1e-12, "{n}");
        }
    }

    #[test]
    fn fingerprint_is_trimmed_lowercase_name() {
        assert_eq!(fingerprint_of_name("  Sales Helper "), "sales helper");
    }

    #[test]
    fn absorb_counts_keeps_newest_evidence_and_unites() {
        let t0 = datetime!(2026-03-01 12:00:00 UTC);
        let first = obs("Bot", t0, &["a"], None);
        let mut row = CandidateRow::from_observations(TenantId::new(), &[first]).unwrap();
        assert_eq!((row.event_count, row.score), (1, 0.5));
        let later: Vec<Observation> = (1..=60)
            .map(|i| {
                obs(
                    "bot",
                    t0 + time::Duration::seconds(i),
                    &["b", "a"],
                    Some("llm"),
                )
            })
            .collect();
        row.absorb(&later);
        assert_eq!(row.event_count, 61);
        assert_eq!(row.score, 1.0);
        assert_eq!(row.name, "Bot", "the first name stays");
        assert_eq!(row.suggested_type.as_deref(), Some("llm"));
        assert_eq!(row.capabilities.0, json!(["a", "b"]));
        let ev = row.evidence.0.as_array().unwrap();
        assert_eq!(ev.len(), EVIDENCE_KEPT);
        assert_eq!(
            ev.last().unwrap()["observed_at"],
            json!(format_timestamp(t0 + time::Duration::seconds(60)))
        );
        assert_eq!(row.first_seen, Ts(t0));
        assert_eq!(row.last_seen, Ts(t0 + time::Duration::seconds(60)));
    }

    #[test]
    fn fold_sums_and_orders_evidence() {
        let t0 = datetime!(2026-03-01 12:00:00 UTC);
        let s = |i| t0 + time::Duration::seconds(i);
        let tenant = TenantId::new();
        let mut a = CandidateRow::from_observations(
            tenant,
            &[obs("a", s(10), &[], None), obs("a", s(30), &[], None)],
        )
        .unwrap();
        let b = CandidateRow::from_observations(tenant, &[obs("b", s(5), &["x"], Some("tool"))])
            .unwrap();
        let c = CandidateRow::from_observations(tenant, &[obs("c", s(20), &[], None)]).unwrap();
        a.fold(&[b, c]);
        assert_eq!(a.event_count, 4);
        assert_eq!(a.score, 0.8);
        assert_eq!(a.first_seen, Ts(s(5)));
        assert_eq!(a.last_seen, Ts(s(30)));
        assert_eq!(a.suggested_type.as_deref(), Some("tool"));
        let names: Vec<&str> = a
            .evidence
            .0
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["data"]["n"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b", "a", "c", "a"]);
    }
}
