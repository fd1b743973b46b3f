//! The chain on both backends: concurrent appends never fork or skip, and verification names
//! the first tampered entry.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::json;
use steward_audit::{AuditService, ChainHasher};
use steward_core::principal::CredentialKind;
use steward_core::{AuditRecord, MemoryBus, Principal, Role, TenantId};
use steward_store::schema::audit_entries;
use steward_store::{db_test, with_conn, DbPool, DbResultExt, Id};

async fn tenant(db: &DbPool) -> TenantId {
    steward_store::testing::insert_tenant(db).await.unwrap()
}

/// The chain's signing key in these tests.
fn hasher() -> ChainHasher {
    ChainHasher::new(Some(b"k"))
}

/// A service (an instance) over `pool`, signing with `hasher()`.
fn service(pool: &DbPool) -> AuditService {
    AuditService::new(pool.clone(), Arc::new(MemoryBus::new()), hasher()).unwrap()
}

fn principal(t: TenantId) -> Principal {
    Principal {
        tenant: t,
        role: Role::Viewer,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    }
}

fn record(t: TenantId, i: usize) -> AuditRecord {
    AuditRecord::system(t, None, "system.test", format!("r/{i}"))
        .with_input(json!({"i": i, "f": 0.1 + 0.2, "s": "é\u{2028}"}))
}

db_test!(concurrent_appends_form_one_chain, |db| {
    let service = service(&db.pool);
    let (t1, t2) = (tenant(&db.pool).await, tenant(&db.pool).await);
    let mut tasks = Vec::new();
    for i in 0..40 {
        let s = service.clone();
        let t = if i % 2 == 0 { t1 } else { t2 };
        tasks.push(tokio::spawn(async move {
            s.append(record(t, i)).await.map(|e| e.seq)
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    for t in [t1, t2] {
        let v = service.verify(&principal(t)).await.unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!(v.checked, 20);
        let page = service
            .list(&principal(t), &[("limit".into(), "200".into())])
            .await
            .unwrap();
        let mut seqs: Vec<i64> = page.items.iter().map(|e| e.seq).collect();
        seqs.sort();
        assert_eq!(seqs, (1..=20).collect::<Vec<_>>(), "no gap, no duplicate");
    }
});

db_test!(several_instances_interleave_without_forking, |db| {
    // Three services are three instances: each groups its own appends and remembers where it
    // left each tenant's head; the others' writes move the head behind its back.
    let services: Vec<AuditService> = (0..3).map(|_| service(&db.pool)).collect();
    let t = tenant(&db.pool).await;
    let mut tasks = Vec::new();
    for round in 0..5 {
        for (n, s) in services.iter().enumerate() {
            for k in 0..8 {
                let s = s.clone();
                let i = round * 100 + n * 10 + k;
                tasks.push(tokio::spawn(async move { s.append(record(t, i)).await }));
            }
        }
    }
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.push(task.await.unwrap().unwrap());
    }
    let v = services[0].verify(&principal(t)).await.unwrap();
    assert!(v.valid, "{v:?}");
    assert_eq!(v.checked, 120);
    let page = services[1]
        .list(&principal(t), &[("limit".into(), "200".into())])
        .await
        .unwrap();
    let mut seqs: Vec<i64> = page.items.iter().map(|e| e.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=120).collect::<Vec<_>>(), "no gap, no duplicate");
    // Every acknowledged entry is stored as acknowledged.
    for e in acknowledged {
        let stored = page.items.iter().find(|x| x.id == e.id).unwrap();
        assert_eq!((stored.seq, &stored.hash), (e.seq, &e.hash));
    }
});

db_test!(verify_names_the_edited_entry, |db| {
    let service = service(&db.pool);
    let t = tenant(&db.pool).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(service.append(record(t, i)).await.unwrap().id);
    }
    assert!(service.verify(&principal(t)).await.unwrap().valid);
    // Someone with database access edits the third entry.
    let victim: uuid::Uuid = ids[2].parse().unwrap();
    let pool = &db.pool;
    let r: Result<usize, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::update(audit_entries::table.filter(audit_entries::id.eq(Id(victim))))
                .set(audit_entries::resource.eq("r/forged"))
                .execute(conn)
                .await
                .db()
        })
    }
    .await;
    assert_eq!(r.unwrap(), 1);
    let v = service.verify(&principal(t)).await.unwrap();
    assert!(!v.valid);
    assert_eq!(v.first_bad_id.as_deref(), Some(ids[2].as_str()));
    assert_eq!(v.checked, 3);
});

/// Deletes the tenant's entries whose `seq` is in `seqs`, as someone with database access.
async fn delete_entries(pool: &DbPool, t: TenantId, seqs: &[i64]) {
    let seqs = seqs.to_vec();
    let r: Result<usize, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::delete(
                audit_entries::table
                    .filter(audit_entries::tenant_id.eq(Id(t.0)))
                    .filter(audit_entries::seq.eq_any(seqs)),
            )
            .execute(conn)
            .await
            .db()
        })
    }
    .await;
    r.unwrap();
}

