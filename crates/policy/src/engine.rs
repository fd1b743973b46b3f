//! Policy engines: the trait the service evaluates through (an OPA-backed engine can implement
//! it later), and the embedded engine, which keeps each tenant's compiled active modules in
//! memory and evaluates them with a time-out.
//!
//! Evaluation of a check runs in two passes. The inline pass evaluates, on the calling task,
//! the modules whose every step is cheap (`CompiledModule::inline_safe`: the three default
//! templates and `hitl` are) with a budget of 50,000 VM instructions and 2 ms each, 3 ms in
//! all. Every other module, and any that exceeds that budget, goes to the blocking pool
//! (`spawn_blocking` behind a semaphore) with the full limits, and the check waits for it
//! until the deadline; a module without a result by then hard-denies as failed. A runaway
//! module therefore holds a pool thread, never an async worker, and other checks answer.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use steward_core::{Error, PolicyId, Result, TenantId};
use steward_store::schema::policies;
use steward_store::{with_conn, DbPool, DbResultExt, Id};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use crate::decision::{PolicyOutcome, Verdict};
use crate::module::{CompiledModule, EvalLimits, Evaluator};

/// Evaluates a tenant's active policies.
#[async_trait]
pub trait PolicyEngine: Send + Sync + 'static {
    /// The outcome of every active policy of the tenant for `input` (the document of contract
    /// 13.5), in evaluation order: priority descending, then creation ascending.
    async fn evaluate(
        &self,
        tenant: TenantId,
        input: &serde_json::Value,
    ) -> Result<Vec<PolicyOutcome>>;

    /// Forgets what the engine holds for the tenant: its policies changed.
    fn invalidate(&self, tenant: TenantId);

    /// Forgets everything (a change notice may have been missed).
    fn invalidate_all(&self);

    /// The tenant's policies were saved on this instance (`removed`: policies deleted or
    /// deactivated). Called after the database write; a remote engine loads the tenant's
    /// modules now. The default forgets the tenant's compiled set.
    async fn saved(&self, tenant: TenantId, removed: &[PolicyId]) {
        let _ = removed;
        self.invalidate(tenant);
    }

    /// `embedded` or, for a remote engine, its kind.
    fn kind(&self) -> &'static str;

    /// False while a remote engine cannot be used (checks are then answered by the embedded
    /// engine). The embedded engine is always online.
    fn online(&self) -> bool {
        true
    }
}

/// Settings of the embedded engine.
#[derive(Clone, Copy, Debug)]
pub struct EngineSettings {
    /// Per-module limits (time, VM instructions).
    pub limits: EvalLimits,
    /// Longest wait for a whole check's evaluation, queueing included; modules without a
    /// result by then count as failed.
    pub deadline: Duration,
    /// Evaluations (and compilations) running at once on the blocking pool.
    pub max_concurrent: usize,
    pub evaluator: Evaluator,
    /// Evaluate inline-safe modules on the calling task with `EvalLimits::INLINE` first,
    /// sending only the rest (and any that exceed that budget) to the blocking pool.
    pub inline: bool,
    /// Tenants whose compiled set is kept (about 90 KiB for the three default policies);
    /// beyond it the set built longest ago is dropped and rebuilt when next needed.
    pub max_cached_tenants: usize,
    /// A compiled set older than this is built again from the database (default 30 s).
    /// Changes reach the other instances by a bus notice at once; this bounds how long a
    /// notice lost to a cache outage (published while Redis was down, or received by no one)
    /// can leave an instance deciding on old policies.
    pub max_set_age: Duration,
}

impl Default for EngineSettings {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            limits: EvalLimits::default(),
            deadline: Duration::from_millis(1250),
            max_concurrent: (cores * 2).max(4),
            evaluator: Evaluator::Vm,
            inline: true,
            max_cached_tenants: 2_000,
            max_set_age: Duration::from_secs(30),
        }
    }
}

/// The longest time one check's inline pass may hold the calling task.
const INLINE_PASS: Duration = Duration::from_millis(3);

/// One active policy, compiled.
struct Entry {
    policy_id: PolicyId,
    name: String,
    /// The module's source as stored.
    source: String,
    /// The compiled module, or why it does not compile any more.
    module: std::result::Result<CompiledModule, String>,
}

