//! Discovery on both backends: merge by fingerprint, batch validation, confirm and dismiss,
//! clustering, tenant isolation, roles, integrations, concurrent ingest.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use steward_core::principal::CredentialKind;
use steward_core::{
    AgentId, Body, Error, ErrorKind, EventBus, MemoryBus, Principal, Role, TenantId,
};
use steward_discovery::{Candidate, Discovery, IntegrationSettings, Task};
use steward_registry::{NoActivity, Registry};
use steward_store::schema::agents;
use steward_store::testing::TestDb;
use steward_store::{db_test, with_conn, DbPool, DbResultExt, Id};

async fn tenant(db: &DbPool) -> TenantId {
    steward_store::testing::insert_tenant(db).await.unwrap()
}

fn as_role(t: TenantId, role: Role) -> Principal {
    Principal {
        tenant: t,
        role,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    }
}

fn dev(t: TenantId) -> Principal {
    as_role(t, Role::Developer)
}

fn service_with(db: &DbPool, integrations: IntegrationSettings) -> Discovery {
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new());
    let registry = Registry::new(
        db.clone(),
        bus.clone(),
        Arc::new(NoActivity),
        Duration::from_secs(300),
    );
    Discovery::new(db.clone(), bus, registry, integrations)
}

fn service(db: &DbPool) -> Discovery {
    service_with(db, IntegrationSettings::default())
}

fn body(v: Value) -> Body {
    Body::json(&v)
}

fn kind<T: std::fmt::Debug>(r: Result<T, Error>) -> ErrorKind {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.kind,
    }
}

fn fields<T: std::fmt::Debug>(r: Result<T, Error>) -> Vec<String> {
    match r {
        Ok(v) => panic!("expected a 422, got {v:?}"),
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::ValidationFailed, "{e}");
            e.errors.into_iter().map(|f| f.field).collect()
        }
    }
}

async fn ingest(s: &Discovery, p: &Principal, v: Value) -> (Candidate, bool) {
    s.ingest(p, &body(v)).await.unwrap()
}

async fn pending(s: &Discovery, p: &Principal) -> Vec<Candidate> {
    s.list(p, &[("limit".into(), "200".into())])
        .await
        .unwrap()
        .items
}

/// Claims the next clustering task and runs it to its end (deterministic, no worker loop).
async fn run_one_cluster_task(s: &Discovery, db: &DbPool) {
    let job = steward_store::jobs::claim(
        db,
        steward_discovery::cluster::JOB_KIND,
        Duration::from_secs(30),
    )
    .await
    .unwrap()
    .expect("a queued clustering task");
    s.run_claimed(&job).await;
}

