//! Audit exports (contract 14.5): synchronous streams of at most 10,000 records and
//! asynchronous jobs writing a file under `EXPORT_STORAGE_PATH`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::stream::{self, Stream};
use serde_json::{json, Value};
use steward_core::clock::{self, format_timestamp};
use steward_core::validate::{Fields, Query};
use steward_core::{
    parse_path_id, AgentId, Body, Error, ErrorKind, JobId, Op, Principal, Result, TenantId,
};
use steward_store::jobs::{self, JobRow};
use steward_store::schema::{agents, audit_entries};
use steward_store::{with_conn, DbResultExt, Id, RawJson, Ts};
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt;

use crate::service::{AuditEntry, AuditService, EntryRow};

/// Most asynchronous exports a tenant may have queued or running at once.
pub const MAX_ACTIVE_EXPORTS: usize = 10;
/// Finished (completed) asynchronous exports a tenant keeps: when another completes, the
/// oldest beyond these go, job and file, before `EXPORT_RETENTION_HOURS` (the queue bound
/// alone let one caller fill the disk with a week of finished files).
pub const MAX_FINISHED_EXPORTS: i64 = 20;

/// Largest synchronous export.
pub const SYNC_LIMIT: i64 = 10_000;
/// Most records read per database round trip while exporting.
const BATCH: i64 = 1_000;

/// Most entries read per query by an export job.
const JOB_BATCH: i64 = 5_000;

/// Records of the first read of an export: later reads are sized from the bytes per record seen
/// so far ([`next_batch`]), so that a log of large entries (up to 1 MiB each) is not read a
/// thousand at a time.
const FIRST_BATCH: i64 = 100;
/// The bytes a synchronous export aims to hold per read (one chunk of the response).
const CHUNK_BYTES: usize = 8 << 20;
/// The bytes an export job aims to hold per read (two reads are in flight: one being read,
/// one being written).
const JOB_CHUNK_BYTES: usize = 16 << 20;

/// The size of the next read: as many records as fit `target` bytes at the size per record of
/// the last read (`bytes` for `count` records), between 1 and `max`.
fn next_batch(bytes: usize, count: usize, target: usize, max: i64) -> i64 {
    let per_record = (bytes / count.max(1)).max(1);
    i64::try_from(target / per_record)
        .unwrap_or(max)
        .clamp(1, max)
}

/// How often an export job reports progress (and renews its lease, `LEASE` long unless
/// `JOB_LEASE_SECONDS` says otherwise).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
const JOB_KIND: &str = "audit_export";
const LEASE: Duration = Duration::from_secs(30);
pub const FORMATS: [&str; 3] = ["jsonl", "json", "csv"];

fn formats() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&FORMATS)
}
const CSV_COLUMNS: &str =
    "id,seq,timestamp,agent_id,agent_name,user_id,action,resource,risk_score,is_approved,input,output,reasoning,prev_hash,hash,signature";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Json,
    Csv,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "jsonl" => Some(Format::Jsonl),
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }

    pub fn content_type(&self) -> &'static str {
        match self {
            Format::Jsonl => "application/x-ndjson",
            Format::Json => "application/json",
            Format::Csv => "text/csv; charset=utf-8",
        }
    }

    fn head(&self) -> Vec<u8> {
        match self {
            Format::Jsonl => Vec::new(),
            Format::Json => b"[".to_vec(),
            Format::Csv => format!("{CSV_COLUMNS}\n").into_bytes(),
        }
    }

    fn tail(&self) -> Vec<u8> {
        match self {
            Format::Json => b"]\n".to_vec(),
            _ => Vec::new(),
        }
    }

    /// Appends a record's encoding to `out` (no intermediate buffer).
    fn write_record(&self, e: &AuditEntry, first: bool, out: &mut Vec<u8>) {
        self.before_record(first, out);
        match self {
            Format::Jsonl | Format::Json => {
                let _ = serde_json::to_writer(&mut *out, e);
            }
            Format::Csv => out.extend_from_slice(csv_row(e).as_bytes()),
        }
        self.after_record(out);
    }

    /// What precedes a record: the comma between the records of a JSON array.
    fn before_record(&self, first: bool, out: &mut Vec<u8>) {
        if *self == Format::Json && !first {
            out.push(b',');
        }
    }

    /// What ends a record: the newline of JSON lines (a CSV row carries its own).
    fn after_record(&self, out: &mut Vec<u8>) {
        if *self == Format::Jsonl {
            out.push(b'\n');
        }
    }

    fn record(&self, e: &AuditEntry, first: bool) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_record(e, first, &mut out);
        out
    }
}

