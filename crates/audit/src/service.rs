//! Appending, reading and verifying audit entries.

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use steward_core::clock::{self, format_timestamp};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::validate::{Fields, Query};
use steward_core::{
    parse_path_id, AgentId, AuditId, AuditRecord, AuditWriter, Body, Error, EventBus, Op, Page,
    PageRequest, Principal, Result, TenantId,
};
use steward_store::schema::{agents, audit_entries, audit_heads};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

use crate::chain::{canonical_bytes, ChainHasher, SignedFields, GENESIS_HASH};

diesel::table! {
    use diesel::sql_types::BigInt;
    use steward_store::types::{DbTime, DbUuid};

    /// Audit entries per tenant and UTC day (`day` = the midnight starting it), maintained by
    /// triggers on `audit_entries` (migration `audit_daily_counts`), read by the dashboard.
    audit_daily_counts (tenant_id, day) {
        tenant_id -> DbUuid,
        day -> DbTime,
        count -> BigInt,
    }
}
use crate::writer::Writer;

/// An audit entry as the API emits it (contract 14.1).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: String,
    pub seq: i64,
    pub tenant_id: String,
    pub agent_id: Option<String>,
    pub agent_name: Option<String>,
    pub user_id: Option<String>,
    pub action: String,
    pub resource: String,
    pub input: Value,
    pub output: Value,
    pub reasoning: Value,
    pub risk_score: f64,
    pub is_approved: bool,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub timestamp: String,
    pub prev_hash: String,
    pub hash: String,
    pub signature: Option<String>,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = audit_entries)]
pub(crate) struct EntryRow {
    pub(crate) id: Id,
    pub(crate) tenant_id: Id,
    pub(crate) seq: i64,
    pub(crate) agent_id: Option<Id>,
    pub(crate) user_id: Option<Id>,
    pub(crate) action: String,
    pub(crate) resource: String,
    pub(crate) input: Json,
    pub(crate) output: Json,
    pub(crate) reasoning: Json,
    pub(crate) risk_score: f64,
    pub(crate) is_approved: bool,
    pub(crate) timestamp: Ts,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
    pub(crate) signature: Option<String>,
}

fn uuid_str(id: &Option<Id>) -> Option<String> {
    id.map(|i| i.0.hyphenated().to_string())
}

impl EntryRow {
    pub(crate) fn named(self, agent_name: Option<String>) -> AuditEntry {
        let mut v = self.view();
        v.agent_name = agent_name;
        v
    }

    pub(crate) fn view(self) -> AuditEntry {
        AuditEntry {
            id: self.id.0.hyphenated().to_string(),
            seq: self.seq,
            tenant_id: self.tenant_id.0.hyphenated().to_string(),
            agent_id: uuid_str(&self.agent_id),
            agent_name: None,
            user_id: uuid_str(&self.user_id),
            action: self.action,
            resource: self.resource,
            input: self.input.0,
            output: self.output.0,
            reasoning: self.reasoning.0,
            risk_score: self.risk_score,
            is_approved: self.is_approved,
            timestamp: format_timestamp(self.timestamp.0),
            prev_hash: self.prev_hash,
            hash: self.hash,
            signature: self.signature,
        }
    }
}

impl AuditEntry {
    pub(crate) fn signed_fields(&self) -> SignedFields<'_> {
        SignedFields {
            seq: self.seq,
            id: &self.id,
            tenant_id: &self.tenant_id,
            agent_id: self.agent_id.as_deref(),
            user_id: self.user_id.as_deref(),
            action: &self.action,
            resource: &self.resource,
            input: &self.input,
            output: &self.output,
            reasoning: &self.reasoning,
            risk_score: self.risk_score,
            is_approved: self.is_approved,
            timestamp: &self.timestamp,
            prev_hash: &self.prev_hash,
        }
    }
}

/// The result of `GET /audit/verify`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Verification {
    pub valid: bool,
    pub checked: i64,
    /// The first entry whose link, `seq`, hash or signature is wrong. Null while `valid` is
    /// false when no retained entry is wrong but entries are missing after the last one (the
    /// tenant's chain head records a later entry).
    pub first_bad_id: Option<String>,
}

