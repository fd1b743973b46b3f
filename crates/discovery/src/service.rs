//! The discovery service (contract 12): ingest, listing, confirm, dismiss, integrations and
//! the internal feed used by the other sources of candidates (12.5).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde::Serialize;
use serde_json::{json, Map, Value};
use steward_core::clock;
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::principal::CredentialKind;
use steward_core::validate::{Fields, Query};
use steward_core::{
    parse_path_id, AgentId, Body, CandidateId, Error, ErrorKind, EventBus, Op, Page, PageRequest,
    Principal, Result, Role, TenantId,
};
use steward_registry::embedding::AGENT_TYPES;
use steward_registry::{AgentView, Registry};
use steward_store::schema::{discovery_candidates as dc, discovery_source_counts as dsc};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Ts};
use time::OffsetDateTime;

use crate::model::{
    bounded_data, fingerprint_of_name, json_len, truncate_chars, Candidate, CandidateRow,
    Observation, CONFIRMED, DISMISSED, EVIDENCE_DATA_MAX, FINGERPRINT_MAX, NAME_MAX, PENDING,
    SOURCE_MAX,
};

/// Events in one batch ingest.
pub const BATCH_MAX: usize = 1000;
/// Longest capability name (as in agent registration).
const CAPABILITY_MAX: usize = 100;
/// Rounds of "find the pending candidate, merge or insert" before giving up under contention.
const MAX_ATTEMPTS: usize = 100;
/// Fingerprints per `IN (…)` lookup, new candidates per insert transaction.
const LOOKUP_CHUNK: usize = 500;
const INSERT_CHUNK: usize = 100;
const LIST_STATUSES: [&str; 4] = [PENDING, CONFIRMED, DISMISSED, "all"];

/// The integrations of contract 12.6, by id.
pub const INTEGRATIONS: [&str; 2] = ["agent_framework", "model_provider"];

fn integrations() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&INTEGRATIONS)
}

/// Which integrations are enabled (`INTEGRATION_AGENT_FRAMEWORK_ENABLED`,
/// `INTEGRATION_MODEL_PROVIDER_ENABLED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegrationSettings {
    pub agent_framework_enabled: bool,
    pub model_provider_enabled: bool,
}

impl Default for IntegrationSettings {
    fn default() -> Self {
        Self {
            agent_framework_enabled: true,
            model_provider_enabled: true,
        }
    }
}

/// The answer of `POST /discovery/ingest/batch` (contract 12.2).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct BatchResult {
    /// Candidates created by the batch.
    pub created: usize,
    /// Events merged into an existing candidate (or into one created earlier in the batch).
    pub merged: usize,
    /// The affected candidate of every event, in input order (as it stands after the batch).
    pub candidates: Vec<Candidate>,
    pub cluster_task_id: Option<String>,
}

/// The answer of `POST /discovery/candidates/{id}/confirm`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Confirmed {
    pub candidate: Candidate,
    pub agent: AgentView,
}

/// The answer of `GET /integrations/{integration}/status` (contract 12.6).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IntegrationStatus {
    #[schema(schema_with = integrations)]
    pub integration: String,
    pub enabled: bool,
    pub status: String,
    pub discovery_fallback: bool,
    pub events_received: i64,
}

/// The discovery service.
#[derive(Clone)]
pub struct Discovery {
    pub(crate) db: DbPool,
    pub(crate) bus: Arc<dyn EventBus>,
    registry: Registry,
    integrations: IntegrationSettings,
}

