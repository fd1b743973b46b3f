//! The HITL service: requests, decisions exactly once, and approvals bound to one action.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;
use serde_json::{json, Value};
use steward_core::clock::{self, format_timestamp};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::validate::{Fields, Query};
use steward_core::{
    parse_path_id, AgentId, ApprovalId, AuditRecord, AuditWriter, Body, Error, ErrorKind, EventBus,
    Op, Page, PageRequest, Principal, Result, TenantId, UserId,
};
use steward_store::schema::hitl_requests as hr;
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

use crate::digest::action_digest;

pub const PENDING: &str = "pending";
pub const APPROVED: &str = "approved";
pub const REJECTED: &str = "rejected";

fn statuses() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&[PENDING, APPROVED, REJECTED])
}

/// Longest `action` of a request.
const ACTION_MAX: usize = 1024;
/// Longest `resource` of a request.
const RESOURCE_MAX: usize = 4096;
/// Longest `approver` / `reason`.
const TEXT_MAX: usize = 1024;

/// How the HITL service behaves beyond the contract.
#[derive(Clone, Debug, Default)]
pub struct HitlConfig {
    /// How long after its approval a request may still be used by a check
    /// (`HITL_APPROVAL_TTL_SECONDS`; `None` = no limit).
    pub approval_ttl: Option<Duration>,
}

/// The registry as the HITL service sees it: an agent's status in a tenant.
#[async_trait]
pub trait AgentStatuses: Send + Sync + 'static {
    async fn status(&self, tenant: TenantId, agent: AgentId) -> Result<Option<String>>;
}

/// A row of `hitl_requests`.
#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = hr)]
struct Row {
    id: Id,
    tenant_id: Id,
    agent_id: Id,
    action: String,
    resource: String,
    context: Json,
    digest: String,
    status: String,
    requested_at: Ts,
    decided_at: Option<Ts>,
    approver: Option<String>,
    rejection_reason: Option<String>,
    decided_by: Option<Id>,
    consumed_at: Option<Ts>,
}

/// A request as the API shows it (contract 16.1).
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct HitlRequest {
    pub approval_id: String,
    pub tenant_id: String,
    pub agent_id: String,
    pub action: String,
    pub resource: String,
    #[schema(value_type = Object)]
    pub context: Value,
    #[schema(schema_with = statuses)]
    pub status: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub requested_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub decided_at: Option<String>,
    pub approver: Option<String>,
    pub rejection_reason: Option<String>,
}

impl From<&Row> for HitlRequest {
    fn from(r: &Row) -> Self {
        HitlRequest::from(r.clone())
    }
}

/// Moves the row's values (a listing of large contexts holds each once, not twice).
impl From<Row> for HitlRequest {
    fn from(r: Row) -> Self {
        HitlRequest {
            approval_id: r.id.0.to_string(),
            tenant_id: r.tenant_id.0.to_string(),
            agent_id: r.agent_id.0.to_string(),
            action: r.action,
            resource: r.resource,
            context: r.context.0,
            status: r.status,
            requested_at: format_timestamp(r.requested_at.0),
            decided_at: r.decided_at.map(|t| format_timestamp(t.0)),
            approver: r.approver,
            rejection_reason: r.rejection_reason,
        }
    }
}

/// Why an `approval_id` presented by a policy check does not count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// Not an id, or no request of this tenant has it.
    Unknown,
    /// The request is pending or rejected.
    NotApproved,
    /// A check already used it.
    AlreadyUsed,
    /// Its action, resource, agent or context differ from the check's.
    DifferentAction,
    /// It was approved longer ago than `HITL_APPROVAL_TTL_SECONDS`.
    Expired,
}

impl ApprovalRefusal {
    pub fn describe(&self) -> &'static str {
        match self {
            ApprovalRefusal::Unknown => "the approval_id names no approval request of this tenant",
            ApprovalRefusal::NotApproved => "the approval request is not approved",
            ApprovalRefusal::AlreadyUsed => "the approval was already used by an earlier check",
            ApprovalRefusal::DifferentAction => {
                "the approval was given for a different agent, action, resource or context"
            }
            ApprovalRefusal::Expired => "the approval has expired",
        }
    }
}

