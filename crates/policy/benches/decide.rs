//! Decisions per second for the three default policies plus `hitl`, in process.
//!
//! `cargo bench -p steward-policy --bench decide` (a plain timing loop, no extra dependency).
//! It measures the synchronous path (compiled set + aggregation + rules scoring on one thread)
//! and the service path's engine part (the blocking pool hand-off included), then the modules
//! alone on regorus and on the real OPA engine (when its Python bindings are installed, see
//! fixtures/opa/README.md), with the ratio.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use steward_core::{AgentId, PolicyId, TenantId};
use steward_policy::{
    decide, template, AgentInfo, AgentState, Aggregation, CompiledSet, EvalLimits, Evaluator,
    PolicySource, RulesScorer,
};

fn inputs(tenant: TenantId, agent: &AgentInfo) -> Vec<(String, String, Value, Value)> {
    let cases = [
        ("read_data", "crm/contacts", json!({})),
        (
            "read_data",
            "crm/contacts",
            json!({"personal_data": true, "consent": true, "purpose": "support"}),
        ),
        (
            "read_phi",
            "ehr/patients/42",
            json!({"purpose": "marketing"}),
        ),
        (
            "export_phi",
            "ehr/exports",
            json!({"purpose": "treatment", "encrypted": true}),
        ),
        (
            "write_data",
            "users/ru/1001",
            json!({"data_subject_country": "RU", "consent": true, "purpose": "account", "storage_region": "EU"}),
        ),
        ("export_data", "reports/q3", json!({"records": 5000})),
        ("delete_data", "tmp/cache", json!({"approved": true})),
        (
            "read_data",
            "shared/ledger",
            json!({"target_tenant_id": "other"}),
        ),
    ];
    cases
        .into_iter()
        .map(|(action, resource, context)| {
            let input = json!({
                "action": action, "resource": resource, "context": context,
                "tenant_id": tenant.to_string(), "agent": agent.input_document(),
            });
            (action.to_owned(), resource.to_owned(), context, input)
        })
        .collect()
}

/// The registered, active agent every benchmark input names.
fn bench_agent() -> AgentInfo {
    AgentInfo {
        id: AgentId::new(),
        name: "bench".into(),
        agent_type: "llm".into(),
        capabilities: vec!["read".into()],
        permissions: json!({}),
        status: "active".into(),
    }
}

fn compiled(evaluator: Evaluator) -> CompiledSet {
    let sources = ["gdpr", "hipaa", "fz152", "hitl"]
        .into_iter()
        .map(|id| PolicySource {
            policy_id: PolicyId::new(),
            name: id.to_owned(),
            rego: template(id).map(|t| t.rego.to_owned()).unwrap_or_default(),
        })
        .collect();
    CompiledSet::compile(sources, EvalLimits::default(), evaluator)
}

fn run(label: &str, evaluator: Evaluator, budget: Duration) {
    let tenant = TenantId::new();
    let agent = bench_agent();
    let set = compiled(evaluator);
    let cases = inputs(tenant, &agent);
    let scorer = RulesScorer::default();
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < budget {
        for (action, resource, context, input) in &cases {
            let input = regorus::Value::from(input.clone());
            let outcomes = set.evaluate_blocking(&input);
            let risk = scorer.score(action, resource, context).risk_score;
            let d = decide(
                &Aggregation {
                    agent_id: "bench",
                    agent: AgentState::Registered(&agent),
                    outcomes: &outcomes,
                    action,
                    context,
                    hitl_risk_threshold: 0.8,
                },
                risk,
            );
            black_box(d);
            n += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label}: {n} decisions in {secs:.2} s = {:.0} decisions/s on one thread ({:.1} µs each)",
        n as f64 / secs,
        secs * 1e6 / n as f64
    );
}