/// The validated body of an ingest event (without the time it was observed).
fn read_event(f: &mut Fields<'_>, observed_at: OffsetDateTime) -> Option<Observation> {
    // An observed name is kept as seen, odd characters included: refusing one would hide the
    // agent that uses it from discovery (names an operator gives are checked: `read_confirm`).
    let name = f.required_str("name", 1, NAME_MAX).map(str::trim);
    if name == Some("") {
        f.error("name", "must not be blank");
    }
    let source = f.optional_str("source", 1, SOURCE_MAX);
    if source.is_some_and(|s| s.trim().is_empty()) {
        f.error("source", "must not be blank");
    }
    let fingerprint = f.optional_str("fingerprint", 1, FINGERPRINT_MAX);
    if fingerprint.is_some_and(|s| s.trim().is_empty()) {
        f.error("fingerprint", "must not be blank");
    }
    let suggested_type = f.optional_enum("type", &AGENT_TYPES).map(str::to_owned);
    let capabilities = f.optional_str_array("capabilities", CAPABILITY_MAX);
    let data = f.optional_object("evidence").cloned();
    if let Some(d) = &data {
        if json_len(&Value::Object(d.clone())) > EVIDENCE_DATA_MAX {
            f.error(
                "evidence",
                format!("must be at most {EVIDENCE_DATA_MAX} bytes of JSON"),
            );
        }
    }
    if f.has_errors() {
        return None;
    }
    let name = name?.to_owned();
    Some(Observation {
        fingerprint: fingerprint.map_or_else(|| fingerprint_of_name(&name), str::to_owned),
        name,
        source: source.unwrap_or("ingest").to_owned(),
        suggested_type,
        capabilities: capabilities.unwrap_or_default(),
        data: Value::Object(data.unwrap_or_default()),
        observed_at,
    })
}

/// The validated body of a confirm.
#[derive(Default)]
struct ConfirmInput {
    name: Option<String>,
    agent_type: Option<String>,
    capabilities: Option<Vec<String>>,
    permissions: Option<Map<String, Value>>,
}

fn read_confirm(value: &Value) -> Result<ConfirmInput> {
    let mut f = Fields::root(value);
    let name = f.optional_str("name", 1, NAME_MAX);
    let name = f.name("name", name);
    let agent_type = f.optional_enum("type", &AGENT_TYPES).map(str::to_owned);
    let capabilities = f.optional_str_array("capabilities", CAPABILITY_MAX);
    let permissions = f.optional_object("permissions").cloned();
    if let Some(m) = permissions
        .as_ref()
        .and_then(|p| p.get("max_risk"))
        .filter(|v| !v.is_null())
    {
        if !m.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)) {
            f.error("permissions.max_risk", "must be a number between 0 and 1");
        }
    }
    f.finish()?;
    Ok(ConfirmInput {
        name,
        agent_type,
        capabilities,
        permissions,
    })
}

fn not_pending(row: &CandidateRow) -> Error {
    Error::conflict(format!(
        "candidate {} is {}, not pending",
        row.id.0.hyphenated(),
        row.status
    ))
}

fn not_found(id: CandidateId) -> Error {
    Error::not_found(format!("candidate {id} was not found"))
}

/// Events grouped by fingerprint, in order of first appearance; `slots[i]` is the group of
/// event `i`.
fn group_by_fingerprint(events: Vec<Observation>) -> (Vec<Vec<Observation>>, Vec<usize>) {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<Vec<Observation>> = Vec::new();
    let mut slots = Vec::with_capacity(events.len());
    for e in events {
        let g = *index.entry(e.fingerprint.clone()).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(e);
        slots.push(g);
    }
    (groups, slots)
}

