//! The policy service: policy records (contract 13.1-13.4) and the policy check (13.6-13.7).
//!
//! Every operation checks the caller's role first, then parses and validates the body, then
//! looks the addressed policy up within the caller's tenant (404), then applies business rules
//! (409), as contract 3.2 orders them.

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde::Serialize;
use serde_json::{json, Map, Value};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::validate::{Fields, Query};
use steward_core::{
    clock, parse_path_id, AgentId, AuditRecord, AuditWriter, Body, Error, ErrorKind, EventBus, Op,
    Page, PageRequest, PolicyId, Principal, Result, TenantId, UserId,
};
use steward_store::schema::policies;
use steward_store::{with_conn, DbPool, DbResultExt, Id, Ts};

use crate::agents::{AgentInfo, AgentLookup};
use crate::approval::{ApprovalGate, PresentedApproval};
use crate::decision::{decide, AgentState, Aggregation, CheckResponse, Verdict};
use crate::engine::{EmbeddedEngine, EngineSettings, PolicyEngine};
use crate::module::validate_module;
use crate::risk::{RiskEvent, RiskScorer, RulesScorer};
use crate::templates::{self, Template, DEFAULT_POLICIES, GUARD_TEMPLATE};

/// The bus channel carrying "this tenant's policies changed" notices (payload: the tenant id).
pub const POLICY_CHANGES_CHANNEL: &str = "policy-changes";

/// Longest policy name (characters).
pub const MAX_NAME_CHARS: usize = 100;
/// Longest policy description (characters).
pub const MAX_DESCRIPTION_CHARS: usize = 10_000;

/// Settings of the policy service.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    /// `HITL_RISK_THRESHOLD`: a check whose risk score is strictly above it requires approval.
    pub hitl_risk_threshold: f64,
    /// `HITL_REQUIRE_APPROVAL_ID`: a bare `context.approved: true` without a valid
    /// `approval_id` counts as not approved.
    pub require_approval_id: bool,
    /// The embedded engine's limits and pool.
    pub engine: EngineSettings,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            hitl_risk_threshold: 0.8,
            require_approval_id: false,
            engine: EngineSettings::default(),
        }
    }
}

/// A policy as the API emits it (contract 13.1).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PolicyView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub template: Option<String>,
    pub rego: String,
    pub is_active: bool,
    pub priority: i64,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub updated_at: String,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = policies)]
struct PolicyRow {
    id: Id,
    tenant_id: Id,
    name: String,
    description: String,
    template: Option<String>,
    rego: String,
    is_active: bool,
    priority: i64,
    created_at: Ts,
    updated_at: Ts,
}

impl From<PolicyRow> for PolicyView {
    fn from(r: PolicyRow) -> Self {
        PolicyView {
            id: r.id.0.hyphenated().to_string(),
            name: r.name,
            description: r.description,
            template: r.template,
            rego: r.rego,
            is_active: r.is_active,
            priority: r.priority,
            created_at: clock::format_timestamp(r.created_at.0),
            updated_at: clock::format_timestamp(r.updated_at.0),
        }
    }
}

#[derive(AsChangeset, Default)]
#[diesel(table_name = policies)]
struct PolicyChanges {
    name: Option<String>,
    description: Option<String>,
    template: Option<Option<String>>,
    rego: Option<String>,
    is_active: Option<bool>,
    priority: Option<i64>,
    updated_at: Option<Ts>,
}

/// The fields of a create or update body, validated.
#[derive(Default)]
struct PolicyFields {
    name: Option<String>,
    description: Option<String>,
    template: Option<&'static Template>,
    rego: Option<String>,
    is_active: Option<bool>,
    priority: Option<i64>,
}

