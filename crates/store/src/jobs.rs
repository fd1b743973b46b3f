//! The database job queue: background work claimed by exactly one instance with a lease.
//! A job whose lease expired (its instance died) is claimed again, up to `MAX_ATTEMPTS`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde_json::Value;
use steward_core::{clock, Error, Result, TenantId};

use crate::schedule::instance_id;
use crate::schema::{jobs, tenants};
use crate::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

/// Attempts before a job whose instances keep dying is marked failed.
pub const MAX_ATTEMPTS: i32 = 3;

/// Every status a job (and the task or export it carries) can have.
pub const STATUSES: [&str; 5] = ["queued", "running", "completed", "failed", "cancelled"];

/// The schema of a job status.
pub fn statuses() -> utoipa::openapi::Object {
    steward_core::schema::one_of(&STATUSES)
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = jobs)]
pub struct JobRow {
    pub id: Id,
    pub tenant_id: Id,
    pub kind: String,
    pub status: String,
    pub progress: f64,
    pub payload: Json,
    pub result: Option<Json>,
    pub error: Option<String>,
    pub attempts: i32,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Ts>,
    pub created_at: Ts,
    pub started_at: Option<Ts>,
    pub finished_at: Option<Ts>,
}

/// `JOB_LEASE_SECONDS` in milliseconds; 0 = unset (each worker keeps its own default).
static LEASE_OVERRIDE_MS: AtomicU64 = AtomicU64::new(0);

/// Sets the lease of every kind of claimed background work (`JOB_LEASE_SECONDS`: export and
/// clustering jobs, training tasks, the SIEM sender); `None` restores each worker's default.
/// The server sets it once at start-up, before its workers start.
pub fn set_lease_override(lease: Option<Duration>) {
    let ms = lease.map_or(0, |l| {
        u64::try_from(l.as_millis()).unwrap_or(u64::MAX).max(1)
    });
    LEASE_OVERRIDE_MS.store(ms, Ordering::Relaxed);
}

/// The lease a worker uses: the configured override, else `default`. An instance that dies
/// holding work delays it by at most this long (docs/adr/0011).
pub fn lease(default: Duration) -> Duration {
    // Fully qualified: `RunQueryDsl::load` is in scope too.
    match AtomicU64::load(&LEASE_OVERRIDE_MS, Ordering::Relaxed) {
        0 => default,
        ms => Duration::from_millis(ms),
    }
}

fn lease_until(lease: Duration) -> Ts {
    Ts(clock::now() + time::Duration::try_from(lease).unwrap_or(time::Duration::SECOND * 30))
}

/// A new queued job row.
fn queued_row(tenant: TenantId, kind: &str, payload: Value) -> JobRow {
    JobRow {
        id: Id(uuid::Uuid::now_v7()),
        tenant_id: Id(tenant.0),
        kind: kind.to_owned(),
        status: "queued".into(),
        progress: 0.0,
        payload: Json(payload),
        result: None,
        error: None,
        attempts: 0,
        lease_owner: None,
        lease_expires_at: None,
        created_at: Ts(clock::now()),
        started_at: None,
        finished_at: None,
    }
}

/// Queues a job.
pub async fn enqueue(db: &DbPool, tenant: TenantId, kind: &str, payload: Value) -> Result<JobRow> {
    let row = queued_row(tenant, kind, payload);
    with_conn!(db, conn => diesel::insert_into(jobs::table).values(&row).execute(conn).await.db())?;
    Ok(row)
}

/// What [`enqueue_unless`] did.
pub enum Enqueued {
    Queued(Box<JobRow>),
    /// Refused: the tenant's queued and running jobs of the kind, oldest first.
    Refused(Vec<JobRow>),
}

