//! OPA as an optional remote engine (contract 13.6).
//!
//! With `OPA_URL` set, every tenant's active modules are loaded into OPA and checks are
//! decided there; the embedded engine answers whenever OPA cannot.
//!
//! **Layout in OPA.** OPA merges modules that declare the same package, and every policy
//! declares `steward.policies.<name>`, so each module is moved to a package of its own,
//! `steward.tenants.t_<tenant>.p_<policy>` (`ModuleInfo::relocate` rewrites the declaration and
//! the module's references to its own package; a module can read nothing else under `data`,
//! validation refuses it, so no tenant's module can read another tenant's). Per tenant a
//! generated module `steward.tenants.t_<tenant>.eval` collects the decision documents of the
//! tenant's active policies in one object, `decisions`, together with `version`, the digest of
//! the set it was generated from. Module ids are `steward/<tenant>/<policy>` and
//! `steward/<tenant>/eval`.
//!
//! **Consistency.** A check queries `data.steward.tenants.t_<tenant>.eval` with the input. When
//! OPA does not know the tenant or holds another version than the set this instance compiled
//! from the database (OPA restarted, a save on another instance not seen yet), the instance
//! loads its set into OPA and asks again. Saves load the tenant's modules at once
//! (`PolicyEngine::saved`), and on start-up and after every outage all tenants are loaded.
//!
//! **Fallback.** OPA unreachable, slower than the time-out (2 s) or answering a server error:
//! the engine goes offline (`/status` and readiness show it), checks are answered by the
//! embedded engine, and a probe of `GET /health` every two seconds brings it back (loading
//! every tenant again). OPA answering that one of a tenant's modules fails (refused on load, or
//! an evaluation error such as conflicting outputs) is that module's problem, not OPA's: the
//! tenant's checks are answered by the embedded engine, which reports the failing module, until
//! the tenant's policies change; the engine stays online.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use diesel::{ExpressionMethods, QueryDsl};
use serde_json::{json, Value};
use steward_core::{Error, PolicyId, Result, TenantId};
use steward_store::schema::policies;
use steward_store::{with_conn, DbPool, DbResultExt, Id};

use crate::decision::{PolicyOutcome, Verdict};
use crate::engine::{CompiledSet, EmbeddedEngine, PolicyEngine};
use crate::module::{data_path, decision_object, decode};

/// Settings of the remote engine.
#[derive(Clone, Debug)]
pub struct OpaSettings {
    /// OPA's base address, e.g. `http://127.0.0.1:8181`.
    pub url: String,
    /// Longest wait for any one OPA request; slower counts as unreachable.
    pub timeout: Duration,
    /// Attempts to reach OPA at start-up before the server gives up waiting (it keeps probing).
    pub startup_attempts: u32,
    /// Pause between two attempts, and between two probes while offline.
    pub retry_interval: Duration,
    /// The root of Steward's packages and module ids in OPA (`steward`); deployments sharing
    /// one OPA need distinct namespaces. Letters, digits and `_`, starting with a letter.
    pub namespace: String,
}

impl OpaSettings {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            timeout: Duration::from_secs(2),
            startup_attempts: 10,
            retry_interval: Duration::from_secs(2),
            namespace: "steward".to_owned(),
        }
    }
}

/// Counters of the remote engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpaStats {
    /// Checks decided by OPA.
    pub remote: u64,
    /// Checks answered by the embedded engine instead.
    pub fallback: u64,
}

/// Why OPA did not decide a check.
#[derive(Debug)]
enum RemoteError {
    /// OPA cannot be used: unreachable, a server error.
    Unavailable(String),
    /// OPA did not answer within the time-out.
    Timeout(String),
    /// OPA refused or failed one of the tenant's modules.
    Module(String),
    /// OPA holds another version of the tenant's set even after loading this instance's (a
    /// concurrent save on another instance); this check only is answered locally.
    Stale,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unavailable(e) => write!(f, "OPA unavailable: {e}"),
            RemoteError::Timeout(e) => write!(f, "OPA too slow: {e}"),
            RemoteError::Module(e) => write!(f, "OPA failed a module: {e}"),
            RemoteError::Stale => f.write_str("OPA holds another version of the policies"),
        }
    }
}

