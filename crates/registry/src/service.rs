//! Registering, reading, changing and sweeping agents (contract 11).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;
use serde_json::{json, Map, Value};
use steward_core::clock::{self, format_timestamp};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::validate::{Fields, Query};
use steward_core::{
    parse_path_id, AgentId, Body, Error, ErrorKind, EventBus, Op, Page, PageRequest, Principal,
    Result, TenantId,
};
use steward_store::schema::agents;
use steward_store::{with_conn, with_conn_async_commit, DbPool, DbResultExt, Id, Json, Ts};
use time::OffsetDateTime;

use crate::embedding::{add_example, Embedding, Profile, TypePredictor, TypeSums, AGENT_TYPES};
use crate::index::{SearchIndex, TenantIndex};

/// Bus channel of "a tenant's agents changed" notices (search index invalidation).
pub const CHANGES_CHANNEL: &str = "registry-changes";

/// The bus channel of "an agent as the policy check sees it changed" notices:
/// `<tenant> <agent> <origin instance>`, or `* <origin instance>` for every agent.
pub const AGENT_CHANGES_CHANNEL: &str = "agent-changes";

/// Longest time a looked-up agent is served from memory without reading it again (bounds
/// staleness should a change notice be lost).
pub const AGENT_CACHE_TTL: Duration = Duration::from_secs(10);

/// Agents kept in memory at most; beyond it the cache is cleared and refills.
const AGENT_CACHE_MAX: usize = 200_000;

/// Agents recently looked up by the policy check, with when they were read.
#[derive(Default)]
struct AgentCache {
    map: std::sync::RwLock<
        std::collections::HashMap<(TenantId, AgentId), (AgentRecord, std::time::Instant)>,
    >,
    /// Bumped by every invalidation, so that a read that raced with a change is not kept.
    epoch: std::sync::atomic::AtomicU64,
}

/// Attempts of a read-modify-write whose status moved under it before giving up with 409.
const SAVE_ATTEMPTS: u32 = 5;

/// After a lost status race: go on (reload) unless the attempts are used up.
/// What an agent was when read, for `Registry::save`'s condition.
struct Read {
    status: String,
    updated_at: Ts,
}

impl Read {
    fn of(a: &AgentRecord) -> Read {
        Read {
            status: a.status.clone(),
            updated_at: a.updated_at,
        }
    }
}

fn lost_race(attempt: u32, a: &AgentRecord) -> Result<()> {
    if attempt >= SAVE_ATTEMPTS {
        return Err(Error::conflict(format!(
            "agent {} changed concurrently; retry the request",
            a.id.0
        )));
    }
    Ok(())
}

/// An embedding is refreshed on heartbeat when older than this.
const EMBEDDING_MAX_AGE: time::Duration = time::Duration::hours(1);
pub const STATUSES: [&str; 4] = ["active", "inactive", "error", "suspended"];

fn agent_statuses() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&STATUSES)
}

fn agent_types() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&AGENT_TYPES)
}

/// What other domains know about an agent's activity (implemented with the audit log and the
/// anomaly reports).
#[async_trait]
pub trait AgentActivity: Send + Sync + 'static {
    /// Names of the agent's most recent actions, newest first.
    async fn recent_actions(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Vec<String>>;
    /// Mean risk score of the agent's `limit` most recent audit entries.
    async fn recent_risk(
        &self,
        tenant: TenantId,
        agent: AgentId,
        limit: i64,
    ) -> Result<Option<f64>>;
}

/// No activity source (tests, or before the audit log is wired).
pub struct NoActivity;

#[async_trait]
impl AgentActivity for NoActivity {
    async fn recent_actions(&self, _: TenantId, _: AgentId, _: i64) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    async fn recent_risk(&self, _: TenantId, _: AgentId, _: i64) -> Result<Option<f64>> {
        Ok(None)
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset, Clone, Debug)]
#[diesel(table_name = agents)]
#[diesel(treat_none_as_null = true)]
pub struct AgentRecord {
    pub id: Id,
    pub tenant_id: Id,
    pub name: String,
    pub agent_type: String,
    pub capabilities: Json,
    pub permissions: Json,
    pub status: String,
    pub version: Option<String>,
    pub predicted_type: Option<String>,
    pub type_confidence: Option<f64>,
    pub risk_score: Option<f64>,
    pub embedding: Option<Vec<u8>>,
    pub embedding_updated_at: Option<Ts>,
    pub created_at: Ts,
    pub updated_at: Ts,
    pub profile_changed_at: Ts,
    pub last_heartbeat: Option<Ts>,
    pub active_since: Ts,
}