/// Queues a job unless `refuse` says no, given the tenant's queued and running jobs of the
/// kind, in one transaction that first locks the tenant's row: concurrent calls, on any
/// instance, see each other's jobs, so a bound on them holds.
pub async fn enqueue_unless(
    db: &DbPool,
    tenant: TenantId,
    kind: &str,
    payload: Value,
    refuse: fn(&[JobRow]) -> bool,
) -> Result<Enqueued> {
    let row = queued_row(tenant, kind, payload);
    let t = Id(tenant.0);
    let row = &row;
    with_conn!(db, conn => {
        conn.transaction::<_, diesel::result::Error, _>(|conn| {
            async move {
                // A no-op update: the row lock (PostgreSQL) or the write lock (SQLite).
                diesel::update(tenants::table.filter(tenants::id.eq(t)))
                    .set(tenants::name.eq(tenants::name))
                    .execute(conn)
                    .await?;
                let active: Vec<JobRow> = jobs::table
                    .filter(jobs::tenant_id.eq(t))
                    .filter(jobs::kind.eq(&row.kind))
                    .filter(jobs::status.eq_any(["queued", "running"]))
                    .order(jobs::created_at.asc())
                    .limit(100)
                    .select(JobRow::as_select())
                    .load(conn)
                    .await?;
                if refuse(&active) {
                    return Ok(Enqueued::Refused(active));
                }
                diesel::insert_into(jobs::table).values(row).execute(conn).await?;
                Ok(Enqueued::Queued(Box::new(row.clone())))
            }
            .scope_boxed()
        })
        .await
        .db()
    })
}

/// A tenant's job of a kind (`None` when absent or another tenant's).
pub async fn get(
    db: &DbPool,
    tenant: TenantId,
    kind: &str,
    id: uuid::Uuid,
) -> Result<Option<JobRow>> {
    with_conn!(db, conn => {
        jobs::table
            .filter(jobs::id.eq(Id(id)))
            .filter(jobs::tenant_id.eq(Id(tenant.0)))
            .filter(jobs::kind.eq(kind))
            .select(JobRow::as_select())
            .first(conn)
            .await
            .optional()
            .db()
    })
}

/// Claims the oldest runnable job of `kind` (queued, or running with an expired lease).
/// The claim is a conditional UPDATE: of several instances racing, one wins.
pub async fn claim(db: &DbPool, kind: &str, lease: Duration) -> Result<Option<JobRow>> {
    claim_kinds(
        db,
        &[kind.to_owned()],
        &instance_id(),
        lease,
        "the job was interrupted too many times",
    )
    .await
}