db_test!(verify_finds_entries_deleted_at_either_end, |db| {
    let service = service(&db.pool);
    let p = |t| principal(t);
    // The newest entry deleted: no entry is wrong, the chain stops short of its head.
    let t = tenant(&db.pool).await;
    for i in 0..5 {
        service.append(record(t, i)).await.unwrap();
    }
    delete_entries(&db.pool, t, &[5]).await;
    let v = service.verify(&p(t)).await.unwrap();
    assert!(!v.valid, "{v:?}");
    assert_eq!((v.checked, v.first_bad_id.as_deref()), (4, None));

    // The oldest entries deleted (no retention purge ran): the first one left does not link
    // to the genesis.
    let t = tenant(&db.pool).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(service.append(record(t, i)).await.unwrap().id);
    }
    delete_entries(&db.pool, t, &[1, 2]).await;
    let v = service.verify(&p(t)).await.unwrap();
    assert!(!v.valid, "{v:?}");
    assert_eq!(v.first_bad_id.as_deref(), Some(ids[2].as_str()));
    assert_eq!(v.checked, 1);

    // Every entry deleted.
    let t = tenant(&db.pool).await;
    for i in 0..3 {
        service.append(record(t, i)).await.unwrap();
    }
    delete_entries(&db.pool, t, &[1, 2, 3]).await;
    let v = service.verify(&p(t)).await.unwrap();
    assert!(!v.valid, "{v:?}");
    assert_eq!((v.checked, v.first_bad_id.as_deref()), (0, None));

    // A tenant that never wrote anything, and an intact chain, are valid; entries appended
    // after a verification are checked by the next one.
    let t = tenant(&db.pool).await;
    assert!(service.verify(&p(t)).await.unwrap().valid);
    for i in 0..3 {
        service.append(record(t, i)).await.unwrap();
    }
    let v = service.verify(&p(t)).await.unwrap();
    assert_eq!((v.valid, v.checked), (true, 3));
});

db_test!(offline_verification_of_an_export, |db| {
    let hasher = hasher();
    let service = service(&db.pool);
    let t = tenant(&db.pool).await;
    for i in 0..6 {
        service.append(record(t, i)).await.unwrap();
    }
    let page = service.list(&principal(t), &[]).await.unwrap();
    // Round trip through JSON, as an export file would be read.
    let text = serde_json::to_string(&page.items).unwrap();
    let entries: Vec<steward_audit::AuditEntry> = serde_json::from_str(&text).unwrap();
    assert!(steward_audit::verify_entries(&hasher, entries.clone()).valid);
    let wrong_key = ChainHasher::new(Some(b"other"));
    assert!(!steward_audit::verify_entries(&wrong_key, entries.clone()).valid);
    let mut gapped = entries.clone();
    gapped.retain(|e| e.seq != 3);
    let v = steward_audit::verify_entries(&hasher, gapped);
    assert!(!v.valid, "a missing entry is a broken chain");
    let mut edited = entries;
    edited[0].resource = "changed".into();
    let v = steward_audit::verify_entries(&hasher, edited.clone());
    assert_eq!(v.first_bad_id.as_deref(), Some(edited[0].id.as_str()));
});

db_test!(retention_purge_keeps_the_chain_verifiable, |db| {
    let service = service(&db.pool);
    let t = tenant(&db.pool).await;
    for i in 0..7 {
        service.append(record(t, i)).await.unwrap();
    }
    // Everything written so far is "old"; purge in batches of 3.
    let cutoff = steward_core::clock::now() + time::Duration::seconds(1);
    assert_eq!(service.purge_older_than(cutoff, 3).await.unwrap(), 7);
    for i in 7..10 {
        service.append(record(t, i)).await.unwrap();
    }
    let v = service.verify(&principal(t)).await.unwrap();
    assert!(v.valid, "{v:?}");
    assert_eq!(v.checked, 3);
    let page = service.list(&principal(t), &[]).await.unwrap();
    assert_eq!(
        page.items.iter().map(|e| e.seq).min(),
        Some(8),
        "sequence numbers continue"
    );
});