db_test!(merges_by_fingerprint_and_scores, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let (a, created) = ingest(
        &s,
        &p,
        json!({"name": " Sales Helper ", "type": "llm", "capabilities": ["chat"],
               "evidence": {"ip": "10.0.0.1"}}),
    )
    .await;
    assert!(created);
    assert_eq!(a.name, "Sales Helper");
    assert_eq!(a.fingerprint, "sales helper");
    assert_eq!(a.source, "ingest");
    assert_eq!(a.status, "pending");
    assert_eq!((a.event_count, a.score), (1, 0.5));
    assert_eq!(a.suggested_type.as_deref(), Some("llm"));
    assert_eq!(a.evidence[0]["source"], "ingest");
    assert_eq!(a.evidence[0]["data"], json!({"ip": "10.0.0.1"}));
    assert_eq!(
        a.evidence[0]["observed_at"].as_str().map(str::len),
        Some(27)
    );
    assert!(a.agent_id.is_none() && a.decided_at.is_none());

    // Same name once trimmed and lowercased: merged.
    let (b, created) = ingest(
        &s,
        &p,
        json!({"name": "SALES HELPER", "source": "agent_framework", "capabilities": ["mail", "chat"]}),
    )
    .await;
    assert!(!created);
    assert_eq!(b.id, a.id);
    assert_eq!((b.event_count, b.score), (2, 0.6));
    assert_eq!(b.name, "Sales Helper", "the first name stays");
    assert_eq!(b.source, "ingest", "the first source stays");
    assert_eq!(b.capabilities, json!(["chat", "mail"]));
    assert_eq!(b.evidence.as_array().map(Vec::len), Some(2));
    assert_eq!(b.evidence[1]["source"], "agent_framework");
    assert!(b.last_seen >= a.last_seen);
    assert_eq!(b.first_seen, a.first_seen);

    // An explicit fingerprint is the merge key, whatever the name.
    let (c, created) = ingest(&s, &p, json!({"name": "x", "fingerprint": "FP-1"})).await;
    assert!(created);
    let (d, created) = ingest(&s, &p, json!({"name": "y", "fingerprint": "FP-1"})).await;
    assert!(!created);
    assert_eq!(d.id, c.id);
    let (e, created) = ingest(&s, &p, json!({"name": "z", "fingerprint": "fp-1"})).await;
    assert!(
        created,
        "a given fingerprint is kept as given (case matters)"
    );
    assert_ne!(e.id, c.id);

    // Score formula up to the cap; only the 50 newest events are kept.
    let mut last = b;
    for n in 3..=60 {
        last = ingest(
            &s,
            &p,
            json!({"name": "sales helper", "evidence": {"n": n}}),
        )
        .await
        .0;
        let expected = (0.5 + 0.1 * (n as f64 - 1.0)).min(1.0);
        assert!((last.score - expected).abs() < 1e-9, "{n}: {}", last.score);
    }
    assert_eq!(last.event_count, 60);
    let ev = last.evidence.as_array().unwrap();
    assert_eq!(ev.len(), 50);
    assert_eq!(ev[49]["data"]["n"], 60);
    assert_eq!(ev[0]["data"]["n"], 11);
    assert_eq!(pending(&s, &p).await.len(), 3);
});

db_test!(concurrent_ingests_of_one_fingerprint_merge, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (s, p) = (s.clone(), p.clone());
        tasks.push(tokio::spawn(async move {
            s.ingest(&p, &body(json!({"name": "Racer", "evidence": {"i": i}})))
                .await
                .map(|(_, created)| created)
        }));
    }
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap().unwrap() {
            created += 1;
        }
    }
    assert_eq!(created, 1, "exactly one ingest creates the candidate");
    let list = pending(&s, &p).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].event_count, 16);
    assert_eq!(list[0].score, 1.0);
    assert_eq!(list[0].evidence.as_array().map(Vec::len), Some(16));
});