/// A free-text cell that a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, tab or
/// carriage return first: CSV injection, CWE-1236) gets a leading `'`, which spreadsheets show
/// as text. The JSON exports carry the exact values.
fn csv_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{s}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv_row(e: &AuditEntry) -> String {
    let opt = |o: &Option<String>| o.clone().unwrap_or_default();
    let fields = [
        e.id.clone(),
        e.seq.to_string(),
        e.timestamp.clone(),
        opt(&e.agent_id),
        csv_text(&opt(&e.agent_name)).into_owned(),
        opt(&e.user_id),
        csv_text(&e.action).into_owned(),
        csv_text(&e.resource).into_owned(),
        serde_json::to_string(&e.risk_score).unwrap_or_default(),
        e.is_approved.to_string(),
        e.input.to_string(),
        e.output.to_string(),
        e.reasoning.to_string(),
        e.prev_hash.clone(),
        e.hash.clone(),
        opt(&e.signature),
    ];
    let mut line = fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}

/// The file name of an export: `audit-<tenant>-<yyyymmddThhmmssZ>.<ext>`.
pub fn file_name(tenant: TenantId, at: OffsetDateTime, format: Format) -> String {
    format!(
        "audit-{tenant}-{:04}{:02}{:02}T{:02}{:02}{:02}Z.{}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        format.as_str()
    )
}

/// The filters of `GET /audit`, shared by exports.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub agent: Option<AgentId>,
    pub action: Option<String>,
    pub resource: Option<String>,
}

impl Filters {
    fn read(q: &mut Query<'_>) -> Filters {
        Filters {
            agent: q.parse("agent_id", "a UUID"),
            action: q.string("action").map(str::to_owned),
            resource: q.string("resource").map(str::to_owned),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "agent_id": self.agent.map(|a| a.to_string()),
            "action": self.action,
            "resource": self.resource,
        })
    }

    fn from_json(v: &Value) -> Filters {
        Filters {
            agent: v["agent_id"].as_str().and_then(|s| s.parse().ok()),
            action: v["action"].as_str().map(str::to_owned),
            resource: v["resource"].as_str().map(str::to_owned),
        }
    }
}

/// A synchronous export ready to stream.
pub struct SyncExport {
    pub format: Format,
    pub file_name: String,
    pub body: std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>>>>>,
}

/// An asynchronous export job as the API shows it.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ExportJob {
    pub job_id: String,
    #[schema(schema_with = steward_store::jobs::statuses)]
    pub status: String,
    pub progress: f64,
    pub records: i64,
    #[schema(schema_with = formats)]
    pub format: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub finished_at: Option<String>,
    pub error: Option<String>,
    pub download_url: Option<String>,
}

impl ExportJob {
    fn from_row(j: &JobRow) -> ExportJob {
        let records = j
            .result
            .as_ref()
            .and_then(|r| r.0["records"].as_i64())
            .unwrap_or(0);
        let id = j.id.0.hyphenated().to_string();
        ExportJob {
            download_url: (j.status == "completed")
                .then(|| format!("/api/v1/audit/export/download/{id}")),
            job_id: id,
            status: j.status.clone(),
            progress: j.progress,
            records,
            format: j.payload.0["format"].as_str().unwrap_or("jsonl").to_owned(),
            created_at: format_timestamp(j.created_at.0),
            finished_at: j.finished_at.map(|t| format_timestamp(t.0)),
            error: j.error.clone(),
        }
    }
}

/// A completed export file ready to stream.
pub struct ExportFile {
    pub format: Format,
    pub file_name: String,
    pub path: PathBuf,
}

struct Cursor {
    service: AuditService,
    tenant: TenantId,
    filters: Filters,
    before: Option<i64>,
    remaining: Option<i64>,
    format: Format,
    first: bool,
    state: u8, // 0 = head, 1 = records, 2 = tail, 3 = done
    /// Records of the next read ([`next_batch`]).
    batch: i64,
}