/// The engine part of the service path: `EmbeddedEngine::evaluate_set` (inline pass, or the
/// blocking-pool hand-off) from `tasks` concurrent tasks on a two-thread runtime.
fn run_pool(tasks: usize, inline: bool, budget: Duration) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return eprintln!("no runtime: {e}"),
    };
    let dir = std::env::temp_dir().join(format!("steward-bench-{}", std::process::id()));
    let target = steward_store::DbTarget::Sqlite(dir.join("bench.db"));
    let pool = match steward_store::DbPool::new(&target, &steward_store::DbSettings::default()) {
        Ok(p) => p,
        Err(e) => return eprintln!("no pool: {e}"),
    };
    let settings = steward_policy::EngineSettings {
        inline,
        ..Default::default()
    };
    let engine = std::sync::Arc::new(steward_policy::EmbeddedEngine::new(pool, settings));
    let set = std::sync::Arc::new(compiled(Evaluator::Vm));
    let agent = bench_agent();
    let input = regorus::Value::from(inputs(TenantId::new(), &agent)[1].3.clone());
    let n = runtime.block_on(async {
        let started = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let (engine, set, input) = (engine.clone(), set.clone(), input.clone());
            // Each task a tenant of its own: the pool is measured, not one tenant's share.
            let tenant = TenantId::new();
            handles.push(tokio::spawn(async move {
                let mut n = 0u64;
                while started.elapsed() < budget {
                    black_box(
                        engine
                            .evaluate_set(tenant, set.clone(), input.clone())
                            .await,
                    );
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for h in handles {
            total += h.await.unwrap_or(0);
        }
        total
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "engine, inline pass {}: {:.0} evaluations/s ({tasks} tasks, 2 runtime workers)",
        if inline {
            "on"
        } else {
            "off (all on the blocking pool)"
        },
        n as f64 / budget.as_secs_f64()
    );
}

/// The modules alone (no aggregation, no scoring) on regorus' VM and on the real OPA engine
/// (through `fixtures/opa/bench.py` and the Python bindings of the OPA Go library), same
/// modules as Steward loads them into OPA, same inputs, same run.
fn compare_with_opa(budget: Duration) {
    let tenant = TenantId::new();
    let agent = bench_agent();
    let set = compiled(Evaluator::Vm);
    let cases = inputs(tenant, &agent);
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < budget {
        for (_, _, _, input) in &cases {
            black_box(set.evaluate_blocking(&regorus::Value::from(input.clone())));
            n += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let ours = n as f64 / secs;
    println!(
        "modules only, regorus VM: {ours:.0} evaluations/s on one thread ({:.1} µs each)",
        secs * 1e6 / n as f64
    );
    let python = std::env::var("STEWARD_OPA_PYTHON").ok().or_else(|| {
        let home = std::env::var("HOME").ok()?;
        let p = format!("{home}/.cache/steward/opa-venv/bin/python");
        std::path::Path::new(&p).exists().then_some(p)
    });
    let Some(python) = python else {
        return println!(
            "OPA comparison skipped: no OPA bindings (set STEWARD_OPA_PYTHON; fixtures/opa/README.md)"
        );
    };
    let (modules, query) = match steward_policy::opa_modules("steward", tenant, &set) {
        Ok(m) => m,
        Err(e) => return eprintln!("OPA comparison: {e}"),
    };
    let spec = json!({
        "modules": modules,
        "query": query,
        "inputs": cases.iter().map(|c| c.3.clone()).collect::<Vec<_>>(),
    });
    let path = std::env::temp_dir().join(format!("steward-opa-bench-{}.json", std::process::id()));
    if let Err(e) = std::fs::write(&path, spec.to_string()) {
        return eprintln!("OPA comparison: {e}");
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/opa/bench.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&path)
        .arg(budget.as_secs_f64().to_string())
        .output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => {
            return eprintln!(
                "OPA comparison failed: {}",
                String::from_utf8_lossy(&o.stderr)
            )
        }
        Err(e) => return eprintln!("OPA comparison: {e}"),
    };
    let r: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
    let (each, trivial) = (
        r["us_each"].as_f64().unwrap_or(f64::NAN),
        r["trivial_us_each"].as_f64().unwrap_or(f64::NAN),
    );
    let net = (each - trivial).max(f64::MIN_POSITIVE);
    println!(
        "modules only, OPA v1 engine (Go, via Python bindings): {:.0} evaluations/s ({each:.1} µs \
         each, of which {trivial:.1} µs is the bindings' call overhead measured on a trivial module)",
        r["per_s"].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "ratio regorus VM / OPA: {:.1}x as measured, {:.1}x with OPA's binding overhead removed",
        each / (secs * 1e6 / n as f64),
        net / (secs * 1e6 / n as f64)
    );
}

fn main() {
    let budget = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    );
    run("vm", Evaluator::Vm, budget);
    run("interpreter", Evaluator::Interpreter, budget);
    run_pool(8, true, budget);
    run_pool(8, false, budget);
    compare_with_opa(budget);
}