db_test!(batch_ingest_and_validation_paths, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let batch = |v: Value| {
        let (s, p) = (s.clone(), p.clone());
        async move { s.ingest_batch(&p, &body(v)).await }
    };

    assert_eq!(fields(batch(json!({})).await), ["events"]);
    assert_eq!(fields(batch(json!({"events": []})).await), ["events"]);
    assert_eq!(
        fields(batch(json!({"events": {"name": "a"}})).await),
        ["events"]
    );
    let too_many: Vec<Value> = (0..1001)
        .map(|i| json!({"name": format!("a{i}")}))
        .collect();
    assert_eq!(fields(batch(json!({"events": too_many})).await), ["events"]);
    assert_eq!(fields(batch(json!([1])).await), ["body"]);
    assert_eq!(
        fields(
            batch(json!({
                "cluster": "yes",
                "events": [
                    {"name": "ok"},
                    {"name": ""},
                    {"name": "b", "type": "robot", "capabilities": [""], "evidence": 3},
                    7,
                    {"fingerprint": 5}
                ]
            }))
            .await
        ),
        [
            "cluster",
            "events[1].name",
            "events[2].type",
            "events[2].capabilities[0]",
            "events[2].evidence",
            "events[3]",
            "events[4].name",
            "events[4].fingerprint",
        ]
    );
    assert!(
        pending(&s, &p).await.is_empty(),
        "an invalid batch stores nothing"
    );
    assert_eq!(
        kind(
            s.ingest_batch(
                &p,
                &Body::new(Some("application/json".into()), b"{".to_vec())
            )
            .await
        ),
        ErrorKind::BadRequest
    );

    // A valid batch: one existing candidate, repeated and new fingerprints.
    let (existing, _) = ingest(&s, &p, json!({"name": "old-bot"})).await;
    let r = batch(json!({"events": [
        {"name": "new-a"},
        {"name": "Old-Bot", "source": "model_provider"},
        {"name": "NEW-A", "type": "tool"},
        {"name": "new-b", "fingerprint": "fp-b"},
    ]}))
    .await
    .unwrap();
    assert_eq!((r.created, r.merged), (2, 2));
    assert!(r.cluster_task_id.is_none());
    let ids: Vec<&str> = r.candidates.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[0], ids[2], "one candidate per fingerprint");
    assert_eq!(ids[1], existing.id);
    assert_eq!(r.candidates[0].event_count, 2);
    assert_eq!(r.candidates[0].suggested_type.as_deref(), Some("tool"));
    assert_eq!(r.candidates[1].event_count, 2);
    assert_eq!(r.candidates[3].fingerprint, "fp-b");
    assert_eq!(pending(&s, &p).await.len(), 3);

    // An observed name is kept as seen, invisible characters included: refusing it would hide
    // the agent from discovery.
    let (hidden, _) = ingest(&s, &p, json!({"name": "shadow\u{200B}bot"})).await;
    assert_eq!(hidden.name, "shadow\u{200B}bot");

    // `cluster: true` queues a clustering task.
    let r = batch(json!({"events": [{"name": "x"}], "cluster": true}))
        .await
        .unwrap();
    let task_id = r.cluster_task_id.expect("a clustering task id");
    let task = s.cluster_status(&p, &task_id).await.unwrap();
    assert_eq!(task.kind, "discovery_cluster");
    assert_eq!(task.status, "queued");

    // A full batch of 1000 distinct events.
    let many: Vec<Value> = (0..1000)
        .map(|i| json!({"name": format!("bulk-{i}")}))
        .collect();
    let r = batch(json!({"events": many})).await.unwrap();
    assert_eq!((r.created, r.merged), (1000, 0));
    assert_eq!(r.candidates[999].name, "bulk-999");
});

db_test!(listing_by_status_and_paging, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let mut ids = Vec::new();
    for n in ["a-bot", "b-bot", "c-bot", "d-bot"] {
        ids.push(ingest(&s, &p, json!({"name": n})).await.0.id);
    }
    s.dismiss(&p, &ids[0]).await.unwrap();
    s.confirm(&p, &ids[1], &Body::default()).await.unwrap();
    let list = |q: &'static str| {
        let pairs = steward_core::validate::parse_query_string(q);
        let s = s.clone();
        let p = p.clone();
        async move { s.list(&p, &pairs).await }
    };
    let page = list("").await.unwrap();
    assert_eq!(page.total, 2);
    // Newest first.
    assert_eq!(page.items[0].id, ids[3]);
    assert_eq!(page.items[1].id, ids[2]);
    assert_eq!(list("status=dismissed").await.unwrap().items[0].id, ids[0]);
    assert_eq!(list("status=confirmed").await.unwrap().items[0].id, ids[1]);
    let all = list("status=all&limit=1&skip=1").await.unwrap();
    assert_eq!(
        (all.total, all.items.len(), all.limit, all.skip),
        (4, 1, 1, 1)
    );
    assert_eq!(all.items[0].id, ids[2]);
    assert_eq!(fields(list("status=gone").await), ["status"]);
    assert_eq!(fields(list("limit=0").await), ["limit"]);
});

