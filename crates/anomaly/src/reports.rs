//! Anomaly reports (contract 15.1) and feedback samples (15.3): validation, storage on
//! either backend, list filters, status changes, statistics, `anomaly.detected` events.
//! Scoring, agent lookups and orphan candidates are injected through [`ReportHooks`] so
//! this module has no dependency on the model or on other domains.

use std::sync::Arc;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;
use serde_json::{json, Map, Value};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::{Page, PageRequest};
use steward_core::validate::{Fields, Query};
use steward_core::{clock, Body, Error, EventBus, Op, Principal, Result, TenantId};
use steward_store::schema::{anomaly_feedback as af, anomaly_reports as ar};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};
use time::OffsetDateTime;
use uuid::Uuid;

/// Report statuses (contract 15.1).
pub const STATUSES: [&str; 4] = ["open", "investigating", "resolved", "false_positive"];
/// Report sources.
pub const SOURCES: [&str; 2] = ["auto", "manual"];

fn statuses() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&STATUSES)
}

fn sources() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&SOURCES)
}
/// Largest page.
pub const MAX_LIMIT: i64 = 200;

/// What reports need from the rest of the system.
#[async_trait]
pub trait ReportHooks: Send + Sync + 'static {
    /// Whether `agent` is a registered agent of `tenant`.
    async fn agent_registered(&self, tenant: TenantId, agent: Uuid) -> Result<bool>;
    /// The composite risk (contract 15.2) of `event_data` for `tenant`.
    async fn score(&self, tenant: TenantId, event_data: &Value) -> f64;
    /// An orphan report (no agent) named an agent: feed a discovery candidate.
    async fn orphan(&self, tenant: TenantId, agent_name: &str, event_data: &Value);
    /// A report was created (metrics).
    fn created(&self, _report: &Report) {}
    /// A feedback sample was stored (metrics, auto-retrain).
    fn feedback(&self, _tenant: TenantId, _label: i32) {}
}

/// The report object.
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Report {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub agent_id: Option<Uuid>,
    pub risk_score: f64,
    #[schema(schema_with = sources)]
    pub source: String,
    #[schema(schema_with = statuses)]
    pub status: String,
    pub event_data: Value,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub timestamp: OffsetDateTime,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub updated_at: OffsetDateTime,
}

/// A feedback sample as answered by `POST /anomalies/detector/feedback`.
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Feedback {
    pub id: Uuid,
    pub label: i32,
    pub source: String,
    pub report_id: Option<Uuid>,
    #[serde(with = "steward_core::clock::serde_ts")]
    pub created_at: OffsetDateTime,
}

/// `GET /anomalies/stats`.
#[derive(Clone, Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Stats {
    pub total: i64,
    pub by_status: Map<String, Value>,
    pub by_source: Map<String, Value>,
    pub average_risk_score: Option<f64>,
    pub last_24h: i64,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = ar)]
struct ReportRow {
    id: Id,
    tenant_id: Id,
    agent_id: Option<Id>,
    risk_score: f64,
    source: String,
    status: String,
    event_data: Json,
    created_at: Ts,
    updated_at: Ts,
}

impl ReportRow {
    fn view(self) -> Report {
        Report {
            id: self.id.0,
            tenant_id: self.tenant_id.0,
            agent_id: self.agent_id.map(|i| i.0),
            risk_score: self.risk_score,
            source: self.source,
            status: self.status,
            event_data: self.event_data.0,
            timestamp: self.created_at.0,
            updated_at: self.updated_at.0,
        }
    }
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = af)]
pub struct FeedbackRow {
    pub id: Id,
    pub tenant_id: Id,
    pub event_data: Json,
    pub label: i32,
    pub source: String,
    pub report_id: Option<Id>,
    pub created_at: Ts,
}

/// (status, source, count, sum of risk) of one group of reports.
type StatsGroup = (String, String, i64, Option<f64>);

