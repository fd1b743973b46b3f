//! Store tests, generated for SQLite and (with `TEST_DATABASE_URL`) PostgreSQL, and the
//! shared cache/bus suites for Redis (with `TEST_REDIS_URL`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::json;
use steward_store::schema::tenants;
use steward_store::testing::{redis_url, TestDb};
use steward_store::types::{DbJson, DbTime, DbUuid};
use steward_store::{db_test, with_conn, DbResultExt, Id, Json, Ts};

#[test]
fn sqlite_migrations_redo_each_step() {
    let (target, dir) = TestDb::sqlite_target();
    let n = steward_store::migrate::redo_each_blocking(&target).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn postgres_migrations_redo_each_step() {
    let Some(created) = TestDb::postgres_target() else {
        eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL migrations not checked");
        return;
    };
    let (target, base, schema) = created.unwrap_or_else(|e| panic!("{e}"));
    let result = steward_store::migrate::redo_each_blocking(&target);
    steward_store::testing::drop_schema(base, schema);
    assert!(result.unwrap_or_else(|e| panic!("{e}")) >= 1);
}

#[derive(Queryable, Selectable, Insertable, Debug, PartialEq)]
#[diesel(table_name = tenants)]
struct TenantRow {
    id: Id,
    name: String,
    settings: Json,
    created_at: Ts,
}

db_test!(portable_types_round_trip, |db| {
    let row = TenantRow {
        id: Id(uuid::Uuid::now_v7()),
        name: "acme".into(),
        settings: Json(json!({"tier": "gold", "limits": [1, 2]})),
        created_at: Ts::from(steward_core::clock::now()),
    };
    let pool = &db.pool;
    let result: Result<TenantRow, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::insert_into(tenants::table).values(&row).execute(conn).await.db()?;
            tenants::table
                .filter(tenants::id.eq(row.id))
                .select(TenantRow::as_select())
                .first(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(result.unwrap_or_else(|e| panic!("{e}")), row);
});

db_test!(unique_violation_is_conflict, |db| {
    let pool = &db.pool;
    let insert = |name: &'static str| async move {
        let row = TenantRow {
            id: Id(uuid::Uuid::now_v7()),
            name: name.into(),
            settings: Json(json!({})),
            created_at: Ts::from(steward_core::clock::now()),
        };
        with_conn!(pool, conn => diesel::insert_into(tenants::table).values(&row).execute(conn).await.db())
    };
    assert!(insert("dup").await.is_ok());
    let err = insert("dup").await.err().map(|e| e.kind);
    assert_eq!(err, Some(steward_core::ErrorKind::Conflict));
});

db_test!(timestamps_order_in_sql, |db| {
    // Ordering by a timestamp column must be chronological on both backends.
    let pool = &db.pool;
    let base = steward_core::clock::now();
    let result: Result<Vec<String>, steward_core::Error> = async {
        with_conn!(pool, conn => {
            for (i, secs) in [30i64, -3600, 5].into_iter().enumerate() {
                let row = TenantRow {
                    id: Id(uuid::Uuid::now_v7()),
                    name: format!("t{i}"),
                    settings: Json(json!({})),
                    created_at: Ts::from(base + time::Duration::seconds(secs)),
                };
                diesel::insert_into(tenants::table).values(&row).execute(conn).await.db()?;
            }
            tenants::table
                .order(tenants::created_at.asc())
                .select(tenants::name)
                .load(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(result.unwrap_or_else(|e| panic!("{e}")), ["t1", "t2", "t0"]);
});

db_test!(ping_answers, |db| {
    db.pool.ping().await.unwrap_or_else(|e| panic!("{e}"));
});

#[tokio::test]
async fn redis_cache_conformance() {
    let Some(url) = redis_url() else {
        eprintln!("skipped: TEST_REDIS_URL is not set, Redis cache not checked");
        return;
    };
    let prefix = format!("steward-test:{}:", uuid::Uuid::new_v4().simple());
    let handle =
        steward_store::redis::RedisHandle::new(&url, &prefix, std::time::Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("{e}"));
    let cache = steward_store::redis::RedisCache(handle);
    steward_core::cache::conformance::run(&cache, "c")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn redis_bus_conformance() {
    let Some(url) = redis_url() else {
        eprintln!("skipped: TEST_REDIS_URL is not set, Redis bus not checked");
        return;
    };
    let prefix = format!("steward-test:{}:", uuid::Uuid::new_v4().simple());
    let handle =
        steward_store::redis::RedisHandle::new(&url, &prefix, std::time::Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("{e}"));
    let bus = steward_store::redis::RedisBus::new(handle);
    steward_core::bus::conformance::run(&bus, "b")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn redis_presence_sums_live_instances() {
    use steward_core::Presence;
    let Some(url) = redis_url() else {
        eprintln!("skipped: TEST_REDIS_URL is not set, Redis presence not checked");
        return;
    };
    let prefix = format!("steward-test:{}:", uuid::Uuid::new_v4().simple());
    let handle =
        steward_store::redis::RedisHandle::new(&url, &prefix, std::time::Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("{e}"));
    let a = steward_store::redis::RedisPresence::as_instance(handle.clone(), "instance-a");
    let b = steward_store::redis::RedisPresence::as_instance(handle.clone(), "instance-b");
    steward_core::presence::conformance::run(&a, &b, "p")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // An instance that never refreshed its liveness (killed) does not count.
    let dead = steward_store::redis::RedisPresence::as_instance(handle, "instance-dead");
    a.set_local("q", 1).await.unwrap_or_else(|e| panic!("{e}"));
    dead.set_local("q", 7)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.total("q").await.unwrap_or_else(|e| panic!("{e}")), 1);
}

// The column types are used by name in the schema; keep them exported.
#[allow(dead_code)]
fn _types_are_public(_: DbUuid, _: DbTime, _: DbJson) {}

db_test!(one_claim_per_tick, |db| {
    use std::time::Duration;
    let first = steward_store::schedule::claim_tick(&db.pool, "t", Duration::from_secs(60))
        .await
        .unwrap();
    let second = steward_store::schedule::claim_tick(&db.pool, "t", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(first, "the first claim of a due tick wins");
    assert!(!second, "the tick is taken until the interval has passed");
    let other = steward_store::schedule::claim_tick(&db.pool, "u", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(other, "schedules are independent");
});

db_test!(
    jobs_are_claimed_once_and_taken_over_after_lease_expiry,
    |db| {
        use std::time::Duration;
        use steward_store::jobs;
        let pool = &db.pool;
        let tenant = steward_store::testing::insert_tenant(pool).await.unwrap();
        let job = jobs::enqueue(pool, tenant, "k", json!({"x": 1}))
            .await
            .unwrap();
        let first = jobs::claim(pool, "k", Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(first.map(|j| j.id), Some(job.id));
        assert!(
            jobs::claim(pool, "k", Duration::from_secs(30))
                .await
                .unwrap()
                .is_none(),
            "leased"
        );
        assert!(jobs::claim(pool, "other", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none());
        // Expire the lease (as if 30 s had passed) rather than sleep past a short one, which a
        // slow commit on a loaded machine could outlast before the "leased" check.
        {
            use steward_store::schema::jobs as job_rows;
            let past = Ts::from(steward_core::clock::now() - time::Duration::seconds(1));
            let r: Result<usize, steward_core::Error> = async {
                with_conn!(pool, conn => diesel::update(job_rows::table.filter(job_rows::id.eq(job.id)))
                    .set(job_rows::lease_expires_at.eq(Some(past)))
                    .execute(conn)
                    .await
                    .db())
            }
            .await;
            assert_eq!(r.unwrap(), 1);
        }
        let again = jobs::claim(pool, "k", Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            again.as_ref().map(|j| j.attempts),
            Some(2),
            "an expired lease is taken over"
        );
        jobs::complete(pool, job.id, json!({"records": 3}))
            .await
            .unwrap();
        let done = jobs::get(pool, tenant, "k", job.id.0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(done.status, "completed");
        assert_eq!(jobs::count_active(pool).await.unwrap(), 0);
    }
);

db_test!(
    a_taken_over_job_is_not_completed_or_failed_by_its_former_owner,
    |db| {
        use std::time::Duration;
        use steward_store::jobs;
        let pool = &db.pool;
        let tenant = steward_store::testing::insert_tenant(pool).await.unwrap();
        let job = jobs::enqueue(pool, tenant, "owned", json!({}))
            .await
            .unwrap();
        // This instance claims it, stalls past its lease, and another instance takes it over.
        let mine = jobs::claim(pool, "owned", Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(mine.map(|j| j.id), Some(job.id));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let kinds = ["owned".to_owned()];
        let theirs =
            jobs::claim_kinds(pool, &kinds, "other-instance", Duration::from_secs(30), "x")
                .await
                .unwrap();
        assert_eq!(theirs.map(|j| j.attempts), Some(2));
        // The former owner can neither renew, complete nor fail the new owner's attempt.
        let lost = jobs::heartbeat(pool, job.id, 0.5, None, Duration::from_secs(30)).await;
        assert_eq!(lost.unwrap_err().kind, steward_core::ErrorKind::Conflict);
        let done = jobs::complete(pool, job.id, json!({"records": 1})).await;
        assert_eq!(done.unwrap_err().kind, steward_core::ErrorKind::Conflict);
        let failed = jobs::fail(pool, job.id, "stale").await;
        assert_eq!(failed.unwrap_err().kind, steward_core::ErrorKind::Conflict);
        let row = jobs::get(pool, tenant, "owned", job.id.0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.status, "running");
        assert_eq!(row.lease_owner.as_deref(), Some("other-instance"));
        assert_eq!(row.error, None);
    }
);

db_test!(
    a_graceful_stop_puts_its_running_jobs_back_in_the_queue,
    |db| {
        use std::time::Duration;
        use steward_store::jobs;
        let pool = &db.pool;
        let tenant = steward_store::testing::insert_tenant(pool).await.unwrap();
        let job = jobs::enqueue(pool, tenant, "stop", json!({}))
            .await
            .unwrap();
        let mine = jobs::claim(pool, "stop", Duration::from_secs(300))
            .await
            .unwrap();
        assert_eq!(mine.map(|j| j.attempts), Some(1));
        assert_eq!(jobs::release_held(pool).await.unwrap(), 1);
        let row = jobs::get(pool, tenant, "stop", job.id.0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.status, "queued");
        assert_eq!(row.lease_owner, None);
        assert_eq!(row.attempts, 0, "a planned stop is not a failed attempt");
        // The former holder can no longer complete it; another instance claims it at once,
        // long before the 300 s lease would have run out.
        let done = jobs::complete(pool, job.id, json!({})).await;
        assert_eq!(done.unwrap_err().kind, steward_core::ErrorKind::Conflict);
        let kinds = ["stop".to_owned()];
        let theirs =
            jobs::claim_kinds(pool, &kinds, "other-instance", Duration::from_secs(30), "x")
                .await
                .unwrap();
        assert_eq!(theirs.map(|j| (j.id, j.attempts)), Some((job.id, 1)));
        // A job another instance holds is not this instance's to release.
        assert_eq!(jobs::release_held(pool).await.unwrap(), 0);
    }
);

db_test!(
    a_tenants_completed_jobs_beyond_its_newest_are_deleted,
    |db| {
        use std::time::Duration;
        use steward_store::jobs;
        let pool = &db.pool;
        let (tenant, other) = (
            steward_store::testing::insert_tenant(pool).await.unwrap(),
            steward_store::testing::insert_tenant(pool).await.unwrap(),
        );
        let mut done = Vec::new();
        for t in [tenant, tenant, tenant, other] {
            let job = jobs::enqueue(pool, t, "keep", json!({})).await.unwrap();
            jobs::claim(pool, "keep", Duration::from_secs(30))
                .await
                .unwrap();
            jobs::complete(pool, job.id, json!({})).await.unwrap();
            done.push(job.id.0);
            // Distinct completion times.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let queued = jobs::enqueue(pool, tenant, "keep", json!({}))
            .await
            .unwrap();
        let gone = jobs::delete_completed_beyond(pool, tenant, "keep", 2)
            .await
            .unwrap();
        assert_eq!(
            gone,
            vec![done[0]],
            "the oldest completed job of the tenant only"
        );
        assert!(jobs::get(pool, tenant, "keep", done[0])
            .await
            .unwrap()
            .is_none());
        assert!(jobs::get(pool, tenant, "keep", done[2])
            .await
            .unwrap()
            .is_some());
        assert!(jobs::get(pool, tenant, "keep", queued.id.0)
            .await
            .unwrap()
            .is_some());
        assert!(jobs::get(pool, other, "keep", done[3])
            .await
            .unwrap()
            .is_some());
        let missing = jobs::missing(pool, &[done[0], done[1], done[3]])
            .await
            .unwrap();
        assert_eq!(missing, vec![done[0]]);
    }
);

#[derive(QueryableByName)]
struct Alive {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct BackendPid {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pid: i32,
}

/// Connections are handed out without a `SELECT 1` first; one whose server side went away
/// (here terminated, as by a database restart) must still never be handed out again.
#[tokio::test]
async fn postgres_pool_replaces_connections_the_server_closed() {
    let Some(db) = TestDb::postgres().await else {
        eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL pool recycling not checked");
        return;
    };
    let db = db.unwrap_or_else(|e| panic!("{e}"));
    let settings = steward_store::DbSettings {
        max_connections: 1,
        ..steward_store::DbSettings::default()
    };
    let one = steward_store::DbPool::new(&db.target, &settings).unwrap();
    let steward_store::DbPool::Pg(pool) = &one else {
        panic!("a PostgreSQL pool was expected");
    };
    let pid = |pool| async move {
        let mut conn = steward_store::pool::checkout(pool).await.unwrap();
        diesel::sql_query("SELECT pg_backend_pid() AS pid")
            .get_result::<BackendPid>(&mut *conn)
            .await
            .map(|r| r.pid)
    };
    let first = pid(pool).await.unwrap();
    assert_eq!(
        pid(pool).await.unwrap(),
        first,
        "the idle connection is reused"
    );
    let admin = &db.pool;
    let terminated: Result<(), steward_core::Error> = async {
        with_conn!(admin, conn => {
            diesel::sql_query(format!("SELECT pg_terminate_backend({first})"))
                .execute(conn)
                .await
                .db()
                .map(|_| ())
        })
    }
    .await;
    terminated.unwrap();
    // `pg_terminate_backend` returns once the signal is sent: wait until the backend is gone
    // (and a moment for the client to see its socket close).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let alive: Result<i64, steward_core::Error> = async {
            with_conn!(admin, conn => {
                diesel::sql_query(format!(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = {first}"
                ))
                .get_result::<Alive>(conn)
                .await
                .db()
                .map(|r| r.n)
            })
        }
        .await;
        if alive.unwrap() == 0 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let second = pid(pool)
        .await
        .expect("a fresh connection replaces the terminated one");
    assert_ne!(second, first);
}

/// The commit-durability setting of a connection, as text (PostgreSQL `synchronous_commit`:
/// `on`/`off`; SQLite `synchronous`: 2 = FULL, 1 = NORMAL).
#[derive(diesel::QueryableByName)]
struct Setting {
    #[diesel(sql_type = diesel::sql_types::Text)]
    v: String,
}

fn setting_query(backend: steward_store::Backend) -> &'static str {
    match backend {
        steward_store::Backend::Postgres => "SELECT current_setting('synchronous_commit') AS v",
        steward_store::Backend::Sqlite => {
            "SELECT CAST(synchronous AS TEXT) AS v FROM pragma_synchronous"
        }
    }
}

async fn setting_in(pool: &steward_store::DbPool) -> steward_core::Result<String> {
    let q = setting_query(pool.backend());
    with_conn!(pool, conn => {
        diesel::sql_query(q).get_result::<Setting>(conn).await.db().map(|s| s.v)
    })
}

fn usual(backend: steward_store::Backend) -> &'static str {
    match backend {
        steward_store::Backend::Postgres => "on",
        steward_store::Backend::Sqlite => "2",
    }
}

db_test!(async_commit_is_relaxed_inside_and_restored_after, |db| {
    // One connection, so that the one used inside is the one checked after.
    let settings = steward_store::DbSettings {
        max_connections: 1,
        ..steward_store::DbSettings::default()
    };
    let pool = steward_store::DbPool::new(&db.target, &settings).unwrap();
    let backend = pool.backend();
    assert_eq!(setting_in(&pool).await.unwrap(), usual(backend));
    let q = setting_query(backend);
    let id = Id(uuid::Uuid::new_v4());
    let inside: steward_core::Result<String> = async {
        steward_store::with_conn_async_commit!(&pool, conn => {
            diesel::insert_into(tenants::table)
                .values((
                    tenants::id.eq(id),
                    tenants::name.eq("async-commit"),
                    tenants::settings.eq(Json(json!({}))),
                    tenants::created_at.eq(Ts(steward_core::clock::now())),
                ))
                .execute(conn)
                .await
                .db()?;
            diesel::sql_query(q).get_result::<Setting>(conn).await.db().map(|s| s.v)
        })
    }
    .await;
    let inside = inside.unwrap();
    let relaxed = match backend {
        steward_store::Backend::Postgres => "off",
        steward_store::Backend::Sqlite => "1",
    };
    assert_eq!(inside, relaxed);
    assert_eq!(setting_in(&pool).await.unwrap(), usual(backend));
    // The write committed.
    let n: steward_core::Result<i64> = async {
        with_conn!(&pool, conn => {
            tenants::table.filter(tenants::id.eq(id)).count().get_result(conn).await.db()
        })
    }
    .await;
    let n = n.unwrap();
    assert_eq!(n, 1);

    // An early return inside: the relaxed connection never goes back to the pool.
    let failed: steward_core::Result<()> = async {
        steward_store::with_conn_async_commit!(&pool, conn => {
            let _ = &conn;
            Err::<(), _>(steward_core::Error::bad_request("stop here"))?;
            Ok(())
        })
    }
    .await;
    assert!(failed.is_err());
    assert_eq!(setting_in(&pool).await.unwrap(), usual(backend));
});

/// Connections opened together on a SQLite database whose last connection just closed (the
/// first one runs the WAL recovery, the others find the file locked) wait for the lock
/// rather than fail with `database is locked`: `busy_timeout` is set before anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_connections_opened_together_wait_for_each_other() {
    for round in 0..20 {
        let db = steward_store::testing::TestDb::sqlite()
            .await
            .unwrap_or_else(|e| panic!("sqlite test database: {e}"));
        let pings = (0..8).map(|_| {
            let pool = db.pool.clone();
            tokio::spawn(async move { pool.ping().await })
        });
        for ping in futures_util::future::join_all(pings).await {
            let answer = ping.unwrap_or_else(|e| panic!("ping task: {e}"));
            assert!(answer.is_ok(), "round {round}: {answer:?}");
        }
    }
}

/// A statement whose future is dropped while it runs (a client that hung up, a time-out, an
/// aborted task) leaves diesel-async's SQLite worker thread holding the connection. With one
/// connection in the pool, the next checkout gets that same connection unless it was closed:
/// it must not panic ("Cannot access shared transaction state") and must answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cancelled_mid_way_does_not_poison_the_sqlite_pool() {
    use diesel::sql_types::BigInt;
    use steward_store::{DbPool, DbSettings};

    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let (target, dir) = TestDb::sqlite_target();
    let settings = DbSettings {
        max_connections: 1,
        timeout: std::time::Duration::from_secs(30),
    };
    let pool = DbPool::new(&target, &settings).unwrap();
    let slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) \
                SELECT count(*) AS n FROM c";
    for _ in 0..3 {
        let p = &pool;
        let cancelled = tokio::time::timeout(std::time::Duration::from_millis(50), async move {
            with_conn!(p, conn => diesel::sql_query(slow).get_result::<Count>(conn).await.db())
        })
        .await;
        assert!(
            cancelled.is_err(),
            "the slow statement finished within 50 ms"
        );
        // The pool still serves, on a connection that is not the busy one.
        pool.ping().await.unwrap();
        let p = &pool;
        let one: Count = async move {
            with_conn!(p, conn => diesel::sql_query("SELECT 1 AS n").get_result::<Count>(conn).await.db())
        }
        .await
        .unwrap();
        assert_eq!(one.n, 1);
    }
    drop(pool);
    let _ = std::fs::remove_dir_all(dir);
}

/// A redis-server of this test's own on a free port (`None` when the binary is missing).
fn private_redis(port: u16) -> Option<std::process::Child> {
    std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok()
}

// When Redis goes away, the bus's subscribers must learn it (the broadcast closes), so that
// they subscribe again and reload what notices they may have missed; a quiet reconnection
// lost a policy change published meanwhile on another instance (probe C).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_redis_subscription_closes_the_subscribers() {
    use steward_core::EventBus;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
    };
    let Some(mut server) = private_redis(port) else {
        eprintln!("skipped: redis-server is not installed, bus reconnection not checked");
        return;
    };
    let url = format!("redis://127.0.0.1:{port}");
    let handle =
        steward_store::redis::RedisHandle::new(&url, "t:", std::time::Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("{e}"));
    let bus = steward_store::redis::RedisBus::new(handle);
    let mut rx = None;
    for _ in 0..50 {
        if let Ok(r) = bus.subscribe("changes").await {
            rx = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut rx = rx.unwrap_or_else(|| panic!("no subscription to the private redis"));
    bus.publish("changes", b"one")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await;
    assert!(matches!(got, Ok(Ok(ref m)) if m == b"one"), "{got:?}");

    let _ = server.kill();
    let _ = server.wait();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await;
    assert!(
        matches!(
            closed,
            Ok(Err(tokio::sync::broadcast::error::RecvError::Closed))
        ),
        "{closed:?}"
    );

    // Back again: a new subscription works.
    let mut server = private_redis(port).unwrap_or_else(|| panic!("redis-server restart"));
    let mut again = None;
    for _ in 0..100 {
        if let Ok(r) = bus.subscribe("changes").await {
            again = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut again = again.unwrap_or_else(|| panic!("no subscription after the restart"));
    bus.publish("changes", b"two")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), again.recv()).await;
    assert!(matches!(got, Ok(Ok(ref m)) if m == b"two"), "{got:?}");
    let _ = server.kill();
    let _ = server.wait();
}

// Pub/sub ignores the database number: two deployments on one Redis, databases 1 and 2, must
// not hear each other's notices (probe C).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buses_on_other_databases_do_not_hear_each_other() {
    use steward_core::EventBus;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
    };
    let Some(mut server) = private_redis(port) else {
        eprintln!("skipped: redis-server is not installed, database separation not checked");
        return;
    };
    let bus = |db: u8| {
        let url = format!("redis://127.0.0.1:{port}/{db}");
        let handle = steward_store::redis::RedisHandle::new(
            &url,
            "steward:",
            std::time::Duration::from_secs(2),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        steward_store::redis::RedisBus::new(handle)
    };
    let (one, two) = (bus(1), bus(2));
    let mut heard = None;
    for _ in 0..50 {
        if let Ok(r) = two.subscribe("changes").await {
            heard = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut heard = heard.unwrap_or_else(|| panic!("no subscription to the private redis"));
    one.publish("changes", b"from-db-1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    two.publish("changes", b"from-db-2")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), heard.recv()).await;
    assert!(matches!(got, Ok(Ok(ref m)) if m == b"from-db-2"), "{got:?}");
    let _ = server.kill();
    let _ = server.wait();
}