impl AgentRecord {
    pub fn capability_list(&self) -> Vec<String> {
        self.capabilities
            .0
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn agent_id(&self) -> AgentId {
        self.id.into_id()
    }
}

/// The agent object (contract 11.1).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct AgentView {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    #[serde(rename = "type")]
    #[schema(schema_with = agent_types)]
    pub agent_type: String,
    pub capabilities: Value,
    pub permissions: Value,
    #[schema(schema_with = agent_statuses)]
    pub status: String,
    pub version: Option<String>,
    pub predicted_type: Option<String>,
    pub risk_score: Option<f64>,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub updated_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub last_heartbeat: Option<String>,
}

impl From<&AgentRecord> for AgentView {
    fn from(a: &AgentRecord) -> Self {
        AgentView {
            id: a.id.0.hyphenated().to_string(),
            tenant_id: a.tenant_id.0.hyphenated().to_string(),
            name: a.name.clone(),
            agent_type: a.agent_type.clone(),
            capabilities: a.capabilities.0.clone(),
            permissions: a.permissions.0.clone(),
            status: a.status.clone(),
            version: a.version.clone(),
            predicted_type: a.predicted_type.clone(),
            risk_score: a.risk_score,
            created_at: format_timestamp(a.created_at.0),
            updated_at: format_timestamp(a.updated_at.0),
            last_heartbeat: a.last_heartbeat.map(|t| format_timestamp(t.0)),
        }
    }
}

/// The validated fields of a registration or update.
#[derive(Default)]
struct AgentInput {
    name: Option<String>,
    agent_type: Option<String>,
    capabilities: Option<Vec<String>>,
    permissions: Option<Map<String, Value>>,
    version: Option<Option<String>>,
}

fn read_input(value: &Value, registering: bool) -> Result<AgentInput> {
    let mut f = Fields::root(value);
    let name = if registering {
        f.required_str("name", 1, 128)
    } else {
        f.optional_str("name", 1, 128)
    };
    let name = f.name("name", name);
    let agent_type = f.optional_enum("type", &AGENT_TYPES).map(str::to_owned);
    let capabilities = f.optional_str_array("capabilities", 100);
    let permissions = f.optional_object("permissions").cloned();
    if let Some(p) = &permissions {
        if let Some(m) = p.get("max_risk").filter(|v| !v.is_null()) {
            if !m.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)) {
                f.error("permissions.max_risk", "must be a number between 0 and 1");
            }
        }
    }
    let version = match value.get("version") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => f.optional_str("version", 0, 64).map(|v| Some(v.to_owned())),
    };
    if !registering && value.get("status").is_some() {
        f.error(
            "status",
            "cannot be changed here: use heartbeat, suspend or resume",
        );
    }
    f.finish()?;
    Ok(AgentInput {
        name,
        agent_type,
        capabilities,
        permissions,
        version,
    })
}

fn name_conflict(e: Error, name: &str) -> Error {
    if e.kind == ErrorKind::Conflict {
        Error::conflict(format!(
            "an agent named {name:?} already exists in this tenant"
        ))
    } else {
        e
    }
}

/// The registry service.
#[derive(Clone)]
pub struct Registry {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    activity: Arc<dyn AgentActivity>,
    predictor: Arc<TypePredictor>,
    inactivity: Duration,
    index: SearchIndex,
    loading: Arc<tokio::sync::Mutex<()>>,
    /// Per tenant, the embedding sums of its agents by declared type (the labelled examples
    /// of type prediction), loaded on first use and kept current like the search index.
    type_sums: Arc<std::sync::RwLock<std::collections::HashMap<TenantId, TypeSums>>>,
    /// Agents as the policy check reads them (`find_cached`).
    cached: Arc<AgentCache>,
}

/// An agent's type and stored embedding before a change.
type Previous = Option<(String, Option<Vec<u8>>)>;

fn previous(a: &AgentRecord) -> Previous {
    Some((a.agent_type.clone(), a.embedding.clone()))
}