/// The audit service.
#[derive(Clone)]
pub struct AuditService {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    hasher: ChainHasher,
    hook: Option<Arc<dyn AfterWrite>>,
    writer: Writer,
    agents: Option<Arc<dyn AgentDirectory>>,
    /// One chain verification at a time in this instance (`GET /audit/verify` is open to
    /// viewers and its cost grows with the retained chain): later ones wait their turn instead
    /// of taking every core.
    verifying: Arc<tokio::sync::Semaphore>,
}

/// Where `POST /audit/log` looks the reporting agent up: its status and name. The server wires
/// the registry's in-memory view; without one the service reads the agents table.
#[async_trait::async_trait]
pub trait AgentDirectory: Send + Sync + 'static {
    async fn status_and_name(
        &self,
        tenant: TenantId,
        agent: AgentId,
    ) -> Result<Option<(String, String)>>;
}

/// Told (best effort, off the request path) after an entry about an agent was written; the
/// registry refreshes the agent's risk score and embedding.
#[async_trait::async_trait]
pub trait AfterWrite: Send + Sync + 'static {
    async fn agent_entry_written(&self, tenant: TenantId, agent: AgentId);
}

/// Reserved action prefixes of server-written entries (contract 14.1).
pub const RESERVED_PREFIXES: [&str; 6] =
    ["user.", "api_key.", "policy.", "hitl.", "guard.", "system."];

/// Whether an action names a reserved prefix as a reader would see it: compatibility forms
/// folded (NFKC: a fullwidth letter or a one-dot leader reads as the ASCII one), invisible
/// format characters (zero-width spaces and joiners, bidirectional marks, soft hyphens)
/// removed, leading white space ignored, letter case ignored. `HITL.consumed`,
/// `" user.login"` and `"user\u{200b}.login"` would otherwise pass for system records.
pub fn is_reserved_action(action: &str) -> bool {
    use unicode_normalization::UnicodeNormalization;
    let invisible = |c: &char| {
        matches!(*c as u32,
            0x00AD | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064
            | 0x2066..=0x2069 | 0xFEFF)
    };
    let folded: String = action
        .nfkc()
        .filter(|c| !invisible(c))
        .collect::<String>()
        .trim_start()
        .to_lowercase();
    RESERVED_PREFIXES.iter().any(|p| folded.starts_with(p))
}

/// Entries read per batch while verifying.
const VERIFY_BATCH: i64 = 1000;

impl AuditService {
    /// Fails only when the writer's thread cannot be started.
    pub fn new(db: DbPool, bus: Arc<dyn EventBus>, hasher: ChainHasher) -> Result<Self> {
        let writer = Writer::new(db.clone(), hasher.clone()).map_err(|e| {
            Error::internal_msg(format!("cannot start the audit writer thread: {e}"))
        })?;
        Ok(Self {
            writer,
            db,
            bus,
            hasher,
            hook: None,
            agents: None,
            verifying: Arc::new(tokio::sync::Semaphore::new(1)),
        })
    }

    pub(crate) fn db(&self) -> &DbPool {
        &self.db
    }

    /// Sets the agent lookup of `POST /audit/log` (wired once the registry exists).
    pub fn with_agents(mut self, agents: Arc<dyn AgentDirectory>) -> Self {
        self.agents = Some(agents);
        self
    }

    /// Sets the after-write hook (wired once the registry exists).
    pub fn with_hook(mut self, hook: Arc<dyn AfterWrite>) -> Self {
        self.hook = Some(hook);
        self
    }

