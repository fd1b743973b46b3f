//! The report of `cargo xtask bench`: `report.json` and a Markdown table (`report.md`), each
//! scenario beside its target (issues 3–6, 13–15, 18 and docs/benchmarks.md).

use serde_json::{json, Value};

use crate::suite::SuiteOpts;

#[derive(Default, Clone)]
pub struct Row {
    pub name: String,
    pub backend: String,
    pub clients: usize,
    pub seconds: f64,
    pub count: u64,
    pub errors: u64,
    pub throughput: f64,
    pub unit: String,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub server_cpu: f64,
    pub server_cpu_pct: f64,
    pub peak_rss_mib: f64,
    pub gen_cpu: f64,
    pub vs_health: Option<f64>,
    pub note: String,
}

pub struct Startup {
    pub backend: String,
    pub fresh_ms: f64,
    pub migrated_ms: f64,
    pub idle_rss_mib: f64,
}

pub struct Micro {
    pub package: String,
    pub bench: String,
    pub what: String,
    /// (criterion id, mean ns, median ns)
    pub criterion: Vec<(String, f64, f64)>,
    /// The bench's own summary lines (percentiles, rates, ratios).
    pub lines: Vec<String>,
}

pub struct Report {
    pub command: String,
    pub date: String,
    pub machine: Value,
    pub quick: bool,
    pub scale: f64,
    pub seconds: u64,
    pub bin: String,
    pub rows: Vec<Row>,
    pub startup: Vec<Startup>,
    pub peers: Vec<Value>,
    pub micro: Vec<Micro>,
    pub notes: Vec<String>,
}