/// An entry with its JSON columns as stored text.
#[derive(Queryable, Selectable)]
#[diesel(table_name = audit_entries)]
pub(crate) struct RawEntry {
    id: Id,
    seq: i64,
    tenant_id: Id,
    agent_id: Option<Id>,
    user_id: Option<Id>,
    action: String,
    resource: String,
    input: RawJson,
    output: RawJson,
    reasoning: RawJson,
    risk_score: f64,
    is_approved: bool,
    timestamp: Ts,
    prev_hash: String,
    hash: String,
    signature: Option<String>,
}

impl RawEntry {
    /// Appends the entry as the JSON object of contract 14.1 (the fields in `AuditEntry`'s
    /// order), its JSON columns spliced in as stored.
    fn write_json(&self, agent_name: Option<&str>, out: &mut Vec<u8>) {
        fn key(out: &mut Vec<u8>, name: &str) {
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
        }
        fn field<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, name: &str, value: &T) {
            key(out, name);
            let _ = serde_json::to_writer(&mut *out, value);
            out.push(b',');
        }
        fn raw(out: &mut Vec<u8>, name: &str, value: &RawJson) {
            key(out, name);
            out.extend_from_slice(value.0.as_bytes());
            out.push(b',');
        }
        let uuid = |id: &Id| id.0.hyphenated().to_string();
        out.push(b'{');
        field(out, "id", &uuid(&self.id));
        field(out, "seq", &self.seq);
        field(out, "tenant_id", &uuid(&self.tenant_id));
        field(out, "agent_id", &self.agent_id.as_ref().map(uuid));
        field(out, "agent_name", &agent_name);
        field(out, "user_id", &self.user_id.as_ref().map(uuid));
        field(out, "action", &self.action);
        field(out, "resource", &self.resource);
        raw(out, "input", &self.input);
        raw(out, "output", &self.output);
        raw(out, "reasoning", &self.reasoning);
        field(out, "risk_score", &self.risk_score);
        field(out, "is_approved", &self.is_approved);
        field(out, "timestamp", &format_timestamp(self.timestamp.0));
        field(out, "prev_hash", &self.prev_hash);
        field(out, "hash", &self.hash);
        field(out, "signature", &self.signature);
        if out.last() == Some(&b',') {
            out.pop();
        }
        out.push(b'}');
    }
}

/// A batch of an export job.
enum JobBatch {
    Parsed(Vec<AuditEntry>),
    Raw(Vec<(RawEntry, Option<String>)>),
}

impl JobBatch {
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> usize {
        match self {
            JobBatch::Parsed(v) => v.len(),
            JobBatch::Raw(v) => v.len(),
        }
    }

    fn last_seq(&self) -> Option<i64> {
        match self {
            JobBatch::Parsed(v) => v.last().map(|e| e.seq),
            JobBatch::Raw(v) => v.last().map(|(e, _)| e.seq),
        }
    }

    /// Appends the batch's records to `out`; returns how many.
    fn encode(&self, format: Format, first: bool, out: &mut Vec<u8>) -> i64 {
        let mut first = first;
        match self {
            JobBatch::Parsed(v) => {
                for e in v {
                    format.write_record(e, first, out);
                    first = false;
                }
            }
            JobBatch::Raw(v) => {
                for (e, name) in v {
                    format.before_record(first, out);
                    e.write_json(name.as_deref(), out);
                    format.after_record(out);
                    first = false;
                }
            }
        }
        self.len() as i64
    }
}

/// Matching rows with the agent's name, newest first, `seq` below `before`, selected as
/// `$select` (a macro: each backend and each selection gets its own query type).
macro_rules! matching_rows {
    ($svc:expr, $tenant:expr, $f:expr, $before:expr, $limit:expr, $select:expr) => {{
        let tenant = Id($tenant.0);
        let (f, before, limit) = ($f, $before, $limit);
        with_conn!($svc.db(), conn => {
            let mut q = audit_entries::table
                .left_join(agents::table.on(agents::id.nullable().eq(audit_entries::agent_id)))
                .filter(audit_entries::tenant_id.eq(tenant))
                .into_boxed();
            if let Some(a) = f.agent {
                q = q.filter(audit_entries::agent_id.eq(Id(a.0)));
            }
            if let Some(a) = &f.action {
                q = q.filter(audit_entries::action.eq(a.clone()));
            }
            if let Some(r) = &f.resource {
                q = q.filter(audit_entries::resource.eq(r.clone()));
            }
            if let Some(b) = before {
                q = q.filter(audit_entries::seq.lt(b));
            }
            q.order(audit_entries::seq.desc())
                .limit(limit)
                .select(($select, agents::name.nullable()))
                .load(conn)
                .await
                .db()
        })
    }};
}