db_test!(confirm_registers_the_agent_and_links, |db| {
    let s = service(&db.pool);
    let t = tenant(&db.pool).await;
    let p = dev(t);
    let (c, _) = ingest(
        &s,
        &p,
        json!({"name": "invoice-parser", "type": "tool", "capabilities": ["parse"]}),
    )
    .await;
    ingest(&s, &p, json!({"name": "invoice-parser"})).await;
    let r = s.confirm(&p, &c.id, &Body::default()).await.unwrap();
    assert_eq!(r.candidate.status, "confirmed");
    assert_eq!(r.candidate.agent_id.as_deref(), Some(r.agent.id.as_str()));
    assert!(r.candidate.decided_at.is_some());
    assert_eq!(r.candidate.event_count, 2);
    assert_eq!(r.agent.name, "invoice-parser");
    assert_eq!(r.agent.agent_type, "tool");
    assert_eq!(r.agent.capabilities, json!(["parse"]));
    assert_eq!(r.agent.permissions, json!({}));
    assert_eq!(r.agent.status, "active");
    assert_eq!(r.agent.tenant_id, t.to_string());

    // The agent details link.
    let agent: AgentId = r.agent.id.parse().unwrap();
    let linked = s.candidate_for_agent(t, agent).await.unwrap().unwrap();
    assert_eq!(linked.id, c.id);
    assert!(s
        .candidate_for_agent(TenantId::new(), agent)
        .await
        .unwrap()
        .is_none());
    assert!(s
        .candidate_for_agent(t, AgentId::new())
        .await
        .unwrap()
        .is_none());

    // Confirmed is final: confirm and dismiss answer 409.
    assert_eq!(
        kind(s.confirm(&p, &c.id, &Body::default()).await),
        ErrorKind::Conflict
    );
    assert_eq!(kind(s.dismiss(&p, &c.id).await), ErrorKind::Conflict);
    // A new event of the same fingerprint starts a new pending candidate.
    let (again, created) = ingest(&s, &p, json!({"name": "invoice-parser"})).await;
    assert!(created);
    assert_ne!(again.id, c.id);

    // Body overrides; the agent name is taken: 409, the candidate stays pending, no agent leaks.
    assert_eq!(
        kind(
            s.confirm(&p, &again.id, &body(json!({"name": "Invoice-Parser"})))
                .await
        ),
        ErrorKind::Conflict
    );
    let still = pending(&s, &p).await;
    assert_eq!(still.len(), 1);
    assert_eq!(still[0].status, "pending");
    let r = s
        .confirm(
            &p,
            &again.id,
            &body(json!({"name": "invoice-parser-2", "type": "workflow",
                         "capabilities": ["a", "b"], "permissions": {"max_risk": 0.5}})),
        )
        .await
        .unwrap();
    assert_eq!(r.agent.name, "invoice-parser-2");
    assert_eq!(r.agent.agent_type, "workflow");
    assert_eq!(r.agent.capabilities, json!(["a", "b"]));
    assert_eq!(r.agent.permissions, json!({"max_risk": 0.5}));
    let count: i64 = {
        let r: Result<i64, Error> = async {
            with_conn!(&db.pool, conn => {
                agents::table.filter(agents::tenant_id.eq(Id(t.0))).count().get_result(conn).await.db()
            })
        }
        .await;
        r.unwrap()
    };
    assert_eq!(count, 2);

    // Without a suggested type the agent is `custom`.
    let (plain, _) = ingest(&s, &p, json!({"name": "plain"})).await;
    let r = s.confirm(&p, &plain.id, &Body::default()).await.unwrap();
    assert_eq!(r.agent.agent_type, "custom");

    // Validation of the body precedes the lookup.
    assert_eq!(
        fields(
            s.confirm(&p, "not-a-uuid", &body(json!({"type": "robot"})))
                .await
        ),
        ["type"]
    );
});

