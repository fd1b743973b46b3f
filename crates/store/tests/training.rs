//! The shared training-task mechanism and model store, on SQLite and (with
//! `TEST_DATABASE_URL`) PostgreSQL: one claimer, cancel within a second, rollback,
//! takeover of a killed instance's task, and no half-written model ever active.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::json;
use steward_core::{EventBus, MemoryBus, Result, TenantId};
use steward_store::schema::{jobs, tenants};
use steward_store::training::{self, Outcome, Runner, TrainCtx, TrainedModel, Trainer};
use steward_store::{db_test, with_conn, DbPool, DbResultExt, Id, Json, Ts};

async fn tenant(db: &DbPool) -> TenantId {
    let id = uuid::Uuid::now_v7();
    let r: Result<usize> = async {
        with_conn!(db, conn => diesel::insert_into(tenants::table)
            .values((
                tenants::id.eq(Id(id)),
                tenants::name.eq(format!("t-{id}")),
                tenants::settings.eq(Json(json!({}))),
                tenants::created_at.eq(Ts::from(steward_core::clock::now())),
            ))
            .execute(conn)
            .await
            .db())
    }
    .await;
    r.unwrap();
    TenantId(id)
}

/// Trains for `steps` × 50 ms, reporting progress each step; the bytes name the tenant.
struct Slow {
    steps: usize,
    started: Arc<AtomicUsize>,
}

#[async_trait]
impl Trainer for Slow {
    async fn train(&self, ctx: TrainCtx) -> Result<TrainedModel> {
        self.started.fetch_add(1, Ordering::SeqCst);
        for i in 0..self.steps {
            ctx.handle.progress(i as f64 / self.steps as f64)?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(TrainedModel {
            bytes: format!("model of {}", ctx.tenant.0).into_bytes(),
            feature_version: "f1".into(),
            library_version: "l1".into(),
            metrics: json!({"precision": 1.0}),
            sample_count: 10,
        })
    }
}

fn runner(
    db: &DbPool,
    bus: Arc<dyn EventBus>,
    owner: &str,
    steps: usize,
) -> (Runner, Arc<AtomicUsize>) {
    let started = Arc::new(AtomicUsize::new(0));
    let r = Runner::new(db.clone(), bus)
        .with_owner(owner)
        .with_lease(Duration::from_secs(2))
        .register(
            "test",
            Arc::new(Slow {
                steps,
                started: started.clone(),
            }),
        );
    (r, started)
}

db_test!(completes_activates_and_notifies, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let mut rx = bus.subscribe(training::MODEL_CHANGES).await.unwrap();
    let t = tenant(&db.pool).await;
    let task = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    assert_eq!(task.status, "queued");
    assert_eq!(task.kind, "test");
    // A second task for the same (tenant, detector) is a conflict.
    let again = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap_err();
    assert_eq!(again.status(), 409);
    let (r, _) = runner(&db.pool, bus.clone(), "a", 2);
    let out = r.run_once().await.unwrap();
    assert_eq!(
        out,
        Outcome::Completed {
            task_id: task.task_id,
            version: 1
        }
    );
    let done = training::task(&db.pool, t, "test", task.task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, "completed");
    assert_eq!(done.progress, 1.0);
    assert_eq!(done.model_version, Some(1));
    let active = training::active(&db.pool, t, "test")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(active.info.version, 1);
    assert_eq!(active.info.feature_version, "f1");
    assert_eq!(active.bytes, format!("model of {}", t.0).into_bytes());
    let notice: training::ModelChange = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(
        notice,
        training::ModelChange {
            tenant_id: t.0,
            detector: "test".into(),
            version: 1
        }
    );
    // Another tenant sees nothing.
    let other = tenant(&db.pool).await;
    assert!(training::active(&db.pool, other, "test")
        .await
        .unwrap()
        .is_none());
    assert!(training::task(&db.pool, other, "test", task.task_id)
        .await
        .unwrap()
        .is_none());
});