/// Reports and feedback of every tenant.
#[derive(Clone)]
pub struct Reports {
    db: DbPool,
    bus: Arc<dyn EventBus>,
    hooks: Arc<dyn ReportHooks>,
}

fn parse_id(raw: &str) -> Result<Uuid> {
    Uuid::parse_str(raw).map_err(|_| Error::not_found("the anomaly report was not found"))
}

impl Reports {
    pub fn new(db: DbPool, bus: Arc<dyn EventBus>, hooks: Arc<dyn ReportHooks>) -> Reports {
        Reports { db, bus, hooks }
    }

    /// `POST /anomalies/report` `{agent_id?, event_data, source?}` → 201 report.
    pub async fn create(&self, p: &Principal, body: &Body) -> Result<Report> {
        p.authorize(Op::AnomaliesReport)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let event_data = f.required_object("event_data").cloned();
        let source = f
            .optional_enum("source", &SOURCES)
            .unwrap_or("manual")
            .to_owned();
        let agent_id = f.optional_uuid("agent_id");
        if let (Some(agent), false) = (agent_id, f.has_errors()) {
            if !self.hooks.agent_registered(p.tenant, agent).await? {
                f.error("agent_id", "is not a registered agent of the tenant");
            }
        }
        f.finish()?;
        let event_data = Value::Object(event_data.unwrap_or_default());
        let risk = match event_data.get("risk_score").and_then(Value::as_f64) {
            Some(r) if (0.0..=1.0).contains(&r) => r,
            _ => match (agent_id, event_data.get("agent_id")) {
                // The report's agent is the event's agent for scoring.
                (Some(agent), None) => {
                    let mut scored = event_data.clone();
                    if let Value::Object(m) = &mut scored {
                        m.insert("agent_id".into(), Value::String(agent.to_string()));
                    }
                    self.hooks.score(p.tenant, &scored).await
                }
                _ => self.hooks.score(p.tenant, &event_data).await,
            },
        };
        self.insert(p.tenant, agent_id, risk, &source, event_data)
            .await
    }

    /// Stores a report (manual or automatic), publishes `anomaly.detected`, and feeds a
    /// discovery candidate for an orphan report that names its agent (`agent_name`).
    pub async fn insert(
        &self,
        tenant: TenantId,
        agent_id: Option<Uuid>,
        risk: f64,
        source: &str,
        event_data: Value,
    ) -> Result<Report> {
        let now = Ts::from(clock::now());
        let row = ReportRow {
            id: Id(Uuid::now_v7()),
            tenant_id: Id(tenant.0),
            agent_id: agent_id.map(Id),
            risk_score: if risk.is_finite() {
                risk.clamp(0.0, 1.0)
            } else {
                0.0
            },
            source: source.to_owned(),
            status: "open".into(),
            event_data: Json(event_data),
            created_at: now,
            updated_at: now,
        };
        let r = &row;
        with_conn!(&self.db, conn => diesel::insert_into(ar::table).values(r).execute(conn).await.db())?;
        let report = row.view();
        publish(
            &self.bus,
            Event::new(
                "anomaly.detected",
                tenant,
                Severity::Warning,
                json!({
                    "report_id": report.id,
                    "agent_id": report.agent_id,
                    "risk_score": report.risk_score,
                    "source": report.source,
                }),
            ),
        );
        self.hooks.created(&report);
        if report.agent_id.is_none() {
            if let Some(name) = report
                .event_data
                .get("agent_name")
                .and_then(Value::as_str)
                .filter(|n| !n.trim().is_empty())
            {
                self.hooks.orphan(tenant, name, &report.event_data).await;
            }
        }
        Ok(report)
    }