impl AuditService {
    /// One batch of matching entries, newest first, with `seq` below `before`.
    async fn batch(
        &self,
        tenant: TenantId,
        f: &Filters,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(EntryRow, Option<String>)> =
            matching_rows!(self, tenant, f, before, limit, EntryRow::as_select())?;
        Ok(rows.into_iter().map(|(r, n)| r.named(n)).collect())
    }

    /// An export job's batch: JSON formats read the JSON columns as stored text.
    async fn job_batch(
        &self,
        format: Format,
        tenant: TenantId,
        f: &Filters,
        before: Option<i64>,
        limit: i64,
    ) -> Result<JobBatch> {
        Ok(match format {
            Format::Jsonl | Format::Json => {
                JobBatch::Raw(self.raw_batch(tenant, f, before, limit).await?)
            }
            Format::Csv => JobBatch::Parsed(self.batch(tenant, f, before, limit).await?),
        })
    }

    /// The same batch with `input`, `output` and `reasoning` as stored text (JSON exports
    /// splice them into their output without parsing them).
    async fn raw_batch(
        &self,
        tenant: TenantId,
        f: &Filters,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<(RawEntry, Option<String>)>> {
        matching_rows!(self, tenant, f, before, limit, RawEntry::as_select())
    }

    async fn count_matching(&self, tenant: TenantId, f: &Filters) -> Result<i64> {
        let tenant = Id(tenant.0);
        with_conn!(self.db(), conn => {
            let mut q = audit_entries::table.filter(audit_entries::tenant_id.eq(tenant)).into_boxed();
            if let Some(a) = f.agent {
                q = q.filter(audit_entries::agent_id.eq(Id(a.0)));
            }
            if let Some(a) = &f.action {
                q = q.filter(audit_entries::action.eq(a.clone()));
            }
            if let Some(r) = &f.resource {
                q = q.filter(audit_entries::resource.eq(r.clone()));
            }
            q.count().get_result(conn).await.db()
        })
    }

    /// The records of an export as a stream of encoded chunks (constant memory).
    fn stream(
        &self,
        tenant: TenantId,
        filters: Filters,
        limit: Option<i64>,
        format: Format,
    ) -> impl Stream<Item = Result<Vec<u8>>> {
        let cursor = Cursor {
            service: self.clone(),
            tenant,
            filters,
            before: None,
            remaining: limit,
            format,
            first: true,
            state: 0,
            batch: FIRST_BATCH,
        };
        stream::unfold(cursor, |mut c| async move {
            loop {
                match c.state {
                    0 => {
                        c.state = 1;
                        let head = c.format.head();
                        if !head.is_empty() {
                            return Some((Ok(head), c));
                        }
                    }
                    1 => {
                        let want = c.remaining.map_or(c.batch, |r| r.min(c.batch));
                        if want <= 0 {
                            c.state = 2;
                            continue;
                        }
                        match c.service.batch(c.tenant, &c.filters, c.before, want).await {
                            Err(e) => {
                                // The status line (200) is sent already: the body is cut short,
                                // which the client sees as an incomplete transfer; say it here.
                                tracing::warn!(tenant = %c.tenant.0, error = %e,
                                    "audit export stopped part-way; the response was cut short");
                                c.state = 3;
                                return Some((Err(e), c));
                            }
                            Ok(entries) if entries.is_empty() => c.state = 2,
                            Ok(entries) => {
                                let mut chunk = Vec::new();
                                for e in &entries {
                                    chunk.extend(c.format.record(e, c.first));
                                    c.first = false;
                                }
                                c.before = entries.last().map(|e| e.seq);
                                c.batch =
                                    next_batch(chunk.len(), entries.len(), CHUNK_BYTES, BATCH);
                                if let Some(r) = c.remaining.as_mut() {
                                    *r -= entries.len() as i64;
                                }
                                if (entries.len() as i64) < want {
                                    c.state = 2;
                                }
                                return Some((Ok(chunk), c));
                            }
                        }
                    }
                    2 => {
                        c.state = 3;
                        let tail = c.format.tail();
                        if !tail.is_empty() {
                            return Some((Ok(tail), c));
                        }
                    }
                    _ => return None,
                }
            }
        })
    }

    /// `GET /audit/export[/json|/csv]`: `fixed` is the format of the path, if any.
    pub async fn export(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
        fixed: Option<Format>,
    ) -> Result<SyncExport> {
        p.authorize(Op::AuditExport)?;
        let mut q = Query::new(pairs);
        let format = match fixed {
            Some(f) => f,
            None => q
                .one_of("format", &FORMATS)
                .and_then(Format::parse)
                .unwrap_or(Format::Jsonl),
        };
        let limit = q.int("limit", 1, None);
        let filters = Filters::read(&mut q);
        q.finish()?;
        let too_large = || {
            Error::unprocessable(
                ErrorKind::ExportTooLarge,
                "limit",
                format!(
                    "a synchronous export holds at most {SYNC_LIMIT} records; use POST /api/v1/audit/export/async for more"
                ),
            )
        };
        let limit = match limit {
            Some(l) if l > SYNC_LIMIT => return Err(too_large()),
            Some(l) => l,
            None => {
                if self.count_matching(p.tenant, &filters).await? > SYNC_LIMIT {
                    return Err(too_large());
                }
                SYNC_LIMIT
            }
        };
        Ok(SyncExport {
            format,
            file_name: file_name(p.tenant, clock::now(), format),
            body: Box::pin(self.stream(p.tenant, filters, Some(limit), format)),
        })
    }

    /// `POST /audit/export/async`: body `{format?, limit?}`, `limit` also as a query parameter.
    pub async fn start_export(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
        body: &Body,
    ) -> Result<ExportJob> {
        p.authorize(Op::AuditExport)?;
        let value = body.parse_or_empty::<Value>()?;
        let mut f = Fields::root(&value);
        let format = f
            .optional_enum("format", &FORMATS)
            .and_then(Format::parse)
            .unwrap_or(Format::Jsonl);
        let body_limit = f.optional_i64("limit", 1, i64::MAX);
        let mut q = Query::new(pairs);
        let query_limit = q.int("limit", 1, None);
        let filters = Filters::read(&mut q);
        if let Err(e) = q.finish() {
            for fe in e.errors {
                f.error(&fe.field, fe.message);
            }
        }
        f.finish()?;
        let payload = json!({
            "format": format.as_str(),
            "limit": body_limit.or(query_limit),
            "filters": filters.to_json(),
        });
        // A tenant has at most `MAX_ACTIVE_EXPORTS` jobs queued or running: each one writes
        // the tenant's retained log to disk, and every tenant's exports wait in one queue.
        let job = match jobs::enqueue_unless(self.db(), p.tenant, JOB_KIND, payload, |active| {
            active.len() >= MAX_ACTIVE_EXPORTS
        })
        .await?
        {
            jobs::Enqueued::Queued(job) => job,
            jobs::Enqueued::Refused(active) => {
                return Err(Error::conflict(format!(
                    "{} export jobs of this tenant are queued or running (at most {MAX_ACTIVE_EXPORTS}); wait for one to finish",
                    active.len()
                )))
            }
        };
        Ok(ExportJob::from_row(&job))
    }

    async fn job(&self, p: &Principal, id: &str) -> Result<JobRow> {
        p.authorize(Op::AuditExport)?;
        let id: JobId = parse_path_id(id, "export job")?;
        jobs::get(self.db(), p.tenant, JOB_KIND, id.0)
            .await?
            .ok_or_else(|| Error::not_found(format!("export job {id} was not found")))
    }

    /// `GET /audit/export/status/{job_id}`.
    pub async fn export_status(&self, p: &Principal, id: &str) -> Result<ExportJob> {
        Ok(ExportJob::from_row(&self.job(p, id).await?))
    }

    /// `GET /audit/export/download/{job_id}`: 409 until the job completed.
    pub async fn export_file(&self, p: &Principal, id: &str, dir: &Path) -> Result<ExportFile> {
        let job = self.job(p, id).await?;
        let view = ExportJob::from_row(&job);
        if job.status != "completed" {
            return Err(Error::conflict(format!(
                "export job {} is {}, not completed",
                view.job_id, job.status
            )));
        }
        let format = Format::parse(&view.format).unwrap_or(Format::Jsonl);
        let finished = job.finished_at.map(|t| t.0).unwrap_or(job.created_at.0);
        Ok(ExportFile {
            format,
            file_name: file_name(p.tenant, finished, format),
            path: dir.join(format!("{}.{}", view.job_id, format.as_str())),
        })
    }

    /// Runs one claimed export job: writes `<id>.<ext>.partial`, then renames it, so that a
    /// half-written file is never served. Returns the record count.
    async fn run_export(&self, job: &JobRow, dir: &Path) -> Result<i64> {
        let tenant: TenantId = job.tenant_id.into_id();
        let payload = &job.payload.0;
        let format = payload["format"]
            .as_str()
            .and_then(Format::parse)
            .unwrap_or(Format::Jsonl);
        let limit = payload["limit"].as_i64();
        let filters = Filters::from_json(&payload["filters"]);
        let total = self.count_matching(tenant, &filters).await?;
        let total = limit.map_or(total, |l| l.min(total)).max(1);
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| Error::internal_msg(format!("cannot create {}: {e}", dir.display())))?;
        let id = job.id.0.hyphenated().to_string();
        let final_path = dir.join(format!("{id}.{}", format.as_str()));
        // One partial file per attempt: an instance that lost its lease (stalled, then taken
        // over) never writes into the file of the attempt that replaced it, so whichever
        // rename lands last puts one complete file in place.
        let partial = dir.join(format!(
            "{id}.{}.{}-{}.partial",
            format.as_str(),
            job.attempts,
            uuid::Uuid::new_v4().simple()
        ));
        let io = |e: std::io::Error| {
            Error::internal_msg(format!("export file {}: {e}", partial.display()))
        };
        // Large writes: each write to a tokio file is a hop to the blocking pool.
        let mut file = tokio::io::BufWriter::with_capacity(
            1 << 20,
            tokio::fs::File::create(&partial).await.map_err(io)?,
        );
        file.write_all(&format.head()).await.map_err(io)?;
        let mut written = 0i64;
        let mut remaining = limit;
        let mut chunk = Vec::with_capacity(1 << 20);
        // Progress (and the lease) is renewed at most once a second, not per batch: each
        // renewal is a commit.
        let mut reported = std::time::Instant::now();
        let mut size = FIRST_BATCH;
        let first = remaining.map_or(size, |r| r.min(size));
        let mut entries = if first > 0 {
            self.job_batch(format, tenant, &filters, None, first)
                .await?
        } else {
            JobBatch::Parsed(Vec::new())
        };
        let mut want = first;
        // Pipelined: the next batch is read while this one is encoded and written.
        while !entries.is_empty() {
            if let Some(r) = remaining.as_mut() {
                *r -= entries.len() as i64;
            }
            let full = entries.len() as i64 == want;
            let count = entries.len();
            let before = entries.last_seq();
            let next_want = remaining.map_or(size, |r| r.min(size));
            let next = async {
                if full && next_want > 0 {
                    self.job_batch(format, tenant, &filters, before, next_want)
                        .await
                } else {
                    Ok(JobBatch::Parsed(Vec::new()))
                }
            };
            let write = async {
                chunk.clear();
                written += entries.encode(format, written == 0, &mut chunk);
                file.write_all(&chunk).await.map_err(io)
            };
            let (next, wrote) = tokio::join!(next, write);
            wrote?;
            // Sized from this batch's bytes; the read already under way keeps its size.
            size = next_batch(chunk.len(), count, JOB_CHUNK_BYTES, JOB_BATCH);
            entries = next?;
            want = next_want;
            if reported.elapsed() >= PROGRESS_EVERY {
                reported = std::time::Instant::now();
                jobs::heartbeat(
                    self.db(),
                    job.id,
                    (written as f64 / total as f64).min(0.99),
                    Some(json!({"records": written})),
                    jobs::lease(LEASE),
                )
                .await?;
            }
        }
        file.write_all(&format.tail()).await.map_err(io)?;
        file.flush().await.map_err(io)?;
        let file = file.into_inner();
        file.sync_all().await.map_err(io)?;
        drop(file);
        tokio::fs::rename(&partial, &final_path).await.map_err(io)?;
        remove_abandoned(dir, &id).await;
        Ok(written)
    }