type Remote<T> = std::result::Result<T, RemoteError>;

fn unavailable(e: impl std::fmt::Display) -> RemoteError {
    RemoteError::Unavailable(e.to_string())
}

fn request_failed(e: reqwest::Error) -> RemoteError {
    if e.is_timeout() {
        RemoteError::Timeout(e.to_string())
    } else {
        RemoteError::Unavailable(e.to_string())
    }
}

fn tenant_component(tenant: TenantId) -> String {
    format!("t_{}", tenant.0.simple())
}

fn policy_component(policy: PolicyId) -> String {
    format!("p_{}", policy.0.simple())
}

/// The rule appended to every module loaded into OPA: the tenant's `eval` module reports
/// whether each policy's module is present, so a module removed behind Steward's back is
/// noticed (and loaded again) rather than read as undefined documents.
const LOADED_RULE: &str = "__steward_loaded";

/// Where Steward's modules live in OPA.
#[derive(Clone, Debug)]
struct Layout {
    namespace: String,
}

impl Layout {
    fn tenant_package(&self, tenant: TenantId) -> Vec<String> {
        vec![
            self.namespace.clone(),
            "tenants".to_owned(),
            tenant_component(tenant),
        ]
    }

    fn policy_package(&self, tenant: TenantId, policy: PolicyId) -> Vec<String> {
        let mut p = self.tenant_package(tenant);
        p.push(policy_component(policy));
        p
    }

    fn policy_id(&self, tenant: TenantId, policy: PolicyId) -> String {
        format!("{}/{tenant}/{policy}", self.namespace)
    }

    fn eval_id(&self, tenant: TenantId) -> String {
        format!("{}/{tenant}/eval", self.namespace)
    }

    /// The path of the tenant's `eval` document under `/v1/data/`.
    fn eval_path(&self, tenant: TenantId) -> String {
        let mut p = self.tenant_package(tenant);
        p.push("eval".to_owned());
        p.join("/")
    }

    /// The modules of a tenant's set as OPA holds them, in load order: (module id, policy,
    /// source); each compiled policy moved to its package (with the loaded marker), then the
    /// tenant's `eval` module (no policy). Policies that do not compile are left out (they
    /// fail locally).
    fn modules(
        &self,
        tenant: TenantId,
        set: &CompiledSet,
    ) -> std::result::Result<Vec<(String, Option<PolicyId>, String)>, String> {
        let mut out = Vec::new();
        for (policy, module) in set.modules() {
            let Ok((module, source)) = module else {
                continue;
            };
            let package = self.policy_package(tenant, policy).join(".");
            let mut moved = module
                .info()
                .relocate(source, &package)
                .ok_or_else(|| format!("policy {policy} cannot be moved to {package}"))?;
            moved.push_str(&format!("\n{LOADED_RULE} := true\n"));
            out.push((self.policy_id(tenant, policy), Some(policy), moved));
        }
        out.push((self.eval_id(tenant), None, self.eval_module(tenant, set)));
        Ok(out)
    }

    /// The generated module collecting a tenant's decisions.
    fn eval_module(&self, tenant: TenantId, set: &CompiledSet) -> String {
        let mut entries = Vec::new();
        for (policy, module) in set.modules() {
            if let Ok((module, _)) = module {
                let base = data_path(&self.policy_package(tenant, policy));
                let loaded = format!("\t\"loaded\": [x | x := {base}[\"{LOADED_RULE}\"]],");
                entries.push(format!(
                    "\t\"{policy}\": {},",
                    decision_object(module.info(), &base, &[loaded]).replace('\n', "\n\t")
                ));
            }
        }
        format!(
            "package {}.eval\n\nimport rego.v1\n\nversion := \"{}\"\n\n\
             decisions := {{\n{}\n}}\n",
            self.tenant_package(tenant).join("."),
            set.digest(),
            entries.join("\n")
        )
    }
}