db_test!(one_instance_claims, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    let (a, _) = runner(&db.pool, bus.clone(), "a", 1);
    let (b, _) = runner(&db.pool, bus.clone(), "b", 1);
    let (x, y) = tokio::join!(a.claim(), b.claim());
    let claims = [x.unwrap(), y.unwrap()];
    assert_eq!(claims.iter().filter(|c| c.is_some()).count(), 1);
});

db_test!(cancel_stops_within_a_second, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    // 1,200 steps of 50 ms: 60 s of work if not cancelled.
    let task = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    let (r, started) = runner(&db.pool, bus, "a", 1200);
    let run = tokio::spawn(async move { r.run_once().await });
    while AtomicUsize::load(&started, Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled = training::cancel(&db.pool, t, "test").await.unwrap();
    assert_eq!(cancelled.status, "cancelled");
    // The runner notices at its next lease renewal (every 200 ms) and stops at the trainer's
    // next step: well within a second on an idle machine. The bound leaves room for a loaded
    // one and still proves the work was cut short of its 60 s.
    let begun = Instant::now();
    let out = run.await.unwrap().unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "stopped after {:?}",
        begun.elapsed()
    );
    assert!(matches!(
        out,
        Outcome::Stopped {
            cancelled: true,
            ..
        }
    ));
    let row = training::task(&db.pool, t, "test", task.task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, "cancelled");
    assert!(training::active(&db.pool, t, "test")
        .await
        .unwrap()
        .is_none());
    // Nothing left to cancel.
    assert_eq!(
        training::cancel(&db.pool, t, "test")
            .await
            .unwrap_err()
            .status(),
        409
    );
});

db_test!(rollback_to_any_version, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    let (r, _) = runner(&db.pool, bus.clone(), "a", 1);
    for v in 1..=3 {
        training::enqueue(&db.pool, t, "test", json!({}))
            .await
            .unwrap();
        assert!(
            matches!(r.run_once().await.unwrap(), Outcome::Completed { version, .. } if version == v)
        );
    }
    let list = training::versions(&db.pool, t, "test").await.unwrap();
    assert_eq!(
        list.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![3, 2, 1]
    );
    assert!(list[0].active && !list[1].active);
    let mut rx = bus.subscribe(training::MODEL_CHANGES).await.unwrap();
    let m = training::rollback(&db.pool, bus.as_ref(), t, "test", 1)
        .await
        .unwrap();
    assert_eq!(m.info.version, 1);
    assert_eq!(
        training::active_version(&db.pool, t, "test").await.unwrap(),
        Some(1)
    );
    let notice: training::ModelChange = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
    assert_eq!(notice.version, 1);
    assert_eq!(
        training::rollback(&db.pool, bus.as_ref(), t, "test", 9)
            .await
            .unwrap_err()
            .status(),
        404
    );
    // While a task is queued: 409.
    training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    assert_eq!(
        training::rollback(&db.pool, bus.as_ref(), t, "test", 2)
            .await
            .unwrap_err()
            .status(),
        409
    );
    // The next version follows the highest stored one, not the active one.
    assert!(matches!(
        r.run_once().await.unwrap(),
        Outcome::Completed { version: 4, .. }
    ));
});