    /// `GET /anomalies` with pagination, `status`, `source`, `agent_id`; newest first.
    pub async fn list(&self, p: &Principal, pairs: &[(String, String)]) -> Result<Page<Report>> {
        p.authorize(Op::AnomaliesRead)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, MAX_LIMIT);
        let status = q.one_of("status", &STATUSES).map(str::to_owned);
        let source = q.one_of("source", &SOURCES).map(str::to_owned);
        let agent: Option<Uuid> = q.parse("agent_id", "a UUID");
        q.finish()?;
        let tenant = Id(p.tenant.0);
        macro_rules! filtered {
            () => {{
                let mut query = ar::table.filter(ar::tenant_id.eq(tenant)).into_boxed();
                if let Some(s) = &status {
                    query = query.filter(ar::status.eq(s.clone()));
                }
                if let Some(s) = &source {
                    query = query.filter(ar::source.eq(s.clone()));
                }
                if let Some(a) = agent {
                    query = query.filter(ar::agent_id.eq(Id(a)));
                }
                query
            }};
        }
        let (total, rows): (i64, Vec<ReportRow>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (ar::created_at.desc(), ar::id.desc()),
            ReportRow::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.into_iter().map(ReportRow::view).collect(),
            total,
            page,
        ))
    }

    async fn load(&self, tenant: TenantId, id: Uuid) -> Result<Option<ReportRow>> {
        with_conn!(&self.db, conn => {
            ar::table
                .filter(ar::id.eq(Id(id)))
                .filter(ar::tenant_id.eq(Id(tenant.0)))
                .select(ReportRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })
    }

    /// `GET /anomalies/{id}`.
    pub async fn get(&self, p: &Principal, id: &str) -> Result<Report> {
        p.authorize(Op::AnomaliesRead)?;
        let id = parse_id(id)?;
        self.load(p.tenant, id)
            .await?
            .map(ReportRow::view)
            .ok_or_else(|| Error::not_found("the anomaly report was not found"))
    }

    /// Whether a report of the tenant exists (feedback's `report_id`).
    pub async fn exists(&self, tenant: TenantId, id: Uuid) -> Result<bool> {
        Ok(self.load(tenant, id).await?.is_some())
    }

    /// `PATCH /anomalies/{id}` `{status}`.
    pub async fn set_status(&self, p: &Principal, id: &str, body: &Body) -> Result<Report> {
        p.authorize(Op::AnomaliesRead)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let status = f.required_enum("status", &STATUSES).map(str::to_owned);
        f.finish()?;
        let id = parse_id(id)?;
        let Some(row) = self.load(p.tenant, id).await? else {
            return Err(Error::not_found("the anomaly report was not found"));
        };
        let status = status.unwrap_or_else(|| row.status.clone());
        if status == row.status {
            return Ok(row.view());
        }
        let now = Ts::from(clock::now());
        let s = status.clone();
        with_conn!(&self.db, conn => {
            diesel::update(ar::table.filter(ar::id.eq(Id(id))).filter(ar::tenant_id.eq(Id(p.tenant.0))))
                .set((ar::status.eq(s), ar::updated_at.eq(now)))
                .execute(conn)
                .await
                .db()
        })?;
        let mut view = row.view();
        view.status = status;
        view.updated_at = now.0;
        Ok(view)
    }

    /// `GET /anomalies/stats`.
    pub async fn stats(&self, p: &Principal) -> Result<Stats> {
        p.authorize(Op::AnomaliesRead)?;
        let tenant = Id(p.tenant.0);
        let since = Ts::from(clock::now() - time::Duration::DAY);
        let (groups, last_24h): (Vec<StatsGroup>, i64) = with_conn!(&self.db, conn => {
            let groups = ar::table
                .filter(ar::tenant_id.eq(tenant))
                .group_by((ar::status, ar::source))
                .select((
                    ar::status,
                    ar::source,
                    diesel::dsl::count_star(),
                    diesel::dsl::sum(ar::risk_score),
                ))
                .load::<(String, String, i64, Option<f64>)>(conn)
                .await
                .db()?;
            let recent: i64 = ar::table
                .filter(ar::tenant_id.eq(tenant))
                .filter(ar::created_at.ge(since))
                .count()
                .get_result(conn)
                .await
                .db()?;
            Ok::<_, Error>((groups, recent))
        })?;
        let mut by_status: Map<String, Value> = STATUSES
            .iter()
            .map(|s| ((*s).to_owned(), json!(0)))
            .collect();
        let mut by_source: Map<String, Value> = SOURCES
            .iter()
            .map(|s| ((*s).to_owned(), json!(0)))
            .collect();
        let mut total = 0i64;
        let mut sum = 0.0;
        for (status, source, n, s) in groups {
            total += n;
            sum += s.unwrap_or(0.0);
            let add = |m: &mut Map<String, Value>, k: String| {
                let cur = m.get(&k).and_then(Value::as_i64).unwrap_or(0);
                m.insert(k, json!(cur + n));
            };
            add(&mut by_status, status);
            add(&mut by_source, source);
        }
        Ok(Stats {
            total,
            by_status,
            by_source,
            average_risk_score: (total > 0).then(|| sum / total as f64),
            last_24h,
        })
    }

    /// `POST /anomalies/detector/feedback` `{event_data, label, source?, report_id?}` → 201.
    pub async fn feedback(&self, p: &Principal, body: &Body) -> Result<Feedback> {
        p.authorize(Op::AnomaliesRead)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let event_data = f.required_object("event_data").cloned();
        let label = match f.get("label") {
            None => {
                f.error("label", "is required");
                None
            }
            Some(v) => match v.as_i64() {
                Some(l @ (0 | 1)) if v.is_i64() || v.is_u64() => Some(l as i32),
                _ => {
                    f.error("label", "must be the integer 0 or 1");
                    None
                }
            },
        };
        let source = f
            .optional_str("source", 1, 64)
            .unwrap_or("manual")
            .to_owned();
        let report_id = f.optional_uuid("report_id");
        if let (Some(r), false) = (report_id, f.has_errors()) {
            if !self.exists(p.tenant, r).await? {
                f.error("report_id", "is not a report of the tenant");
            }
        }
        f.finish()?;
        let label = label.unwrap_or(0);
        let row = FeedbackRow {
            id: Id(Uuid::now_v7()),
            tenant_id: Id(p.tenant.0),
            event_data: Json(Value::Object(event_data.unwrap_or_default())),
            label,
            source,
            report_id: report_id.map(Id),
            created_at: Ts::from(clock::now()),
        };
        let r = &row;
        with_conn!(&self.db, conn => diesel::insert_into(af::table).values(r).execute(conn).await.db())?;
        if label == 0 {
            metrics::counter!("anomaly_false_positive_reports_total").increment(1);
        }
        self.hooks.feedback(p.tenant, label);
        Ok(Feedback {
            id: row.id.0,
            label,
            source: row.source,
            report_id,
            created_at: row.created_at.0,
        })
    }

    /// The tenant's number of reports (`total_anomalies` of `GET /stats`).
    pub async fn total(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            ar::table
                .filter(ar::tenant_id.eq(Id(tenant.0)))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    /// The number of reports naming an agent (`GET /agents/{id}/details`).
    pub async fn count_for_agent(&self, tenant: TenantId, agent: Uuid) -> Result<i64> {
        with_conn!(&self.db, conn => {
            ar::table
                .filter(ar::tenant_id.eq(Id(tenant.0)))
                .filter(ar::agent_id.eq(Id(agent)))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }

    /// The tenant's labelled samples (training).
    pub async fn labelled(&self, tenant: TenantId) -> Result<Vec<FeedbackRow>> {
        with_conn!(&self.db, conn => {
            af::table
                .filter(af::tenant_id.eq(Id(tenant.0)))
                .order(af::created_at.asc())
                .select(FeedbackRow::as_select())
                .load(conn)
                .await
                .db()
        })
    }

    /// The number of the tenant's labelled samples.
    pub async fn labelled_count(&self, tenant: TenantId) -> Result<i64> {
        with_conn!(&self.db, conn => {
            af::table
                .filter(af::tenant_id.eq(Id(tenant.0)))
                .count()
                .get_result(conn)
                .await
                .db()
        })
    }
}