/// A tenant's set as Steward loads it into OPA under `namespace`: (module id, source) in load
/// order, and the dotted path of the document a check queries (`<ns>.tenants.t_<id>.eval`).
/// For comparing engines on the same modules (the `decide` benchmark).
pub fn opa_modules(
    namespace: &str,
    tenant: TenantId,
    set: &CompiledSet,
) -> std::result::Result<(Vec<(String, String)>, String), String> {
    let layout = Layout {
        namespace: namespace.to_owned(),
    };
    let modules = layout
        .modules(tenant, set)?
        .into_iter()
        .map(|(id, _, source)| (id, source))
        .collect();
    Ok((modules, layout.eval_path(tenant).replace('/', ".")))
}

/// The OPA-backed engine; the embedded engine compiles the sets (read from the database) and
/// answers whenever OPA does not.
pub struct OpaEngine {
    embedded: Arc<EmbeddedEngine>,
    db: DbPool,
    client: reqwest::Client,
    layout: Layout,
    base: String,
    settings: OpaSettings,
    online: AtomicBool,
    /// Tenants whose set (by digest) OPA refused or failed: answered locally until it changes.
    module_errors: Mutex<HashMap<TenantId, String>>,
    /// The policies this instance last loaded per tenant (to remove those left out later).
    pushed: Mutex<HashMap<TenantId, BTreeSet<PolicyId>>>,
    remote: AtomicU64,
    fallback: AtomicU64,
}