    /// The export worker: claims queued (or abandoned) export jobs and runs them.
    pub async fn run_export_worker(self, dir: PathBuf) {
        loop {
            match jobs::claim(self.db(), JOB_KIND, jobs::lease(LEASE)).await {
                Ok(Some(job)) => {
                    let outcome = self.run_export(&job, &dir).await;
                    let result = match outcome {
                        Ok(records) => {
                            let done =
                                jobs::complete(self.db(), job.id, json!({"records": records}))
                                    .await;
                            if done.is_ok() {
                                self.prune_finished(job.tenant_id.into_id(), &dir).await;
                            }
                            done
                        }
                        Err(e) if e.kind == ErrorKind::Conflict => {
                            // The lease was lost: another instance owns the job now.
                            tracing::info!(job = %job.id.0, "audit export taken over by another instance");
                            Ok(())
                        }
                        Err(e) => {
                            tracing::warn!(job = %job.id.0, error = %e, "audit export failed");
                            jobs::fail(self.db(), job.id, "the export could not be written").await
                        }
                    };
                    if let Err(e) = result {
                        tracing::warn!(job = %job.id.0, error = %e, "export job state not saved");
                    }
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(250)).await,
                Err(e) => {
                    tracing::debug!(error = %e, "export job claim failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            if let Ok(n) = jobs::count_active(self.db()).await {
                metrics::gauge!("background_tasks_in_progress").set(n as f64);
            }
        }
    }
}

impl AuditService {
    /// Deletes the tenant's completed exports beyond its newest `MAX_FINISHED_EXPORTS`: their
    /// jobs (status and download then answer 404) and their files in `dir`; files another
    /// instance wrote go at its next hourly pass (`remove_files_without_jobs`). Best effort.
    async fn prune_finished(&self, tenant: TenantId, dir: &Path) {
        match jobs::delete_completed_beyond(self.db(), tenant, JOB_KIND, MAX_FINISHED_EXPORTS).await
        {
            Ok(ids) => {
                for id in &ids {
                    remove_export_files(dir, *id).await;
                }
                if !ids.is_empty() {
                    tracing::info!(%tenant, jobs = ids.len(), "older finished exports removed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "older finished exports not removed"),
        }
    }

    /// Removes the export files of `dir` whose job no longer exists (removed by the bound on
    /// finished exports or by retention on another instance); answers how many.
    async fn remove_files_without_jobs(&self, dir: &Path) -> usize {
        let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
            return 0;
        };
        let mut ids = Vec::new();
        while let Ok(Some(entry)) = entries.next_entry().await {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_export_file(&name) {
                if let Some(id) = name
                    .split_once('.')
                    .and_then(|(id, _)| uuid::Uuid::parse_str(id).ok())
                {
                    ids.push(id);
                }
            }
        }
        let mut removed = 0;
        for chunk in ids.chunks(500) {
            match jobs::missing(self.db(), chunk).await {
                Ok(gone) => {
                    for id in gone {
                        remove_export_files(dir, id).await;
                        removed += 1;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "export files without jobs not checked");
                    break;
                }
            }
        }
        removed
    }

    /// Deletes finished asynchronous exports older than `hours`, every hour: each instance
    /// removes the files of its `dir` last written before the cut-off (the directory may be
    /// its own), and one instance (claimed through the database) deletes the jobs finished
    /// before it, whose status and download then answer 404. Export files hold audit entries:
    /// they do not outlive their use, and they cannot fill the disk that the database shares.
    pub async fn run_export_retention(self, dir: PathBuf, hours: u64) {
        let mut tick = tokio::time::interval(Duration::from_secs(3_600));
        loop {
            tick.tick().await;
            let keep = Duration::from_secs(hours.saturating_mul(3_600));
            let removed = remove_files_older_than(&dir, keep).await
                + self.remove_files_without_jobs(&dir).await;
            if removed > 0 {
                tracing::info!(files = removed, hours, "audit export files removed");
            }
            let hour = Duration::from_secs(3_600);
            match steward_store::schedule::claim_tick(self.db(), "audit.export_retention", hour)
                .await
            {
                Ok(true) => {
                    let cutoff = clock::now() - time::Duration::hours(hours as i64);
                    match jobs::delete_finished_before(self.db(), JOB_KIND, Ts(cutoff)).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(jobs = n, hours, "audit export jobs removed"),
                        Err(e) => tracing::warn!(error = %e, "audit export jobs not removed"),
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "audit export retention not claimed"),
            }
        }
    }
}

/// Whether `name` is a finished export file, `<job uuid>.<format>` (nothing else in the
/// directory is ever removed, should it be shared).
fn is_export_file(name: &str) -> bool {
    name.split_once('.')
        .is_some_and(|(id, ext)| uuid::Uuid::parse_str(id).is_ok() && Format::parse(ext).is_some())
}

/// Removes the finished export files (not the partial ones of running attempts) of `dir` last
/// modified more than `keep` ago; returns how many (best effort).
async fn remove_files_older_than(dir: &Path, keep: Duration) -> usize {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return 0;
    };
    let mut removed = 0;
    while let Ok(Some(entry)) = entries.next_entry().await {
        if !is_export_file(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let old = match entry.metadata().await.and_then(|m| m.modified()) {
            Ok(at) => at.elapsed().is_ok_and(|age| age > keep),
            Err(_) => false,
        };
        if old && tokio::fs::remove_file(entry.path()).await.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes the finished file of job `id` from `dir`, in whichever format (best effort).
async fn remove_export_files(dir: &Path, id: uuid::Uuid) {
    let id = id.hyphenated().to_string();
    for ext in FORMATS {
        let _ = tokio::fs::remove_file(dir.join(format!("{id}.{ext}"))).await;
    }
}

/// Removes the partial files that attempts of job `id` killed mid-write left in `dir`
/// (best effort).
async fn remove_abandoned(dir: &Path, id: &str) {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    let prefix = format!("{id}.");
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".partial") {
            let _ = tokio::fs::remove_file(entry.path()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_sized_by_the_bytes_per_record() {
        // Ordinary entries (~500 bytes): the most a read takes.
        assert_eq!(next_batch(50_000, 100, CHUNK_BYTES, BATCH), BATCH);
        // Entries of 1 MiB: eight per read of 8 MiB, not a thousand.
        assert_eq!(next_batch(100 << 20, 100, CHUNK_BYTES, BATCH), 8);
        // Larger than the target: one at a time; nothing read yet: the most.
        assert_eq!(next_batch(40 << 20, 2, CHUNK_BYTES, BATCH), 1);
        assert_eq!(next_batch(0, 0, CHUNK_BYTES, BATCH), BATCH);
    }
    use time::macros::datetime;

    #[test]
    fn only_export_files_are_swept() {
        assert!(is_export_file("0199a1b2-0000-7000-8000-000000000001.jsonl"));
        assert!(is_export_file("0199a1b2-0000-7000-8000-000000000001.csv"));
        for other in [
            "0199a1b2-0000-7000-8000-000000000001.jsonl.p1-2.partial",
            "0199a1b2-0000-7000-8000-000000000001.xlsx",
            "notes.txt",
            "steward.db",
            ".jsonl",
        ] {
            assert!(!is_export_file(other), "{other}");
        }
    }

    #[tokio::test]
    async fn old_export_files_are_removed_and_others_kept() {
        let dir = std::env::temp_dir().join(format!("steward-sweep-{}", uuid::Uuid::new_v4()));
        tokio::fs::create_dir_all(&dir).await.unwrap();
        let export = dir.join("0199a1b2-0000-7000-8000-000000000001.json");
        let other = dir.join("keep-me.json");
        tokio::fs::write(&export, b"[]").await.unwrap();
        tokio::fs::write(&other, b"[]").await.unwrap();
        assert_eq!(
            remove_files_older_than(&dir, Duration::from_secs(3_600)).await,
            0
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            remove_files_older_than(&dir, Duration::from_millis(1)).await,
            1
        );
        assert!(!export.exists() && other.exists());
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }

    #[test]
    fn csv_cells_never_start_a_formula() {
        for cell in [
            "=HYPERLINK(\"http://x\")",
            "+1",
            "-2+3",
            "@SUM(A1)",
            "\tx",
            "\rx",
        ] {
            assert_eq!(csv_text(cell), format!("'{cell}"));
        }
        for cell in ["read_data", "db/users", "", "a=b", "x-y"] {
            assert_eq!(csv_text(cell), cell);
        }
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("l1\nl2"), "\"l1\nl2\"");
    }

    #[test]
    fn names() {
        let t = TenantId(uuid::Uuid::nil());
        let n = file_name(t, datetime!(2026-03-01 12:30:05 UTC), Format::Csv);
        assert_eq!(
            n,
            "audit-00000000-0000-0000-0000-000000000000-20260301T123005Z.csv"
        );
    }
}
