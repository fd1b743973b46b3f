//! `cargo xtask bench` (no scenario name): the whole benchmark suite in one command.
//!
//! Starts the server binary (`--bin`, default `target/release/steward`) on PostgreSQL + Redis
//! (default), on SQLite with the in-process cache and bus (`--embedded`), or both (`--both`);
//! seeds a data set (tenants, users, agents over the API; the bulk of the audit entries straight
//! into the database); drives every hot path over HTTP with the load generator of `bench.rs`;
//! measures `GET /health` in the same run as the ceiling; runs the peers (the real OPA engine,
//! pgbench's plain INSERT, scikit-learn's IsolationForest) and the in-process micro-benchmarks;
//! writes `target/bench/report.json` and `target/bench/report.md` (see `report.rs`).
//!
//! `--quick`: 3 s per scenario on a small seed, no peers, no micro-benchmarks; fails when a
//! scenario answers an error or completes nothing (a smoke test, never a time threshold).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::bench::{self, drive, expect_status, pool, register_agents, Conn, Options, Samples};
use crate::report::{Micro, Report, Row, Startup};

pub struct SuiteOpts {
    pub quick: bool,
    pub backends: Vec<Backend>,
    pub bin: PathBuf,
    pub scale: f64,
    pub seconds: u64,
    pub out: PathBuf,
    pub micro: bool,
    pub peers: bool,
    pub only: Option<Vec<String>>,
    pub guard_data: PathBuf,
    pub command: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres+redis",
            Backend::Sqlite => "sqlite",
        }
    }
}

const ADMIN_KEY: &str = "bench-suite-admin-key";
const SUPER_EMAIL: &str = "admin@bench.local";
const SUPER_PASSWORD: &str = "Bench-super-password-1";
const USER_PASSWORD: &str = "Bench-user-password-1";
const PG: &str = "postgres://postgres@127.0.0.1:5432";

pub fn parse(args: &[String]) -> Result<SuiteOpts> {
    let root = crate::workspace_root();
    let mut o = SuiteOpts {
        quick: false,
        backends: vec![Backend::Postgres],
        bin: root.join("target/release/steward"),
        scale: 1.0,
        seconds: 10,
        out: root.join("target/bench"),
        micro: true,
        peers: true,
        only: None,
        guard_data: std::env::var("STEWARD_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("../shared"))
            .join("guard-data"),
        command: format!("cargo xtask bench {}", args.join(" ")),
    };
    let (mut seconds, mut scale) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--quick" => o.quick = true,
            "--embedded" => o.backends = vec![Backend::Sqlite],
            "--both" => o.backends = vec![Backend::Postgres, Backend::Sqlite],
            "--bin" => o.bin = PathBuf::from(v()?),
            "--scale" => scale = Some(v()?.parse::<f64>()?),
            "--seconds" => seconds = Some(v()?.parse::<u64>()?),
            "--out" => o.out = PathBuf::from(v()?),
            "--no-micro" => o.micro = false,
            "--no-peers" => o.peers = false,
            "--only" => o.only = Some(v()?.split(',').map(str::to_owned).collect()),
            "--guard-data" => o.guard_data = PathBuf::from(v()?),
            other => bail!("unknown option {other} (cargo xtask bench [--quick] [--embedded|--both] [--bin PATH] [--scale F] [--seconds S] [--only a,b] [--no-micro] [--no-peers] [--out DIR])"),
        }
    }
    if o.quick {
        o.seconds = 3;
        o.scale = 0.01;
        o.micro = false;
        o.peers = false;
    }
    if let Some(s) = seconds {
        o.seconds = s.max(1);
    }
    if let Some(s) = scale {
        if !(s > 0.0 && s.is_finite()) {
            bail!("--scale must be > 0");
        }
        o.scale = s;
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------
// Processes and /proc.

fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process in seconds ("self" for this one).
fn cpu_secs(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / clk_tck()
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Resets the peak resident size (VmHWM) to the current one (Linux ≥ 4.0).
fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// Server CPU, generator CPU and the server's peak RSS over one measured section.
pub struct Meter {
    pid: u32,
    server0: f64,
    gen0: f64,
    t0: Instant,
}

pub struct Metered {
    pub server_cpu: f64,
    pub gen_cpu: f64,
    pub wall: f64,
    pub peak_rss_mib: f64,
}

impl Meter {
    fn start(pid: u32) -> Meter {
        reset_peak(pid);
        Meter {
            pid,
            server0: cpu_secs(&pid.to_string()),
            gen0: cpu_secs("self"),
            t0: Instant::now(),
        }
    }
    fn stop(self) -> Metered {
        Metered {
            server_cpu: cpu_secs(&self.pid.to_string()) - self.server0,
            gen_cpu: cpu_secs("self") - self.gen0,
            wall: self.t0.elapsed().as_secs_f64(),
            peak_rss_mib: status_kib(self.pid, "VmHWM:").unwrap_or(0) as f64 / 1024.0,
        }
    }
}

pub struct Server {
    child: Option<Child>,
    pub pid: u32,
    pub addr: String,
    dir: PathBuf,
    db: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(db) = &self.db {
            let _ = psql(
                "postgres",
                &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
            );
        }
    }
}

fn psql(db: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atq",
        ])
        .arg("-c")
        .arg(sql)
        .output()
        .context("psql")?;
    if !out.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn get_status(addr: &str, path: &str) -> Option<u16> {
    let mut c = Conn::open(addr).await.ok()?;
    c.call("GET", path, &[], None).await.ok().map(|r| r.0)
}

/// Where a server's data goes; `fresh` = a new empty database.
pub struct Place {
    backend: Backend,
    dir: PathBuf,
    db: Option<String>,
    redis_db: u8,
}