impl OpaEngine {
    /// An engine that starts offline; run `connect` to reach OPA.
    pub fn new(db: DbPool, embedded: Arc<EmbeddedEngine>, settings: OpaSettings) -> Result<Self> {
        let ns = &settings.namespace;
        let valid = ns.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(Error::internal_msg(format!(
                "OPA namespace {ns:?} must be letters, digits and _, starting with a letter"
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .build()
            .map_err(Error::internal)?;
        Ok(Self {
            embedded,
            db,
            client,
            layout: Layout {
                namespace: settings.namespace.clone(),
            },
            base: settings.url.trim_end_matches('/').to_owned(),
            settings,
            online: AtomicBool::new(false),
            module_errors: Mutex::default(),
            pushed: Mutex::default(),
            remote: AtomicU64::new(0),
            fallback: AtomicU64::new(0),
        })
    }

    pub fn stats(&self) -> OpaStats {
        OpaStats {
            remote: self.remote.load(Ordering::Relaxed),
            fallback: self.fallback.load(Ordering::Relaxed),
        }
    }

    pub fn embedded(&self) -> &Arc<EmbeddedEngine> {
        &self.embedded
    }

    /// Reaches OPA at start-up (`startup_attempts` tries, `retry_interval` apart), loads every
    /// tenant's modules, then keeps watching: probes while offline, and every few seconds
    /// while online. Runs until the task is aborted.
    pub async fn connect(self: Arc<Self>) {
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            if self.try_connect().await {
                break;
            }
            if attempt == self.settings.startup_attempts {
                tracing::warn!(
                    attempts = attempt,
                    url = %self.base,
                    "OPA is unreachable; the embedded engine answers checks and OPA is probed \
                     in the background"
                );
            } else if attempt < self.settings.startup_attempts {
                tracing::info!(attempt, url = %self.base, "waiting for OPA");
            }
            tokio::time::sleep(self.settings.retry_interval).await;
        }
        loop {
            let pause = if self.online.load(Ordering::Relaxed) {
                self.settings.retry_interval * 3
            } else {
                self.settings.retry_interval
            };
            tokio::time::sleep(pause).await;
            if self.online.load(Ordering::Relaxed) {
                if let Err(e) = self.health().await {
                    self.went_offline(&e);
                }
            } else {
                self.try_connect().await;
            }
        }
    }

    /// Probes OPA and, when it answers, loads every tenant and goes online. True when online.
    pub async fn try_connect(&self) -> bool {
        if self.health().await.is_err() {
            return false;
        }
        match self.sync_all().await {
            Ok(tenants) => {
                self.online.store(true, Ordering::Relaxed);
                tracing::info!(url = %self.base, tenants, "OPA online; policies loaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "loading the policies into OPA failed");
                false
            }
        }
    }

    fn went_offline(&self, e: &RemoteError) {
        if self.online.swap(false, Ordering::Relaxed) {
            tracing::warn!(error = %e, url = %self.base, "OPA offline; the embedded engine answers checks");
        }
    }

    async fn health(&self) -> Remote<()> {
        let resp = self
            .client
            .get(format!("{}/health", self.base))
            .send()
            .await
            .map_err(unavailable)?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(unavailable(format!("health answered {}", resp.status())))
        }
    }

    /// Every active policy: (tenant, policy).
    async fn active_policies(&self) -> Result<Vec<(Id, Id)>> {
        // Imported here only: its `load` would shadow `AtomicBool::load` in the module.
        use diesel_async::RunQueryDsl;
        with_conn!(&self.db, conn => {
            policies::table
                .filter(policies::is_active.eq(true))
                .select((policies::tenant_id, policies::id))
                .load(conn)
                .await
                .db()
        })
    }

    /// The ids of the modules OPA holds.
    async fn loaded_modules(&self) -> Remote<Vec<String>> {
        let listed: Value = self
            .client
            .get(format!("{}/v1/policies", self.base))
            .send()
            .await
            .map_err(unavailable)?
            .json()
            .await
            .map_err(unavailable)?;
        Ok(listed["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect())
    }

    /// Loads every tenant's active modules, then removes the Steward modules OPA held before
    /// that belong to no active policy any more. Returns the number of tenants loaded.
    async fn sync_all(&self) -> Remote<usize> {
        let before = self.loaded_modules().await?;
        let active = self.active_policies().await.map_err(unavailable)?;
        let tenants: BTreeSet<TenantId> = active.iter().map(|(t, _)| t.into_id()).collect();
        for &tenant in &tenants {
            let set = self
                .embedded
                .compiled_set(tenant)
                .await
                .map_err(unavailable)?;
            if set.is_empty() {
                continue;
            }
            match self.push(tenant, &set, &[]).await {
                Ok(()) => {}
                Err(RemoteError::Module(e)) => self.module_failed(tenant, &set, &e),
                Err(e) => return Err(e),
            }
        }
        // Read after the listing: a policy saved since then is active here and is kept.
        let active = self.active_policies().await.map_err(unavailable)?;
        let mut keep = HashSet::new();
        for (t, p) in &active {
            let (t, p): (TenantId, PolicyId) = (t.into_id(), p.into_id());
            keep.insert(self.layout.policy_id(t, p));
            keep.insert(self.layout.eval_id(t));
        }
        let prefix = format!("{}/", self.layout.namespace);
        for id in before {
            if id.starts_with(&prefix) && !keep.contains(&id) {
                self.delete_module(&id).await?;
            }
        }
        Ok(tenants.len())
    }

    fn module_failed(&self, tenant: TenantId, set: &CompiledSet, error: &str) {
        tracing::warn!(%tenant, %error, "OPA failed a module of the tenant; the embedded engine answers its checks until its policies change");
        self.module_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tenant, set.digest().to_owned());
    }

    fn has_module_error(&self, tenant: TenantId, set: &CompiledSet) -> bool {
        self.module_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tenant)
            .is_some_and(|d| d == set.digest())
    }

    async fn put_module(&self, id: &str, source: String) -> Remote<()> {
        let resp = self
            .client
            .put(format!("{}/v1/policies/{id}", self.base))
            .header("Content-Type", "text/plain")
            .body(source)
            .send()
            .await
            .map_err(unavailable)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let message = body["message"].as_str().unwrap_or("").to_owned();
        if status == reqwest::StatusCode::BAD_REQUEST {
            Err(RemoteError::Module(format!("{id}: {message}")))
        } else {
            Err(unavailable(format!(
                "loading {id} answered {status}: {message}"
            )))
        }
    }

    async fn delete_module(&self, id: &str) -> Remote<()> {
        let resp = self
            .client
            .delete(format!("{}/v1/policies/{id}", self.base))
            .send()
            .await
            .map_err(unavailable)?;
        let status = resp.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(unavailable(format!("removing {id} answered {status}")))
        }
    }

    /// Loads a tenant's set into OPA: each compiled module in its own package, then the
    /// tenant's `eval` module; removes the modules of `removed` and of policies this instance
    /// loaded before that are no longer in the set.
    async fn push(&self, tenant: TenantId, set: &CompiledSet, removed: &[PolicyId]) -> Remote<()> {
        let mut current = BTreeSet::new();
        for (id, policy, source) in self
            .layout
            .modules(tenant, set)
            .map_err(RemoteError::Module)?
        {
            self.put_module(&id, source).await?;
            current.extend(policy);
        }
        let before = self
            .pushed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tenant, current.clone())
            .unwrap_or_default();
        let gone: BTreeSet<PolicyId> = before
            .into_iter()
            .chain(removed.iter().copied())
            .filter(|p| !current.contains(p))
            .collect();
        for policy in gone {
            self.delete_module(&self.layout.policy_id(tenant, policy))
                .await?;
        }
        Ok(())
    }

