//! `cargo bench -p steward-audit --bench chain`: what the write path computes per entry —
//! the RFC 8785 canonical bytes of the signed object, its SHA-256 hash and its HMAC-SHA256
//! signature (contract 14.3) — for a typical entry (small input/output/reasoning).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use serde_json::json;
use steward_audit::chain::SignedFields;
use steward_audit::{canonical_bytes, ChainHasher, GENESIS_HASH};

fn entry(c: &mut Criterion) {
    let input = json!({"query": "select name, email from contacts where id = 42", "rows": 17,
                       "filters": {"country": "DE", "active": true}});
    let output = json!({"status": "ok", "records": 17});
    let reasoning = json!([
        "needed for the support ticket",
        "customer asked for a callback"
    ]);
    let fields = SignedFields {
        seq: 123_456,
        id: "0b0f9e55-7a43-4b4e-9d0b-2b1f2b0e7c11",
        tenant_id: "5e0c1f0e-8d7d-4b9a-a3a1-2d1f4f0b9c22",
        agent_id: Some("7f2a3b4c-5d6e-4f70-8a9b-0c1d2e3f4a55"),
        user_id: None,
        action: "read_data",
        resource: "crm/contacts/42",
        input: &input,
        output: &output,
        reasoning: &reasoning,
        risk_score: 0.25,
        is_approved: true,
        timestamp: "2026-11-25T06:00:00.123456Z",
        prev_hash: GENESIS_HASH,
    };
    let hasher = ChainHasher::new(Some(b"bench-secret-key-0123456789abcdef"));
    c.bench_function("audit canonical json", |b| {
        b.iter(|| black_box(canonical_bytes(black_box(&fields))))
    });
    c.bench_function("audit canonical json + sha256 + hmac", |b| {
        b.iter(|| {
            let bytes = canonical_bytes(black_box(&fields));
            let hash = ChainHasher::hash(&bytes);
            let sig = hasher.sign(&bytes);
            black_box((hash, sig))
        })
    });
}

criterion_group!(benches, entry);
criterion_main!(benches);