impl Place {
    fn new(backend: Backend, tag: &str, redis_db: u8) -> Result<Place> {
        let dir = std::env::temp_dir().join(format!(
            "steward-bench-{tag}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir)?;
        let db = match backend {
            Backend::Postgres => {
                let name = format!("steward_bench_{tag}_{}", std::process::id());
                psql(
                    "postgres",
                    &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
                )?;
                psql("postgres", &format!("CREATE DATABASE {name}"))?;
                let _ = Command::new("redis-cli")
                    .args(["-h", "127.0.0.1", "-n", &redis_db.to_string(), "FLUSHDB"])
                    .output();
                Some(name)
            }
            Backend::Sqlite => None,
        };
        Ok(Place {
            backend,
            dir,
            db,
            redis_db,
        })
    }

    fn database_url(&self) -> String {
        match &self.db {
            Some(db) => format!("{PG}/{db}"),
            None => format!("sqlite://{}/steward.db", self.dir.display()),
        }
    }

    pub fn sqlite_path(&self) -> PathBuf {
        self.dir.join("steward.db")
    }
}

/// Starts the server on `place`; answers it and the time from spawn to the first 200 of
/// `GET /health/ready`.
async fn start(
    bin: &Path,
    place: &Place,
    extra: &[(&str, String)],
    keep: bool,
) -> Result<(Server, Duration)> {
    let port = free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(place.dir.join("server.log"))?;
    let bin = std::fs::canonicalize(bin).with_context(|| format!("{}", bin.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.current_dir(&place.dir)
        .env("HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env("DATABASE_URL", place.database_url())
        .env("ADMIN_API_KEY", ADMIN_KEY)
        .env("SECRET_KEY", "bench-suite-secret-key-0123456789abcdef")
        .env("SUPER_ADMIN_EMAIL", SUPER_EMAIL)
        .env("SUPER_ADMIN_PASSWORD", SUPER_PASSWORD)
        .env("EXPORT_STORAGE_PATH", place.dir.join("exports"))
        .env("MODEL_STORAGE_PATH", place.dir.join("models"))
        .env("LOG_LEVEL", "WARNING")
        .env("RATE_LIMIT_ENABLED", "false")
        .env("AGENT_INACTIVITY_SECONDS", "86400")
        .env_remove("REDIS_URL")
        .env_remove("OPA_URL")
        .stdout(Stdio::null())
        .stderr(log);
    if place.backend == Backend::Postgres {
        cmd.env(
            "REDIS_URL",
            format!("redis://127.0.0.1:6379/{}", place.redis_db),
        );
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let pid = child.id();
    let mut server = Server {
        child: Some(child),
        pid,
        addr: addr.clone(),
        dir: if keep {
            PathBuf::new()
        } else {
            place.dir.clone()
        },
        db: None,
    };
    loop {
        if get_status(&addr, "/health/ready").await == Some(200) {
            break;
        }
        if let Some(c) = &mut server.child {
            if let Some(st) = c.try_wait()? {
                bail!(
                    "the server exited ({st}) before it was ready; see {}",
                    place.dir.join("server.log").display()
                );
            }
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("the server at {addr} was not ready after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok((server, t0.elapsed()))
}

// ---------------------------------------------------------------------------------------
// Load.

pub struct Req {
    pub method: &'static str,
    pub path: String,
    pub key: Arc<str>,
    pub body: Option<Value>,
    pub want: u16,
}

pub struct Run {
    pub samples: Samples,
    pub elapsed: Duration,
    pub errors: u64,
}

fn opts(addr: &str, seconds: u64) -> Result<Options> {
    let mut o = Options::from_args(&[])?;
    o.addr = addr.to_owned();
    o.admin_key = ADMIN_KEY.into();
    o.duration = Duration::from_secs(seconds);
    Ok(o)
}

/// `clients` keep-alive connections sending `make(client, i)` for `seconds`.
async fn load<F>(addr: &str, clients: usize, seconds: u64, make: F) -> Result<Run>
where
    F: Fn(usize, u64) -> Req + Send + Sync + 'static,
{
    let o = opts(addr, seconds)?;
    let conns = pool(addr, clients);
    let make = Arc::new(make);
    let addr = addr.to_owned();
    let (samples, elapsed, errors) = drive(&o, clients, move |client, i| {
        let (conns, addr, make) = (conns.clone(), addr.clone(), make.clone());
        async move {
            let r = make(client, i);
            let mut g = bench::with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            match c
                .call(r.method, &r.path, &[("X-API-Key", &r.key)], r.body.as_ref())
                .await
            {
                Ok((st, body)) => expect_status(st, r.want, &body)
                    .with_context(|| format!("{} {}", r.method, r.path)),
                Err(e) => {
                    *g = None;
                    Err(e)
                }
            }
        }
    })
    .await?;
    Ok(Run {
        samples,
        elapsed,
        errors,
    })
}

fn row(name: &str, backend: Backend, clients: usize, run: &Run, m: &Metered, unit: &str) -> Row {
    let n = run.samples.count();
    Row {
        name: name.to_owned(),
        backend: backend.name().to_owned(),
        clients,
        seconds: run.elapsed.as_secs_f64(),
        count: n as u64,
        errors: run.errors,
        throughput: n as f64 / run.elapsed.as_secs_f64().max(1e-9),
        unit: unit.to_owned(),
        p50: run.samples.pct(50.0),
        p95: run.samples.pct(95.0),
        p99: run.samples.pct(99.0),
        max: run.samples.pct(100.0),
        server_cpu: m.server_cpu,
        server_cpu_pct: 100.0 * m.server_cpu / m.wall.max(1e-9),
        peak_rss_mib: m.peak_rss_mib,
        gen_cpu: m.gen_cpu,
        ..Row::default()
    }
}

// ---------------------------------------------------------------------------------------
// Seeding.

async fn api(
    c: &mut Conn,
    method: &str,
    path: &str,
    auth: (&str, &str),
    body: Option<&Value>,
    want: u16,
) -> Result<Value> {
    let (s, b) = c
        .call(method, &format!("/api/v1{path}"), &[auth], body)
        .await?;
    if s != want {
        bail!("{method} {path} answered {s}: {b}");
    }
    Ok(b)
}

struct Seed {
    /// The tenant with the agents and the bulk of the audit entries.
    read_key: Arc<str>,
    read_agents: Arc<Vec<String>>,
    entries: u64,
    /// 8 tenants with 4 agents each for the audit writes.
    write: Arc<Vec<(Arc<str>, Vec<String>)>>,
    /// Users of the read tenant (emails) for the login scenario.
    users: Arc<Vec<String>>,
}

async fn tenant_id(addr: &str, key: &str) -> Result<String> {
    let mut c = Conn::open(addr).await?;
    let st = api(&mut c, "GET", "/status", ("X-API-Key", key), None, 200).await?;
    st["tenant"]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no tenant id in /status: {st}"))
}

async fn super_token(addr: &str) -> Result<String> {
    let mut c = Conn::open(addr).await?;
    let b = api(
        &mut c,
        "POST",
        "/auth/login",
        ("X-Bench", "1"),
        Some(&json!({"email": SUPER_EMAIL, "password": SUPER_PASSWORD})),
        200,
    )
    .await?;
    Ok(b["access_token"].as_str().unwrap_or_default().to_owned())
}

fn agents_opts(addr: &str) -> Result<Options> {
    let mut o = opts(addr, 1)?;
    o.clients = 16;
    Ok(o)
}

async fn seed(o: &SuiteOpts, place: &Place, addr: &str) -> Result<Seed> {
    let agents_n = ((10_000.0 * o.scale).round() as usize).max(20);
    let entries = ((1_000_000.0 * o.scale).round() as u64).max(1_000);
    let users_n = if o.quick { 2 } else { 10 };
    let t = Instant::now();
    let read_key: Arc<str> = bench::new_tenant(addr, ADMIN_KEY, "bench-read")
        .await?
        .into();
    let read_agents = register_agents(&agents_opts(addr)?, &read_key, agents_n).await?;
    println!(
        "  seeded {agents_n} agents over the API in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let tid = tenant_id(addr, &read_key).await?;
    let token = format!("Bearer {}", super_token(addr).await?);
    let mut users = Vec::new();
    {
        let mut c = Conn::open(addr).await?;
        for i in 0..users_n {
            let email = format!("user{i}-{}@bench.local", &tid[..8]);
            let role = ["viewer", "developer", "security_analyst", "admin"][i % 4];
            api(
                &mut c,
                "POST",
                "/users",
                ("Authorization", &token),
                Some(&json!({"email": email, "password": USER_PASSWORD,
                              "role": role,
                              "tenant_id": tid})),
                201,
            )
            .await?;
            users.push(email);
        }
    }
    let mut write = Vec::new();
    for _ in 0..8 {
        let key: Arc<str> = bench::new_tenant(addr, ADMIN_KEY, "bench-write")
            .await?
            .into();
        let mut ao = agents_opts(addr)?;
        ao.clients = 1;
        let agents = register_agents(&ao, &key, 4).await?;
        write.push((key, agents));
    }
    // The user-management entries above are written in batches: let them land first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t = Instant::now();
    seed_entries(place, &tid, entries)?;
    println!(
        "  seeded {entries} audit entries straight into the database in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(Seed {
        read_key,
        read_agents: Arc::new(read_agents),
        entries,
        write: Arc::new(write),
        users: Arc::new(users),
    })
}

/// The bulk of the read tenant's audit entries, straight into the database, spread evenly over
/// the last 7 days (every one inside the dashboard's activity window: its worst case). The
/// hash chain is not recomputed (`prev_hash`/`hash` are placeholders; no signature): the read
/// scenarios (list, stats, export) do not verify it. The head row is set so that a later
/// append would continue after the seeded sequence.
fn seed_entries(place: &Place, tenant: &str, n: u64) -> Result<()> {
    match place.backend {
        Backend::Postgres => {
            let db = place.db.as_deref().unwrap_or("postgres");
            psql(
                db,
                &format!(
                    r#"INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, input, output,
  reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
SELECT gen_random_uuid(), '{tenant}', b.base + g, NULL, NULL,
  (ARRAY['read_data','write_data','send_email','read_phi','delete_data'])[1 + g % 5],
  'crm/contacts/' || g,
  jsonb_build_object('query', 'select name from contacts where id = ' || g, 'rows', g % 50),
  jsonb_build_object('status', 'ok'), '["needed for the support ticket"]'::jsonb,
  (g % 100) / 100.0, g % 3 = 0,
  w.start + (now() - w.start) * ((g - 1)::float8 / {n}),
  md5((g - 1)::text) || md5((g - 1)::text), md5(g::text) || md5(g::text), NULL
FROM generate_series(1, {n}) AS g,
  (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '6 days' AS start) AS w,
  (SELECT coalesce(max(seq), 0) AS base FROM audit_entries WHERE tenant_id = '{tenant}') AS b;
INSERT INTO audit_heads (tenant_id, seq, hash)
  SELECT '{tenant}', max(seq), md5('{n}') || md5('{n}') FROM audit_entries WHERE tenant_id = '{tenant}'
ON CONFLICT (tenant_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash;"#
                ),
            )?;
            psql(db, "VACUUM ANALYZE audit_entries")?;
        }
        Backend::Sqlite => {
            let hex = tenant.replace('-', "");
            let sql = format!(
                r#"PRAGMA busy_timeout = 60000;
BEGIN IMMEDIATE;
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {n}),
 w(start, span, base) AS (SELECT (julianday('now', 'start of day', '-6 days') - 2440587.5) * 86400.0,
                           (julianday('now') - julianday('now', 'start of day', '-6 days')) * 86400.0,
                           (SELECT coalesce(max(seq), 0) FROM audit_entries WHERE tenant_id = X'{hex}'))
INSERT INTO audit_entries (id, tenant_id, seq, action, resource, input, output, reasoning,
  risk_score, is_approved, "timestamp", prev_hash, hash)
SELECT randomblob(16), X'{hex}', base + n,
  CASE n % 5 WHEN 0 THEN 'read_data' WHEN 1 THEN 'write_data' WHEN 2 THEN 'send_email' WHEN 3 THEN 'read_phi' ELSE 'delete_data' END,
  'crm/contacts/' || n,
  '{{"query":"select name from contacts where id = ' || n || '","rows":' || (n % 50) || '}}',
  '{{"status":"ok"}}', '["needed for the support ticket"]', (n % 100) / 100.0, n % 3 = 0,
  strftime('%Y-%m-%dT%H:%M:%S', t, 'unixepoch') || '.' || printf('%06d', CAST((t - CAST(t AS INTEGER)) * 1000000 AS INTEGER)) || 'Z',
  lower(hex(randomblob(32))), lower(hex(randomblob(32)))
FROM (SELECT n, w.base AS base, w.start + w.span * (n - 1) / {n}.0 AS t FROM g, w);
INSERT INTO audit_heads (tenant_id, seq, hash)
  SELECT X'{hex}', max(seq), lower(hex(randomblob(32))) FROM audit_entries WHERE tenant_id = X'{hex}'
  ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash;
COMMIT;
ANALYZE;
"#
            );
            let mut child = Command::new("sqlite3")
                .arg(place.sqlite_path())
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("sqlite3 (apt-get install sqlite3)")?;
            use std::io::Write;
            child
                .stdin
                .take()
                .ok_or_else(|| anyhow!("sqlite3 stdin"))?
                .write_all(sql.as_bytes())?;
            let out = child.wait_with_output()?;
            if !out.status.success() || !out.stderr.is_empty() {
                bail!("sqlite3: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Scenarios.

const CHECK_CASES: [(&str, &str, &str); 12] = [
    ("read_data", "crm/contacts", "{}"),
    (
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "consent": true, "purpose": "support"}"#,
    ),
    (
        "read_data",
        "crm/contacts",
        r#"{"personal_data": true, "purpose": "support"}"#,
    ),
    ("read_phi", "ehr/patients", r#"{"purpose": "treatment"}"#),
    ("read_phi", "ehr/patients", r#"{"purpose": "marketing"}"#),
    (
        "read_data",
        "ehr/patients",
        r#"{"phi": true, "authorization": true}"#,
    ),
    (
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment", "encrypted": true}"#,
    ),
    (
        "export_phi",
        "ehr/exports",
        r#"{"purpose": "treatment", "encrypted": true, "approved": true}"#,
    ),
    (
        "read_data",
        "ru/citizens",
        r#"{"personal_data": true, "consent": true, "purpose": "support", "data_subject_country": "RU", "storage_location": "RU"}"#,
    ),
    ("write_data", "crm/notes", r#"{"note": "called back"}"#),
    ("delete_data", "crm/contacts", "{}"),
    (
        "send_email",
        "mail/outbox",
        r#"{"to": "someone@example.com"}"#,
    ),
];

/// A tenant with the default policies plus `hitl`, and `n` agents.
async fn check_tenant(addr: &str, n: usize) -> Result<(Arc<str>, Arc<Vec<String>>)> {
    let key: Arc<str> = bench::new_tenant(addr, ADMIN_KEY, "bench-check")
        .await?
        .into();
    let mut c = Conn::open(addr).await?;
    api(
        &mut c,
        "POST",
        "/policies",
        ("X-API-Key", &key),
        Some(&json!({"name": "hitl", "template": "hitl"})),
        201,
    )
    .await?;
    let agents = register_agents(&agents_opts(addr)?, &key, n).await?;
    Ok((key, Arc::new(agents)))
}

async fn check_load(
    addr: &str,
    key: Arc<str>,
    agents: Arc<Vec<String>>,
    clients: usize,
    seconds: u64,
) -> Result<Run> {
    let cases: Arc<Vec<(&str, &str, Value)>> = Arc::new(
        CHECK_CASES
            .iter()
            .map(|(a, r, c)| (*a, *r, serde_json::from_str(c).unwrap_or(Value::Null)))
            .collect(),
    );
    load(addr, clients, seconds, move |client, i| {
        let (action, resource, context) = &cases[(client * 5 + i as usize) % cases.len()];
        let agent = &agents[(client * 31 + i as usize * 7) % agents.len()];
        Req {
            method: "POST",
            path: "/api/v1/policies/check".into(),
            key: key.clone(),
            body: Some(json!({"agent_id": agent, "action": action,
                              "resource": format!("{resource}/{i}"), "context": context})),
            want: 200,
        }
    })
    .await
}

/// Prompts of the guard-data files, benign and attack interleaved; the built-in templates
/// when the files are missing.
fn guard_prompts(dir: &Path) -> (Vec<String>, String) {
    let mut benign = Vec::new();
    let mut attack = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        for f in files {
            for line in std::fs::read_to_string(&f).unwrap_or_default().lines() {
                let Ok(v) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let Some(text) = v["text"].as_str() else {
                    continue;
                };
                if text.len() > 16 * 1024 {
                    continue;
                }
                if v["label"] == 1 {
                    attack.push(text.to_owned());
                } else {
                    benign.push(text.to_owned());
                }
            }
        }
    }
    if benign.is_empty() || attack.is_empty() {
        let p: Vec<String> = crate::bench_guard::PROMPTS
            .iter()
            .map(|s| s.replace("{i}", "0"))
            .collect();
        return (p, "built-in templates (guard-data not found)".into());
    }
    let what = format!(
        "{} benign + {} attack prompts of guard-data, alternating",
        benign.len(),
        attack.len()
    );
    let n = benign.len().max(attack.len());
    let mut out = Vec::with_capacity(2 * n);
    for i in 0..n {
        out.push(benign[i % benign.len()].clone());
        out.push(attack[(i * 7) % attack.len()].clone());
    }
    (out, what)
}

fn anomaly_event(i: u64, odd: bool) -> Value {
    let actions = ["read_data", "write_data", "send_email", "search"];
    if odd {
        json!({"action": "read_data", "resource": format!("crm/contacts/{i}' OR 1=1; DROP TABLE users; --"),
               "input": {"query": format!("select * from users where id = {i} union select password from admins")},
               "output": {"status": 200, "bytes": 9_000_000}})
    } else {
        json!({"action": actions[(i % 4) as usize], "resource": format!("crm/contacts/{}", i % 500),
               "input": {"query": format!("name of contact {}", i % 500), "rows": i % 20},
               "output": {"status": 200, "bytes": 1200 + i % 300}})
    }
}

/// A tenant with a trained anomaly model (history written through `POST /audit/log`).
async fn anomaly_tenant(
    addr: &str,
    history: usize,
) -> Result<(Arc<str>, Arc<Vec<String>>, String)> {
    let key: Arc<str> = bench::new_tenant(addr, ADMIN_KEY, "bench-anomaly")
        .await?
        .into();
    let mut ao = agents_opts(addr)?;
    ao.clients = 1;
    let agents = register_agents(&ao, &key, 4).await?;
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (addr, key, agents, next) =
            (addr.to_owned(), key.clone(), agents.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(&addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= history as u64 {
                    return Ok::<_, anyhow::Error>(());
                }
                let mut ev = anomaly_event(i, false);
                ev["agent_id"] = json!(agents[(i % 4) as usize]);
                ev["risk_score"] = json!(0.1);
                api(
                    &mut c,
                    "POST",
                    "/audit/log",
                    ("X-API-Key", &key),
                    Some(&ev),
                    201,
                )
                .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let mut c = Conn::open(addr).await?;
    let mut state = "rules only (training not started)".to_owned();
    // The writes are acknowledged before they are committed in batches: retry the training
    // until the history is visible.
    for _ in 0..20 {
        let (s, b) = c
            .call(
                "POST",
                "/api/v1/anomalies/detector/train",
                &[("X-API-Key", &key)],
                Some(&json!({})),
            )
            .await?;
        if s == 202 {
            state = "training".into();
            break;
        }
        state = format!("rules only (train answered {s}: {b})");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    if state == "training" {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, t) = c
                .call(
                    "GET",
                    "/api/v1/anomalies/detector/training/status",
                    &[("X-API-Key", &key)],
                    None,
                )
                .await?;
            match t["status"].as_str() {
                Some("queued" | "running") if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                Some("completed") => {
                    state = format!("model trained on {history} entries");
                    break;
                }
                _ => {
                    state = format!("rules only (training: {t})");
                    break;
                }
            }
        }
    }
    Ok((key, Arc::new(agents), state))
}

/// One HITL round trip per sample: request → approve → status → check with `approved`.
async fn hitl_load(addr: &str, clients: usize, seconds: u64) -> Result<Run> {
    let (key, agents) = check_tenant(addr, 8).await?;
    let o = opts(addr, seconds)?;
    let conns = pool(addr, clients);
    let addr = addr.to_owned();
    let (samples, elapsed, errors) = drive(&o, clients, move |client, i| {
        let (conns, addr, key, agents) = (conns.clone(), addr.clone(), key.clone(), agents.clone());
        async move {
            let agent = &agents[(client + i as usize) % agents.len()];
            let resource = format!("crm/contacts/{client}-{i}");
            let mut g = bench::with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            let h = [("X-API-Key", &*key)];
            let r: Result<bool> = async {
                let (s, b) = c
                    .call("POST", "/api/v1/hitl/request", &h,
                          Some(&json!({"agent_id": agent, "action": "delete_data", "resource": resource,
                                       "context": {"reason": "bench"}})))
                    .await?;
                if s != 201 {
                    return Ok(false);
                }
                let id = b["approval_id"].as_str().unwrap_or_default().to_owned();
                let (s, _) = c
                    .call("POST", &format!("/api/v1/hitl/approve/{id}"), &h,
                          Some(&json!({"approver": "bench"})))
                    .await?;
                if s != 200 {
                    return Ok(false);
                }
                let (s, st) = c
                    .call("GET", &format!("/api/v1/hitl/status/{id}"), &h, None)
                    .await?;
                if s != 200 || st["status"] != "approved" {
                    return Ok(false);
                }
                let (s, d) = c
                    .call("POST", "/api/v1/policies/check", &h,
                          Some(&json!({"agent_id": agent, "action": "delete_data", "resource": resource,
                                       "context": {"approved": true}})))
                    .await?;
                Ok(s == 200 && d["allowed"] == true)
            }
            .await;
            if r.is_err() {
                *g = None;
            }
            r
        }
    })
    .await?;
    Ok(Run {
        samples,
        elapsed,
        errors,
    })
}

/// Async export of the read tenant's entries: one job, polled to completion.
async fn export(addr: &str, key: &str) -> Result<(Run, u64)> {
    let mut c = Conn::open(addr).await?;
    let t = Instant::now();
    let job = api(
        &mut c,
        "POST",
        "/audit/export/async",
        ("X-API-Key", key),
        Some(&json!({"format": "jsonl"})),
        202,
    )
    .await?;
    let id = job["job_id"]
        .as_str()
        .ok_or_else(|| anyhow!("no job_id: {job}"))?
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(600);
    let (status, records) = loop {
        let st = api(
            &mut c,
            "GET",
            &format!("/audit/export/status/{id}"),
            ("X-API-Key", key),
            None,
            200,
        )
        .await?;
        match st["status"].as_str() {
            Some("completed") => break ("completed", st["records"].as_u64().unwrap_or(0)),
            Some("failed") => break ("failed", 0),
            _ if Instant::now() > deadline => break ("timed out", 0),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let elapsed = t.elapsed();
    let mut samples = Samples::default();
    let mut errors = 0;
    if status == "completed" {
        samples.push(elapsed);
    } else {
        errors = 1;
    }
    Ok((
        Run {
            samples,
            elapsed,
            errors,
        },
        records,
    ))
}

fn wanted(o: &SuiteOpts, name: &str) -> bool {
    o.only
        .as_ref()
        .is_none_or(|l| l.iter().any(|n| name.starts_with(n.as_str())))
}

/// Every scenario on one backend.
async fn run_backend(o: &SuiteOpts, backend: Backend, report: &mut Report) -> Result<()> {
    println!("\n## {}\n", backend.name());
    let secs = o.seconds;
    // Start-to-ready on a fresh database (migrations applied during start-up), then again on
    // the migrated database; idle RSS one second after ready.
    let place = Place::new(backend, "suite", 11)?;
    let (server, fresh) = start(&o.bin, &place, &[], true).await?;
    drop(server);
    let (server, migrated) = start(&o.bin, &place, &[], true).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = status_kib(server.pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    println!(
        "  start to ready: {:.0} ms on a fresh database (migrations applied), {:.0} ms migrated; idle RSS {idle:.1} MiB",
        fresh.as_secs_f64() * 1e3,
        migrated.as_secs_f64() * 1e3
    );
    report.startup.push(Startup {
        backend: backend.name().into(),
        fresh_ms: fresh.as_secs_f64() * 1e3,
        migrated_ms: migrated.as_secs_f64() * 1e3,
        idle_rss_mib: idle,
    });
    let pid = server.pid;
    let addr = server.addr.clone();
    let seed = seed(o, &place, &addr).await?;
    let mut rows: Vec<Row> = Vec::new();
    let push = |rows: &mut Vec<Row>, r: Row| {
        println!(
            "  {:<22} {:>9.0} {}  p50 {:.2} p95 {:.2} p99 {:.2} max {:.2} ms  errors {}  server CPU {:.0} %  peak RSS {:.0} MiB",
            r.name, r.throughput, r.unit, r.p50, r.p95, r.p99, r.max, r.errors, r.server_cpu_pct, r.peak_rss_mib
        );
        rows.push(r);
    };

    // GET /health: the ceiling.
    let health_clients = 16;
    let m = Meter::start(pid);
    let run = load(&addr, health_clients, secs, |_, _| Req {
        method: "GET",
        path: "/health".into(),
        key: Arc::from(""),
        body: None,
        want: 200,
    })
    .await?;
    push(
        &mut rows,
        row("health", backend, health_clients, &run, &m.stop(), "req/s"),
    );

    if wanted(o, "check") {
        let (key, agents) = check_tenant(&addr, 50).await?;
        let m = Meter::start(pid);
        let run = check_load(&addr, key, agents, 16, secs).await?;
        push(
            &mut rows,
            row("check", backend, 16, &run, &m.stop(), "checks/s"),
        );
    }
    if wanted(o, "guard") {
        let (prompts, what) = guard_prompts(&o.guard_data);
        let prompts = Arc::new(prompts);
        let key: Arc<str> = bench::new_tenant(&addr, ADMIN_KEY, "bench-guard")
            .await?
            .into();
        let m = Meter::start(pid);
        let run = load(&addr, 16, secs, move |client, i| {
            let n = client as u64 * 1_000_003 + i * 16;
            // A numbered suffix: no two requests alike, so the result cache never answers.
            let prompt = format!(
                "{}\n(ref {n})",
                prompts[(n % prompts.len() as u64) as usize]
            );
            Req {
                method: "POST",
                path: "/api/v1/guard/validate".into(),
                key: key.clone(),
                body: Some(json!({"prompt": prompt, "context": {"channel": "bench"}})),
                want: 200,
            }
        })
        .await?;
        let mut r = row("guard", backend, 16, &run, &m.stop(), "validations/s");
        r.note = what;
        push(&mut rows, r);
    }
    if wanted(o, "audit") {
        for (name, tenants) in [("audit-write-8", 8usize), ("audit-write-hot", 1)] {
            let write = seed.write.clone();
            let m = Meter::start(pid);
            let run = load(&addr, 64, secs, move |client, i| {
                let (key, agents) = &write[client % tenants];
                Req {
                    method: "POST",
                    path: "/api/v1/audit/log".into(),
                    key: key.clone(),
                    body: Some(
                        json!({"agent_id": agents[i as usize % agents.len()], "action": "read_data",
                                      "resource": format!("crm/{i}"), "input": {"q": i},
                                      "risk_score": 0.25, "is_approved": true}),
                    ),
                    want: 201,
                }
            })
            .await?;
            let mut r = row(name, backend, 64, &run, &m.stop(), "entries/s");
            r.note = format!("{tenants} tenant(s)");
            push(&mut rows, r);
        }
    }
    if wanted(o, "heartbeat") {
        let (key, agents) = (seed.read_key.clone(), seed.read_agents.clone());
        let m = Meter::start(pid);
        let run = load(&addr, 32, secs, move |client, i| Req {
            method: "POST",
            path: format!(
                "/api/v1/agents/{}/heartbeat",
                agents[(client * 7919 + i as usize * 104_729) % agents.len()]
            ),
            key: key.clone(),
            body: None,
            want: 200,
        })
        .await?;
        let mut r = row("heartbeat", backend, 32, &run, &m.stop(), "heartbeats/s");
        r.note = format!("{} agents", seed.read_agents.len());
        push(&mut rows, r);
    }
    if wanted(o, "search") {
        let key = seed.read_key.clone();
        let queries = [
            "invoice%20parser",
            "support%20chat",
            "fraud%20risk",
            "billing%20report",
            "etl",
            "crm%20mail%20search",
        ];
        let m = Meter::start(pid);
        let run = load(&addr, 1, secs, move |client, i| Req {
            method: "GET",
            path: format!(
                "/api/v1/agents/search?q={}&limit=20",
                queries[(client + i as usize) % queries.len()]
            ),
            key: key.clone(),
            body: None,
            want: 200,
        })
        .await?;
        let mut r = row("search", backend, 1, &run, &m.stop(), "searches/s");
        r.note = format!("{} agents", seed.read_agents.len());
        push(&mut rows, r);
    }
    if wanted(o, "audit-list") {
        let key = seed.read_key.clone();
        let m = Meter::start(pid);
        let run = load(&addr, 8, secs, move |client, i| Req {
            method: "GET",
            path: format!(
                "/api/v1/audit?limit=50&offset={}",
                ((client as u64 * 3 + i) % 20) * 50
            ),
            key: key.clone(),
            body: None,
            want: 200,
        })
        .await?;
        let mut r = row("audit-list", backend, 8, &run, &m.stop(), "pages/s");
        r.note = format!("pages 1–20 of 50 over {} entries", seed.entries);
        push(&mut rows, r);
    }
    if wanted(o, "stats") {
        let key = seed.read_key.clone();
        let m = Meter::start(pid);
        let run = load(&addr, 4, secs, move |_, _| Req {
            method: "GET",
            path: "/api/v1/stats".into(),
            key: key.clone(),
            body: None,
            want: 200,
        })
        .await?;
        let mut r = row("stats", backend, 4, &run, &m.stop(), "req/s");
        r.note = format!("{} entries in the last 7 days", seed.entries);
        push(&mut rows, r);
    }
    if wanted(o, "anomaly") {
        let history = if o.quick { 200 } else { 2_000 };
        let (key, agents, state) = anomaly_tenant(&addr, history).await?;
        let m = Meter::start(pid);
        let run = load(&addr, 8, secs, move |client, i| {
            let n = client as u64 * 1_000_003 + i;
            Req {
                method: "POST",
                path: "/api/v1/anomalies/report".into(),
                key: key.clone(),
                body: Some(json!({"agent_id": agents[(n % 4) as usize],
                                  "event_data": anomaly_event(n, n.is_multiple_of(10)), "source": "manual"})),
                want: 201,
            }
        })
        .await?;
        let mut r = row("anomaly-report", backend, 8, &run, &m.stop(), "reports/s");
        r.note = format!("{state}; 1 in 10 events an injection");
        push(&mut rows, r);
    }
    if wanted(o, "hitl") {
        let m = Meter::start(pid);
        let run = hitl_load(&addr, 8, secs).await?;
        let mut r = row(
            "hitl-round-trip",
            backend,
            8,
            &run,
            &m.stop(),
            "round trips/s",
        );
        r.note = "request → approve → status → check(approved)".into();
        push(&mut rows, r);
    }
    if wanted(o, "login") {
        let users = seed.users.clone();
        let m = Meter::start(pid);
        let run = {
            let o2 = opts(&addr, secs)?;
            let conns = pool(&addr, 2);
            let addr2 = addr.clone();
            let (samples, elapsed, errors) = drive(&o2, 2, move |client, i| {
                let (conns, addr, users) = (conns.clone(), addr2.clone(), users.clone());
                async move {
                    let email = &users[(client + i as usize) % users.len()];
                    let mut g = bench::with_conn(&conns[client], &addr).await?;
                    let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
                    let (s, _) = c
                        .call(
                            "POST",
                            "/api/v1/auth/login",
                            &[],
                            Some(&json!({"email": email, "password": USER_PASSWORD})),
                        )
                        .await?;
                    Ok(s == 200)
                }
            })
            .await?;
            Run {
                samples,
                elapsed,
                errors,
            }
        };
        let mut r = row("login", backend, 2, &run, &m.stop(), "logins/s");
        r.note = "argon2id m=19 MiB t=2 p=1".into();
        push(&mut rows, r);
    }
    if wanted(o, "ws") {
        let mut wo = opts(&addr, secs)?;
        wo.clients = if o.quick { 50 } else { 1000 };
        wo.events = if o.quick { 200 } else { 10_000 };
        wo.super_email = SUPER_EMAIL.into();
        wo.super_password = SUPER_PASSWORD.into();
        let m = Meter::start(pid);
        let w = crate::bench_ws::ws_run(&wo).await?;
        let run = Run {
            samples: w.samples,
            elapsed: w.total,
            errors: (w.want - w.delivered.min(w.want)) + w.dropped,
        };
        let mut r = row(
            "ws-fanout",
            backend,
            wo.clients,
            &run,
            &m.stop(),
            "deliveries/s",
        );
        r.note = format!(
            "{} clients, burst of {} events produced in {:.1} s; {}/{} delivered, {} dropped",
            wo.clients,
            wo.events,
            w.produced.as_secs_f64(),
            w.delivered,
            w.want,
            w.dropped
        );
        push(&mut rows, r);
    }
    if wanted(o, "export") {
        let m = Meter::start(pid);
        let (run, records) = export(&addr, &seed.read_key).await?;
        let met = m.stop();
        let mut r = row("export", backend, 1, &run, &met, "entries/s");
        r.count = records;
        r.throughput = records as f64 / run.elapsed.as_secs_f64().max(1e-9);
        r.note = format!("async jsonl export of {records} entries, one job");
        if records < seed.entries {
            r.errors += 1;
        }
        push(&mut rows, r);
    }
    if o.peers && backend == Backend::Postgres && wanted(o, "audit") {
        match pgbench_peer(&place, &seed, secs) {
            Ok(p) => report.peers.push(p),
            Err(e) => report.notes.push(format!("pgbench peer: {e:#}")),
        }
    }
    let health = rows.first().map(|r| r.throughput).unwrap_or(0.0);
    for r in &mut rows {
        r.vs_health = (health > 0.0).then(|| r.throughput / health);
    }
    drop(server);
    drop(place_cleanup(place));
    if o.peers && wanted(o, "check") {
        match opa_peer(o, backend, rows.iter().find(|r| r.name == "check")).await {
            Ok(p) => report.peers.push(p),
            Err(e) => report.notes.push(format!("OPA peer: {e:#}")),
        }
    }
    report.rows.extend(rows);
    Ok(())
}

fn place_cleanup(place: Place) -> Result<()> {
    let _ = std::fs::remove_dir_all(&place.dir);
    if let Some(db) = &place.db {
        psql(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Peers.

fn cache_dir() -> PathBuf {
    std::env::var("STEWARD_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            std::env::var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|_| {
                    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                        .join(".cache")
                })
                .join("steward")
        })
}

/// A cached Python environment with exactly the packages of a hash-locked requirements file
/// (`.ci/requirements/*.txt`, the files `.ci/run` installs the same way): rebuilt when the lock
/// changes (its sha256 is kept in the venv), pip refuses any download whose hash differs.
fn venv(name: &str, probe: &str, lock: &str, extra: &[&str]) -> Result<PathBuf> {
    let dir = cache_dir().join(name);
    let python = dir.join("bin/python");
    let lock = crate::workspace_root().join(lock);
    let want = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&lock)?))
    };
    let stamp = dir.join(".lock-sha256");
    let ok = |p: &Path| {
        Command::new(p)
            .args(["-c", probe])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want) && ok(&python) {
        return Ok(python);
    }
    println!("  creating {} from {}", dir.display(), lock.display());
    let _ = std::fs::remove_dir_all(&dir);
    let st = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .status()?;
    if !st.success() {
        bail!("python3 -m venv failed");
    }
    let st = Command::new(dir.join("bin/pip"))
        .args([
            "install",
            "-q",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
        ])
        .args(extra)
        .arg("-r")
        .arg(&lock)
        .status()?;
    if !st.success() || !ok(&python) {
        let _ = std::fs::remove_dir_all(&dir);
        bail!("pip install -r {} failed", lock.display());
    }
    std::fs::write(&stamp, &want)?;
    Ok(python)
}

/// The same check scenario against a second server whose policy engine is the real OPA
/// engine (fixtures/opa shim over the OPA Go library), same policies, same clients.
async fn opa_peer(o: &SuiteOpts, backend: Backend, ours: Option<&Row>) -> Result<Value> {
    // The wheel declares Requires-Python >= 3.14 but runs on 3.11 (see the lock file).
    let python = venv(
        "opa-venv",
        "import opa_bindings.engine",
        ".ci/requirements/opa.txt",
        &["--ignore-requires-python"],
    )?;
    let port = free_port()?;
    let mut shim = Command::new(&python)
        .arg(crate::workspace_root().join("fixtures/opa/shim.py"))
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let opa = format!("http://127.0.0.1:{port}");
    let result = async {
        let t = Instant::now();
        while get_status(&format!("127.0.0.1:{port}"), "/health").await != Some(200) {
            if t.elapsed() > Duration::from_secs(30) {
                bail!("the OPA shim did not start");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let place = Place::new(backend, "opa", 12)?;
        let (server, _) = start(&o.bin, &place, &[("OPA_URL", opa.clone())], false).await?;
        let (key, agents) = check_tenant(&server.addr, 50).await?;
        let mut c = Conn::open(&server.addr).await?;
        let st = api(&mut c, "GET", "/status", ("X-API-Key", &key), None, 200).await?;
        let m = Meter::start(server.pid);
        let run = check_load(&server.addr, key, agents, 16, o.seconds).await?;
        let met = m.stop();
        let shim_cpu = cpu_secs(&shim.id().to_string());
        drop(server);
        let _ = place_cleanup(place);
        let r = row("check via OPA", backend, 16, &run, &met, "checks/s");
        let ours_tp = ours.map(|r| r.throughput).unwrap_or(0.0);
        println!(
            "  peer: check with the real OPA engine: {:.0} checks/s, p99 {:.2} ms ({} errors); Steward embedded / OPA = {:.1}x",
            r.throughput,
            r.p99,
            r.errors,
            ours_tp / r.throughput.max(1e-9)
        );
        Ok(json!({
            "peer": "OPA v1.20 engine (Go library behind fixtures/opa/shim.py) as Steward's policy engine (OPA_URL)",
            "scenario": "check", "backend": backend.name(),
            "peer_throughput": r.throughput, "peer_p50_ms": r.p50, "peer_p99_ms": r.p99, "peer_errors": r.errors,
            "peer_server_cpu_s": r.server_cpu, "shim_cpu_s_total": shim_cpu,
            "ours_throughput": ours_tp, "ours_p99_ms": ours.map(|r| r.p99),
            "ratio": ours_tp / r.throughput.max(1e-9),
            "ratio_meaning": "Steward checks/s with the embedded engine ÷ checks/s with OPA as the engine (same policies, clients, duration)",
            "policy_engine_status": st["services"].clone(),
        }))
    }
    .await;
    let _ = shim.kill();
    let _ = shim.wait();
    result
}

/// pgbench's plain single-row INSERT into the same table (xtask/scripts/bench-audit.sh).
fn pgbench_peer(place: &Place, seed: &Seed, secs: u64) -> Result<Value> {
    let db = place.db.as_deref().ok_or_else(|| anyhow!("no database"))?;
    let tenant = psql(
        db,
        "SELECT id FROM tenants ORDER BY created_at DESC LIMIT 1",
    )?;
    let h = "a".repeat(64);
    let dir = std::env::temp_dir().join(format!("pgbench-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    let sql = dir.join("ins.sql");
    std::fs::write(
        &sql,
        format!(
            r#"\set s random(1, 9000000000000000)
INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, input, output,
  reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
VALUES (gen_random_uuid(), '{tenant}', :s, NULL, NULL, 'read_data', 'crm/' || :s,
  '{{"q": 1}}', '{{}}', '[]', 0.25, true, now(), '{h}', '{h}', '{h}');
"#
        ),
    )?;
    let gen0 = cpu_secs("self");
    let out = Command::new("pgbench")
        .current_dir(&dir)
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            db,
            "-n",
            "-c",
            "64",
            "-j",
            "2",
            "-T",
        ])
        .arg(secs.to_string())
        .args(["-l", "-f"])
        .arg(&sql)
        .output()
        .context("pgbench")?;
    let _ = gen0;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!("pgbench: {}", String::from_utf8_lossy(&out.stderr));
    }
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    let mut lat = Vec::new();
    for e in std::fs::read_dir(&dir)?.flatten() {
        if e.file_name().to_string_lossy().starts_with("pgbench_log") {
            for l in std::fs::read_to_string(e.path())?.lines() {
                if let Some(v) = l
                    .split_whitespace()
                    .nth(2)
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    lat.push(v);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .map(|v| *v as f64 / 1000.0)
            .unwrap_or(0.0)
    };
    let _ = seed;
    println!(
        "  peer: pgbench plain INSERT, 64 clients: {tps:.0} tx/s, p50 {:.2} p99 {:.2} ms",
        q(0.5),
        q(0.99)
    );
    Ok(json!({
        "peer": "pgbench, plain single-row INSERT of the same columns into audit_entries (autocommit), 64 clients, -j 2",
        "scenario": "audit-write-8", "backend": "postgres+redis",
        "peer_throughput": tps, "peer_p50_ms": q(0.5), "peer_p95_ms": q(0.95), "peer_p99_ms": q(0.99), "peer_max_ms": q(1.0),
    }))
}

/// scikit-learn's IsolationForest (`xtask/scripts/iforest_peer.py`), compared with the
/// in-process anomaly scoring of `cargo bench -p steward-anomaly`.
fn iforest_peer(quick: bool) -> Result<Value> {
    let python = venv(
        "iforest-venv",
        "import sklearn",
        ".ci/requirements/bench.txt",
        &[],
    )?;
    let out = Command::new(python)
        .arg(crate::workspace_root().join("xtask/scripts/iforest_peer.py"))
        .arg(if quick { "2000" } else { "20000" })
        .output()?;
    if !out.status.success() {
        bail!("iforest_peer.py: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    println!("  peer: scikit-learn IsolationForest: {v}");
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Micro-benchmarks.

const MICRO: [(&str, &str, &str); 5] = [
    (
        "steward-policy",
        "decide",
        "policy decision (plain timing loop + OPA engine in process)",
    ),
    ("steward-guard", "validate", "guard scoring"),
    ("steward-anomaly", "anomaly", "anomaly scoring"),
    (
        "steward-audit",
        "chain",
        "canonical JSON + SHA-256 + HMAC of an audit entry",
    ),
    ("steward-registry", "search", "embedding + search"),
];

fn micro(o: &SuiteOpts, report: &mut Report) {
    let root = crate::workspace_root();
    for (pkg, bench, what) in MICRO {
        if !wanted(o, "micro") && !wanted(o, bench) {
            continue;
        }
        println!("  cargo bench -p {pkg} --bench {bench}");
        // Every run names all five packages, so that cargo resolves one feature set and
        // builds the shared dependencies once (with `-p {pkg}` alone each run would rebuild
        // them for its own features); `--bench` then picks the one target.
        let mut args = vec!["bench", "--locked"];
        for (p, _, _) in MICRO {
            args.extend(["-p", p]);
        }
        args.extend(["--bench", bench]);
        let out = Command::new("cargo")
            .current_dir(&root)
            .args(&args)
            .stderr(Stdio::inherit())
            .output();
        let text = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).to_string(),
            Ok(o) => {
                report.notes.push(format!(
                    "cargo bench -p {pkg} --bench {bench} failed ({})",
                    o.status
                ));
                continue;
            }
            Err(e) => {
                report.notes.push(format!("cargo bench: {e}"));
                continue;
            }
        };
        let _ = std::fs::write(o.out.join(format!("micro-{bench}.log")), &text);
        let noise = [
            "time:",
            "change:",
            "thrpt:",
            "Found ",
            "outlier",
            "Benchmarking",
            "Warming",
            "Collecting",
            "Analyzing",
            "Performance has",
            "No change",
            "Change within",
            "high mild",
            "high severe",
            "low mild",
            "low severe",
        ];
        let lines: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !noise.iter().any(|n| l.contains(n)))
            .filter(|l| {
                // ("median": the anomaly bench's training times, printed in seconds)
                ["/s", "µs", "ms", "p99", "ratio", "x ", "median"]
                    .iter()
                    .any(|k| l.contains(k))
            })
            .map(str::to_owned)
            .collect();
        report.micro.push(Micro {
            package: pkg.into(),
            bench: bench.into(),
            what: what.into(),
            criterion: Vec::new(),
            lines,
        });
    }
    // Criterion's own estimates (mean and median of every benchmark it measured).
    let crit = root.join("target/criterion");
    let mut found = Vec::new();
    collect_estimates(&crit, &mut found);
    for (id, mean, median) in found {
        let slot = report.micro.iter_mut().find(|m| {
            let l = id.to_ascii_lowercase();
            match m.bench.as_str() {
                "validate" => l.starts_with("guard"),
                "anomaly" => {
                    !l.starts_with("guard") && !l.starts_with("audit") && !l.starts_with("registry")
                }
                "chain" => l.starts_with("audit"),
                "search" => l.starts_with("registry"),
                _ => false,
            }
        });
        if let Some(m) = slot {
            m.criterion.push((id, mean, median));
        }
    }
}

fn collect_estimates(dir: &Path, out: &mut Vec<(String, f64, f64)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_dir() || p.file_name().is_some_and(|n| n == "report") {
            continue;
        }
        let est = p.join("new/estimates.json");
        let meta = p.join("new/benchmark.json");
        if est.exists() {
            let v: Value = std::fs::read_to_string(&est)
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(Value::Null);
            let id = std::fs::read_to_string(&meta)
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .and_then(|m| m["full_id"].as_str().map(str::to_owned))
                .unwrap_or_else(|| p.display().to_string());
            out.push((
                id,
                v["mean"]["point_estimate"].as_f64().unwrap_or(f64::NAN),
                v["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN),
            ));
        } else {
            collect_estimates(&p, out);
        }
    }
}

// ---------------------------------------------------------------------------------------

pub fn suite(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    if !o.bin.exists() {
        bail!(
            "no server binary at {} (cargo build --release -p steward-server, or --bin PATH)",
            o.bin.display()
        );
    }
    std::fs::create_dir_all(&o.out)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut report = Report::new(&o);
    println!(
        "# cargo xtask bench: {} s per scenario, scale {}, {}",
        o.seconds,
        o.scale,
        o.bin.display()
    );
    let mut failed = Vec::new();
    for &b in &o.backends {
        if let Err(e) = rt.block_on(run_backend(&o, b, &mut report)) {
            eprintln!("{}: {e:#}", b.name());
            failed.push(format!("{}: {e:#}", b.name()));
        }
    }
    // Idle RSS and start-to-ready are targets on SQLite: measure there when not run above.
    if !o.backends.contains(&Backend::Sqlite) {
        let r: Result<()> = rt.block_on(async {
            let place = Place::new(Backend::Sqlite, "startup", 0)?;
            let (s, fresh) = start(&o.bin, &place, &[], true).await?;
            drop(s);
            let (s, migrated) = start(&o.bin, &place, &[], true).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let idle = status_kib(s.pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
            drop(s);
            let _ = place_cleanup(place);
            report.startup.push(Startup {
                backend: Backend::Sqlite.name().into(),
                fresh_ms: fresh.as_secs_f64() * 1e3,
                migrated_ms: migrated.as_secs_f64() * 1e3,
                idle_rss_mib: idle,
            });
            Ok(())
        });
        if let Err(e) = r {
            failed.push(format!("sqlite start-up: {e:#}"));
        }
    }
    if o.peers && wanted(&o, "anomaly") {
        match iforest_peer(o.quick) {
            Ok(v) => report.peers.push(v),
            Err(e) => report.notes.push(format!("IsolationForest peer: {e:#}")),
        }
    }
    if o.micro {
        println!("\n## micro-benchmarks\n");
        micro(&o, &mut report);
    }
    report.finish();
    let json_path = o.out.join("report.json");
    let md_path = o.out.join("report.md");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report.to_json())?)?;
    std::fs::write(&md_path, report.markdown())?;
    println!("\nwrote {} and {}", json_path.display(), md_path.display());
    for r in &report.rows {
        if r.errors > 0 || r.count == 0 {
            failed.push(format!(
                "{} on {}: {} errors, {} completed",
                r.name, r.backend, r.errors, r.count
            ));
        }
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}