/// The HITL domain service.
#[derive(Clone)]
pub struct Hitl {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    audit: Arc<dyn AuditWriter>,
    agents: Arc<dyn AgentStatuses>,
    config: HitlConfig,
}

enum Decision {
    Approve,
    Reject,
}

impl Hitl {
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        audit: Arc<dyn AuditWriter>,
        agents: Arc<dyn AgentStatuses>,
        config: HitlConfig,
    ) -> Self {
        Self {
            db,
            bus,
            audit,
            agents,
            config,
        }
    }

    /// `POST /hitl/request` → 201 pending request.
    pub async fn request(&self, p: &Principal, body: &Body) -> Result<HitlRequest> {
        p.authorize(Op::HitlRequest)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let agent = f.required_uuid("agent_id");
        let action = f.required_str("action", 1, ACTION_MAX).map(str::to_owned);
        let resource = f
            .required_str("resource", 1, RESOURCE_MAX)
            .map(str::to_owned);
        let context = if f.present("context") {
            f.required_object("context").cloned()
        } else {
            Some(Default::default())
        };
        let status = match agent {
            Some(id) => self.agents.status(p.tenant, AgentId(id)).await?,
            None => None,
        };
        if agent.is_some() && status.is_none() {
            f.error("agent_id", "is not a registered agent of this tenant");
        }
        f.finish()?;
        let (Some(agent), Some(action), Some(resource), Some(context)) =
            (agent, action, resource, context)
        else {
            return Err(Error::internal_msg("validated request fields missing"));
        };
        if status.as_deref() == Some("suspended") {
            return Err(Error::new(
                ErrorKind::AgentSuspended,
                format!("agent {agent} is suspended"),
            ));
        }
        let context = Value::Object(context);
        let digest = action_digest(
            &p.tenant.to_string(),
            &agent.to_string(),
            &action,
            &resource,
            &context,
        );
        let row = Row {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: Id(p.tenant.0),
            agent_id: Id(agent),
            action,
            resource,
            context: Json(context),
            digest,
            status: PENDING.to_owned(),
            requested_at: Ts(clock::now()),
            decided_at: None,
            approver: None,
            rejection_reason: None,
            decided_by: None,
            consumed_at: None,
        };
        with_conn!(&self.db, conn => {
            diesel::insert_into(hr::table).values(&row).execute(conn).await.db()
        })?;
        let view = HitlRequest::from(&row);
        publish(
            &self.bus,
            Event::new(
                "hitl.requested",
                p.tenant,
                Severity::Info,
                json!({
                    "approval_id": view.approval_id,
                    "agent_id": view.agent_id,
                    "action": view.action,
                    "resource": view.resource,
                    "context": view.context,
                }),
            ),
        );
        Ok(view)
    }

    /// `GET /hitl/status/{id}`.
    pub async fn status(&self, p: &Principal, id: &str) -> Result<HitlRequest> {
        p.authorize(Op::HitlRequest)?;
        let id: ApprovalId = parse_path_id(id, "approval request")?;
        let row = self.row(p.tenant, id).await?.ok_or_else(|| not_found(id))?;
        Ok(HitlRequest::from(&row))
    }

    /// `GET /hitl/pending`: the tenant's pending requests, oldest first.
    pub async fn pending(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<HitlRequest>> {
        p.authorize(Op::HitlDecide)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        q.finish()?;
        let tenant = Id(p.tenant.0);
        macro_rules! filtered {
            () => {
                hr::table
                    .filter(hr::tenant_id.eq(tenant))
                    .filter(hr::status.eq(PENDING))
                    .into_boxed()
            };
        }
        let (total, rows): (i64, Vec<Row>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (hr::requested_at.asc(), hr::id.asc()),
            Row::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.into_iter().map(HitlRequest::from).collect(),
            total,
            page,
        ))
    }

    /// The number of pending requests of a tenant (dashboard statistics).
    pub async fn pending_count(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            hr::table
                .filter(hr::tenant_id.eq(Id(tenant.0)))
                .filter(hr::status.eq(PENDING))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    /// `POST /hitl/approve/{id}` with `{approver}`.
    pub async fn approve(&self, p: &Principal, id: &str, body: &Body) -> Result<HitlRequest> {
        self.decide(p, id, body, Decision::Approve).await
    }

    /// `POST /hitl/reject/{id}` with `{approver, reason?}`.
    pub async fn reject(&self, p: &Principal, id: &str, body: &Body) -> Result<HitlRequest> {
        self.decide(p, id, body, Decision::Reject).await
    }

    /// Decides a pending request exactly once: one conditional UPDATE; of concurrent
    /// deciders (on any instance) one changes the row, the others get 409.
    async fn decide(
        &self,
        p: &Principal,
        id: &str,
        body: &Body,
        decision: Decision,
    ) -> Result<HitlRequest> {
        p.authorize(Op::HitlDecide)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let approver = f.required_str("approver", 1, TEXT_MAX).map(str::to_owned);
        let reason = match decision {
            Decision::Reject => f.optional_str("reason", 0, TEXT_MAX).map(str::to_owned),
            Decision::Approve => None,
        };
        f.finish()?;
        let Some(approver) = approver else {
            return Err(Error::internal_msg("validated approver missing"));
        };
        let id: ApprovalId = parse_path_id(id, "approval request")?;
        let (status, action) = match decision {
            Decision::Approve => (APPROVED, "hitl.approved"),
            Decision::Reject => (REJECTED, "hitl.rejected"),
        };
        let now = Ts(clock::now());
        let decided_by = p.user.map(|u| Id(u.0));
        let updated: Option<Row> = with_conn!(&self.db, conn => {
            diesel::update(
                hr::table
                    .filter(hr::id.eq(Id(id.0)))
                    .filter(hr::tenant_id.eq(Id(p.tenant.0)))
                    .filter(hr::status.eq(PENDING)),
            )
            .set((
                hr::status.eq(status),
                hr::decided_at.eq(Some(now)),
                hr::approver.eq(Some(approver.clone())),
                hr::rejection_reason.eq(reason.clone()),
                hr::decided_by.eq(decided_by),
            ))
            .returning(Row::as_returning())
            .get_result(conn)
            .await
            .optional()
            .db()
        })?;
        let row = match updated {
            Some(row) => row,
            None => {
                let existing = self.row(p.tenant, id).await?.ok_or_else(|| not_found(id))?;
                return Err(Error::conflict(format!(
                    "approval request {id} is already {}",
                    existing.status
                )));
            }
        };
        let view = HitlRequest::from(&row);
        let record = AuditRecord {
            agent_id: Some(AgentId(row.agent_id.0)),
            input: json!({"approver": approver, "reason": reason}),
            output: json!({"status": status, "action": row.action, "resource": row.resource}),
            is_approved: matches!(decision, Decision::Approve),
            ..AuditRecord::system(p.tenant, p.user, action, format!("hitl:{id}"))
        };
        if let Err(e) = self.audit.append(record).await {
            tracing::error!(error = %e, approval = %id, "audit entry of a HITL decision not written");
        }
        publish(
            &self.bus,
            Event::new(
                "hitl.resolved",
                p.tenant,
                Severity::Info,
                json!({
                    "approval_id": view.approval_id,
                    "agent_id": view.agent_id,
                    "action": view.action,
                    "resource": view.resource,
                    "status": view.status,
                    "approver": view.approver,
                    "rejection_reason": view.rejection_reason,
                }),
            ),
        );
        Ok(view)
    }

    /// Whether `approval_id`, presented by a policy check of `tenant` about this agent,
    /// action, resource and context, may count as an approval. Reads only.
    pub async fn validate_approval(
        &self,
        tenant: TenantId,
        approval_id: &str,
        agent_id: &str,
        action: &str,
        resource: &str,
        context: &Value,
    ) -> Result<std::result::Result<ApprovalId, ApprovalRefusal>> {
        let Ok(id) = approval_id.trim().parse::<ApprovalId>() else {
            return Ok(Err(ApprovalRefusal::Unknown));
        };
        let Some(row) = self.row(tenant, id).await? else {
            return Ok(Err(ApprovalRefusal::Unknown));
        };
        if row.status != APPROVED {
            return Ok(Err(ApprovalRefusal::NotApproved));
        }
        if row.consumed_at.is_some() {
            return Ok(Err(ApprovalRefusal::AlreadyUsed));
        }
        let digest = action_digest(&tenant.to_string(), agent_id, action, resource, context);
        if digest != row.digest {
            return Ok(Err(ApprovalRefusal::DifferentAction));
        }
        if self.expired(&row) {
            return Ok(Err(ApprovalRefusal::Expired));
        }
        Ok(Ok(id))
    }

    fn expired(&self, row: &Row) -> bool {
        match (self.config.approval_ttl, row.decided_at) {
            (Some(ttl), Some(decided)) => {
                let ttl = time::Duration::try_from(ttl).unwrap_or(time::Duration::MAX);
                decided.0.saturating_add(ttl) < clock::now()
            }
            _ => false,
        }
    }

    /// Uses an approval for an allowed check: one conditional UPDATE (approved, unused, same
    /// digest), so of concurrent checks on any instance exactly one succeeds. On success the
    /// audit entry `hitl.consumed` names the approval and the check. `false` = not consumed
    /// (another check took it first, or it is no longer valid). `user`: who made the check
    /// (none for a key), named in the entry.
    #[allow(clippy::too_many_arguments)]
    pub async fn consume(
        &self,
        tenant: TenantId,
        user: Option<UserId>,
        id: ApprovalId,
        agent_id: &str,
        action: &str,
        resource: &str,
        context: &Value,
    ) -> Result<bool> {
        let digest = action_digest(&tenant.to_string(), agent_id, action, resource, context);
        let now = clock::now();
        // Approved no earlier than this (the TTL), checked in the same UPDATE.
        let cutoff = match self.config.approval_ttl {
            Some(ttl) => {
                now.saturating_sub(time::Duration::try_from(ttl).unwrap_or(time::Duration::MAX))
            }
            None => time::OffsetDateTime::UNIX_EPOCH,
        };
        let (now, cutoff) = (Ts(now), Ts(cutoff));
        let taken: Option<Row> = with_conn!(&self.db, conn => {
            diesel::update(
                hr::table
                    .filter(hr::id.eq(Id(id.0)))
                    .filter(hr::tenant_id.eq(Id(tenant.0)))
                    .filter(hr::status.eq(APPROVED))
                    .filter(hr::consumed_at.is_null())
                    .filter(hr::digest.eq(digest))
                    .filter(hr::decided_at.ge(cutoff)),
            )
            .set(hr::consumed_at.eq(Some(now)))
            .returning(Row::as_returning())
            .get_result(conn)
            .await
            .optional()
            .db()
        })?;
        let Some(row) = taken else {
            return Ok(false);
        };
        let record = AuditRecord {
            agent_id: Some(AgentId(row.agent_id.0)),
            input: json!({"action": action, "resource": resource, "context": context}),
            output: json!({"approval_id": id.to_string(), "allowed": true, "approver": row.approver}),
            is_approved: true,
            ..AuditRecord::system(tenant, user, "hitl.consumed", format!("hitl:{id}"))
        };
        if let Err(e) = self.audit.append(record).await {
            tracing::error!(error = %e, approval = %id, "audit entry of a used approval not written");
        }
        Ok(true)
    }

    async fn row(&self, tenant: TenantId, id: ApprovalId) -> Result<Option<Row>> {
        with_conn!(&self.db, conn => {
            hr::table
                .filter(hr::id.eq(Id(id.0)))
                .filter(hr::tenant_id.eq(Id(tenant.0)))
                .select(Row::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })
    }
}

fn not_found(id: ApprovalId) -> Error {
    Error::not_found(format!("approval request {id} was not found"))
}