impl PolicyFields {
    /// Reads the body; every invalid field is reported (422 `validation_failed`).
    fn read(value: &Value, creating: bool) -> Result<PolicyFields> {
        let mut f = Fields::root(value);
        let name = if creating {
            f.required_str("name", 1, MAX_NAME_CHARS)
        } else {
            f.optional_str("name", 1, MAX_NAME_CHARS)
        };
        let name = f.name("name", name);
        let description = f
            .optional_str("description", 0, MAX_DESCRIPTION_CHARS)
            .map(str::to_owned);
        let template = match f.optional_str("template", 1, 200) {
            None => None,
            Some(id) => match templates::template(id) {
                Some(t) if t.id == GUARD_TEMPLATE => {
                    f.error(
                        "template",
                        "guard is the prompt guard's module and cannot be used as a policy",
                    );
                    None
                }
                Some(t) => Some(t),
                None => {
                    f.error(
                        "template",
                        "unknown template; use one of gdpr, hipaa, fz152, hitl, custom",
                    );
                    None
                }
            },
        };
        let rego = f.optional_str("rego", 1, usize::MAX).map(str::to_owned);
        let is_active = f.optional_bool("is_active");
        let priority = f.optional_i64("priority", i64::MIN, i64::MAX);
        if creating && !f.present("rego") && !f.present("template") {
            f.error("rego", "is required when no template is given");
        }
        f.finish()?;
        Ok(PolicyFields {
            name,
            description,
            template,
            rego,
            is_active,
            priority,
        })
    }

    /// The source to store: the given `rego`, else the template's.
    fn source(&self) -> Option<String> {
        self.rego
            .clone()
            .or_else(|| self.template.map(|t| t.rego.to_owned()))
    }
}

/// Compiles a module off the async threads; 422 `invalid_rego` when it does not compile.
async fn check_module(rego: String) -> Result<()> {
    tokio::task::spawn_blocking(move || validate_module(&rego))
        .await
        .map_err(Error::internal)?
}

fn duplicate_name(name: &str) -> impl FnOnce(Error) -> Error + '_ {
    move |e| {
        if e.kind == ErrorKind::Conflict {
            Error::conflict(format!("a policy named '{name}' already exists"))
        } else {
            e
        }
    }
}

/// Sets or clears `approved` in a check's context (an object: validated before).
fn set_approved(context: &mut Value, approved: bool) {
    if let Value::Object(map) = context {
        if approved {
            map.insert("approved".to_owned(), Value::Bool(true));
        } else {
            map.remove("approved");
        }
    }
}

/// The policy service.
#[derive(Clone)]
pub struct PolicyService {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    audit: Arc<dyn AuditWriter>,
    agents: Arc<dyn AgentLookup>,
    scorer: Arc<dyn RiskScorer>,
    engine: Arc<dyn PolicyEngine>,
    approvals: Option<Arc<dyn ApprovalGate>>,
    config: PolicyConfig,
}