fn sh(cmd: &str) -> String {
    std::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The target of a scenario and whether the row meets it (`None`: no target).
pub fn target(r: &Row) -> (&'static str, Option<bool>) {
    match r.name.as_str() {
        "health" => ("the HTTP ceiling", None),
        "check" => (
            "≥ 8,000/s, p99 < 5 ms (issue 5)",
            Some(r.throughput >= 8000.0 && r.p99 < 5.0),
        ),
        "guard" => (
            "≥ 40 % of /health, p99 < 5 ms (issue 15)",
            Some(r.vs_health.unwrap_or(0.0) >= 0.4 && r.p99 < 5.0),
        ),
        "audit-write-8" => (
            "≥ 5,000/s, p99 < 20 ms (issue 6)",
            Some(r.throughput >= 5000.0 && r.p99 < 20.0),
        ),
        "audit-write-hot" => ("measured beside the 8 tenants (issue 6)", None),
        "heartbeat" => ("— (issue 4: figure only; 2,507/s earlier)", None),
        "search" => (
            "p95 < 20 ms over 100,000 agents (issue 4)",
            Some(r.p95 < 20.0),
        ),
        "audit-list" => ("—", None),
        "stats" => (
            "p95 < 20 ms with 1,000,000 entries (issue 18)",
            Some(r.p95 < 20.0),
        ),
        "anomaly-report" => ("— over HTTP (in process: p99 < 20 µs, see micro)", None),
        "hitl-round-trip" => ("—", None),
        "login" => ("p50 < 100 ms (issue 3)", Some(r.p50 < 100.0)),
        "ws-fanout" => (
            "p99 < 50 ms, no client dropped (issue 13)",
            Some(r.p99 < 50.0 && r.errors == 0),
        ),
        "export" => (
            "≥ 100,000 entries/s, peak RSS < 100 MB (issue 6)",
            Some(r.throughput >= 100_000.0 && r.peak_rss_mib < 100.0),
        ),
        _ => ("—", None),
    }
}

fn fmt_n(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let s = format!("{:.0}", v);
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

impl Report {
    pub fn new(o: &SuiteOpts) -> Report {
        let date = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let machine = json!({
            "nproc": sh("nproc"),
            "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
            "memory": sh("grep MemTotal /proc/meminfo | awk '{printf \"%.1f GiB\", $2/1048576}'"),
            "kernel": sh("uname -r"),
            "postgres": sh("psql -h 127.0.0.1 -U postgres -Atc 'SHOW server_version' 2>/dev/null"),
            "load_before": sh("cut -d' ' -f1-3 /proc/loadavg"),
        });
        Report {
            command: o.command.clone(),
            date,
            machine,
            quick: o.quick,
            scale: o.scale,
            seconds: o.seconds,
            bin: o.bin.display().to_string(),
            rows: Vec::new(),
            startup: Vec::new(),
            peers: Vec::new(),
            micro: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Ratios that need figures from several parts of the run.
    pub fn finish(&mut self) {
        let rows = self.rows.clone();
        for p in &mut self.peers {
            if p["scenario"] == "audit-write-8" {
                if let Some(r) = rows.iter().find(|r| r.name == "audit-write-8") {
                    let peer = p["peer_throughput"].as_f64().unwrap_or(0.0);
                    p["ours_throughput"] = json!(r.throughput);
                    p["ours_p99_ms"] = json!(r.p99);
                    p["ratio"] = json!(r.throughput / peer.max(1e-9));
                    p["ratio_meaning"] = json!("Steward audit entries/s (chained, signed, 64 clients over 8 tenants) ÷ pgbench plain INSERTs/s");
                }
            }
            if p["peer"]
                .as_str()
                .is_some_and(|s| s.contains("IsolationForest"))
            {
                let ours = self
                    .micro
                    .iter()
                    .flat_map(|m| m.criterion.iter())
                    .find(|(id, _, _)| id.contains("score_event") || id.contains("score event"))
                    .map(|(_, mean, _)| *mean);
                if let Some(ns) = ours {
                    let peer_us = p["single_p50_us"].as_f64().unwrap_or(0.0);
                    p["ours_single_mean_us"] = json!(ns / 1e3);
                    p["ratio"] = json!(peer_us * 1e3 / ns.max(1e-9));
                    p["ratio_meaning"] = json!("scikit-learn's time to score one event (p50, forest only, features given) ÷ Steward's in-process time for one event (criterion mean, features + forest + rules)");
                }
                if let Some(r) = rows.iter().find(|r| r.name == "anomaly-report") {
                    p["ours_http_reports_per_s"] = json!(r.throughput);
                }
            }
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "command": self.command, "date": self.date, "machine": self.machine,
            "quick": self.quick, "scale": self.scale, "seconds_per_scenario": self.seconds,
            "binary": self.bin,
            "scenarios": self.rows.iter().map(|r| {
                let (t, met) = target(r);
                json!({
                    "name": r.name, "backend": r.backend, "clients": r.clients, "seconds": r.seconds,
                    "completed": r.count, "errors": r.errors, "throughput": r.throughput, "unit": r.unit,
                    "latency_ms": {"p50": r.p50, "p95": r.p95, "p99": r.p99, "max": r.max},
                    "server_cpu_s": r.server_cpu, "server_cpu_pct": r.server_cpu_pct,
                    "server_peak_rss_mib": r.peak_rss_mib, "generator_cpu_s": r.gen_cpu,
                    "ratio_to_health": r.vs_health, "target": t, "target_met": met, "note": r.note,
                })
            }).collect::<Vec<_>>(),
            "startup": self.startup.iter().map(|s| json!({
                "backend": s.backend, "start_to_ready_fresh_ms": s.fresh_ms,
                "start_to_ready_migrated_ms": s.migrated_ms, "idle_rss_mib": s.idle_rss_mib,
                "targets": "idle RSS < 60 MB on SQLite, start-to-ready < 1 s with migrations applied",
            })).collect::<Vec<_>>(),
            "peers": self.peers,
            "micro": self.micro.iter().map(|m| json!({
                "package": m.package, "bench": m.bench, "what": m.what,
                "criterion": m.criterion.iter().map(|(id, mean, median)| json!({"id": id, "mean_ns": mean, "median_ns": median})).collect::<Vec<_>>(),
                "summary": m.lines,
            })).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "Command `{}`, {} (UTC). Machine: {} cores ({}), {} memory, kernel {}, PostgreSQL {}; load average before the run {}. Binary `{}`; {} s per scenario, scale {}{}.\n\n",
            self.command,
            self.date,
            self.machine["nproc"].as_str().unwrap_or("?"),
            self.machine["cpu"].as_str().unwrap_or("?"),
            self.machine["memory"].as_str().unwrap_or("?"),
            self.machine["kernel"].as_str().unwrap_or("?"),
            self.machine["postgres"].as_str().unwrap_or("?"),
            self.machine["load_before"].as_str().unwrap_or("?"),
            self.bin,
            self.seconds,
            self.scale,
            if self.quick { " (quick)" } else { "" },
        ));
        s.push_str("| scenario | backend | clients | throughput | p50 | p95 | p99 | max (ms) | errors | × /health | server CPU | server peak RSS | generator CPU | target | met |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let (t, met) = target(r);
            s.push_str(&format!(
                "| {} | {} | {} | {} {} | {} | {} | {} | {} | {} | {} | {:.0} % | {:.0} MiB | {:.1} s | {} | {} |\n",
                r.name,
                r.backend,
                r.clients,
                fmt_n(r.throughput),
                r.unit,
                fmt_ms(r.p50),
                fmt_ms(r.p95),
                fmt_ms(r.p99),
                fmt_ms(r.max),
                r.errors,
                r.vs_health.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into()),
                r.server_cpu_pct,
                r.peak_rss_mib,
                r.gen_cpu,
                t,
                match met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "–",
                }
            ));
        }
        let notes: Vec<&Row> = self.rows.iter().filter(|r| !r.note.is_empty()).collect();
        if !notes.is_empty() {
            s.push('\n');
            for r in notes {
                s.push_str(&format!("- {} ({}): {}\n", r.name, r.backend, r.note));
            }
        }
        if !self.startup.is_empty() {
            s.push_str("\n| start-up | start to ready, fresh database (migrations applied) | start to ready, migrated | idle RSS | target |\n|---|---|---|---|---|\n");
            for st in &self.startup {
                s.push_str(&format!(
                    "| {} | {:.0} ms | {:.0} ms | {:.1} MiB | < 1 s; idle RSS < 60 MB on SQLite: {} |\n",
                    st.backend,
                    st.fresh_ms,
                    st.migrated_ms,
                    st.idle_rss_mib,
                    if st.fresh_ms < 1000.0 && (st.backend != "sqlite" || st.idle_rss_mib * 1.048576 < 60.0) {
                        "yes"
                    } else {
                        "**no**"
                    }
                ));
            }
        }
        if !self.peers.is_empty() {
            s.push_str("\n| peer | scenario | peer figure | Steward | ratio | meaning |\n|---|---|---|---|---|---|\n");
            for p in &self.peers {
                let (peer_fig, ours_fig) = if p["peer"]
                    .as_str()
                    .is_some_and(|x| x.contains("IsolationForest"))
                {
                    (
                        format!(
                            "{:.1} µs p50 / {:.1} µs p99 per single event; {} rows/s in batches",
                            p["single_p50_us"].as_f64().unwrap_or(f64::NAN),
                            p["single_p99_us"].as_f64().unwrap_or(f64::NAN),
                            fmt_n(p["batch_rows_per_s"].as_f64().unwrap_or(f64::NAN))
                        ),
                        format!(
                            "{:.2} µs per event in process; {} reports/s over HTTP",
                            p["ours_single_mean_us"].as_f64().unwrap_or(f64::NAN),
                            fmt_n(p["ours_http_reports_per_s"].as_f64().unwrap_or(f64::NAN))
                        ),
                    )
                } else {
                    (
                        format!(
                            "{}/s, p99 {:.2} ms",
                            fmt_n(p["peer_throughput"].as_f64().unwrap_or(f64::NAN)),
                            p["peer_p99_ms"].as_f64().unwrap_or(f64::NAN)
                        ),
                        format!(
                            "{}/s, p99 {:.2} ms",
                            fmt_n(p["ours_throughput"].as_f64().unwrap_or(f64::NAN)),
                            p["ours_p99_ms"].as_f64().unwrap_or(f64::NAN)
                        ),
                    )
                };
                s.push_str(&format!(
                    "| {} | {} ({}) | {} | {} | **{:.2}×** | {} |\n",
                    p["peer"].as_str().unwrap_or("?"),
                    p["scenario"].as_str().unwrap_or("?"),
                    p["backend"].as_str().unwrap_or("-"),
                    peer_fig,
                    ours_fig,
                    p["ratio"].as_f64().unwrap_or(f64::NAN),
                    p["ratio_meaning"].as_str().unwrap_or("")
                ));
            }
        }
        if !self.micro.is_empty() {
            s.push_str("\n| micro-benchmark | measurement | figure |\n|---|---|---|\n");
            for m in &self.micro {
                for (id, mean, median) in &m.criterion {
                    s.push_str(&format!(
                        "| `cargo bench -p {} --bench {}` ({}) | criterion `{}` | mean {}, median {} |\n",
                        m.package,
                        m.bench,
                        m.what,
                        id,
                        fmt_ns(*mean),
                        fmt_ns(*median)
                    ));
                }
                for l in &m.lines {
                    s.push_str(&format!(
                        "| `cargo bench -p {} --bench {}` ({}) | | {} |\n",
                        m.package,
                        m.bench,
                        m.what,
                        l.replace('|', "\\|")
                    ));
                }
            }
        }
        if !self.notes.is_empty() {
            s.push_str("\nNotes:\n");
            for n in &self.notes {
                s.push_str(&format!("- {n}\n"));
            }
        }
        s
    }
}