    /// `POST /audit/log`: an agent action reported by the agent's integration.
    pub async fn log(&self, p: &Principal, body: &Body) -> Result<AuditEntry> {
        p.authorize(Op::AuditWrite)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let agent = f.required_uuid("agent_id");
        let action = f.required_str("action", 1, 128).map(str::to_owned);
        if let Some(a) = &action {
            if is_reserved_action(a) {
                f.error("action", "must not start with a reserved prefix (user., api_key., policy., hitl., guard., system.)");
            }
        }
        let resource = f.required_str("resource", 0, 512).map(str::to_owned);
        let input = f.optional_object("input").cloned().unwrap_or_default();
        let output = f.optional_object("output").cloned().unwrap_or_default();
        let reasoning = f
            .optional_str_array("reasoning", 10_000)
            .unwrap_or_default();
        let risk_score = f.optional_f64("risk_score", 0.0, 1.0).unwrap_or(0.0);
        let is_approved = f.optional_bool("is_approved").unwrap_or(false);
        let found = match agent {
            Some(id) => self.agent_status(p.tenant, AgentId(id)).await?,
            None => None,
        };
        let (status, agent_name) = match found {
            Some((s, n)) => (Some(s), Some(n)),
            None => (None, None),
        };
        if agent.is_some() && status.is_none() {
            f.error("agent_id", "is not a registered agent of this tenant");
        }
        f.finish()?;
        let (Some(agent), Some(action), Some(resource)) = (agent, action, resource) else {
            return Err(Error::internal_msg("validated audit fields missing"));
        };
        if status.as_deref() == Some("suspended") {
            return Err(Error::new(
                steward_core::ErrorKind::AgentSuspended,
                format!("agent {agent} is suspended"),
            ));
        }
        let record = AuditRecord {
            tenant: p.tenant,
            agent_id: Some(AgentId(agent)),
            user_id: p.user,
            action,
            resource,
            input: Value::Object(input),
            output: Value::Object(output),
            reasoning,
            risk_score,
            is_approved,
        };
        let mut entry = self.append(record).await?;
        entry.agent_name = agent_name;
        Ok(entry)
    }