db_test!(killed_instance_task_is_taken_over, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    let task = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    // Instance "dead" claims the task, then dies (its work is aborted, no renewal).
    let (dead, _) = runner(&db.pool, bus.clone(), "dead", 200);
    let claimed = dead.claim().await.unwrap().unwrap();
    let job = claimed.clone();
    let work = tokio::spawn(async move { dead.run_job(job).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    work.abort();
    assert!(training::active(&db.pool, t, "test")
        .await
        .unwrap()
        .is_none());
    // Before the lease expires nobody else may claim it.
    let (live, _) = runner(&db.pool, bus.clone(), "live", 1);
    assert!(live.claim().await.unwrap().is_none());
    // Expire the lease (as if 2 s had passed) and let the live instance finish it.
    let past = Ts::from(steward_core::clock::now() - time::Duration::seconds(1));
    let pool = &db.pool;
    let r: Result<usize> = async {
        with_conn!(pool, conn => diesel::update(jobs::table.filter(jobs::id.eq(Id(task.task_id))))
            .set(jobs::lease_expires_at.eq(Some(past)))
            .execute(conn)
            .await
            .db())
    }
    .await;
    r.unwrap();
    let out = live.run_once().await.unwrap();
    assert_eq!(
        out,
        Outcome::Completed {
            task_id: task.task_id,
            version: 1
        }
    );
    let done = training::task(&db.pool, t, "test", task.task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, "completed");
    assert_eq!(
        training::versions(&db.pool, t, "test").await.unwrap().len(),
        1
    );
});

db_test!(lost_task_never_activates_its_model, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    let task = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    // "slow" claims and trains; meanwhile its lease is taken by "thief" (as after a stall).
    let (slow, _) = runner(&db.pool, bus.clone(), "slow", 10);
    let job = slow.claim().await.unwrap().unwrap();
    let pool = &db.pool;
    let r: Result<usize> = async {
        with_conn!(pool, conn => diesel::update(jobs::table.filter(jobs::id.eq(Id(task.task_id))))
            .set(jobs::lease_owner.eq(Some("thief".to_owned())))
            .execute(conn)
            .await
            .db())
    }
    .await;
    r.unwrap();
    let out = slow.run_job(job).await.unwrap();
    assert!(
        matches!(
            out,
            Outcome::Stopped {
                cancelled: true,
                ..
            }
        ),
        "{out:?}"
    );
    assert!(training::active(&db.pool, t, "test")
        .await
        .unwrap()
        .is_none());
    assert!(training::versions(&db.pool, t, "test")
        .await
        .unwrap()
        .is_empty());
});

/// A trainer that fails leaves the previous version serving.
struct Failing;

#[async_trait]
impl Trainer for Failing {
    async fn train(&self, _ctx: TrainCtx) -> Result<TrainedModel> {
        Err(steward_core::Error::internal_msg("boom"))
    }
}

db_test!(failure_keeps_previous_version, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    let (ok, _) = runner(&db.pool, bus.clone(), "a", 1);
    training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    ok.run_once().await.unwrap();
    let bad = Runner::new(db.pool.clone(), bus).register("test", Arc::new(Failing));
    let task = training::enqueue(&db.pool, t, "test", json!({}))
        .await
        .unwrap();
    assert!(matches!(
        bad.run_once().await.unwrap(),
        Outcome::Stopped {
            cancelled: false,
            ..
        }
    ));
    let row = training::task(&db.pool, t, "test", task.task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, "failed");
    assert!(row.error.is_some());
    assert_eq!(
        training::active_version(&db.pool, t, "test").await.unwrap(),
        Some(1)
    );
    let latest = training::latest_task(&db.pool, t, "test")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.task_id, task.task_id);
});

db_test!(only_the_newest_versions_are_kept, |db| {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let t = tenant(&db.pool).await;
    let (r, _) = runner(&db.pool, bus.clone(), "a", 0);
    let total = training::KEPT_VERSIONS + 2;
    for _ in 0..total {
        training::enqueue(&db.pool, t, "test", json!({}))
            .await
            .unwrap();
        assert!(matches!(
            r.run_once().await.unwrap(),
            Outcome::Completed { .. }
        ));
    }
    let kept: Vec<i32> = training::versions(&db.pool, t, "test")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    let expected: Vec<i32> = (3..=total).rev().collect();
    assert_eq!(kept, expected);
    assert_eq!(
        training::active_version(&db.pool, t, "test").await.unwrap(),
        Some(total)
    );
});