impl Registry {
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        activity: Arc<dyn AgentActivity>,
        inactivity: Duration,
    ) -> Self {
        Self {
            db,
            bus,
            activity,
            predictor: Arc::new(TypePredictor::new()),
            inactivity,
            index: SearchIndex::default(),
            loading: Arc::default(),
            type_sums: Arc::default(),
            cached: Arc::default(),
        }
    }

    /// Replaces the activity source (wired after the audit service exists).
    pub fn with_activity(mut self, activity: Arc<dyn AgentActivity>) -> Self {
        self.activity = activity;
        self
    }

    /// Keeps this instance's search index current and tells the other instances.
    fn changed(&self, tenant: TenantId, agent: &AgentRecord, deleted: bool, before: Previous) {
        {
            let mut all = self.type_sums.write().unwrap_or_else(|e| e.into_inner());
            if let Some(sums) = all.get_mut(&tenant) {
                let example = |a: &Option<Vec<u8>>| a.as_deref().and_then(Embedding::from_bytes);
                if let Some((t, Some(e))) = before.as_ref().map(|(t, b)| (t, example(b))) {
                    add_example(sums, t, &e, -1.0);
                }
                if let Some(e) = example(&agent.embedding) {
                    add_example(
                        sums,
                        &agent.agent_type,
                        &e,
                        if deleted { -1.0 } else { 1.0 },
                    );
                }
            }
        }
        let embedding = if deleted {
            None
        } else {
            agent.embedding.as_deref().and_then(Embedding::from_bytes)
        };
        self.index
            .apply(tenant, agent.agent_id(), embedding.as_ref());
        let bus = self.bus.clone();
        let payload = format!("{tenant} {}", steward_store::schedule::instance_id()).into_bytes();
        tokio::spawn(async move {
            let _ = bus.publish(CHANGES_CHANNEL, &payload).await;
        });
    }

    /// Invalidates search indexes on other instances' notices (run once per instance; this
    /// instance's own notices are skipped, its index is already current).
    pub async fn listen_for_changes(self) {
        steward_core::bus::follow(
            self.bus.clone(),
            CHANGES_CHANNEL,
            |msg| {
                let text = String::from_utf8_lossy(msg);
                let (tenant, origin) = text.split_once(' ').unwrap_or((&text, ""));
                if origin != steward_store::schedule::instance_id() {
                    if let Ok(t) = tenant.parse() {
                        self.drop_indexes(Some(t));
                    }
                }
            },
            || self.drop_indexes(None),
        )
        .await
    }

    /// Drops the search index and type sums of one tenant, or of all.
    fn drop_indexes(&self, tenant: Option<TenantId>) {
        let mut sums = self.type_sums.write().unwrap_or_else(|e| e.into_inner());
        match tenant {
            Some(t) => {
                self.index.invalidate(t);
                sums.remove(&t);
            }
            None => {
                self.index.invalidate_all();
                sums.clear();
            }
        }
    }

    fn event(&self, kind: &str, tenant: TenantId, agent: &AgentRecord) {
        publish(
            &self.bus,
            Event::new(
                kind,
                tenant,
                Severity::Info,
                json!({"agent_id": agent.id.0.to_string(), "name": agent.name, "type": agent.agent_type}),
            ),
        );
    }

    /// Computes embedding, predicted type and confidence into the record.
    /// The tenant's labelled examples, loaded from the database on first use.
    async fn tenant_types(&self, tenant: TenantId) -> Result<TypeSums> {
        if let Some(s) = self
            .type_sums
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tenant)
        {
            return Ok(s.clone());
        }
        let t = Id(tenant.0);
        let rows: Vec<(String, Option<Vec<u8>>)> = with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(t))
                .select((agents::agent_type, agents::embedding))
                .load(conn)
                .await
                .db()
        })?;
        let mut sums = TypeSums::new();
        for (agent_type, bytes) in rows {
            if let Some(e) = bytes.as_deref().and_then(Embedding::from_bytes) {
                add_example(&mut sums, &agent_type, &e, 1.0);
            }
        }
        self.type_sums
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant, sums.clone());
        Ok(sums)
    }

    /// Recomputes the embedding with the agent's 20 most recent action names (best effort:
    /// without them when the audit log cannot be read).
    async fn reembed(&self, a: &mut AgentRecord, now: OffsetDateTime) {
        let actions = self
            .activity
            .recent_actions(a.tenant_id.into_id(), a.agent_id(), 20)
            .await
            .unwrap_or_default();
        self.embed(a, &actions, now).await;
    }

    /// Computes embedding, predicted type and confidence into the record.
    async fn embed(&self, a: &mut AgentRecord, actions: &[String], now: OffsetDateTime) {
        let sums = match self.tenant_types(a.tenant_id.into_id()).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::debug!(error = %e, "tenant type examples not loaded; seed examples only");
                None
            }
        };
        self.embed_with(a, actions, now, sums.as_ref());
    }

    fn embed_with(
        &self,
        a: &mut AgentRecord,
        actions: &[String],
        now: OffsetDateTime,
        sums: Option<&TypeSums>,
    ) {
        let caps = a.capability_list();
        let e = Embedding::of_agent(&Profile {
            name: &a.name,
            agent_type: &a.agent_type,
            capabilities: &caps,
            actions,
        });
        let prediction = self.predictor.predict_with(&e, sums);
        a.predicted_type = prediction.map(|(t, _)| t.to_owned());
        a.type_confidence = prediction.map(|(_, c)| c);
        a.embedding = Some(e.to_bytes());
        a.embedding_updated_at = Some(Ts(now));
    }

    /// An agent of a tenant as the policy check needs it, from memory when read less than
    /// `AGENT_CACHE_TTL` ago and not changed since (changes on any instance drop it).
    pub async fn find_cached(&self, tenant: TenantId, id: AgentId) -> Result<Option<AgentRecord>> {
        use std::sync::atomic::Ordering;
        {
            let map = self.cached.map.read().unwrap_or_else(|e| e.into_inner());
            if let Some((a, at)) = map.get(&(tenant, id)) {
                if at.elapsed() < AGENT_CACHE_TTL {
                    return Ok(Some(a.clone()));
                }
            }
        }
        let epoch = std::sync::atomic::AtomicU64::load(&self.cached.epoch, Ordering::Acquire);
        let found = self.find(tenant, id).await?;
        if let Some(a) = &found {
            let mut map = self.cached.map.write().unwrap_or_else(|e| e.into_inner());
            if std::sync::atomic::AtomicU64::load(&self.cached.epoch, Ordering::Acquire) == epoch {
                if map.len() >= AGENT_CACHE_MAX {
                    map.clear();
                }
                map.insert((tenant, id), (a.clone(), std::time::Instant::now()));
            }
        }
        Ok(found)
    }

    fn drop_cached(&self, which: Option<(TenantId, AgentId)>) {
        let mut map = self.cached.map.write().unwrap_or_else(|e| e.into_inner());
        self.cached
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        match which {
            Some(key) => {
                map.remove(&key);
            }
            None => map.clear(),
        }
    }

    /// An agent's name, type, capabilities, permissions or status changed (or every agent's,
    /// for `None`): forgets it here at once and tells the other instances before the request
    /// is answered, so that a suspension is refused everywhere once its answer arrives.
    async fn agent_changed(&self, which: Option<(TenantId, AgentId)>) {
        let (bus, payload) = self.agent_change_notice(which);
        if let Err(e) = bus.publish(AGENT_CHANGES_CHANNEL, payload.as_bytes()).await {
            tracing::warn!(error = %e, "agent change notice not published");
        }
    }

    /// The same, for a caller that cannot wait: the notice leaves from a task of its own.
    fn agent_changed_soon(&self, which: Option<(TenantId, AgentId)>) {
        let (bus, payload) = self.agent_change_notice(which);
        tokio::spawn(async move {
            let _ = bus.publish(AGENT_CHANGES_CHANNEL, payload.as_bytes()).await;
        });
    }

    fn agent_change_notice(
        &self,
        which: Option<(TenantId, AgentId)>,
    ) -> (Arc<dyn EventBus>, String) {
        self.drop_cached(which);
        let origin = steward_store::schedule::instance_id();
        let payload = match which {
            Some((t, a)) => format!("{t} {a} {origin}"),
            None => format!("* {origin}"),
        };
        (self.bus.clone(), payload)
    }

    /// Drops cached agents on other instances' notices; runs until the task is aborted.
    pub async fn listen_for_agent_changes(self) {
        steward_core::bus::follow(
            self.bus.clone(),
            AGENT_CHANGES_CHANNEL,
            |msg| {
                let text = String::from_utf8_lossy(msg);
                let parts: Vec<&str> = text.split(' ').collect();
                let which = match parts.as_slice() {
                    [t, a, _] => t.parse().ok().zip(a.parse().ok()),
                    _ => None,
                };
                self.drop_cached(which);
            },
            || self.drop_cached(None),
        )
        .await
    }

    /// The id of the tenant's agent named `name` (names are unique per tenant).
    pub async fn id_by_name(&self, tenant: TenantId, name: &str) -> Result<Option<AgentId>> {
        let id: Option<Id> = with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(Id(tenant.0)))
                .filter(agents::name.eq(name))
                .select(agents::id)
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        Ok(id.map(|i| i.into_id()))
    }

    /// The number of agents of a tenant, whatever their status (for statistics).
    pub async fn count(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(Id(tenant.0)))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    /// Loads one agent of a tenant (404 when absent or another tenant's).
    pub async fn find(&self, tenant: TenantId, id: AgentId) -> Result<Option<AgentRecord>> {
        with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(Id(tenant.0)))
                .filter(agents::id.eq(Id(id.0)))
                .select(AgentRecord::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })
    }

    async fn load(&self, p: &Principal, id: &str) -> Result<AgentRecord> {
        let id: AgentId = parse_path_id(id, "agent")?;
        self.find(p.tenant, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("agent {id} was not found")))
    }

    /// Writes the agent back only if it is still as it was read (`read`: its status and
    /// `updated_at`): a concurrent update, suspend, resume, heartbeat or inactivity sweep is
    /// never undone by a write computed from the older row, and two updates of different
    /// fields both land (the loser reads again and applies its change to the new row).
    /// `false`: the row moved; reload and decide again. The risk score is not written: it is
    /// `refresh_after_audit`'s, computed from the audit log.
    async fn save(&self, a: &AgentRecord, read: &Read) -> Result<bool> {
        let id = a.id;
        let (read_status, read_updated) = (read.status.clone(), read.updated_at);
        let written = with_conn!(&self.db, conn => {
            diesel::update(
                agents::table
                    .filter(agents::id.eq(id))
                    .filter(agents::status.eq(read_status.clone()))
                    .filter(agents::updated_at.eq(read_updated)),
            )
            .set((
                agents::name.eq(a.name.clone()),
                agents::agent_type.eq(a.agent_type.clone()),
                agents::capabilities.eq(a.capabilities.clone()),
                agents::permissions.eq(a.permissions.clone()),
                agents::status.eq(a.status.clone()),
                agents::version.eq(a.version.clone()),
                agents::predicted_type.eq(a.predicted_type.clone()),
                agents::type_confidence.eq(a.type_confidence),
                agents::embedding.eq(a.embedding.clone()),
                agents::embedding_updated_at.eq(a.embedding_updated_at),
                agents::updated_at.eq(a.updated_at),
                agents::profile_changed_at.eq(a.profile_changed_at),
                agents::last_heartbeat.eq(a.last_heartbeat),
                agents::active_since.eq(a.active_since),
            ))
            .execute(conn)
            .await
            .db()
        })
        .map_err(|e| name_conflict(e, &a.name))?;
        Ok(written == 1)
    }

    /// Writes a heartbeat (status and its times, nothing of the profile) if the status is
    /// still as read and nothing later was written: an earlier heartbeat or profile update
    /// meanwhile does not make it fail, a suspension or status change does, and neither
    /// `updated_at` nor `last_heartbeat` (never later than `updated_at`) moves back.
    /// `false`: reload and decide again.
    async fn save_beat(&self, a: &AgentRecord, read: &Read) -> Result<bool> {
        let (id, now) = (a.id, a.updated_at);
        let read_status = read.status.clone();
        // Soft state renewed every 30–60 s: the commit does not wait for the disk (ADR 0018),
        // so that replicas beating together do not queue behind one another's fsync on
        // SQLite's one write lock. An operating-system crash may lose the last beats; the
        // agent's next one restores them.
        let written = with_conn_async_commit!(&self.db, conn => {
            diesel::update(
                agents::table
                    .filter(agents::id.eq(id))
                    .filter(agents::status.eq(read_status.clone()))
                    .filter(agents::updated_at.le(now)),
            )
            .set((
                agents::status.eq(a.status.clone()),
                agents::last_heartbeat.eq(a.last_heartbeat),
                agents::active_since.eq(a.active_since),
                agents::updated_at.eq(now),
            ))
            .execute(conn)
            .await
            .db()
        })?;
        Ok(written == 1)
    }

    /// Registers an agent (status `active`) with its embedding; used by confirm too.
    pub async fn create(
        &self,
        tenant: TenantId,
        name: String,
        agent_type: String,
        capabilities: Vec<String>,
        permissions: Map<String, Value>,
        version: Option<String>,
    ) -> Result<AgentRecord> {
        let now = clock::now();
        let mut a = AgentRecord {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: Id(tenant.0),
            name,
            agent_type,
            capabilities: Json(json!(capabilities)),
            permissions: Json(Value::Object(permissions)),
            status: "active".into(),
            version,
            predicted_type: None,
            type_confidence: None,
            risk_score: None,
            embedding: None,
            embedding_updated_at: None,
            created_at: Ts(now),
            updated_at: Ts(now),
            profile_changed_at: Ts(now),
            last_heartbeat: None,
            active_since: Ts(now),
        };
        self.embed(&mut a, &[], now).await;
        with_conn!(&self.db, conn => {
            diesel::insert_into(agents::table).values(&a).execute(conn).await.db()
        })
        .map_err(|e| name_conflict(e, &a.name))?;
        self.changed(tenant, &a, false, None);
        self.event("agent.registered", tenant, &a);
        Ok(a)
    }

    /// `POST /agents/register`.
    pub async fn register(&self, p: &Principal, body: &Body) -> Result<AgentView> {
        p.authorize(Op::AgentsWrite)?;
        let input = read_input(&body.parse::<Value>()?, true)?;
        let a = self
            .create(
                p.tenant,
                input.name.unwrap_or_default(),
                input.agent_type.unwrap_or_else(|| "custom".into()),
                input.capabilities.unwrap_or_default(),
                input.permissions.unwrap_or_default(),
                input.version.flatten(),
            )
            .await?;
        Ok((&a).into())
    }

    /// `GET /agents`: filters `status`, `type`; newest first.
    pub async fn list(&self, p: &Principal, pairs: &[(String, String)]) -> Result<Page<AgentView>> {
        p.authorize(Op::AgentsRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let status = q.one_of("status", &STATUSES).map(str::to_owned);
        let agent_type = q.one_of("type", &AGENT_TYPES).map(str::to_owned);
        q.finish()?;
        let tenant = Id(p.tenant.0);
        macro_rules! filtered {
            () => {{
                let mut query = agents::table
                    .filter(agents::tenant_id.eq(tenant))
                    .into_boxed();
                if let Some(s) = &status {
                    query = query.filter(agents::status.eq(s.clone()));
                }
                if let Some(t) = &agent_type {
                    query = query.filter(agents::agent_type.eq(t.clone()));
                }
                query
            }};
        }
        let (total, rows): (i64, Vec<AgentRecord>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (agents::created_at.desc(), agents::id.desc()),
            AgentRecord::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.iter().map(AgentView::from).collect(),
            total,
            page,
        ))
    }

    /// `GET /agents/{id}`.
    pub async fn get(&self, p: &Principal, id: &str) -> Result<AgentView> {
        p.authorize(Op::AgentsRead)?;
        Ok((&self.load(p, id).await?).into())
    }

    /// The record behind `GET /agents/{id}/details` (the server adds audit and anomalies).
    pub async fn details(&self, p: &Principal, id: &str) -> Result<AgentRecord> {
        p.authorize(Op::AgentsRead)?;
        self.load(p, id).await
    }

    /// `PUT /agents/{id}`.
    pub async fn update(&self, p: &Principal, id: &str, body: &Body) -> Result<AgentView> {
        p.authorize(Op::AgentsWrite)?;
        let input = read_input(&body.parse::<Value>()?, false)?;
        let mut attempt = 0;
        let (a, before, profile_changed) = loop {
            attempt += 1;
            let mut a = self.load(p, id).await?;
            let read = Read::of(&a);
            let before = previous(&a);
            let now = clock::now();
            let mut profile_changed = false;
            if let Some(n) = &input.name {
                profile_changed |= *n != a.name;
                a.name = n.clone();
            }
            if let Some(t) = &input.agent_type {
                profile_changed |= *t != a.agent_type;
                a.agent_type = t.clone();
            }
            if let Some(c) = &input.capabilities {
                let c = json!(c);
                profile_changed |= c != a.capabilities.0;
                a.capabilities = Json(c);
            }
            if let Some(perm) = &input.permissions {
                a.permissions = Json(Value::Object(perm.clone()));
            }
            if let Some(v) = &input.version {
                a.version = v.clone();
            }
            a.updated_at = Ts(now);
            if profile_changed {
                a.profile_changed_at = Ts(now);
                self.reembed(&mut a, now).await;
            }
            if self.save(&a, &read).await? {
                break (a, before, profile_changed);
            }
            lost_race(attempt, &a)?;
        };
        self.agent_changed(Some((p.tenant, a.agent_id()))).await;
        if profile_changed {
            self.changed(p.tenant, &a, false, before);
        }
        self.event("agent.updated", p.tenant, &a);
        Ok((&a).into())
    }

    /// `DELETE /agents/{id}`.
    pub async fn delete(&self, p: &Principal, id: &str) -> Result<()> {
        p.authorize(Op::AgentsDelete)?;
        let a = self.load(p, id).await?;
        let row = a.id;
        let deleted = with_conn!(&self.db, conn => {
            diesel::delete(agents::table.filter(agents::id.eq(row))).execute(conn).await.db()
        })?;
        if deleted == 0 {
            // Deleted meanwhile by a concurrent call, which reports it.
            return Err(Error::not_found(format!("agent {} was not found", row.0)));
        }
        self.agent_changed(Some((p.tenant, a.agent_id()))).await;
        self.changed(p.tenant, &a, true, None);
        self.event("agent.deleted", p.tenant, &a);
        Ok(())
    }

    /// `POST /agents/{id}/heartbeat` with `{status?}` (`active` or `error`).
    pub async fn heartbeat(&self, p: &Principal, id: &str, body: &Body) -> Result<AgentView> {
        p.authorize(Op::AgentsWrite)?;
        let value = body.parse_or_empty::<Value>()?;
        let mut f = Fields::root(&value);
        let status = f
            .optional_enum("status", &["active", "error"])
            .unwrap_or("active")
            .to_owned();
        f.finish()?;
        let sent = clock::now();
        let mut attempt = 0;
        let (a, before, status_changed, stale) = loop {
            attempt += 1;
            let mut a = self.load(p, id).await?;
            if a.status == "suspended" {
                return Err(Error::new(
                    ErrorKind::AgentSuspended,
                    format!("agent {} is suspended", a.id.0),
                ));
            }
            if attempt > 1 && a.status == status && a.last_heartbeat.is_some_and(|t| t.0 >= sent) {
                // A heartbeat of the same status, no older than this one, landed meanwhile
                // (replicas of one agent beating together): it stands for this one.
                break (a, None, false, false);
            }
            // Later than the row's last write even when another instance's clock is ahead.
            let now = clock::now().max(a.updated_at.0 + time::Duration::microseconds(1));
            let read = Read::of(&a);
            let before = previous(&a);
            let status_changed = a.status != status;
            a.status = status.clone();
            a.last_heartbeat = Some(Ts(now));
            a.active_since = Ts(now);
            a.updated_at = Ts(now);
            let stale = a
                .embedding_updated_at
                .is_none_or(|t| now - t.0 > EMBEDDING_MAX_AGE || t.0 < a.profile_changed_at.0);
            let saved = if stale {
                // The embedding is computed from the profile as read: written only if the
                // row is still as read.
                self.reembed(&mut a, now).await;
                self.save(&a, &read).await?
            } else {
                self.save_beat(&a, &read).await?
            };
            if saved {
                break (a, before, status_changed, stale);
            }
            lost_race(attempt, &a)?;
        };
        if status_changed {
            self.agent_changed(Some((p.tenant, a.agent_id()))).await;
        }
        if stale {
            self.changed(p.tenant, &a, false, before);
        }
        Ok((&a).into())
    }

    /// `POST /agents/{id}/suspend` (idempotent).
    /// `POST /agents/{id}/suspend` as requested: the optional body checked ([`Body::unread`])
    /// after the role and before anything changes.
    pub async fn suspend_request(&self, p: &Principal, id: &str, body: &Body) -> Result<AgentView> {
        p.authorize(Op::AgentsSuspend)?;
        body.unread()?;
        self.suspend(p, id).await
    }

    /// `POST /agents/{id}/resume` as requested (see [`Registry::suspend_request`]).
    pub async fn resume_request(&self, p: &Principal, id: &str, body: &Body) -> Result<AgentView> {
        p.authorize(Op::AgentsSuspend)?;
        body.unread()?;
        self.resume(p, id).await
    }

    pub async fn suspend(&self, p: &Principal, id: &str) -> Result<AgentView> {
        p.authorize(Op::AgentsSuspend)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut a = self.load(p, id).await?;
            if a.status == "suspended" {
                return Ok((&a).into());
            }
            let read = Read::of(&a);
            a.status = "suspended".into();
            a.updated_at = Ts(clock::now());
            if self.save(&a, &read).await? {
                self.agent_changed(Some((p.tenant, a.agent_id()))).await;
                self.event("agent.suspended", p.tenant, &a);
                return Ok((&a).into());
            }
            lost_race(attempt, &a)?;
        }
    }

    /// `POST /agents/{id}/resume`: only a suspended agent; restarts the inactivity clock.
    pub async fn resume(&self, p: &Principal, id: &str) -> Result<AgentView> {
        p.authorize(Op::AgentsSuspend)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut a = self.load(p, id).await?;
            if a.status != "suspended" {
                // Also when resumed meanwhile by someone else.
                return Err(Error::conflict(format!(
                    "agent {} is not suspended",
                    a.id.0
                )));
            }
            let read = Read::of(&a);
            let now = clock::now();
            a.status = "active".into();
            a.active_since = Ts(now);
            a.updated_at = Ts(now);
            if self.save(&a, &read).await? {
                self.agent_changed(Some((p.tenant, a.agent_id()))).await;
                self.event("agent.resumed", p.tenant, &a);
                return Ok((&a).into());
            }
            lost_race(attempt, &a)?;
        }
    }

    /// `GET /agents/search?q=`: cosine similarity of hashed vectors, best first, only > 0.
    pub async fn search(&self, p: &Principal, pairs: &[(String, String)]) -> Result<Page<Value>> {
        p.authorize(Op::AgentsRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let text = q.raw("q").map(str::trim).unwrap_or_default().to_owned();
        if text.is_empty() {
            q.error("q", "is required");
        }
        q.finish()?;
        let query = Embedding::of_query(&text);
        let index = match self.index.get(p.tenant) {
            Some(i) => i,
            None => {
                // One load at a time: concurrent first searches wait for it instead of each
                // reading every embedding.
                let _loading = self.loading.lock().await;
                match self.index.get(p.tenant) {
                    Some(i) => i,
                    None => self.index.put(p.tenant, self.load_index(p.tenant).await?),
                }
            }
        };
        let (total, top) = {
            let index = index.read().unwrap_or_else(|e| e.into_inner());
            // `skip` may be any integer ≥ 0 (contract §4): the window's end saturates.
            let end = usize::try_from(page.skip.saturating_add(page.limit)).unwrap_or(usize::MAX);
            index.search(&query, end)
        };
        let total = total as i64;
        let window: Vec<(Id, f32)> = top
            .into_iter()
            .skip(page.skip as usize)
            .map(|(id, s)| (Id(id.0), s))
            .collect();
        let ids: Vec<Id> = window.iter().map(|(id, _)| *id).collect();
        let records: Vec<AgentRecord> = with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::id.eq_any(ids))
                .select(AgentRecord::as_select())
                .load(conn)
                .await
                .db()
        })?;
        let items = window
            .iter()
            .filter_map(|(id, s)| {
                let a = records.iter().find(|r| r.id == *id)?;
                let mut v = serde_json::to_value(AgentView::from(a)).ok()?;
                v["similarity"] = json!((f64::from(*s) * 1e6).round() / 1e6);
                Some(v)
            })
            .collect();
        Ok(Page::new(items, total, page))
    }

    /// Reads a tenant's embeddings from the database.
    async fn load_index(&self, tenant: TenantId) -> Result<TenantIndex> {
        let t = Id(tenant.0);
        let rows: Vec<(Id, Option<Vec<u8>>)> = with_conn!(&self.db, conn => {
            agents::table
                .filter(agents::tenant_id.eq(t))
                .select((agents::id, agents::embedding))
                .load(conn)
                .await
                .db()
        })?;
        Ok(TenantIndex::new(rows.into_iter().filter_map(|(id, e)| {
            Some((id.into_id(), Embedding::from_bytes(e.as_deref()?)?))
        })))
    }

    /// Best-effort refresh after an audit write: rolls up the risk score, refreshes a stale
    /// embedding with the recent actions.
    pub async fn refresh_after_audit(&self, tenant: TenantId, agent: AgentId) -> Result<()> {
        let Some(mut a) = self.find(tenant, agent).await? else {
            return Ok(());
        };
        let before = previous(&a);
        let now = clock::now();
        a.risk_score = self.activity.recent_risk(tenant, agent, 20).await?;
        self.reembed(&mut a, now).await;
        let id = a.id;
        with_conn!(&self.db, conn => {
            diesel::update(agents::table.filter(agents::id.eq(id)))
                .set((
                    agents::risk_score.eq(a.risk_score),
                    agents::embedding.eq(&a.embedding),
                    agents::embedding_updated_at.eq(a.embedding_updated_at),
                    agents::predicted_type.eq(&a.predicted_type),
                    agents::type_confidence.eq(a.type_confidence),
                ))
                .execute(conn)
                .await
                .db()
        })?;
        self.changed(tenant, &a, false, before);
        Ok(())
    }

    /// Marks `active` agents silent for longer than the inactivity period `inactive`, in one
    /// set-based UPDATE. Returns how many changed.
    pub async fn sweep_inactive(&self) -> Result<usize> {
        let now = clock::now();
        let cutoff =
            Ts(now - time::Duration::try_from(self.inactivity).unwrap_or(time::Duration::MINUTE));
        with_conn!(&self.db, conn => {
            diesel::update(
                agents::table
                    .filter(agents::status.eq("active"))
                    .filter(agents::active_since.lt(cutoff)),
            )
            .set((agents::status.eq("inactive"), agents::updated_at.eq(Ts(now))))
            .execute(conn)
            .await
            .db()
        })
        .inspect(|n| {
            if *n > 0 {
                self.agent_changed_soon(None);
            }
        })
    }

    /// Runs the sweeper forever, one claimed tick per interval across all instances.
    pub async fn run_sweeper(self) {
        let interval = (self.inactivity / 3).clamp(Duration::from_secs(1), Duration::from_secs(30));
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match steward_store::schedule::claim_tick(&self.db, "agents.inactivity_sweep", interval)
                .await
            {
                Ok(true) => match self.sweep_inactive().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(agents = n, "agents marked inactive"),
                    Err(e) => tracing::warn!(error = %e, "inactivity sweep failed"),
                },
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "inactivity sweep not claimed"),
            }
        }
    }
}