impl Discovery {
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        registry: Registry,
        integrations: IntegrationSettings,
    ) -> Self {
        Self {
            db,
            bus,
            registry,
            integrations,
        }
    }

    pub(crate) fn event(&self, kind: &str, tenant: TenantId, severity: Severity, data: Value) {
        publish(&self.bus, Event::new(kind, tenant, severity, data));
    }

    // --- Storage ---

    /// One candidate of a tenant (`None` when absent or another tenant's).
    async fn find(&self, tenant: TenantId, id: CandidateId) -> Result<Option<CandidateRow>> {
        with_conn!(&self.db, conn => {
            dc::table
                .filter(dc::tenant_id.eq(Id(tenant.0)))
                .filter(dc::id.eq(Id(id.0)))
                .select(CandidateRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })
    }

    async fn load(&self, p: &Principal, id: &str) -> Result<CandidateRow> {
        let id: CandidateId = parse_path_id(id, "candidate")?;
        self.find(p.tenant, id).await?.ok_or_else(|| not_found(id))
    }

    /// The tenant's pending candidates with one of these fingerprints.
    async fn pending_by_fingerprints(
        &self,
        tenant: TenantId,
        fingerprints: &[String],
    ) -> Result<Vec<CandidateRow>> {
        let mut out = Vec::new();
        for chunk in fingerprints.chunks(LOOKUP_CHUNK) {
            let chunk = chunk.to_vec();
            let rows: Vec<CandidateRow> = with_conn!(&self.db, conn => {
                dc::table
                    .filter(dc::tenant_id.eq(Id(tenant.0)))
                    .filter(dc::status.eq(PENDING))
                    .filter(dc::fingerprint.eq_any(chunk))
                    .select(CandidateRow::as_select())
                    .load(conn)
                    .await
                    .db()
            })?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// Saves a merged candidate unless it changed since it was read (optimistic: the event
    /// count only grows while a candidate is pending). `false` when it changed or left
    /// `pending`.
    async fn save_if_unchanged(&self, row: &CandidateRow, seen_count: i64) -> Result<bool> {
        let n = with_conn!(&self.db, conn => {
            diesel::update(
                dc::table
                    .filter(dc::id.eq(row.id))
                    .filter(dc::status.eq(PENDING))
                    .filter(dc::event_count.eq(seen_count)),
            )
            .set(row)
            .execute(conn)
            .await
            .db()
        })?;
        Ok(n == 1)
    }

    /// Saves several merged candidates in one transaction; returns which were saved.
    async fn save_all_if_unchanged(&self, rows: &[(CandidateRow, i64)]) -> Result<Vec<bool>> {
        if rows.len() == 1 {
            return Ok(vec![self.save_if_unchanged(&rows[0].0, rows[0].1).await?]);
        }
        with_conn!(&self.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    let mut saved = Vec::with_capacity(rows.len());
                    for (row, seen) in rows {
                        let n = diesel::update(
                            dc::table
                                .filter(dc::id.eq(row.id))
                                .filter(dc::status.eq(PENDING))
                                .filter(dc::event_count.eq(*seen)),
                        )
                        .set(row)
                        .execute(conn)
                        .await?;
                        saved.push(n == 1);
                    }
                    Ok(saved)
                }
                .scope_boxed()
            })
            .await
            .db()
        })
    }

    /// Inserts new candidates in one transaction. `false` when one of them collided with a
    /// pending candidate created meanwhile (then none was inserted).
    async fn insert_all(&self, rows: &[CandidateRow]) -> Result<bool> {
        let result = with_conn!(&self.db, conn => {
            if let [row] = rows {
                diesel::insert_into(dc::table).values(row).execute(conn).await.db()
            } else {
                // One statement per row (diesel-async has no multi-row insert on SQLite), one
                // commit for all.
                conn.transaction::<_, diesel::result::Error, _>(|conn| {
                    async move {
                        for row in rows {
                            diesel::insert_into(dc::table).values(row).execute(conn).await?;
                        }
                        Ok(rows.len())
                    }
                    .scope_boxed()
                })
                .await
                .db()
            }
        });
        match result {
            Ok(_) => Ok(true),
            Err(e) if e.kind == ErrorKind::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The slow path for one fingerprint: merge into the pending candidate or create it,
    /// retrying when a concurrent writer got there first.
    async fn apply_one(
        &self,
        tenant: TenantId,
        events: &[Observation],
    ) -> Result<(CandidateRow, bool)> {
        let Some(fingerprint) = events.first().map(|e| e.fingerprint.clone()) else {
            return Err(Error::internal_msg("no event to apply"));
        };
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 2 {
                tokio::time::sleep(Duration::from_millis(attempt.min(20) as u64)).await;
            }
            let existing = self
                .pending_by_fingerprints(tenant, std::slice::from_ref(&fingerprint))
                .await?;
            if let Some(mut row) = existing.into_iter().next() {
                let seen = row.event_count;
                row.absorb(events);
                if self.save_if_unchanged(&row, seen).await? {
                    return Ok((row, false));
                }
            } else if let Some(row) = CandidateRow::from_observations(tenant, events) {
                if self.insert_all(std::slice::from_ref(&row)).await? {
                    return Ok((row, true));
                }
            }
        }
        Err(Error::internal_msg(format!(
            "candidate {fingerprint:?} kept changing during {MAX_ATTEMPTS} attempts"
        )))
    }

    /// Applies groups of events (one fingerprint per group) and returns, per group, the
    /// candidate and whether it was created. Batched on the common path: one lookup, one
    /// transaction per chunk of new candidates, one transaction of merges; a group that met a
    /// concurrent writer is retried alone.
    async fn apply(
        &self,
        tenant: TenantId,
        groups: &[Vec<Observation>],
    ) -> Result<Vec<(CandidateRow, bool)>> {
        let fingerprints: Vec<String> = groups
            .iter()
            .filter_map(|g| g.iter().next().map(|e| e.fingerprint.clone()))
            .collect();
        let mut existing: HashMap<String, CandidateRow> = self
            .pending_by_fingerprints(tenant, &fingerprints)
            .await?
            .into_iter()
            .map(|r| (r.fingerprint.clone(), r))
            .collect();
        let mut results: Vec<Option<(CandidateRow, bool)>> = vec![None; groups.len()];
        let mut merges: Vec<(usize, (CandidateRow, i64))> = Vec::new();
        let mut inserts: Vec<(usize, CandidateRow)> = Vec::new();
        for (i, (fp, events)) in fingerprints.iter().zip(groups).enumerate() {
            match existing.remove(fp) {
                Some(mut row) => {
                    let seen = row.event_count;
                    row.absorb(events);
                    merges.push((i, (row, seen)));
                }
                None => {
                    if let Some(row) = CandidateRow::from_observations(tenant, events) {
                        inserts.push((i, row));
                    }
                }
            }
        }
        let mut retry: Vec<usize> = Vec::new();
        for chunk in inserts.chunks(INSERT_CHUNK) {
            let rows: Vec<CandidateRow> = chunk.iter().map(|(_, r)| r.clone()).collect();
            if self.insert_all(&rows).await? {
                for (i, row) in chunk {
                    results[*i] = Some((row.clone(), true));
                }
            } else {
                retry.extend(chunk.iter().map(|(i, _)| *i));
            }
        }
        if !merges.is_empty() {
            // Rows are locked in id order, so that two batches never wait on each other in a
            // cycle; should the transaction fail anyway (a deadlock with clustering), every
            // merge is retried alone.
            merges.sort_by_key(|(_, (row, _))| row.id.0);
            let rows: Vec<(CandidateRow, i64)> = merges.iter().map(|(_, r)| r.clone()).collect();
            let saved = match self.save_all_if_unchanged(&rows).await {
                Ok(saved) => saved,
                Err(e) if e.kind == ErrorKind::Internal => {
                    tracing::debug!(error = %e, "batched merge failed; merging one by one");
                    vec![false; rows.len()]
                }
                Err(e) => return Err(e),
            };
            for ((i, (row, _)), ok) in merges.into_iter().zip(saved) {
                if ok {
                    results[i] = Some((row, false));
                } else {
                    retry.push(i);
                }
            }
        }
        for i in retry {
            results[i] = Some(self.apply_one(tenant, &groups[i]).await?);
        }
        let results: Vec<(CandidateRow, bool)> = results.into_iter().flatten().collect();
        if results.len() != groups.len() {
            return Err(Error::internal_msg("a group of events was not applied"));
        }
        for (row, created) in &results {
            if *created {
                metrics::counter!("shadow_candidates_total").increment(1);
                self.event(
                    "discovery.candidate_created",
                    tenant,
                    Severity::Warning,
                    json!({
                        "candidate_id": row.id.0.hyphenated().to_string(),
                        "name": row.name,
                        "fingerprint": row.fingerprint,
                        "source": row.source,
                    }),
                );
            }
        }
        self.count_sources(tenant, groups).await?;
        Ok(results)
    }

    /// Adds the events to the per-source counters (integration status `events_received`).
    async fn count_sources(&self, tenant: TenantId, groups: &[Vec<Observation>]) -> Result<()> {
        let mut counts: Vec<(String, i64)> = Vec::new();
        for e in groups.iter().flatten() {
            match counts.iter_mut().find(|(s, _)| *s == e.source) {
                Some((_, n)) => *n += 1,
                None => counts.push((e.source.clone(), 1)),
            }
        }
        for (source, n) in counts {
            with_conn!(&self.db, conn => {
                diesel::insert_into(dsc::table)
                    .values((
                        dsc::tenant_id.eq(Id(tenant.0)),
                        dsc::source.eq(&source),
                        dsc::events.eq(n),
                    ))
                    .on_conflict((dsc::tenant_id, dsc::source))
                    .do_update()
                    .set(dsc::events.eq(dsc::events + n))
                    .execute(conn)
                    .await
                    .db()
            })?;
        }
        Ok(())
    }

    // --- Operations ---

    /// `POST /discovery/ingest`: the candidate and whether it was created (201) or the event
    /// was merged into a pending candidate (200).
    pub async fn ingest(&self, p: &Principal, body: &Body) -> Result<(Candidate, bool)> {
        p.authorize(Op::DiscoveryWrite)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let event = read_event(&mut f, clock::now());
        f.finish()?;
        let Some(event) = event else {
            return Err(Error::invalid_field("body", "must be a JSON object"));
        };
        let results = self.apply(p.tenant, &[vec![event]]).await?;
        let (row, created) = results
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal_msg("ingest applied nothing"))?;
        Ok((row.view(), created))
    }

    /// `POST /discovery/ingest/batch` with `{events: [1..=1000 ingest bodies], cluster?}`.
    pub async fn ingest_batch(&self, p: &Principal, body: &Body) -> Result<BatchResult> {
        p.authorize(Op::DiscoveryWrite)?;
        let value = body.parse::<Value>()?;
        let now = clock::now();
        let mut f = Fields::root(&value);
        let cluster = f.optional_bool("cluster").unwrap_or(false);
        let mut events = Vec::new();
        match f.get("events") {
            None => {
                if value.is_object() {
                    f.error("events", "is required");
                }
            }
            Some(v) => match v.as_array() {
                None => f.error("events", "must be an array of events"),
                Some(items) if items.is_empty() || items.len() > BATCH_MAX => f.error(
                    "events",
                    format!("must hold 1 to {BATCH_MAX} events, not {}", items.len()),
                ),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let mut inner = Fields::nested(item, format!("events[{i}]"));
                        if let Some(e) = read_event(&mut inner, now) {
                            events.push(e);
                        }
                        f.absorb(inner);
                    }
                }
            },
        }
        f.finish()?;
        let total = events.len();
        let (groups, slots) = group_by_fingerprint(events);
        let results = self.apply(p.tenant, &groups).await?;
        let created = results.iter().filter(|(_, c)| *c).count();
        let views: Vec<Candidate> = results.iter().map(|(r, _)| r.view()).collect();
        let candidates = slots
            .iter()
            .filter_map(|g| views.get(*g).cloned())
            .collect();
        let cluster_task_id = if cluster {
            Some(
                self.enqueue_cluster(p.tenant, crate::cluster::DEFAULT_THRESHOLD)
                    .await?
                    .task_id,
            )
        } else {
            None
        };
        Ok(BatchResult {
            created,
            merged: total - created,
            candidates,
            cluster_task_id,
        })
    }

    /// Feeds one event from another source (orphan anomaly reports: `source` `anomaly`;
    /// webhooks of unknown agents: `source` `webhook` with the agent id as `fingerprint`).
    /// The name is trimmed and cut to 128 characters; without a fingerprint the merge key is
    /// the lowercased name. A blank name with no fingerprint is a 422 on `name`.
    pub async fn feed(
        &self,
        tenant: TenantId,
        name: &str,
        fingerprint: Option<&str>,
        source: &str,
        data: Value,
    ) -> Result<Candidate> {
        let mut name = truncate_chars(name.trim(), NAME_MAX);
        let fingerprint = match fingerprint.filter(|f| !f.trim().is_empty()) {
            Some(f) => truncate_chars(f, FINGERPRINT_MAX),
            None if name.is_empty() => {
                return Err(Error::invalid_field("name", "must not be blank"));
            }
            None => fingerprint_of_name(&name),
        };
        if name.is_empty() {
            name = truncate_chars(&fingerprint, NAME_MAX);
        }
        let event = Observation {
            name,
            fingerprint,
            source: truncate_chars(source, SOURCE_MAX),
            suggested_type: None,
            capabilities: Vec::new(),
            data: bounded_data(data),
            observed_at: clock::now(),
        };
        let results = self.apply(tenant, &[vec![event]]).await?;
        results
            .into_iter()
            .next()
            .map(|(row, _)| row.view())
            .ok_or_else(|| Error::internal_msg("feed applied nothing"))
    }

    /// `GET /discovery/candidates` with `status` (`pending` by default, `confirmed`,
    /// `dismissed`, `all`); newest first.
    pub async fn list(&self, p: &Principal, pairs: &[(String, String)]) -> Result<Page<Candidate>> {
        p.authorize(Op::DiscoveryRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let status = q.one_of("status", &LIST_STATUSES).unwrap_or(PENDING);
        q.finish()?;
        let status = (status != "all").then(|| status.to_owned());
        let tenant = Id(p.tenant.0);
        macro_rules! filtered {
            () => {{
                let mut query = dc::table.filter(dc::tenant_id.eq(tenant)).into_boxed();
                if let Some(s) = &status {
                    query = query.filter(dc::status.eq(s.clone()));
                }
                query
            }};
        }
        let (total, rows): (i64, Vec<CandidateRow>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (dc::first_seen.desc(), dc::id.desc()),
            CandidateRow::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.iter().map(CandidateRow::view).collect(),
            total,
            page,
        ))
    }

    /// `POST /discovery/candidates/{id}/confirm` with `{name?, type?, capabilities?,
    /// permissions?}`: registers the agent and links the candidate to it.
    pub async fn confirm(&self, p: &Principal, id: &str, body: &Body) -> Result<Confirmed> {
        p.authorize(Op::DiscoveryWrite)?;
        let input = read_confirm(&body.parse_or_empty::<Value>()?)?;
        let mut row = self.load(p, id).await?;
        if row.status != PENDING {
            return Err(not_pending(&row));
        }
        let agent = self
            .registry
            .create(
                p.tenant,
                input.name.unwrap_or_else(|| row.name.clone()),
                input
                    .agent_type
                    .or_else(|| row.suggested_type.clone())
                    .unwrap_or_else(|| "custom".into()),
                input.capabilities.unwrap_or_else(|| row.capability_list()),
                input.permissions.unwrap_or_default(),
                None,
            )
            .await?;
        let now = Ts(clock::now());
        let (cid, aid) = (row.id, agent.id);
        let changed = with_conn!(&self.db, conn => {
            diesel::update(dc::table.filter(dc::id.eq(cid)).filter(dc::status.eq(PENDING)))
                .set((
                    dc::status.eq(CONFIRMED),
                    dc::agent_id.eq(Some(aid)),
                    dc::decided_at.eq(Some(now)),
                ))
                .execute(conn)
                .await
                .db()
        })?;
        if changed == 0 {
            // Decided (or absorbed by clustering) since it was read: undo the registration,
            // through the registry so that its search index follows.
            let system = Principal {
                tenant: p.tenant,
                role: Role::Admin,
                user: None,
                key: None,
                kind: CredentialKind::TenantKey,
                jti: None,
            };
            if let Err(e) = self.registry.delete(&system, &aid.0.to_string()).await {
                tracing::warn!(agent = %aid.0, error = %e, "agent of a lost confirm not removed");
            }
            return Err(match self.find(p.tenant, row.candidate_id()).await? {
                Some(r) => not_pending(&r),
                None => not_found(row.candidate_id()),
            });
        }
        row.status = CONFIRMED.into();
        row.agent_id = Some(aid);
        row.decided_at = Some(now);
        let waited = (now.0 - row.first_seen.0).as_seconds_f64().max(0.0);
        metrics::histogram!("shadow_time_to_confirm_seconds").record(waited);
        self.event(
            "discovery.candidate_confirmed",
            p.tenant,
            Severity::Info,
            json!({
                "candidate_id": row.id.0.hyphenated().to_string(),
                "agent_id": aid.0.hyphenated().to_string(),
                "name": agent.name,
                "fingerprint": row.fingerprint,
            }),
        );
        Ok(Confirmed {
            candidate: row.view(),
            agent: AgentView::from(&agent),
        })
    }

    /// `POST /discovery/candidates/{id}/dismiss`.
    /// `POST /discovery/candidates/{id}/dismiss` as requested: the optional body checked
    /// ([`Body::unread`]) after the role and before anything changes.
    pub async fn dismiss_request(&self, p: &Principal, id: &str, body: &Body) -> Result<Candidate> {
        p.authorize(Op::DiscoveryWrite)?;
        body.unread()?;
        self.dismiss(p, id).await
    }

    pub async fn dismiss(&self, p: &Principal, id: &str) -> Result<Candidate> {
        p.authorize(Op::DiscoveryWrite)?;
        let mut row = self.load(p, id).await?;
        if row.status != PENDING {
            return Err(not_pending(&row));
        }
        let now = Ts(clock::now());
        let cid = row.id;
        let changed = with_conn!(&self.db, conn => {
            diesel::update(dc::table.filter(dc::id.eq(cid)).filter(dc::status.eq(PENDING)))
                .set((dc::status.eq(DISMISSED), dc::decided_at.eq(Some(now))))
                .execute(conn)
                .await
                .db()
        })?;
        if changed == 0 {
            return Err(match self.find(p.tenant, row.candidate_id()).await? {
                Some(r) => not_pending(&r),
                None => not_found(row.candidate_id()),
            });
        }
        row.status = DISMISSED.into();
        row.decided_at = Some(now);
        self.event(
            "discovery.candidate_dismissed",
            p.tenant,
            Severity::Info,
            json!({
                "candidate_id": row.id.0.hyphenated().to_string(),
                "name": row.name,
                "fingerprint": row.fingerprint,
            }),
        );
        Ok(row.view())
    }

    /// `GET /integrations/{integration}/status`; an unknown integration is a 404.
    pub async fn integration_status(&self, p: &Principal, name: &str) -> Result<IntegrationStatus> {
        p.authorize(Op::IntegrationsRead)?;
        let enabled = match name {
            "agent_framework" => self.integrations.agent_framework_enabled,
            "model_provider" => self.integrations.model_provider_enabled,
            _ => {
                return Err(Error::not_found(format!(
                    "integration {name} was not found; known: {}",
                    INTEGRATIONS.join(", ")
                )))
            }
        };
        let tenant = Id(p.tenant.0);
        let source = name.to_owned();
        let events: Option<i64> = with_conn!(&self.db, conn => {
            dsc::table
                .filter(dsc::tenant_id.eq(tenant))
                .filter(dsc::source.eq(source))
                .select(dsc::events)
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        Ok(IntegrationStatus {
            integration: name.to_owned(),
            enabled,
            status: if enabled { "ok" } else { "disabled" }.to_owned(),
            discovery_fallback: true,
            events_received: events.unwrap_or(0),
        })
    }

    /// The confirmed candidate an agent came from (agent details `discovery`), else `None`.
    pub async fn candidate_for_agent(
        &self,
        tenant: TenantId,
        agent: AgentId,
    ) -> Result<Option<Candidate>> {
        let row: Option<CandidateRow> = with_conn!(&self.db, conn => {
            dc::table
                .filter(dc::tenant_id.eq(Id(tenant.0)))
                .filter(dc::agent_id.eq(Id(agent.0)))
                .filter(dc::status.eq(CONFIRMED))
                .order((dc::decided_at.desc(), dc::id.desc()))
                .select(CandidateRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        Ok(row.as_ref().map(CandidateRow::view))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(value: Value) -> Vec<String> {
        let mut f = Fields::root(&value);
        let _ = read_event(&mut f, clock::now());
        match f.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.errors.into_iter().map(|e| e.field).collect(),
        }
    }

    #[test]
    fn event_validation_names_every_field() {
        assert!(paths(json!({"name": "bot"})).is_empty());
        assert_eq!(
            paths(
                json!({"name": "  ", "type": "robot", "capabilities": ["a", 1],
                         "evidence": [], "source": 3, "fingerprint": ""})
            ),
            [
                "name",
                "source",
                "fingerprint",
                "type",
                "capabilities[1]",
                "evidence"
            ]
        );
        assert_eq!(paths(json!({})), ["name"]);
        assert_eq!(paths(json!({"name": "x".repeat(129)})), ["name"]);
        assert_eq!(
            paths(json!({"name": "x", "evidence": {"blob": "z".repeat(EVIDENCE_DATA_MAX)}})),
            ["evidence"]
        );
        assert!(paths(json!({"name": "x", "evidence": {"blob": "z".repeat(8000)}})).is_empty());
    }

    #[test]
    fn event_defaults() {
        let v = json!({"name": "  Sales Helper ", "type": "llm"});
        let mut f = Fields::root(&v);
        let e = read_event(&mut f, clock::now()).unwrap();
        assert_eq!(e.name, "Sales Helper");
        assert_eq!(e.fingerprint, "sales helper");
        assert_eq!(e.source, "ingest");
        assert_eq!(e.suggested_type.as_deref(), Some("llm"));
        assert_eq!(e.data, json!({}));
        let v = json!({"name": "x", "fingerprint": "FP-1", "evidence": {"k": 1}});
        let mut f = Fields::root(&v);
        let e = read_event(&mut f, clock::now()).unwrap();
        assert_eq!(
            e.fingerprint, "FP-1",
            "a given fingerprint is kept as given"
        );
        assert_eq!(e.data, json!({"k": 1}));
    }

    #[test]
    fn confirm_validation() {
        let bad = read_confirm(&json!({"name": "", "type": "x", "capabilities": "a",
                                       "permissions": {"max_risk": 2}}));
        let fields: Vec<String> = bad
            .err()
            .map(|e| e.errors.into_iter().map(|e| e.field).collect())
            .unwrap_or_default();
        assert_eq!(
            fields,
            ["name", "type", "capabilities", "permissions.max_risk"]
        );
        assert!(read_confirm(&json!({})).is_ok());
    }

    #[test]
    fn grouping_keeps_input_order() {
        let now = clock::now();
        let e = |fp: &str| Observation {
            name: fp.into(),
            fingerprint: fp.into(),
            source: "ingest".into(),
            suggested_type: None,
            capabilities: vec![],
            data: json!({}),
            observed_at: now,
        };
        let (groups, slots) = group_by_fingerprint(vec![e("b"), e("a"), e("b"), e("c")]);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0].len(), 2);
        assert_eq!(slots, [0, 1, 0, 2]);
    }
}