db_test!(concurrent_decisions_have_one_outcome, |db| {
    let s = service(&db.pool);
    let t = tenant(&db.pool).await;
    let p = dev(t);
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(
            ingest(&s, &p, json!({"name": format!("race-{i}")}))
                .await
                .0
                .id,
        );
    }
    let mut tasks = Vec::new();
    for id in &ids {
        for confirm in [true, false, true] {
            let (s, p, id) = (s.clone(), p.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                if confirm {
                    s.confirm(&p, &id, &Body::default()).await.map(|_| ())
                } else {
                    s.dismiss(&p, &id).await.map(|_| ())
                }
            }));
        }
    }
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => wins += 1,
            Err(e) => assert_eq!(e.kind, ErrorKind::Conflict, "{e}"),
        }
    }
    assert_eq!(wins, ids.len(), "one decision per candidate");
    let all = s
        .list(&p, &[("status".into(), "all".into())])
        .await
        .unwrap();
    let confirmed = all.items.iter().filter(|c| c.status == "confirmed").count();
    let agents: i64 = {
        let r: Result<i64, Error> = async {
            with_conn!(&db.pool, conn => {
                agents::table.filter(agents::tenant_id.eq(Id(t.0))).count().get_result(conn).await.db()
            })
        }
        .await;
        r.unwrap()
    };
    assert_eq!(
        agents as usize, confirmed,
        "no agent of a lost confirm remains"
    );
});

db_test!(dismiss_closes_the_candidate, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let (c, _) = ingest(&s, &p, json!({"name": "noise"})).await;
    let d = s.dismiss(&p, &c.id).await.unwrap();
    assert_eq!(d.status, "dismissed");
    assert!(d.decided_at.is_some());
    assert!(d.agent_id.is_none());
    assert_eq!(kind(s.dismiss(&p, &c.id).await), ErrorKind::Conflict);
    assert_eq!(
        kind(s.confirm(&p, &c.id, &Body::default()).await),
        ErrorKind::Conflict
    );
    assert_eq!(kind(s.dismiss(&p, "nope").await), ErrorKind::NotFound);
    assert_eq!(
        kind(s.dismiss(&p, &uuid::Uuid::now_v7().to_string()).await),
        ErrorKind::NotFound
    );
    assert!(pending(&s, &p).await.is_empty());
});