/// A tenant's active policies, compiled, in evaluation order. Evaluates with `&self`.
pub struct CompiledSet {
    entries: Vec<Entry>,
    /// Identifies the sources (ids, names, modules, order): equal digests, equal sets.
    digest: String,
}

/// A policy to compile into a set.
#[derive(Clone, Debug)]
pub struct PolicySource {
    pub policy_id: PolicyId,
    pub name: String,
    pub rego: String,
}

impl CompiledSet {
    /// Compiles the policies (already in evaluation order). A module that does not compile
    /// stays in the set and fails every evaluation (the check denies rather than skipping it).
    pub fn compile(sources: Vec<PolicySource>, limits: EvalLimits, evaluator: Evaluator) -> Self {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for s in &sources {
            for part in [s.policy_id.to_string().as_str(), &s.name, &s.rego] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        let digest = hex::encode(&hasher.finalize()[..16]);
        let entries = sources
            .into_iter()
            .map(|s| {
                let module = CompiledModule::compile(&s.rego, limits, evaluator);
                if let Err(e) = &module {
                    tracing::warn!(policy = %s.policy_id, error = %e, "stored policy does not compile");
                }
                Entry {
                    policy_id: s.policy_id,
                    name: s.name,
                    source: s.rego,
                    module,
                }
            })
            .collect();
        CompiledSet { entries, digest }
    }

    /// Identifies the set's sources.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The policies in evaluation order: id, and the compiled module with its source (or why
    /// it does not compile).
    pub(crate) fn modules(
        &self,
    ) -> impl Iterator<Item = (PolicyId, std::result::Result<(&CompiledModule, &str), &str>)> {
        self.entries.iter().map(|e| {
            (
                e.policy_id,
                match &e.module {
                    Ok(m) => Ok((m, e.source.as_str())),
                    Err(err) => Err(err.as_str()),
                },
            )
        })
    }

    /// The outcomes of the set from verdicts given in evaluation order.
    pub(crate) fn outcomes(&self, verdicts: Vec<Verdict>) -> Vec<PolicyOutcome> {
        verdicts
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| self.outcome(i, v))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn outcome(&self, index: usize, verdict: Verdict) -> Option<PolicyOutcome> {
        self.entries.get(index).map(|e| PolicyOutcome {
            policy_id: e.policy_id,
            name: e.name.clone(),
            verdict,
        })
    }

    fn verdict(&self, index: usize, input: &regorus::Value) -> Verdict {
        match self.entries.get(index).map(|e| &e.module) {
            Some(Ok(module)) => match module.evaluate(input) {
                Ok(r) => Verdict::Decided(r),
                Err(e) => Verdict::Failed(e),
            },
            Some(Err(e)) => Verdict::Failed(format!("does not compile: {e}")),
            None => Verdict::Failed("no such module".to_owned()),
        }
    }

    /// The inline pass: inline-safe modules evaluated on the calling thread with the small
    /// inline budget, for at most `INLINE_PASS` in all. `None` for the modules left to the
    /// blocking pool (not inline-safe, over budget, or not reached).
    pub fn evaluate_inline(&self, input: &regorus::Value) -> Vec<Option<Verdict>> {
        let started = std::time::Instant::now();
        self.entries
            .iter()
            .map(|e| match &e.module {
                Err(err) => Some(Verdict::Failed(format!("does not compile: {err}"))),
                Ok(m) if m.inline_safe() && started.elapsed() < INLINE_PASS => m
                    .evaluate_with(input, EvalLimits::INLINE)
                    .ok()
                    .map(Verdict::Decided),
                Ok(_) => None,
            })
            .collect()
    }

    /// Evaluates every module in order on the calling thread.
    pub fn evaluate_blocking(&self, input: &regorus::Value) -> Vec<PolicyOutcome> {
        (0..self.entries.len())
            .filter_map(|i| self.outcome(i, self.verdict(i, input)))
            .collect()
    }
}

/// A tenant's cache slot: the compiled set (when built) and a counter of invalidations, so
/// that a set built from rows read before a change is not installed after it.
#[derive(Default)]
struct Slot {
    epoch: u64,
    set: Option<Arc<CompiledSet>>,
    /// When the set was installed (the cache's build counter).
    built: u64,
    /// When the set was installed (for `MAX_SET_AGE`).
    installed: Option<std::time::Instant>,
}

/// The embedded engine: per tenant, the compiled active modules, built lazily from the
/// database and dropped when the tenant's policies change. Tenants never share a compiled
/// module.
pub struct EmbeddedEngine {
    db: DbPool,
    settings: EngineSettings,
    cache: RwLock<Cache>,
    permits: Arc<Semaphore>,
    /// Each tenant's share of `permits` (see [`tenant_share`]), created on first use.
    tenant_permits: std::sync::Mutex<HashMap<TenantId, Arc<Semaphore>>>,
}

/// How many of the pool's `max_concurrent` slots one tenant's checks may hold at once: half
/// (at least one). A tenant whose policies are slow, or hostile, fills its own half and waits
/// there; another tenant's check still finds a slot (found by a black-box probe: five slow
/// policies of one tenant made one in two hundred of another tenant's checks fail for want of
/// a slot, ADR 0025).
pub fn tenant_share(max_concurrent: usize) -> usize {
    max_concurrent.max(1).div_ceil(2)
}

/// Tenants' share semaphores kept before the idle ones are dropped.
const TENANT_PERMITS_KEPT: usize = 1024;

#[derive(Default)]
struct Cache {
    /// Bumped by `invalidate_all`.
    generation: u64,
    /// Counts installed sets (orders them for eviction).
    builds: u64,
    /// Slots holding a set.
    cached: usize,
    slots: HashMap<TenantId, Slot>,
}

impl Cache {
    fn install(&mut self, tenant: TenantId, epoch: u64, set: Arc<CompiledSet>, max: usize) {
        self.builds += 1;
        let built = self.builds;
        let slot = self.slots.entry(tenant).or_default();
        if slot.epoch != epoch {
            return;
        }
        if slot.set.replace(set).is_none() {
            self.cached += 1;
        }
        slot.built = built;
        slot.installed = Some(std::time::Instant::now());
        while self.cached > max.max(1) {
            let oldest = self
                .slots
                .iter()
                .filter(|(_, s)| s.set.is_some())
                .min_by_key(|(_, s)| s.built)
                .map(|(t, _)| *t);
            match oldest.and_then(|t| self.slots.get_mut(&t)) {
                Some(s) => {
                    s.set = None;
                    self.cached -= 1;
                }
                None => break,
            }
        }
    }