    /// Status and name of an agent of the tenant.
    async fn agent_status(
        &self,
        tenant: TenantId,
        agent: AgentId,
    ) -> Result<Option<(String, String)>> {
        if let Some(agents) = &self.agents {
            return agents.status_and_name(tenant, agent).await;
        }
        with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(Id(tenant.0)))
                .filter(agents::id.eq(Id(agent.0)))
                .select((agents::status, agents::name))
                .first(conn)
                .await
                .optional()
                .db()
        })
    }

    /// Names of an agent's most recent actions, newest first.
    pub async fn recent_actions(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Vec<String>> {
        with_conn!(&self.db, conn => {
            audit_entries::table
                .filter(audit_entries::tenant_id.eq(Id(tenant.0)))
                .filter(audit_entries::agent_id.eq(Id(agent.0)))
                .order(audit_entries::seq.desc())
                .limit(limit)
                .select(audit_entries::action)
                .load(conn)
                .await
                .db()
        })
    }

    /// Mean risk of the agent's `limit` most recent entries (`None` = all entries when
    /// `limit` is `None`); `None` when the agent has no entry.
    pub async fn mean_risk(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: Option<i64>,
    ) -> Result<Option<f64>> {
        let scores: Vec<f64> = with_conn!(&self.db, conn => {
            let mut q = audit_entries::table
                .filter(audit_entries::tenant_id.eq(Id(tenant.0)))
                .filter(audit_entries::agent_id.eq(Id(agent.0)))
                .order(audit_entries::seq.desc())
                .select(audit_entries::risk_score)
                .into_boxed();
            if let Some(l) = limit {
                q = q.limit(l);
            }
            q.load(conn).await.db()
        })?;
        Ok((!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64))
    }

    /// Entries per UTC day over the `days` days ending today, oldest first (dashboard
    /// activity). Read from the per-day rollup `audit_daily_counts`, which triggers on
    /// `audit_entries` keep current (migration `audit_daily_counts`): one query of at most
    /// `days` rows, whatever the number of entries.
    /// Dashboard statistics are readable by every role of the tenant (`Op::StatsRead`).
    pub async fn daily_activity(&self, p: &Principal, days: u16) -> Result<Vec<(time::Date, i64)>> {
        p.authorize(Op::StatsRead)?;
        self.daily_counts(p.tenant, days).await
    }

    pub async fn daily_counts(
        &self,
        tenant: TenantId,
        days: u16,
    ) -> Result<Vec<(time::Date, i64)>> {
        let today = clock::now().date();
        let first = today - time::Duration::days(i64::from(days.max(1)) - 1);
        let start = Ts(first.midnight().assume_utc());
        let end = Ts((today + time::Duration::days(1)).midnight().assume_utc());
        let rows: Vec<(Ts, i64)> = with_conn!(&self.db, conn => {
            audit_daily_counts::table
                .filter(audit_daily_counts::tenant_id.eq(Id(tenant.0)))
                .filter(audit_daily_counts::day.ge(start))
                .filter(audit_daily_counts::day.lt(end))
                .select((audit_daily_counts::day, audit_daily_counts::count))
                .load(conn)
                .await
                .db()
        })?;
        let mut out = Vec::with_capacity(usize::from(days));
        for back in (0..i64::from(days)).rev() {
            let day = today - time::Duration::days(back);
            let count = rows
                .iter()
                .filter(|(d, _)| d.0.date() == day)
                .map(|(_, c)| *c)
                .sum();
            out.push((day, count));
        }
        Ok(out)
    }

    /// The agent's most recent entries, newest first.
    pub async fn recent_entries(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(EntryRow, Option<String>)> = with_conn!(&self.db, conn => {
            audit_entries::table
                .left_join(agents::table.on(agents::id.nullable().eq(audit_entries::agent_id)))
                .filter(audit_entries::tenant_id.eq(Id(tenant.0)))
                .filter(audit_entries::agent_id.eq(Id(agent.0)))
                .order(audit_entries::seq.desc())
                .limit(limit)
                .select((EntryRow::as_select(), agents::name.nullable()))
                .load(conn)
                .await
                .db()
        })?;
        Ok(rows.into_iter().map(|(r, n)| r.named(n)).collect())
    }

    /// Appends an entry to its tenant's chain (serialised per tenant by the head row) and
    /// publishes `audit.created`. Returns the stored entry.
    pub async fn append(&self, record: AuditRecord) -> Result<AuditEntry> {
        if !record.risk_score.is_finite() {
            return Err(Error::invalid_field(
                "risk_score",
                "must be a finite number",
            ));
        }
        let row = self.writer.append(record.clone()).await?;
        let entry = row.view();
        if let (Some(hook), Some(agent)) = (&self.hook, record.agent_id) {
            let hook = hook.clone();
            let tenant = record.tenant;
            tokio::spawn(async move { hook.agent_entry_written(tenant, agent).await });
        }
        publish(
            &self.bus,
            Event::new(
                "audit.created",
                record.tenant,
                Severity::Info,
                json!({
                    "audit_id": entry.id,
                    "agent_id": entry.agent_id,
                    "action": entry.action,
                    "resource": entry.resource,
                    "risk_score": entry.risk_score,
                }),
            ),
        );
        Ok(entry)
    }

    /// `GET /audit`: filters `agent_id`, `action`, `resource`; newest first.
    pub async fn list(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<AuditEntry>> {
        p.authorize(Op::AuditRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let agent: Option<AgentId> = q.parse("agent_id", "a UUID");
        let action = q.string("action").map(str::to_owned);
        let resource = q.string("resource").map(str::to_owned);
        q.finish()?;
        let tenant = Id(p.tenant.0);
        // A macro, not a closure: each backend arm gets its own boxed query type.
        macro_rules! filtered {
            () => {{
                let mut query = audit_entries::table
                    .filter(audit_entries::tenant_id.eq(tenant))
                    .into_boxed();
                if let Some(a) = agent {
                    query = query.filter(audit_entries::agent_id.eq(Id(a.0)));
                }
                if let Some(a) = &action {
                    query = query.filter(audit_entries::action.eq(a.clone()));
                }
                if let Some(r) = &resource {
                    query = query.filter(audit_entries::resource.eq(r.clone()));
                }
                query
            }};
        }
        let unfiltered = agent.is_none() && action.is_none() && resource.is_none();
        let (total, rows): (i64, Vec<EntryRow>) = with_conn!(&self.db, conn => {
            // The tenant's whole log: the total is the sum of the per-day rollup that the
            // triggers keep exact within each writing transaction (one row per day), not a
            // count over every entry (186 ms of a 187 ms page at 1,000,000 entries, see
            // docs/benchmarks.md). A filtered list counts its matches.
            let total = if unfiltered {
                audit_daily_counts::table
                    .filter(audit_daily_counts::tenant_id.eq(tenant))
                    .select(audit_daily_counts::count)
                    .load::<i64>(conn)
                    .await
                    .db()?
                    .into_iter()
                    .sum()
            } else {
                filtered!().count().get_result(conn).await.db()?
            };
            let rows = filtered!()
                .order(audit_entries::seq.desc())
                .offset(page.skip)
                .limit(page.limit)
                .select(EntryRow::as_select())
                .load(conn)
                .await
                .db()?;
            Ok::<_, Error>((total, rows))
        })?;
        // The agents' current names (contract 14.1), in one query for the page.
        let mut ids: Vec<Id> = rows.iter().filter_map(|r| r.agent_id).collect();
        ids.sort_unstable_by_key(|i| i.0);
        ids.dedup();
        let names: std::collections::HashMap<uuid::Uuid, String> = if ids.is_empty() {
            std::collections::HashMap::new()
        } else {
            let found: Vec<(Id, String)> = with_conn!(&self.db, conn => {
                agents::table
                    .filter(agents::tenant_id.eq(tenant))
                    .filter(agents::id.eq_any(ids.clone()))
                    .select((agents::id, agents::name))
                    .load(conn)
                    .await
                    .db()
            })?;
            found.into_iter().map(|(i, n)| (i.0, n)).collect()
        };
        Ok(Page::new(
            rows.into_iter()
                .map(|r| {
                    let name = r.agent_id.and_then(|a| names.get(&a.0).cloned());
                    r.named(name)
                })
                .collect(),
            total,
            page,
        ))
    }

    /// `GET /audit/{id}`.
    pub async fn get(&self, p: &Principal, id: &str) -> Result<AuditEntry> {
        p.authorize(Op::AuditRead)?;
        let id: AuditId = parse_path_id(id, "audit entry")?;
        let tenant = Id(p.tenant.0);
        let row: Option<(EntryRow, Option<String>)> = with_conn!(&self.db, conn => {
            audit_entries::table
                .left_join(agents::table.on(agents::id.nullable().eq(audit_entries::agent_id)))
                .filter(audit_entries::tenant_id.eq(tenant))
                .filter(audit_entries::id.eq(Id(id.0)))
                .select((EntryRow::as_select(), agents::name.nullable()))
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        row.map(|(r, n)| r.named(n))
            .ok_or_else(|| Error::not_found(format!("audit entry {id} was not found")))
    }

    /// `GET /audit/verify`: recomputes every retained entry of the caller's tenant.
    pub async fn verify(&self, p: &Principal) -> Result<Verification> {
        p.authorize(Op::AuditRead)?;
        self.verify_tenant(p.tenant).await
    }

    /// Verifies one tenant's chain (also used offline). Verifications run one at a time, and
    /// the hashing of each batch runs on the blocking pool, never on the request workers.
    pub async fn verify_tenant(&self, tenant: TenantId) -> Result<Verification> {
        let _turn = self
            .verifying
            .acquire()
            .await
            .map_err(|e| Error::unavailable("audit verifier", e))?;
        let tenant = Id(tenant.0);
        let mut checked = 0i64;
        // The head is read first: the chain must run without a gap from the genesis (seq 1
        // links to 64 zeros) or from the last retention purge's checkpoint up to the head's
        // seq and hash, so that entries deleted at either end, or all of them, are found as
        // well as edited ones. Entries appended after this read are left to the next run.
        type Head = (i64, String, Option<i64>, Option<String>);
        let head: Option<Head> = with_conn!(&self.db, conn => {
            audit_heads::table
                .filter(audit_heads::tenant_id.eq(tenant))
                .select((
                    audit_heads::seq,
                    audit_heads::hash,
                    audit_heads::purged_seq,
                    audit_heads::purged_hash,
                ))
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some((head_seq, head_hash, purged_seq, purged_hash)) = head else {
            // Nothing was ever appended for the tenant.
            return Ok(Verification {
                valid: true,
                checked: 0,
                first_bad_id: None,
            });
        };
        // (seq, hash) of the entry before the next one; the hash is unknown only for a
        // checkpoint written without one (the first retained entry's link is then taken as
        // given, as contract 14.3 allows after a purge).
        let mut previous: (i64, Option<String>) = match purged_seq {
            Some(seq) => (seq, purged_hash),
            None => (0, Some(GENESIS_HASH.to_owned())),
        };
        let mut after = 0i64;
        loop {
            let rows: Vec<EntryRow> = with_conn!(&self.db, conn => {
                audit_entries::table
                    .filter(audit_entries::tenant_id.eq(tenant))
                    .filter(audit_entries::seq.gt(after))
                    .filter(audit_entries::seq.le(head_seq))
                    .order(audit_entries::seq.asc())
                    .limit(VERIFY_BATCH)
                    .select(EntryRow::as_select())
                    .load(conn)
                    .await
                    .db()
            })?;
            let Some(last) = rows.last() else { break };
            after = last.seq;
            let hasher = self.hasher.clone();
            let (n, bad, last) =
                tokio::task::spawn_blocking(move || check_batch(&hasher, rows, previous))
                    .await
                    .map_err(Error::internal)?;
            checked += n;
            if let Some(id) = bad {
                return Ok(Verification {
                    valid: false,
                    checked,
                    first_bad_id: Some(id),
                });
            }
            previous = last;
        }
        // Entries missing after the last one present (or all of them): no entry is wrong,
        // the chain stops short of its head.
        let complete = previous.0 == head_seq
            && previous
                .1
                .as_deref()
                .is_none_or(|h| h == head_hash.as_str());
        Ok(Verification {
            valid: complete,
            checked,
            first_bad_id: None,
        })
    }

    /// `Some(id)` when the entry's link, hash or signature does not match.
    pub fn check_entry(&self, entry: &AuditEntry, previous_hash: Option<&str>) -> Option<String> {
        check_entry(&self.hasher, entry, previous_hash)
    }
}

/// Checks a batch of consecutive rows after `previous` (seq, hash): how many were checked, the
/// id of the first that is out of sequence or does not match, and the (seq, hash) to continue
/// from.
fn check_batch(
    hasher: &ChainHasher,
    rows: Vec<EntryRow>,
    mut previous: (i64, Option<String>),
) -> (i64, Option<String>, (i64, Option<String>)) {
    let mut checked = 0;
    for row in rows {
        checked += 1;
        let entry = row.view();
        let gap = entry.seq != previous.0 + 1;
        if gap || check_entry(hasher, &entry, previous.1.as_deref()).is_some() {
            return (checked, Some(entry.id), previous);
        }
        previous = (entry.seq, Some(entry.hash));
    }
    (checked, None, previous)
}

/// `Some(id)` when the entry's link to `previous_hash`, its hash or its signature does not match.
pub fn check_entry(
    hasher: &ChainHasher,
    entry: &AuditEntry,
    previous_hash: Option<&str>,
) -> Option<String> {
    let canonical = canonical_bytes(&entry.signed_fields());
    let link_ok = previous_hash.is_none_or(|prev| prev == entry.prev_hash);
    let hash_ok = ChainHasher::hash(&canonical) == entry.hash;
    let sig_ok = hasher.verify_signature(&canonical, entry.signature.as_deref());
    (!(link_ok && hash_ok && sig_ok)).then(|| entry.id.clone())
}

/// Verifies entries given in any order (an export file): sorted by `seq`, the first one's
/// `prev_hash` is taken as given, and a gap in `seq` is a broken link.
pub fn verify_entries(hasher: &ChainHasher, mut entries: Vec<AuditEntry>) -> Verification {
    entries.sort_by_key(|e| e.seq);
    let mut previous: Option<(i64, String)> = None;
    for (i, e) in entries.iter().enumerate() {
        let gap = previous.as_ref().is_some_and(|(seq, _)| e.seq != seq + 1);
        if gap || check_entry(hasher, e, previous.as_ref().map(|(_, h)| h.as_str())).is_some() {
            return Verification {
                valid: false,
                checked: i as i64 + 1,
                first_bad_id: Some(e.id.clone()),
            };
        }
        previous = Some((e.seq, e.hash.clone()));
    }
    Verification {
        valid: true,
        checked: entries.len() as i64,
        first_bad_id: None,
    }
}

impl AuditService {
    /// Deletes entries older than `cutoff`, oldest first, `batch` at a time, and records the
    /// last purged entry of each tenant as its checkpoint. Returns the number deleted.
    pub async fn purge_older_than(&self, cutoff: time::OffsetDateTime, batch: i64) -> Result<u64> {
        let cutoff = Ts(cutoff);
        let mut deleted = 0u64;
        loop {
            // The oldest expired entries (any tenant), then per tenant the last one of the batch.
            let expired: Vec<(Id, i64, String)> = with_conn!(&self.db, conn => {
                audit_entries::table
                    .filter(audit_entries::timestamp.lt(cutoff))
                    .order((audit_entries::tenant_id.asc(), audit_entries::seq.asc()))
                    .limit(batch)
                    .select((audit_entries::tenant_id, audit_entries::seq, audit_entries::hash))
                    .load(conn)
                    .await
                    .db()
            })?;
            if expired.is_empty() {
                return Ok(deleted);
            }
            let mut last: Vec<(Id, i64, String)> = Vec::new();
            for (t, seq, hash) in expired {
                match last.last_mut() {
                    Some(l) if l.0 == t => *l = (t, seq, hash),
                    _ => last.push((t, seq, hash)),
                }
            }
            for (t, seq, hash) in last {
                let n = with_conn!(&self.db, conn => {
                    conn.transaction::<_, diesel::result::Error, _>(|conn| {
                        let hash = hash.clone();
                        async move {
                            diesel::update(audit_heads::table.filter(audit_heads::tenant_id.eq(t)))
                                .set((audit_heads::purged_seq.eq(Some(seq)), audit_heads::purged_hash.eq(Some(hash))))
                                .execute(conn)
                                .await?;
                            diesel::delete(
                                audit_entries::table
                                    .filter(audit_entries::tenant_id.eq(t))
                                    .filter(audit_entries::seq.le(seq)),
                            )
                            .execute(conn)
                            .await
                        }
                        .scope_boxed()
                    })
                    .await
                    .db()
                })?;
                deleted += n as u64;
            }
        }
    }

    /// Purges entries older than `days` once a day, claimed so that one instance runs it.
    pub async fn run_retention(self, days: u64) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
        loop {
            tick.tick().await;
            let day = std::time::Duration::from_secs(86_400);
            match steward_store::schedule::claim_tick(&self.db, "audit.retention", day).await {
                Ok(true) => {
                    let cutoff = clock::now() - time::Duration::days(days as i64);
                    match self.purge_older_than(cutoff, 5_000).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(entries = n, days, "audit retention purge"),
                        Err(e) => tracing::warn!(error = %e, "audit retention purge failed"),
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "audit retention not claimed"),
            }
        }
    }
}

#[async_trait::async_trait]
impl AuditWriter for AuditService {
    async fn append(&self, record: AuditRecord) -> Result<AuditId> {
        let entry = AuditService::append(self, record).await?;
        entry
            .id
            .parse()
            .map_err(|_| Error::internal_msg("audit entry id is not a UUID"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_prefixes_are_recognised_in_any_disguise() {
        for a in [
            "user.login",
            "HITL.consumed",
            "USER.LOGIN",
            " user.login",
            "user\u{200b}.login",
            "hitl\u{2024}consumed",
            "\u{ff53}ystem.start",
            "\u{feff}guard.blocked",
            "Api_Key.created",
        ] {
            assert!(is_reserved_action(a), "{a:?}");
        }
        for a in [
            "read_file",
            "users.export",
            "hitlist.update",
            "policy",
            "agent.user.login",
        ] {
            assert!(!is_reserved_action(a), "{a:?}");
        }
    }
}