db_test!(clustering_merges_similar_names, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let other = dev(tenant(&db.pool).await);
    // Three spellings of one agent (three fingerprints), and unrelated names.
    for _ in 0..3 {
        ingest(
            &s,
            &p,
            json!({"name": "Sales Helper", "capabilities": ["crm"]}),
        )
        .await;
    }
    let (dash, _) = ingest(&s, &p, json!({"name": "sales-helper", "type": "llm"})).await;
    let (two, _) = ingest(&s, &p, json!({"name": "saleshelper2"})).await;
    let (invoice, _) = ingest(&s, &p, json!({"name": "invoice-parser"})).await;
    let (report, _) = ingest(&s, &p, json!({"name": "report-bot"})).await;
    // A similar name in another tenant is never merged across tenants.
    let (foreign, _) = ingest(&s, &other, json!({"name": "sales_helper"})).await;
    // Decided candidates are not clustered.
    let (gone, _) = ingest(&s, &p, json!({"name": "Sales-Helper!"})).await;
    s.dismiss(&p, &gone.id).await.unwrap();

    assert_eq!(
        fields(s.start_cluster(&p, &body(json!({"threshold": 0}))).await),
        ["threshold"]
    );
    assert_eq!(
        fields(s.start_cluster(&p, &body(json!({"threshold": 1.5}))).await),
        ["threshold"]
    );
    assert_eq!(
        fields(
            s.start_cluster(&p, &body(json!({"threshold": "high"})))
                .await
        ),
        ["threshold"]
    );
    let task: Task = s.start_cluster(&p, &Body::default()).await.unwrap();
    assert_eq!(task.status, "queued");
    assert_eq!((task.progress, task.merged), (0.0, 0));
    assert!(task.finished_at.is_none());

    run_one_cluster_task(&s, &db.pool).await;
    let done = s.cluster_status(&p, &task.task_id).await.unwrap();
    assert_eq!(done.status, "completed", "{done:?}");
    assert_eq!(done.progress, 1.0);
    assert_eq!(done.merged, 2);
    assert!(done.error.is_none() && done.finished_at.is_some());

    let list = pending(&s, &p).await;
    assert_eq!(list.len(), 3, "{list:?}");
    let survivor = list.iter().find(|c| c.name == "Sales Helper").unwrap();
    assert_eq!(survivor.event_count, 5);
    assert_eq!(survivor.score, 0.9);
    assert_eq!(survivor.suggested_type.as_deref(), Some("llm"));
    assert_eq!(survivor.capabilities, json!(["crm"]));
    assert_eq!(survivor.evidence.as_array().map(Vec::len), Some(5));
    assert!(list.iter().any(|c| c.id == invoice.id));
    assert!(list.iter().any(|c| c.id == report.id));
    // The absorbed candidates are gone.
    for absorbed in [&dash.id, &two.id] {
        assert_eq!(kind(s.dismiss(&p, absorbed).await), ErrorKind::NotFound);
    }
    assert_eq!(pending(&s, &other).await[0].id, foreign.id);
    let all = s
        .list(&p, &[("status".into(), "all".into())])
        .await
        .unwrap();
    assert_eq!(all.total, 4, "the dismissed candidate stays");

    // A later event of the survivor's fingerprint merges into it.
    let (next, created) = ingest(&s, &p, json!({"name": "sales helper"})).await;
    assert!(!created);
    assert_eq!(next.id, survivor.id);

    // A lower threshold joins more; the task is tenant-scoped.
    ingest(&s, &p, json!({"name": "invoice-parser-bot"})).await;
    let t2 = s
        .start_cluster(&p, &body(json!({"threshold": 0.5})))
        .await
        .unwrap();
    assert_eq!(
        kind(s.cluster_status(&other, &t2.task_id).await),
        ErrorKind::NotFound
    );
    assert_eq!(kind(s.cluster_status(&p, "x").await), ErrorKind::NotFound);
    run_one_cluster_task(&s, &db.pool).await;
    let done = s.cluster_status(&p, &t2.task_id).await.unwrap();
    assert_eq!((done.status.as_str(), done.merged), ("completed", 1));
    assert_eq!(pending(&s, &p).await.len(), 3);
});

db_test!(cluster_worker_runs_queued_tasks, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let r = s
        .ingest_batch(
            &p,
            &body(json!({"cluster": true, "events": [
                {"name": "data-sync-agent"}, {"name": "Data Sync Agent"}, {"name": "datasyncagent1"},
                {"name": "mailer"}
            ]})),
        )
        .await
        .unwrap();
    let task_id = r.cluster_task_id.unwrap();
    let worker = tokio::spawn(s.clone().run_cluster_worker());
    let mut task = s.cluster_status(&p, &task_id).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if task.status == "completed" || task.status == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        task = s.cluster_status(&p, &task_id).await.unwrap();
    }
    worker.abort();
    assert_eq!(task.status, "completed", "{task:?}");
    assert_eq!(task.merged, 2);
    let list = pending(&s, &p).await;
    assert_eq!(list.len(), 2);
    assert!(list.iter().any(|c| c.event_count == 3));
});