    /// Queries the tenant's `eval` document: `None` when OPA does not define it.
    async fn query(&self, tenant: TenantId, body: &Value) -> Remote<Option<Value>> {
        let url = format!("{}/v1/data/{}", self.base, self.layout.eval_path(tenant));
        let resp = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(request_failed)?;
        let status = resp.status();
        let mut answer: Value = resp.json().await.map_err(unavailable)?;
        if status.is_success() {
            return Ok(answer.get_mut("result").map(Value::take));
        }
        let message = answer["message"].as_str().unwrap_or("").to_owned();
        // Evaluation errors (conflicting outputs, a failing built-in…) name the module.
        if status == reqwest::StatusCode::INTERNAL_SERVER_ERROR
            && (message.contains("eval_") || message.contains("rego_"))
        {
            Err(RemoteError::Module(message))
        } else {
            Err(unavailable(format!("query answered {status}: {message}")))
        }
    }

    /// The check decided by OPA: the tenant's set (loaded when OPA lacks it or holds another
    /// version) evaluated on `input`.
    async fn remote(
        &self,
        tenant: TenantId,
        set: &CompiledSet,
        input: &Value,
    ) -> Remote<Vec<PolicyOutcome>> {
        let body = json!({ "input": input });
        // OPA holds this version of the set, every module of it loaded.
        let current = |r: &Option<Value>| {
            r.as_ref().is_some_and(|r| {
                r["version"].as_str() == Some(set.digest())
                    && set.modules().all(|(policy, module)| {
                        module.is_err()
                            || r["decisions"][policy.to_string()]["loaded"] == json!([true])
                    })
            })
        };
        let mut result = self.query(tenant, &body).await?;
        if !current(&result) {
            self.push(tenant, set, &[]).await?;
            result = self.query(tenant, &body).await?;
            if !current(&result) {
                return Err(RemoteError::Stale);
            }
        }
        let decisions = result
            .map(|mut r| r["decisions"].take())
            .unwrap_or_default();
        let verdicts = set
            .modules()
            .map(|(policy, module)| match module {
                Err(e) => Verdict::Failed(format!("does not compile: {e}")),
                Ok(_) => match decisions.get(policy.to_string()) {
                    Some(d) => Verdict::Decided(decode(&regorus::Value::from(d.clone()))),
                    None => Verdict::Failed("OPA returned no decision".to_owned()),
                },
            })
            .collect();
        Ok(set.outcomes(verdicts))
    }