impl PolicyService {
    /// A service evaluating with the embedded engine.
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        audit: Arc<dyn AuditWriter>,
        agents: Arc<dyn AgentLookup>,
        scorer: Arc<dyn RiskScorer>,
        config: PolicyConfig,
    ) -> Self {
        let engine = Arc::new(EmbeddedEngine::new(db.clone(), config.engine));
        Self {
            db,
            bus,
            audit,
            agents,
            scorer,
            engine,
            approvals: None,
            config,
        }
    }

    /// Validates and consumes `context.approval_id` through `gate` (HITL).
    pub fn with_approvals(mut self, gate: Arc<dyn ApprovalGate>) -> Self {
        self.approvals = Some(gate);
        self
    }

    /// Replaces the engine (e.g. with an OPA-backed one that falls back to the embedded one).
    pub fn with_engine(mut self, engine: Arc<dyn PolicyEngine>) -> Self {
        self.engine = engine;
        self
    }

    pub fn engine(&self) -> &Arc<dyn PolicyEngine> {
        &self.engine
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    // ------------------------------------------------------------------ templates and reads

    /// `GET /policies/templates`: the templates in the contract's order, paged like every list.
    pub async fn templates(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<Template>> {
        p.authorize(Op::PoliciesRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::from_query(&mut q, MAX_LIMIT)?;
        let all = templates::templates();
        let total = all.len() as i64;
        let items = all
            .iter()
            .skip(usize::try_from(page.skip).unwrap_or(usize::MAX))
            .take(usize::try_from(page.limit).unwrap_or(0))
            .copied()
            .collect();
        Ok(Page::new(items, total, page))
    }

    /// `GET /policies`: query `active_only`, paging; priority descending, then creation.
    pub async fn list(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<PolicyView>> {
        p.authorize(Op::PoliciesRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let active_only = q.bool("active_only").unwrap_or(false);
        q.finish()?;
        let tenant = Id(p.tenant.0);
        macro_rules! filtered {
            () => {{
                let mut query = policies::table
                    .filter(policies::tenant_id.eq(tenant))
                    .into_boxed();
                if active_only {
                    query = query.filter(policies::is_active.eq(true));
                }
                query
            }};
        }
        let (total, rows): (i64, Vec<PolicyRow>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (
                policies::priority.desc(),
                policies::created_at.asc(),
                policies::id.asc()
            ),
            PolicyRow::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.into_iter().map(PolicyView::from).collect(),
            total,
            page,
        ))
    }

    /// `GET /policies/{id}`.
    pub async fn get(&self, p: &Principal, id: &str) -> Result<PolicyView> {
        p.authorize(Op::PoliciesRead)?;
        let id: PolicyId = parse_path_id(id, "policy")?;
        Ok(self.row(p.tenant, id).await?.into())
    }

    /// The number of active policies of a tenant (for statistics).
    pub async fn count_active(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            policies::table
                .filter(policies::tenant_id.eq(Id(tenant.0)))
                .filter(policies::is_active.eq(true))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    async fn row(&self, tenant: TenantId, id: PolicyId) -> Result<PolicyRow> {
        let row: Option<PolicyRow> = with_conn!(&self.db, conn => {
            policies::table
                .filter(policies::id.eq(Id(id.0)))
                .filter(policies::tenant_id.eq(Id(tenant.0)))
                .select(PolicyRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        row.ok_or_else(|| Error::not_found(format!("policy {id} was not found")))
    }

    // ------------------------------------------------------------------ writes

    /// `POST /policies` → 201.
    pub async fn create(&self, p: &Principal, body: &Body) -> Result<PolicyView> {
        p.authorize(Op::PoliciesWrite)?;
        let value = body.parse::<Value>()?;
        let fields = PolicyFields::read(&value, true)?;
        let (Some(name), Some(rego)) = (fields.name.clone(), fields.source()) else {
            return Err(Error::internal_msg("validated policy fields missing"));
        };
        check_module(rego.clone()).await?;
        let now = Ts(clock::now());
        let row = PolicyRow {
            id: Id(PolicyId::new().0),
            tenant_id: Id(p.tenant.0),
            name,
            description: fields.description.clone().unwrap_or_default(),
            template: fields.template.map(|t| t.id.to_owned()),
            rego,
            is_active: fields.is_active.unwrap_or(true),
            priority: fields.priority.unwrap_or(0),
            created_at: now,
            updated_at: now,
        };
        with_conn!(&self.db, conn => {
            diesel::insert_into(policies::table).values(&row).execute(conn).await.db()
        })
        .map_err(duplicate_name(&row.name))?;
        self.policies_changed(p.tenant, &[]).await;
        let id: PolicyId = row.id.into_id();
        self.record(
            p.tenant,
            p.user,
            "policy.created",
            id,
            json!({
                "name": row.name,
                "template": row.template,
                "priority": row.priority,
                "is_active": row.is_active,
            }),
        )
        .await;
        Ok(row.into())
    }

    /// `PUT /policies/{id}`: any subset of the create fields; absent fields stay unchanged.
    pub async fn update(&self, p: &Principal, id: &str, body: &Body) -> Result<PolicyView> {
        p.authorize(Op::PoliciesWrite)?;
        let value = body.parse::<Value>()?;
        let fields = PolicyFields::read(&value, false)?;
        let new_rego = fields.source();
        if let Some(rego) = &new_rego {
            check_module(rego.clone()).await?;
        }
        let id: PolicyId = parse_path_id(id, "policy")?;
        let current = self.row(p.tenant, id).await?;

        let mut changed = Map::new();
        let mut changes = PolicyChanges::default();
        if let Some(name) = fields.name.as_ref().filter(|n| **n != current.name) {
            changed.insert("name".into(), json!(name));
            changes.name = Some(name.clone());
        }
        if let Some(d) = fields
            .description
            .as_ref()
            .filter(|d| **d != current.description)
        {
            changed.insert("description".into(), json!(d));
            changes.description = Some(d.clone());
        }
        if let Some(t) = fields
            .template
            .filter(|t| current.template.as_deref() != Some(t.id))
        {
            changed.insert("template".into(), json!(t.id));
            changes.template = Some(Some(t.id.to_owned()));
        }
        if let Some(rego) = new_rego.filter(|r| *r != current.rego) {
            changed.insert("rego".into(), json!(true));
            changes.rego = Some(rego);
        }
        if let Some(a) = fields.is_active.filter(|a| *a != current.is_active) {
            changed.insert("is_active".into(), json!(a));
            changes.is_active = Some(a);
        }
        if let Some(pr) = fields.priority.filter(|pr| *pr != current.priority) {
            changed.insert("priority".into(), json!(pr));
            changes.priority = Some(pr);
        }
        if changed.is_empty() {
            return Ok(current.into());
        }
        changes.updated_at = Some(Ts(clock::now().max(current.updated_at.0)));
        let name = changes.name.clone().unwrap_or_else(|| current.name.clone());
        let row_id = current.id;
        let tenant = Id(p.tenant.0);
        let updated = with_conn!(&self.db, conn => {
            diesel::update(
                policies::table
                    .filter(policies::id.eq(row_id))
                    .filter(policies::tenant_id.eq(tenant)),
            )
            .set(&changes)
            .execute(conn)
            .await
            .db()
        })
        .map_err(duplicate_name(&name))?;
        if updated == 0 {
            // Deleted while this request ran: nothing was changed, nothing is recorded.
            return Err(Error::not_found(format!("policy {id} was not found")));
        }
        let removed = if changes.is_active == Some(false) {
            vec![id]
        } else {
            Vec::new()
        };
        self.policies_changed(p.tenant, &removed).await;
        self.record(
            p.tenant,
            p.user,
            "policy.updated",
            id,
            json!({"name": name, "changed": Value::Object(changed)}),
        )
        .await;
        Ok(self.row(p.tenant, id).await?.into())
    }

    /// `DELETE /policies/{id}` → 204.
    pub async fn delete(&self, p: &Principal, id: &str) -> Result<()> {
        p.authorize(Op::PoliciesWrite)?;
        let id: PolicyId = parse_path_id(id, "policy")?;
        let current = self.row(p.tenant, id).await?;
        let row_id = current.id;
        let tenant = Id(p.tenant.0);
        let deleted = with_conn!(&self.db, conn => {
            diesel::delete(
                policies::table
                    .filter(policies::id.eq(row_id))
                    .filter(policies::tenant_id.eq(tenant)),
            )
            .execute(conn)
            .await
            .db()
        })?;
        if deleted == 0 {
            return Err(Error::not_found(format!("policy {id} was not found")));
        }
        self.policies_changed(p.tenant, &[id]).await;
        self.record(
            p.tenant,
            p.user,
            "policy.deleted",
            id,
            json!({"name": current.name}),
        )
        .await;
        Ok(())
    }

    /// Installs the default policies of a new tenant (contract 13.4): `gdpr`, `hipaa`, `fz152`
    /// from their templates, priority 0, active, created in that order. Writes no audit entry.
    pub async fn provision_defaults(&self, tenant: TenantId) -> Result<()> {
        let now = clock::now();
        let mut rows = Vec::new();
        for (i, id) in DEFAULT_POLICIES.iter().enumerate() {
            let Some(t) = templates::template(id) else {
                return Err(Error::internal_msg(format!(
                    "default template {id} missing"
                )));
            };
            // Distinct creation times keep the documented order on every backend.
            let at = Ts(now + time::Duration::microseconds(i as i64));
            rows.push(PolicyRow {
                id: Id(PolicyId::new().0),
                tenant_id: Id(tenant.0),
                name: t.id.to_owned(),
                description: t.description.to_owned(),
                template: Some(t.id.to_owned()),
                rego: t.rego.to_owned(),
                is_active: true,
                priority: 0,
                created_at: at,
                updated_at: at,
            });
        }
        let rows = &rows;
        with_conn!(&self.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    for row in rows {
                        diesel::insert_into(policies::table).values(row).execute(conn).await?;
                    }
                    Ok(())
                }
                .scope_boxed()
            })
            .await
            .db()
        })?;
        self.policies_changed(tenant, &[]).await;
        Ok(())
    }

    // ------------------------------------------------------------------ change notices

    /// Drops this instance's compiled set of the tenant (its policies changed).
    pub fn invalidate(&self, tenant: TenantId) {
        self.engine.invalidate(tenant);
    }

    /// Invalidates locally (so the next check sees the change; a remote engine loads the
    /// tenant's modules) and tells the other instances. `removed`: policies deleted or
    /// deactivated by the change.
    pub async fn policies_changed(&self, tenant: TenantId, removed: &[PolicyId]) {
        self.engine.saved(tenant, removed).await;
        if let Err(e) = self
            .bus
            .publish(POLICY_CHANGES_CHANNEL, tenant.to_string().as_bytes())
            .await
        {
            tracing::warn!(error = %e, %tenant, "policy change notice not published");
        }
    }

    /// Listens for change notices of other instances and invalidates; runs until the task is
    /// aborted. Spawn it once at start-up: `tokio::spawn(service.clone().listen_for_changes())`.
    pub async fn listen_for_changes(self) {
        steward_core::bus::follow(
            self.bus.clone(),
            POLICY_CHANGES_CHANNEL,
            |payload| match std::str::from_utf8(payload)
                .ok()
                .and_then(|s| s.trim().parse::<TenantId>().ok())
            {
                Some(tenant) => self.engine.invalidate(tenant),
                None => tracing::warn!("malformed policy change notice"),
            },
            || self.engine.invalidate_all(),
        )
        .await
    }

    // ------------------------------------------------------------------ the check

    /// `POST /policies/check` (contract 13.7).
    pub async fn check(&self, p: &Principal, body: &Body) -> Result<CheckResponse> {
        p.authorize(Op::PoliciesCheck)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let agent_id = f.required_str("agent_id", 0, usize::MAX).map(str::to_owned);
        let action = f.required_str("action", 1, usize::MAX).map(str::to_owned);
        let resource = f.required_str("resource", 1, usize::MAX).map(str::to_owned);
        let context = f.required_object("context").cloned();
        f.finish()?;
        let (Some(agent_id), Some(action), Some(resource), Some(context)) =
            (agent_id, action, resource, context)
        else {
            return Err(Error::internal_msg("validated check fields missing"));
        };
        let context = Value::Object(context);

        let agent: Option<AgentInfo> = match agent_id.parse::<AgentId>() {
            Ok(id) => self.agents.find(p.tenant, id).await?,
            Err(_) => None,
        };

        // Approvals (docs/hitl.md): a presented `approval_id` counts only when the HITL service
        // vouches for it; a bare `approved: true` counts unless HITL_REQUIRE_APPROVAL_ID.
        let presented = context.get("approval_id").map(|v| v.as_str().unwrap_or(""));
        let presented_as = |approval_id| PresentedApproval {
            tenant: p.tenant,
            user: p.user,
            approval_id,
            agent_id: &agent_id,
            action: &action,
            resource: &resource,
            context: &context,
        };
        let mut effective = context.clone();
        let mut refusal: Option<String> = None;
        let mut bound = false;
        match presented {
            Some(approval_id) => {
                let verdict = match &self.approvals {
                    Some(gate) => gate.validate(presented_as(approval_id)).await?,
                    None => Err("approvals are not available".to_owned()),
                };
                match verdict {
                    Ok(()) => {
                        set_approved(&mut effective, true);
                        bound = true;
                    }
                    Err(reason) => {
                        set_approved(&mut effective, false);
                        refusal = Some(reason);
                    }
                }
            }
            None if self.config.require_approval_id => {
                if effective.get("approved") == Some(&Value::Bool(true)) {
                    refusal = Some(
                        "approved: true needs a valid approval_id (HITL_REQUIRE_APPROVAL_ID)"
                            .to_owned(),
                    );
                }
                set_approved(&mut effective, false);
            }
            None => {}
        }

        let (mut decision, mut risk_score, mut assessment) = self
            .decide_check(
                p.tenant,
                agent.as_ref(),
                &agent_id,
                &action,
                &resource,
                &effective,
            )
            .await?;
        if bound && decision.allowed {
            let consumed = match (&self.approvals, presented) {
                (Some(gate), Some(approval_id)) => gate.consume(presented_as(approval_id)).await?,
                _ => false,
            };
            if !consumed {
                // Another check used it first: this one is not approved after all.
                set_approved(&mut effective, false);
                refusal = Some("the approval was already used by an earlier check".to_owned());
                (decision, risk_score, assessment) = self
                    .decide_check(
                        p.tenant,
                        agent.as_ref(),
                        &agent_id,
                        &action,
                        &resource,
                        &effective,
                    )
                    .await?;
            }
        }
        if let (false, Some(why)) = (decision.allowed, &refusal) {
            decision.reason = format!("{}; approval not accepted: {why}", decision.reason);
        }
        if !decision.allowed {
            publish(
                &self.bus,
                Event::new(
                    "policy.violated",
                    p.tenant,
                    Severity::Error,
                    json!({
                        "agent_id": agent_id,
                        "action": action,
                        "resource": resource,
                        "reason": decision.reason,
                        "required_approval": decision.required_approval,
                        "risk_score": risk_score,
                    }),
                ),
            );
        }
        Ok(CheckResponse::new(
            decision,
            risk_score,
            assessment.is_anomaly,
            assessment.report_id,
        ))
    }

    /// Evaluates the tenant's policies, scores the risk and aggregates (contract 13.6-13.8).
    async fn decide_check(
        &self,
        tenant: TenantId,
        agent: Option<&AgentInfo>,
        agent_id: &str,
        action: &str,
        resource: &str,
        context: &Value,
    ) -> Result<(crate::decision::Decision, f64, crate::risk::RiskAssessment)> {
        let outcomes = match agent {
            Some(a) if !a.is_suspended() => {
                let input = json!({
                    "action": action,
                    "resource": resource,
                    "context": context,
                    "tenant_id": tenant.to_string(),
                    "agent": a.input_document(),
                });
                let outcomes = self.engine.evaluate(tenant, &input).await?;
                for o in &outcomes {
                    if let Verdict::Failed(error) = &o.verdict {
                        tracing::warn!(tenant = %tenant, policy = %o.policy_id, name = %o.name, %error, "policy failed to evaluate");
                    }
                }
                outcomes
            }
            _ => Vec::new(),
        };
        let aggregation = Aggregation {
            agent_id,
            agent: match agent {
                Some(a) => AgentState::Registered(a),
                None => AgentState::Unregistered,
            },
            outcomes: &outcomes,
            action,
            context,
            hitl_risk_threshold: self.config.hitl_risk_threshold,
        };
        let event = RiskEvent {
            tenant,
            agent,
            action,
            resource,
            context,
        };
        let reason = |score: f64| decide(&aggregation, score).reason;
        let assessment = match self.scorer.assess(event, &reason).await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "risk scoring failed; the rules decide");
                RulesScorer::default().score(action, resource, context)
            }
        };
        let risk_score = if assessment.risk_score.is_finite() {
            assessment.risk_score.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Ok((decide(&aggregation, risk_score), risk_score, assessment))
    }

    // ------------------------------------------------------------------ helpers

    /// Writes the audit entry of a policy operation and publishes it as an event. A failure to
    /// audit is logged; it does not undo the operation that already happened.
    async fn record(
        &self,
        tenant: TenantId,
        user_id: Option<UserId>,
        action: &str,
        policy: PolicyId,
        details: Value,
    ) {
        let resource = format!("policy:{policy}");
        let entry = AuditRecord::system(tenant, user_id, action, resource.clone())
            .with_input(details.clone());
        if let Err(e) = self.audit.append(entry).await {
            tracing::error!(error = %e, action, resource = %resource, "audit entry not written");
        }
        publish(
            &self.bus,
            Event::new(
                action,
                tenant,
                Severity::Info,
                json!({
                    "user_id": user_id.map(|u| u.to_string()),
                    "policy_id": policy.to_string(),
                    "resource": resource,
                    "details": details,
                }),
            ),
        );
    }
}