db_test!(clustering_during_ingest_loses_no_event, |db| {
    let s = service(&db.pool);
    let p = dev(tenant(&db.pool).await);
    let names = [
        "order-bot",
        "Order Bot",
        "orderbot1",
        "order_bot",
        "ORDER-BOT-2",
    ];
    let worker = tokio::spawn(s.clone().run_cluster_worker());
    let mut writers = Vec::new();
    for w in 0..4 {
        let (s, p) = (s.clone(), p.clone());
        writers.push(tokio::spawn(async move {
            for i in 0..15 {
                let name = names[(w + i) % names.len()];
                let events: Vec<Value> = (0..3).map(|_| json!({"name": name})).collect();
                s.ingest_batch(&p, &body(json!({"events": events, "cluster": i % 5 == 0})))
                    .await
                    .unwrap();
                s.ingest(&p, &body(json!({"name": name}))).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    // Let the queued tasks finish, then one last clustering.
    let last = s.start_cluster(&p, &Body::default()).await.unwrap();
    let mut task = s.cluster_status(&p, &last.task_id).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if task.status == "completed" || task.status == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        task = s.cluster_status(&p, &last.task_id).await.unwrap();
    }
    worker.abort();
    assert_eq!(task.status, "completed", "{task:?}");
    let list = pending(&s, &p).await;
    let total: i64 = list.iter().map(|c| c.event_count).sum();
    assert_eq!(total, 4 * 15 * 4, "every event is counted exactly once");
    assert_eq!(list.len(), 1, "{list:?}");
});

db_test!(tenants_are_isolated, |db| {
    let s = service(&db.pool);
    let a = dev(tenant(&db.pool).await);
    let b = dev(tenant(&db.pool).await);
    let (c, _) = ingest(&s, &a, json!({"name": "secret-bot"})).await;
    // Same fingerprint in another tenant: a separate candidate.
    let (other, created) = ingest(&s, &b, json!({"name": "secret-bot"})).await;
    assert!(created);
    assert_ne!(other.id, c.id);
    assert_eq!(
        kind(s.confirm(&b, &c.id, &Body::default()).await),
        ErrorKind::NotFound
    );
    assert_eq!(kind(s.dismiss(&b, &c.id).await), ErrorKind::NotFound);
    let list_b = pending(&s, &b).await;
    assert_eq!(list_b.len(), 1);
    assert_eq!(list_b[0].id, other.id);
    assert_eq!(pending(&s, &a).await[0].status, "pending");
});

db_test!(roles_are_checked_first, |db| {
    let s = service(&db.pool);
    let t = tenant(&db.pool).await;
    let viewer = as_role(t, Role::Viewer);
    let broken = Body::new(Some("application/json".into()), b"{".to_vec());
    let id = ingest(&s, &dev(t), json!({"name": "x"})).await.0.id;
    {
        let p = &viewer;
        assert_eq!(kind(s.ingest(p, &broken).await), ErrorKind::Forbidden);
        assert_eq!(kind(s.ingest_batch(p, &broken).await), ErrorKind::Forbidden);
        assert_eq!(
            kind(s.list(p, &[("limit".into(), "x".into())]).await),
            ErrorKind::Forbidden
        );
        assert_eq!(kind(s.confirm(p, &id, &broken).await), ErrorKind::Forbidden);
        assert_eq!(kind(s.dismiss(p, "not-an-id").await), ErrorKind::Forbidden);
        assert_eq!(
            kind(s.start_cluster(p, &broken).await),
            ErrorKind::Forbidden
        );
        assert_eq!(
            kind(s.cluster_status(p, "not-an-id").await),
            ErrorKind::Forbidden
        );
    }
    // Viewers read integration status.
    assert!(s
        .integration_status(&viewer, "agent_framework")
        .await
        .is_ok());
    // Developers and above pass.
    for role in [
        Role::Developer,
        Role::SecurityAnalyst,
        Role::Admin,
        Role::SuperAdmin,
    ] {
        assert!(s.list(&as_role(t, role), &[]).await.is_ok());
    }
    // Body problems come after the role check: 400 then 422.
    assert_eq!(
        kind(s.ingest(&dev(t), &broken).await),
        ErrorKind::BadRequest
    );
    assert_eq!(fields(s.ingest(&dev(t), &Body::default()).await), ["body"]);
});

db_test!(integration_status_counts_events, |db| {
    let s = service_with(
        &db.pool,
        IntegrationSettings {
            agent_framework_enabled: true,
            model_provider_enabled: false,
        },
    );
    let t = tenant(&db.pool).await;
    let p = dev(t);
    let viewer = as_role(t, Role::Viewer);
    let st = s
        .integration_status(&viewer, "agent_framework")
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&st).unwrap(),
        json!({"integration": "agent_framework", "enabled": true, "status": "ok",
               "discovery_fallback": true, "events_received": 0})
    );
    ingest(&s, &p, json!({"name": "a", "source": "agent_framework"})).await;
    ingest(&s, &p, json!({"name": "a", "source": "agent_framework"})).await;
    ingest(&s, &p, json!({"name": "b", "source": "model_provider"})).await;
    ingest(&s, &p, json!({"name": "c"})).await;
    s.ingest_batch(
        &p,
        &body(json!({"events": [
            {"name": "d", "source": "agent_framework"}, {"name": "e", "source": "agent_framework"}
        ]})),
    )
    .await
    .unwrap();
    let st = s
        .integration_status(&viewer, "agent_framework")
        .await
        .unwrap();
    assert_eq!(st.events_received, 4);
    let mp = s
        .integration_status(&viewer, "model_provider")
        .await
        .unwrap();
    assert_eq!(
        (mp.enabled, mp.status.as_str(), mp.events_received),
        (false, "disabled", 1)
    );
    assert_eq!(
        kind(s.integration_status(&viewer, "slack").await),
        ErrorKind::NotFound
    );
    // Another tenant's counters are its own.
    let q = as_role(tenant(&db.pool).await, Role::Viewer);
    assert_eq!(
        s.integration_status(&q, "agent_framework")
            .await
            .unwrap()
            .events_received,
        0
    );
});

db_test!(feed_from_other_sources, |db| {
    let s = service(&db.pool);
    let t = tenant(&db.pool).await;
    let p = dev(t);
    // A webhook of an unknown agent id: the id is the fingerprint.
    let agent_id = "0b9d6c62-1111-4222-8333-444455556666";
    let w1 = s
        .feed(
            t,
            "unknown-0b9d6c62",
            Some(agent_id),
            "webhook",
            json!({"action": "read"}),
        )
        .await
        .unwrap();
    let w2 = s
        .feed(
            t,
            "renamed",
            Some(agent_id),
            "webhook",
            json!({"action": "write"}),
        )
        .await
        .unwrap();
    assert_eq!(w1.id, w2.id);
    assert_eq!(w2.fingerprint, agent_id);
    assert_eq!(w2.source, "webhook");
    assert_eq!(w2.name, "unknown-0b9d6c62");
    assert_eq!(w2.event_count, 2);
    assert_eq!(w2.evidence[1]["data"], json!({"action": "write"}));
    // An orphan anomaly report with an agent name.
    let a = s
        .feed(
            t,
            "  Rogue Bot ",
            None,
            "anomaly",
            json!({"risk_score": 0.9}),
        )
        .await
        .unwrap();
    assert_eq!(
        (a.name.as_str(), a.fingerprint.as_str(), a.source.as_str()),
        ("Rogue Bot", "rogue bot", "anomaly")
    );
    let (merged, created) = ingest(&s, &p, json!({"name": "rogue bot"})).await;
    assert!(!created);
    assert_eq!(merged.id, a.id);
    // Long names are cut; a blank name needs a fingerprint.
    let long = s
        .feed(t, &"n".repeat(300), None, "anomaly", json!({}))
        .await
        .unwrap();
    assert_eq!(long.name.chars().count(), 128);
    assert_eq!(
        kind(s.feed(t, "  ", None, "anomaly", json!({})).await),
        ErrorKind::ValidationFailed
    );
    assert_eq!(
        s.feed(t, "", Some("fp-9"), "webhook", json!({}))
            .await
            .unwrap()
            .name,
        "fp-9"
    );
});

#[test]
fn sqlite_migrations_redo_each_step() {
    let (target, dir) = TestDb::sqlite_target();
    let n = steward_store::migrate::redo_each_blocking(&target).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 5);
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
    assert!(result.unwrap_or_else(|e| panic!("{e}")) >= 5);
}
