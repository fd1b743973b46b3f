//! `cargo bench -p steward-registry --bench search`: the hashed embedding of an agent profile
//! and of a query, and a search of a tenant's in-memory index of 10,000 and 100,000 agents
//! (top 20), as `GET /agents/search` runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use steward_core::AgentId;
use steward_registry::embedding::{Embedding, Profile};
use steward_registry::index::TenantIndex;

const WORDS: [&str; 12] = [
    "invoice", "parser", "support", "chat", "billing", "search", "report", "etl", "fraud", "risk",
    "crm", "mail",
];

fn profile_embedding(i: usize) -> Embedding {
    let name = format!(
        "{}-{}-{i}",
        WORDS[i % WORDS.len()],
        WORDS[(i / 7) % WORDS.len()]
    );
    let caps = vec![
        "observe".to_owned(),
        WORDS[(i / 3) % WORDS.len()].to_owned(),
    ];
    let acts = vec!["read_data".to_owned(), "write_data".to_owned()];
    Embedding::of_agent(&Profile {
        name: &name,
        agent_type: "assistant",
        capabilities: &caps,
        actions: &acts,
    })
}

fn embedding(c: &mut Criterion) {
    let caps = vec!["observe".to_owned(), "billing".to_owned()];
    let acts: Vec<String> = (0..10).map(|i| format!("read_data crm/{i}")).collect();
    c.bench_function("registry embed agent profile", |b| {
        b.iter(|| {
            black_box(Embedding::of_agent(&Profile {
                name: black_box("invoice-parser-42"),
                agent_type: "assistant",
                capabilities: &caps,
                actions: &acts,
            }))
        })
    });
    c.bench_function("registry embed query", |b| {
        b.iter(|| black_box(Embedding::of_query(black_box("invoice parser billing"))))
    });
}

fn search(c: &mut Criterion) {
    for n in [10_000usize, 100_000] {
        let index = TenantIndex::new((0..n).map(|i| (AgentId::new(), profile_embedding(i))));
        c.bench_function(&format!("registry embed query + search {n} agents"), |b| {
            b.iter(|| {
                let q = Embedding::of_query(black_box("invoice parser"));
                black_box(index.search(&q, 20))
            })
        });
    }
}

criterion_group!(benches, embedding, search);
criterion_main!(benches);