db_test!(async_exports_carry_the_entries_as_stored, |db| {
    let hasher = hasher();
    let service = service(&db.pool);
    let t = tenant(&db.pool).await;
    for i in 0..7 {
        let r = AuditRecord::system(t, None, "system.test", format!("r/{i}")).with_input(json!({
            "i": i, "f": 0.1 + 0.2, "big": 9_007_199_254_740_993u64, "neg": -1.5e-7,
            "s": "é\u{2028}\"\\\n", "nested": {"b": [1, {"z": null, "a": true}], "a": []},
        }));
        service.append(r).await.unwrap();
    }
    let admin = Principal {
        role: Role::Admin,
        ..principal(t)
    };
    let dir = std::env::temp_dir().join(format!("steward-export-test-{}", uuid::Uuid::new_v4()));
    let worker = tokio::spawn(service.clone().run_export_worker(dir.clone()));
    let stored = service
        .list(&admin, &[("limit".into(), "200".into())])
        .await
        .unwrap()
        .items;
    for format in ["jsonl", "json"] {
        let body = steward_core::Body::json(&json!({ "format": format }));
        let job = service.start_export(&admin, &[], &body).await.unwrap();
        let mut status = job.status.clone();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            status = service
                .export_status(&admin, &job.job_id)
                .await
                .unwrap()
                .status;
            if status == "completed" || status == "failed" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(status, "completed", "{format}");
        let file = service
            .export_file(&admin, &job.job_id, &dir)
            .await
            .unwrap();
        let text = std::fs::read_to_string(&file.path).unwrap();
        let exported: Vec<serde_json::Value> = if format == "jsonl" {
            assert!(text.ends_with('\n'));
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        } else {
            serde_json::from_str(&text).unwrap()
        };
        // The same entries, field for field, as the API shows them.
        let shown: Vec<serde_json::Value> = stored
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert_eq!(exported, shown, "{format}");
        // And the file verifies offline.
        let entries: Vec<steward_audit::AuditEntry> = exported
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();
        assert!(
            steward_audit::verify_entries(&hasher, entries).valid,
            "{format}"
        );
    }
    worker.abort();
    let _ = std::fs::remove_dir_all(&dir);
});

db_test!(deleting_a_tenant_deletes_its_entries, |db| {
    let service = service(&db.pool);
    let (gone, kept) = (tenant(&db.pool).await, tenant(&db.pool).await);
    for i in 0..5 {
        service.append(record(gone, i)).await.unwrap();
        service.append(record(kept, i)).await.unwrap();
    }
    let pool = &db.pool;
    let count = |t: TenantId| async move {
        let r: Result<i64, steward_core::Error> = async {
            with_conn!(pool, conn => {
                audit_entries::table
                    .filter(audit_entries::tenant_id.eq(Id(t.0)))
                    .count()
                    .get_result(conn)
                    .await
                    .db()
            })
        }
        .await;
        r.unwrap()
    };
    assert_eq!((count(gone).await, count(kept).await), (5, 5));
    let deleted: Result<usize, steward_core::Error> = async {
        with_conn!(pool, conn => {
            diesel::delete(
                steward_store::schema::tenants::table
                    .filter(steward_store::schema::tenants::id.eq(Id(gone.0))),
            )
            .execute(conn)
            .await
            .db()
        })
    }
    .await;
    assert_eq!(deleted.unwrap(), 1);
    assert_eq!(
        count(gone).await,
        0,
        "the deleted tenant's entries are gone"
    );
    assert_eq!(count(kept).await, 5, "other tenants' entries stay");
    // The writer remembered the deleted tenant's head; a late append must not resurrect it.
    assert!(service.append(record(gone, 9)).await.is_err());
    assert_eq!(count(gone).await, 0);
    let p = principal(kept);
    assert!(service.verify(&p).await.unwrap().valid);
});

db_test!(exports_read_in_sized_batches_keep_every_entry_once, |db| {
    // Reads are sized from the bytes per record (a first read of 100, then up to 1,000): an
    // export across several reads of different sizes holds every entry once, newest first.
    use futures_util::StreamExt;
    let service = service(&db.pool);
    let t = tenant(&db.pool).await;
    for i in 0..1_350 {
        let r = AuditRecord::system(t, None, "system.test", format!("r/{i}"))
            .with_input(json!({"i": i}));
        service.append(r).await.unwrap();
    }
    let admin = Principal {
        role: Role::Admin,
        ..principal(t)
    };
    let export = service
        .export(&admin, &[("limit".into(), "10000".into())], None)
        .await
        .unwrap();
    let mut body = Vec::new();
    let mut chunks = export.body;
    while let Some(chunk) = chunks.next().await {
        body.extend(chunk.unwrap());
    }
    let text = String::from_utf8(body).unwrap();
    let seqs: Vec<i64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs.len(), 1_350);
    assert!(
        seqs.windows(2).all(|w| w[0] == w[1] + 1),
        "not every entry once, in order"
    );
    // The export job reads the same way (two reads in flight) and writes the same lines.
    let dir = std::env::temp_dir().join(format!("steward-export-test-{}", uuid::Uuid::new_v4()));
    let worker = tokio::spawn(service.clone().run_export_worker(dir.clone()));
    let job = service
        .start_export(
            &admin,
            &[],
            &steward_core::Body::json(&json!({"format": "jsonl"})),
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut status = job.status.clone();
    while std::time::Instant::now() < deadline && status != "completed" && status != "failed" {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        status = service
            .export_status(&admin, &job.job_id)
            .await
            .unwrap()
            .status;
    }
    assert_eq!(status, "completed");
    let file = service
        .export_file(&admin, &job.job_id, &dir)
        .await
        .unwrap();
    let written = std::fs::read_to_string(&file.path).unwrap();
    let job_seqs: Vec<i64> = written
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(job_seqs, seqs);
    worker.abort();
    let _ = std::fs::remove_dir_all(&dir);
});