    fn drop_set(&mut self, tenant: TenantId) {
        let slot = self.slots.entry(tenant).or_default();
        slot.epoch = slot.epoch.wrapping_add(1);
        if slot.set.take().is_some() {
            self.cached -= 1;
        }
    }
}

impl EmbeddedEngine {
    pub fn new(db: DbPool, settings: EngineSettings) -> Self {
        Self {
            db,
            permits: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            tenant_permits: std::sync::Mutex::new(HashMap::new()),
            settings,
            cache: RwLock::new(Cache::default()),
        }
    }

    /// The tenant's compiled set, building it when missing.
    pub async fn compiled_set(&self, tenant: TenantId) -> Result<Arc<CompiledSet>> {
        let (generation, epoch) = {
            let cache = self.cache.read().unwrap_or_else(|p| p.into_inner());
            match cache.slots.get(&tenant) {
                Some(Slot {
                    set: Some(set),
                    installed: Some(at),
                    ..
                }) if at.elapsed() < self.settings.max_set_age => return Ok(set.clone()),
                Some(slot) => (cache.generation, slot.epoch),
                None => (cache.generation, 0),
            }
        };
        let sources = self.load(tenant).await?;
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(Error::internal)?;
        let (limits, evaluator) = (self.settings.limits, self.settings.evaluator);
        let set = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            Arc::new(CompiledSet::compile(sources, limits, evaluator))
        })
        .await
        .map_err(Error::internal)?;
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        if cache.generation == generation {
            cache.install(tenant, epoch, set.clone(), self.settings.max_cached_tenants);
        }
        Ok(set)
    }

    /// Tenants whose compiled set is currently held.
    pub fn cached_tenants(&self) -> usize {
        self.cache.read().unwrap_or_else(|p| p.into_inner()).cached
    }

    async fn load(&self, tenant: TenantId) -> Result<Vec<PolicySource>> {
        let rows: Vec<(Id, String, String)> = with_conn!(&self.db, conn => {
            policies::table
                .filter(policies::tenant_id.eq(Id(tenant.0)))
                .filter(policies::is_active.eq(true))
                .order((
                    policies::priority.desc(),
                    policies::created_at.asc(),
                    policies::id.asc(),
                ))
                .select((policies::id, policies::name, policies::rego))
                .load(conn)
                .await
                .db()
        })?;
        Ok(rows
            .into_iter()
            .map(|(id, name, rego)| PolicySource {
                policy_id: id.into_id(),
                name,
                rego,
            })
            .collect())
    }

    /// Evaluates a compiled set: the inline pass first (when enabled), then the remaining
    /// modules on the blocking pool within the deadline. Modules without a result by the
    /// deadline fail with "timed out".
    pub async fn evaluate_set(
        &self,
        tenant: TenantId,
        set: Arc<CompiledSet>,
        input: regorus::Value,
    ) -> Vec<PolicyOutcome> {
        let deadline = Instant::now() + self.settings.deadline;
        let mut verdicts = if self.settings.inline {
            set.evaluate_inline(&input)
        } else {
            vec![None; set.len()]
        };
        let pending: Vec<usize> = verdicts
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.is_none().then_some(i))
            .collect();
        if !pending.is_empty() {
            self.evaluate_on_pool(tenant, &set, input, pending, deadline, &mut verdicts)
                .await;
        }
        verdicts
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| {
                set.outcome(
                    i,
                    v.unwrap_or_else(|| Verdict::Failed("timed out".to_owned())),
                )
            })
            .collect()
    }

    /// The tenant's share of the pool ([`tenant_share`]).
    fn tenant_permits(&self, tenant: TenantId) -> Arc<Semaphore> {
        let share = tenant_share(self.settings.max_concurrent);
        let mut map = self
            .tenant_permits
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if map.len() >= TENANT_PERMITS_KEPT && !map.contains_key(&tenant) {
            map.retain(|_, s| s.available_permits() < share);
        }
        map.entry(tenant)
            .or_insert_with(|| Arc::new(Semaphore::new(share)))
            .clone()
    }

    async fn evaluate_on_pool(
        &self,
        tenant: TenantId,
        set: &Arc<CompiledSet>,
        input: regorus::Value,
        pending: Vec<usize>,
        deadline: Instant,
        verdicts: &mut [Option<Verdict>],
    ) {
        // The tenant's share first, then a slot of the pool: a tenant that fills its share
        // waits on it and holds none of the slots another tenant needs.
        let slots = async {
            let share = self.tenant_permits(tenant).acquire_owned().await?;
            let slot = self.permits.clone().acquire_owned().await?;
            Ok::<_, tokio::sync::AcquireError>((share, slot))
        };
        let permit = match tokio::time::timeout_at(deadline, slots).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "evaluation pool closed");
                return;
            }
            Err(_) => {
                tracing::warn!(tenant = %tenant, "no evaluation slot became free before the deadline");
                return;
            }
        };
        let n = pending.len();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let worker_set = set.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            for i in pending {
                if tx.send((i, worker_set.verdict(i, &input))).is_err() {
                    break; // the check gave up waiting
                }
            }
        });
        let mut received = 0;
        while received < n {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((i, v))) => {
                    if let Some(slot) = verdicts.get_mut(i) {
                        *slot = Some(v);
                    }
                    received += 1;
                }
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(deadline = ?self.settings.deadline, "policy evaluation timed out");
                    break;
                }
            }
        }
    }
}

#[async_trait]
impl PolicyEngine for EmbeddedEngine {
    async fn evaluate(
        &self,
        tenant: TenantId,
        input: &serde_json::Value,
    ) -> Result<Vec<PolicyOutcome>> {
        let set = self.compiled_set(tenant).await?;
        let input = regorus::Value::from(input.clone());
        Ok(self.evaluate_set(tenant, set, input).await)
    }

    fn invalidate(&self, tenant: TenantId) {
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        cache.drop_set(tenant);
    }

    fn invalidate_all(&self) {
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        cache.generation = cache.generation.wrapping_add(1);
        cache.slots.clear();
        cache.cached = 0;
    }

    fn kind(&self) -> &'static str {
        "embedded"
    }
}
