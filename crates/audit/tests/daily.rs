//! The per-day rollup behind the dashboard's 7-day activity (issue 18) on both backends: it
//! follows appends, entries of earlier days, retention purges and tenant deletion.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::json;
use steward_audit::{AuditService, ChainHasher};
use steward_core::{AuditRecord, MemoryBus, TenantId};
use steward_store::schema::{audit_entries, tenants};
use steward_store::{db_test, with_conn, DbPool, DbResultExt, Id, Json, Ts};

async fn tenant(db: &DbPool) -> TenantId {
    steward_store::testing::insert_tenant(db).await.unwrap()
}

fn service(pool: &DbPool) -> AuditService {
    AuditService::new(
        pool.clone(),
        Arc::new(MemoryBus::new()),
        ChainHasher::new(None),
    )
    .unwrap()
}

fn record(t: TenantId, i: usize) -> AuditRecord {
    AuditRecord::system(t, None, "system.test", format!("r/{i}"))
}

/// Writes an entry straight into the table with the given time (as an import or an old
/// instance would have), outside the chain.
async fn insert_at(pool: &DbPool, t: TenantId, seq: i64, at: time::OffsetDateTime) {
    let r: Result<usize, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::insert_into(audit_entries::table)
                .values((
                    audit_entries::id.eq(Id(uuid::Uuid::now_v7())),
                    audit_entries::tenant_id.eq(Id(t.0)),
                    audit_entries::seq.eq(seq),
                    audit_entries::action.eq("system.test"),
                    audit_entries::resource.eq("r"),
                    audit_entries::input.eq(Json(json!({}))),
                    audit_entries::output.eq(Json(json!({}))),
                    audit_entries::reasoning.eq(Json(json!([]))),
                    audit_entries::risk_score.eq(0.0),
                    audit_entries::is_approved.eq(false),
                    audit_entries::timestamp.eq(Ts(at)),
                    audit_entries::prev_hash.eq("0"),
                    audit_entries::hash.eq("0"),
                ))
                .execute(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(r.unwrap(), 1);
}

fn counts(v: &[(time::Date, i64)]) -> Vec<i64> {
    v.iter().map(|(_, c)| *c).collect()
}

db_test!(daily_counts_follow_appends_purges_and_deletion, |db| {
    let service = service(&db.pool);
    let (a, b) = (tenant(&db.pool).await, tenant(&db.pool).await);
    for i in 0..5 {
        service.append(record(a, i)).await.unwrap();
    }
    for i in 0..2 {
        service.append(record(b, i)).await.unwrap();
    }
    let days = service.daily_counts(a, 7).await.unwrap();
    let today = steward_core::clock::now().date();
    assert_eq!(days.len(), 7);
    assert_eq!(days[6].0, today);
    assert_eq!(days[0].0, today - time::Duration::days(6));
    assert_eq!(counts(&days), vec![0, 0, 0, 0, 0, 0, 5]);
    assert_eq!(
        counts(&service.daily_counts(b, 7).await.unwrap()),
        vec![0, 0, 0, 0, 0, 0, 2]
    );

    // Entries of earlier days (written outside the chain, in another tenant: a purge removes
    // a tenant's entries up to the last expired sequence number), both ends of a UTC day, and
    // a day outside the window.
    let c = tenant(&db.pool).await;
    let midnight = today.midnight().assume_utc();
    insert_at(&db.pool, c, 1, midnight - time::Duration::days(9)).await;
    insert_at(&db.pool, c, 2, midnight - time::Duration::days(3)).await;
    insert_at(
        &db.pool,
        c,
        3,
        midnight - time::Duration::days(2) - time::Duration::microseconds(1),
    )
    .await;
    insert_at(&db.pool, c, 4, midnight - time::Duration::days(2)).await;
    assert_eq!(
        counts(&service.daily_counts(c, 7).await.unwrap()),
        vec![0, 0, 0, 2, 1, 0, 0]
    );

    // Retention removes counts with the entries.
    let cutoff = midnight - time::Duration::days(2);
    assert_eq!(service.purge_older_than(cutoff, 2).await.unwrap(), 3);
    assert_eq!(
        counts(&service.daily_counts(c, 7).await.unwrap()),
        vec![0, 0, 0, 0, 1, 0, 0]
    );
    assert_eq!(
        counts(&service.daily_counts(a, 7).await.unwrap()),
        vec![0, 0, 0, 0, 0, 0, 5]
    );

    // Deleting a tenant deletes its entries and its counts; the other tenant keeps its own.
    let pool = &db.pool;
    let deleted: Result<usize, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::delete(tenants::table.filter(tenants::id.eq(Id(a.0))))
                .execute(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(deleted.unwrap(), 1);
    assert_eq!(
        counts(&service.daily_counts(a, 7).await.unwrap()),
        vec![0; 7]
    );
    assert_eq!(
        counts(&service.daily_counts(b, 7).await.unwrap()),
        vec![0, 0, 0, 0, 0, 0, 2]
    );
});

fn admin(t: TenantId) -> steward_core::Principal {
    steward_core::Principal {
        tenant: t,
        role: steward_core::Role::Admin,
        user: None,
        key: None,
        kind: steward_core::principal::CredentialKind::TenantKey,
        jti: None,
    }
}

fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

// `GET /audit` without a filter takes its total from the rollup: it must equal the number of
// entries whatever their day (inside and outside the dashboard's window), after a purge, and
// per tenant; a filtered list still counts its matches.
db_test!(unfiltered_list_total_is_the_rollup_and_exact, |db| {
    let service = service(&db.pool);
    let (a, b) = (tenant(&db.pool).await, tenant(&db.pool).await);
    let today = steward_core::clock::now().date();
    let midnight = today.midnight().assume_utc();
    for (seq, back) in [(1, 400), (2, 30), (3, 8), (4, 1)] {
        insert_at(&db.pool, a, seq, midnight - time::Duration::days(back)).await;
    }
    for i in 0..3 {
        service.append(record(b, i)).await.unwrap();
    }
    let total = |t: TenantId, pairs: Vec<(String, String)>| {
        let service = &service;
        async move { service.list(&admin(t), &pairs).await.unwrap().total }
    };
    assert_eq!(total(a, query(&[("limit", "1")])).await, 4);
    assert_eq!(total(b, query(&[])).await, 3);
    assert_eq!(total(a, query(&[("action", "system.test")])).await, 4);
    assert_eq!(total(a, query(&[("action", "other")])).await, 0);
    assert_eq!(total(b, query(&[("resource", "r/1")])).await, 1);

    // A purge of everything older than a week leaves the day-old entry counted.
    assert_eq!(
        service
            .purge_older_than(midnight - time::Duration::days(7), 10)
            .await
            .unwrap(),
        3
    );
    assert_eq!(total(a, query(&[])).await, 1);
    assert_eq!(total(b, query(&[])).await, 3);
    service.append(record(a, 9)).await.unwrap();
    assert_eq!(total(a, query(&[])).await, 2);
});