    /// The check decided by OPA only, without falling back (the engine-parity test).
    pub async fn evaluate_remote(
        &self,
        tenant: TenantId,
        input: &Value,
    ) -> std::result::Result<Vec<PolicyOutcome>, String> {
        let set = self
            .embedded
            .compiled_set(tenant)
            .await
            .map_err(|e| e.to_string())?;
        self.remote(tenant, &set, input)
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl PolicyEngine for OpaEngine {
    async fn evaluate(&self, tenant: TenantId, input: &Value) -> Result<Vec<PolicyOutcome>> {
        let set = self.embedded.compiled_set(tenant).await?;
        if set.is_empty() {
            return Ok(Vec::new());
        }
        if self.online.load(Ordering::Relaxed) && !self.has_module_error(tenant, &set) {
            match self.remote(tenant, &set, input).await {
                Ok(outcomes) => {
                    self.remote.fetch_add(1, Ordering::Relaxed);
                    return Ok(outcomes);
                }
                Err(RemoteError::Module(e)) => self.module_failed(tenant, &set, &e),
                Err(RemoteError::Stale) => {
                    tracing::debug!(%tenant, "OPA holds another version of the tenant's policies")
                }
                // Slow on this tenant's modules while answering otherwise: a module's problem
                // (a runaway rule), not OPA's.
                Err(RemoteError::Timeout(e)) if self.health().await.is_ok() => {
                    self.module_failed(tenant, &set, &format!("no decision in time: {e}"))
                }
                Err(e) => self.went_offline(&e),
            }
        }
        self.fallback.fetch_add(1, Ordering::Relaxed);
        let input = regorus::Value::from(input.clone());
        Ok(self.embedded.evaluate_set(tenant, set, input).await)
    }

    fn invalidate(&self, tenant: TenantId) {
        self.embedded.invalidate(tenant);
    }

    fn invalidate_all(&self) {
        self.embedded.invalidate_all();
    }

    async fn saved(&self, tenant: TenantId, removed: &[PolicyId]) {
        self.embedded.invalidate(tenant);
        if !self.online.load(Ordering::Relaxed) {
            return; // loaded with every tenant when OPA is back
        }
        let set = match self.embedded.compiled_set(tenant).await {
            Ok(set) => set,
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "policies not loaded into OPA");
                return;
            }
        };
        match self.push(tenant, &set, removed).await {
            Ok(()) => {}
            Err(RemoteError::Module(e)) => self.module_failed(tenant, &set, &e),
            Err(e) => self.went_offline(&e),
        }
    }

    fn kind(&self) -> &'static str {
        "opa"
    }

    fn online(&self) -> bool {
        self.online.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::PolicySource;
    use crate::module::{EvalLimits, Evaluator};

    #[test]
    fn the_eval_module_names_each_policy_in_its_own_package() {
        let tenant = TenantId::new();
        let (a, b) = (PolicyId::new(), PolicyId::new());
        let set = CompiledSet::compile(
            vec![
                PolicySource {
                    policy_id: a,
                    name: "gdpr".into(),
                    rego: crate::template("gdpr")
                        .map(|t| t.rego)
                        .unwrap_or_default()
                        .into(),
                },
                PolicySource {
                    policy_id: b,
                    name: "broken".into(),
                    rego: "package steward.policies.x\nallow if {".into(),
                },
            ],
            EvalLimits::default(),
            Evaluator::Vm,
        );
        let layout = Layout {
            namespace: "steward".into(),
        };
        let module = layout.eval_module(tenant, &set);
        let t = tenant_component(tenant);
        assert!(module.starts_with(&format!("package steward.tenants.{t}.eval\n")));
        assert!(module.contains(&format!("version := \"{}\"", set.digest())));
        assert!(module.contains(&format!("\"{a}\": {{")), "{module}");
        assert!(
            module.contains("\"loaded\": [x | x := data[\"steward\"]"),
            "{module}"
        );
        assert!(module.contains(&format!(
            "data[\"steward\"][\"tenants\"][\"{t}\"][\"{}\"][\"allow\"]",
            policy_component(a)
        )));
        // The module that does not compile is not loaded (it fails locally).
        assert!(!module.contains(&b.to_string()), "{module}");
        // The generated module itself compiles (with the moved policy beside it).
        let mut engine = regorus::Engine::new();
        engine.add_policy("eval.rego".into(), module).unwrap();
    }
}