/// Claims the oldest runnable job of any of `kinds` for `owner`; a job whose instances died
/// `MAX_ATTEMPTS` times is failed with `exhausted` instead.
pub async fn claim_kinds(
    db: &DbPool,
    kinds: &[String],
    owner: &str,
    lease: Duration,
    exhausted: &str,
) -> Result<Option<JobRow>> {
    if kinds.is_empty() {
        return Ok(None);
    }
    for _ in 0..3 {
        let now = Ts(clock::now());
        let candidate: Option<JobRow> = with_conn!(db, conn => {
            jobs::table
                .filter(jobs::kind.eq_any(kinds))
                .filter(
                    jobs::status
                        .eq("queued")
                        .or(jobs::status.eq("running").and(jobs::lease_expires_at.lt(now))),
                )
                .order(jobs::created_at.asc())
                .select(JobRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some(job) = candidate else {
            return Ok(None);
        };
        if job.attempts >= MAX_ATTEMPTS {
            fail_exhausted(db, job.id, exhausted, now).await?;
            continue;
        }
        let id = job.id;
        let until = lease_until(lease);
        let won = with_conn!(db, conn => {
            diesel::update(
                jobs::table.filter(jobs::id.eq(id)).filter(
                    jobs::status
                        .eq("queued")
                        .or(jobs::status.eq("running").and(jobs::lease_expires_at.lt(now))),
                ),
            )
            .set((
                jobs::status.eq("running"),
                jobs::lease_owner.eq(Some(owner.to_owned())),
                jobs::lease_expires_at.eq(Some(until)),
                jobs::attempts.eq(job.attempts + 1),
                jobs::started_at.eq(Some(now)),
                jobs::progress.eq(0.0),
            ))
            .execute(conn)
            .await
            .db()
        })?;
        if won == 1 {
            let mut job = job;
            job.status = "running".into();
            job.attempts += 1;
            job.lease_owner = Some(owner.to_owned());
            return Ok(Some(job));
        }
    }
    Ok(None)
}

/// The job `$id` while this instance holds it: running, under `$owner`'s lease. Progress,
/// completion and failure all write through it, so a lapsed holder changes nothing.
macro_rules! held_by {
    ($id:expr, $owner:expr) => {
        jobs::table
            .filter(jobs::id.eq($id))
            .filter(jobs::status.eq("running"))
            .filter(jobs::lease_owner.eq($owner))
    };
}

/// Records progress and renews the lease (only while this instance owns the job).
pub async fn heartbeat(
    db: &DbPool,
    id: Id,
    progress: f64,
    result: Option<Value>,
    lease: Duration,
) -> Result<()> {
    let owner = instance_id();
    let until = lease_until(lease);
    let changed = with_conn!(db, conn => {
        diesel::update(
            held_by!(id, owner),
        )
        .set((
            jobs::progress.eq(progress.clamp(0.0, 1.0)),
            jobs::result.eq(result.map(Json)),
            jobs::lease_expires_at.eq(Some(until)),
        ))
        .execute(conn)
        .await
        .db()
    })?;
    if changed == 0 {
        return Err(Error::conflict("the job's lease was lost"));
    }
    Ok(())
}

/// The columns of a failed job (a tuple for `.set`).
macro_rules! failed_now {
    ($error:expr) => {
        (
            jobs::status.eq("failed"),
            jobs::error.eq(Some($error.to_owned())),
            jobs::finished_at.eq(Some(Ts(clock::now()))),
            jobs::lease_owner.eq(None::<String>),
            jobs::lease_expires_at.eq(None::<Ts>),
        )
    };
}

/// Marks a job completed with its result, if this instance still holds it (running, under
/// this instance's lease); otherwise `Err(conflict)` and nothing changes: an instance whose
/// lease lapsed (stalled, then taken over) never completes or fails another's attempt.
pub async fn complete(db: &DbPool, id: Id, result: Value) -> Result<()> {
    let now = Ts(clock::now());
    let owner = instance_id();
    let changed = with_conn!(db, conn => {
        diesel::update(
            held_by!(id, owner),
        )
        .set((
            jobs::status.eq("completed"),
            jobs::progress.eq(1.0),
            jobs::result.eq(Some(Json(result))),
            jobs::finished_at.eq(Some(now)),
            jobs::lease_owner.eq(None::<String>),
            jobs::lease_expires_at.eq(None::<Ts>),
        ))
        .execute(conn)
        .await
        .db()
    })?;
    if changed == 0 {
        return Err(Error::conflict("the job's lease was lost"));
    }
    Ok(())
}

/// Marks a job failed with `error`, if this instance still holds it (as [`complete`]).
pub async fn fail(db: &DbPool, id: Id, error: &str) -> Result<()> {
    let owner = instance_id();
    let changed = with_conn!(db, conn => {
        diesel::update(
            held_by!(id, owner),
        )
        .set(failed_now!(error))
        .execute(conn)
        .await
        .db()
    })?;
    if changed == 0 {
        return Err(Error::conflict("the job's lease was lost"));
    }
    Ok(())
}

/// Puts back in the queue every job this instance is running, at a graceful stop: another
/// instance claims it at once instead of after the lease, and the attempt a planned stop cut
/// short does not count towards `MAX_ATTEMPTS`. This instance's workers can no longer renew,
/// complete or fail those attempts (they hold no lease); returns how many were released.
pub async fn release_held(db: &DbPool) -> Result<usize> {
    let owner = instance_id();
    with_conn!(db, conn => {
        diesel::update(
            jobs::table
                .filter(jobs::status.eq("running"))
                .filter(jobs::lease_owner.eq(owner)),
        )
        .set((
            jobs::status.eq("queued"),
            jobs::lease_owner.eq(None::<String>),
            jobs::lease_expires_at.eq(None::<Ts>),
            jobs::attempts.eq(jobs::attempts - 1),
            jobs::started_at.eq(None::<Ts>),
            jobs::progress.eq(0.0),
        ))
        .execute(conn)
        .await
        .db()
    })
}

/// Fails a job whose instances died `MAX_ATTEMPTS` times (its lease expired; nobody holds it).
async fn fail_exhausted(db: &DbPool, id: Id, error: &str, now: Ts) -> Result<()> {
    with_conn!(db, conn => {
        diesel::update(
            jobs::table.filter(jobs::id.eq(id)).filter(
                jobs::status
                    .eq("queued")
                    .or(jobs::status.eq("running").and(jobs::lease_expires_at.lt(now))),
            ),
        )
        .set(failed_now!(error))
        .execute(conn)
        .await
        .db()
    })?;
    Ok(())
}

/// Deletes a tenant's completed jobs of `kind` beyond its newest `keep` (by completion);
/// answers the ids deleted, so that their files can go too.
pub async fn delete_completed_beyond(
    db: &DbPool,
    tenant: TenantId,
    kind: &str,
    keep: i64,
) -> Result<Vec<uuid::Uuid>> {
    let t = Id(tenant.0);
    let old: Vec<Id> = with_conn!(db, conn => {
        jobs::table
            .filter(jobs::tenant_id.eq(t))
            .filter(jobs::kind.eq(kind))
            .filter(jobs::status.eq("completed"))
            .order((jobs::finished_at.desc(), jobs::id.desc()))
            .offset(keep)
            .limit(1_000)
            .select(jobs::id)
            .load(conn)
            .await
            .db()
    })?;
    if old.is_empty() {
        return Ok(Vec::new());
    }
    with_conn!(db, conn => {
        diesel::delete(jobs::table.filter(jobs::id.eq_any(old.clone())))
            .execute(conn)
            .await
            .db()
    })?;
    Ok(old.into_iter().map(|i| i.0).collect())
}

/// The ids among `ids` that no job row has any more (their files can go).
pub async fn missing(db: &DbPool, ids: &[uuid::Uuid]) -> Result<Vec<uuid::Uuid>> {
    let wanted: Vec<Id> = ids.iter().map(|i| Id(*i)).collect();
    let present: Vec<Id> = with_conn!(db, conn => {
        jobs::table
            .filter(jobs::id.eq_any(wanted.clone()))
            .select(jobs::id)
            .load(conn)
            .await
            .db()
    })?;
    Ok(ids
        .iter()
        .filter(|i| !present.iter().any(|p| p.0 == **i))
        .copied()
        .collect())
}

/// Deletes the completed and failed jobs of `kind` finished before `cutoff`; returns how many.
pub async fn delete_finished_before(db: &DbPool, kind: &str, cutoff: Ts) -> Result<usize> {
    with_conn!(db, conn => {
        diesel::delete(
            jobs::table
                .filter(jobs::kind.eq(kind))
                .filter(jobs::status.eq_any(["completed", "failed"]))
                .filter(jobs::finished_at.lt(cutoff)),
        )
        .execute(conn)
        .await
        .db()
    })
}

/// Queued or running jobs of every kind (the `background_tasks_in_progress` gauge).
pub async fn count_active(db: &DbPool) -> Result<i64> {
    with_conn!(db, conn => {
        jobs::table
            .filter(jobs::status.eq_any(["queued", "running"]))
            .count()
            .get_result(conn)
            .await
            .db()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_override() {
        let default = Duration::from_secs(30);
        assert_eq!(lease(default), default);
        set_lease_override(Some(Duration::from_secs(4)));
        assert_eq!(lease(default), Duration::from_secs(4));
        set_lease_override(None);
        assert_eq!(lease(default), default);
    }
}
