//! `cargo xtask bench <scenario>`: load over HTTP against a running server, with latency
//! percentiles. Scenarios: `login`, `audit`, `heartbeat`, `search`, `check`.
//!
//! The server is started separately (see docs/benchmarks.md); this tool only needs its URL
//! and admin key. A small keep-alive HTTP/1.1 client is used so that the generator itself
//! stays cheap.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One keep-alive connection.
pub struct Conn {
    host: String,
    stream: BufReader<TcpStream>,
}

impl Conn {
    pub async fn open(addr: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            host: addr.to_owned(),
            stream: BufReader::new(stream),
        })
    }

    pub async fn call(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut line = String::new();
        let sent = self
            .stream
            .get_mut()
            .write_all(req.as_bytes())
            .await
            .is_ok()
            && self.stream.read_line(&mut line).await.is_ok_and(|n| n > 0);
        if !sent {
            // The keep-alive race: the server closed this idle connection (actix's keep-alive
            // is 5 s) before it read the request. Like any HTTP client, open a new connection
            // and send the request once more.
            let stream = TcpStream::connect(&self.host)
                .await
                .with_context(|| format!("reconnect {}", self.host))?;
            stream.set_nodelay(true)?;
            self.stream = BufReader::new(stream);
            line.clear();
            self.stream.get_mut().write_all(req.as_bytes()).await?;
            self.stream.read_line(&mut line).await?;
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("bad status line {line:?}"))?;
        let mut length = 0usize;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut buf = vec![0u8; length];
        self.stream.read_exact(&mut buf).await?;
        Ok((status, serde_json::from_slice(&buf).unwrap_or(Value::Null)))
    }
}

/// Latency samples in microseconds.
#[derive(Default)]
pub struct Samples(Vec<u64>);

impl Samples {
    pub(crate) fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros() as u64);
    }

    pub(crate) fn count(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn merge(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    pub(crate) fn pct(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)] as f64 / 1000.0
    }

    pub(crate) fn report(&self, what: &str, elapsed: Duration) {
        println!(
            "{what}: {} requests in {:.1} s = {:.0}/s; latency ms p50 {:.2}, p95 {:.2}, p99 {:.2}, max {:.2}",
            self.0.len(),
            elapsed.as_secs_f64(),
            self.0.len() as f64 / elapsed.as_secs_f64(),
            self.pct(50.0),
            self.pct(95.0),
            self.pct(99.0),
            self.pct(100.0)
        );
    }
}

pub struct Options {
    pub addr: String,
    pub admin_key: String,
    pub clients: usize,
    pub duration: Duration,
    pub tenants: usize,
    pub agents: usize,
    /// An existing tenant key: `search` then skips creating a tenant and registering agents.
    pub key: Option<String>,
    /// `ws`: events in the burst.
    pub events: usize,
    /// `ws`: the server's process id, for its resident memory per connection.
    pub pid: Option<u32>,
    /// `ws`: the super admin who creates the listening user.
    pub super_email: String,
    pub super_password: String,
    /// Requests per second over all clients (`ws`: events per second); 0 = as fast as the
    /// server answers. With a rate, latency counts from each request's scheduled time, so a
    /// server that falls behind is not hidden (no coordinated omission).
    pub rate: f64,
}

impl Options {
    pub fn from_args(args: &[String]) -> Result<Options> {
        let mut o = Options {
            addr: "127.0.0.1:8080".into(),
            admin_key: std::env::var("ADMIN_API_KEY")
                .unwrap_or_else(|_| "dev-admin-key-change-me".into()),
            clients: 64,
            duration: Duration::from_secs(20),
            tenants: 8,
            agents: 1000,
            key: None,
            events: 10_000,
            pid: None,
            super_email: std::env::var("SUPER_ADMIN_EMAIL")
                .unwrap_or_else(|_| "admin@steward.local".into()),
            super_password: std::env::var("SUPER_ADMIN_PASSWORD")
                .unwrap_or_else(|_| "change-me-now".into()),
            rate: 0.0,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut v = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| anyhow!("{a} needs a value"))
            };
            match a.as_str() {
                "--url" => {
                    o.addr = v()?
                        .trim_start_matches("http://")
                        .trim_end_matches('/')
                        .to_owned()
                }
                "--admin-key" => o.admin_key = v()?,
                "--clients" => o.clients = v()?.parse()?,
                "--seconds" => o.duration = Duration::from_secs(v()?.parse()?),
                "--tenants" => o.tenants = v()?.parse()?,
                "--agents" => o.agents = v()?.parse()?,
                "--key" => o.key = Some(v()?),
                "--events" => o.events = v()?.parse()?,
                "--pid" => o.pid = Some(v()?.parse()?),
                "--super-email" => o.super_email = v()?,
                "--super-password" => o.super_password = v()?,
                "--rate" => {
                    o.rate = v()?.parse()?;
                    if !(o.rate >= 0.0 && o.rate.is_finite()) {
                        bail!("--rate must be a number of requests per second >= 0");
                    }
                }
                other => bail!("unknown option {other}"),
            }
        }
        Ok(o)
    }
}

pub(crate) async fn tenant(o: &Options) -> Result<String> {
    new_tenant(&o.addr, &o.admin_key, "bench").await
}

/// Creates a tenant named `PREFIX-<random>` with the admin key; answers its API key.
pub(crate) async fn new_tenant(addr: &str, admin_key: &str, prefix: &str) -> Result<String> {
    let mut c = Conn::open(addr).await?;
    let (s, b) = c
        .call(
            "POST",
            "/api/v1/tenants",
            &[("X-Admin-Key", admin_key)],
            Some(&json!({"name": format!("{prefix}-{}", uuid::Uuid::new_v4().simple())})),
        )
        .await?;
    if s != 201 {
        bail!("tenant creation answered {s}: {b}");
    }
    Ok(b["api_key"].as_str().unwrap_or_default().to_owned())
}

pub(crate) async fn register_agents(o: &Options, key: &str, n: usize) -> Result<Vec<String>> {
    let words = [
        "invoice", "parser", "support", "chat", "billing", "search", "report", "etl", "fraud",
        "risk", "crm", "mail",
    ];
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..o.clients.min(32) {
        let (addr, key, next) = (o.addr.clone(), key.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(&addr).await?;
            let mut ids = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= n {
                    break;
                }
                let name = format!(
                    "{}-{}-{i}",
                    words[i % words.len()],
                    words[(i / 7) % words.len()]
                );
                let (s, b) = c
                    .call(
                        "POST",
                        "/api/v1/agents/register",
                        &[("X-API-Key", &key)],
                        Some(&json!({"name": name, "capabilities": ["observe"]})),
                    )
                    .await?;
                if s != 201 {
                    bail!("register answered {s}: {b}");
                }
                ids.push(b["id"].as_str().unwrap_or_default().to_owned());
            }
            Ok::<_, anyhow::Error>(ids)
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await??);
    }
    Ok(ids)
}

/// How many failed steps of one run [`drive`] prints.
const REPORTED_ERRORS: u64 = 5;

/// Runs `clients` loops of `step` for the duration; returns the merged samples. A step
/// answers `Ok(true)` when it succeeded, and preferably `Err` with what it got otherwise
/// (the first [`REPORTED_ERRORS`] failures are printed).
pub(crate) async fn drive<F, Fut>(
    o: &Options,
    clients: usize,
    step: F,
) -> Result<(Samples, Duration, u64)>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<bool>> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let rate = o.rate;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (stop, errors, step) = (stop.clone(), errors.clone(), step.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Samples::default();
            let mut i = 0u64;
            // Paced: client `c` sends its i-th request at start + (i × clients + c) / rate.
            let period = (rate > 0.0).then(|| Duration::from_secs_f64(clients as f64 / rate));
            let offset = (rate > 0.0).then(|| Duration::from_secs_f64(client as f64 / rate));
            while !stop.load(Ordering::Relaxed) {
                let t = match (period, offset) {
                    (Some(p), Some(off)) => {
                        let due =
                            started + off + Duration::from_secs_f64(p.as_secs_f64() * i as f64);
                        if Instant::now() >= due {
                            // Behind schedule (the previous answer was late): the wait counts.
                            due
                        } else {
                            // On time: measure from the send, not from the timer's wake-up
                            // (tokio's timer is 1 ms coarse).
                            tokio::time::sleep_until(due.into()).await;
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            Instant::now()
                        }
                    }
                    _ => Instant::now(),
                };
                match step(client, i).await {
                    Ok(true) => samples.push(t.elapsed()),
                    outcome => {
                        let n = errors.fetch_add(1, Ordering::Relaxed);
                        // The first few say what went wrong (a status and its problem, or a
                        // lost connection), so a failed run can be explained from its log.
                        if n < REPORTED_ERRORS {
                            match outcome {
                                Err(e) => {
                                    eprintln!("  error (client {client}, request {i}): {e:#}")
                                }
                                _ => eprintln!(
                                    "  error (client {client}, request {i}): unexpected answer"
                                ),
                            }
                        }
                    }
                }
                i += 1;
            }
            samples
        }));
    }
    tokio::time::sleep(o.duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Samples::default();
    for t in tasks {
        all.merge(t.await?);
    }
    Ok((all, started.elapsed(), errors.load(Ordering::Relaxed)))
}

pub(crate) fn pool(addr: &str, n: usize) -> Vec<Arc<tokio::sync::Mutex<Option<Conn>>>> {
    let _ = addr;
    (0..n)
        .map(|_| Arc::new(tokio::sync::Mutex::new(None)))
        .collect()
}

pub(crate) async fn with_conn<'a>(
    slot: &'a tokio::sync::Mutex<Option<Conn>>,
    addr: &str,
) -> Result<tokio::sync::MutexGuard<'a, Option<Conn>>> {
    let mut g = slot.lock().await;
    if g.is_none() {
        *g = Some(Conn::open(addr).await?);
    }
    Ok(g)
}

pub async fn run(scenario: &str, o: Options) -> Result<()> {
    match scenario {
        "login" => login(o).await,
        "audit" => audit(o).await,
        "heartbeat" => heartbeat(o).await,
        "search" => search(o).await,
        "check" => check(o).await,
        "ws" => crate::bench_ws::ws(o).await,
        "guard" => crate::bench_guard::guard(o).await,
        other => bail!("unknown scenario {other}: login, audit, heartbeat, search, check, ws"),
    }
}

/// 50 (or `--clients`) concurrent logins, while one client measures `/health`.
async fn login(o: Options) -> Result<()> {
    let key = tenant(&o).await?;
    let _ = key;
    // A user to log in as, created by the super admin is not needed: create one per tenant via
    // the super admin credentials from the environment.
    let email = std::env::var("SUPER_ADMIN_EMAIL").unwrap_or_else(|_| "admin@steward.local".into());
    let password = std::env::var("SUPER_ADMIN_PASSWORD").unwrap_or_else(|_| "change-me-now".into());
    let conns = pool(&o.addr, o.clients);
    let addr = o.addr.clone();
    let body = json!({"email": email, "password": password});
    let logins = {
        let (conns, addr, body) = (conns.clone(), addr.clone(), body.clone());
        drive(&o, o.clients, move |client, _| {
            let (conns, addr, body) = (conns.clone(), addr.clone(), body.clone());
            async move {
                let mut g = with_conn(&conns[client], &addr).await?;
                let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
                let (s, body) = c
                    .call("POST", "/api/v1/auth/login", &[], Some(&body))
                    .await?;
                expect_status(s, 200, &body)
            }
        })
    };
    let health_conn = pool(&o.addr, 1);
    let health = {
        let addr = addr.clone();
        drive(&o, 1, move |_, _| {
            let (slot, addr) = (health_conn[0].clone(), addr.clone());
            async move {
                let mut g = with_conn(&slot, &addr).await?;
                let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
                let (s, body) = c.call("GET", "/health", &[], None).await?;
                expect_status(s, 200, &body)
            }
        })
    };
    let ((l, le, lerr), (h, he, _)) = tokio::try_join!(logins, health)?;
    l.report(
        &format!("login ({} concurrent, {lerr} errors)", o.clients),
        le,
    );
    h.report("GET /health meanwhile", he);
    Ok(())
}

/// `POST /audit/log` from `--clients` clients spread over `--tenants` tenants.
async fn audit(o: Options) -> Result<()> {
    let mut setup = Vec::new();
    for _ in 0..o.tenants {
        let key = tenant(&o).await?;
        let agents = register_agents(
            &Options {
                clients: 1,
                ..Options::from_args(&[])?
            }
            .with_addr(&o),
            &key,
            4,
        )
        .await?;
        setup.push((key, agents));
    }
    let setup = Arc::new(setup);
    let conns = pool(&o.addr, o.clients);
    let addr = o.addr.clone();
    let (s, e, errors) = drive(&o, o.clients, move |client, i| {
        let (conns, addr, setup) = (conns.clone(), addr.clone(), setup.clone());
        async move {
            let (key, agents) = &setup[client % setup.len()];
            let agent = &agents[(i as usize) % agents.len()];
            let body = json!({"agent_id": agent, "action": "read_data", "resource": format!("crm/{i}"),
                              "input": {"q": i}, "risk_score": 0.25, "is_approved": true});
            let mut g = with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            let (st, body) = c.call("POST", "/api/v1/audit/log", &[("X-API-Key", key)], Some(&body)).await?;
            expect_status(st, 201, &body)
        }
    })
    .await?;
    s.report(
        &format!(
            "audit log ({} clients, {} tenants, {errors} errors)",
            o.clients, o.tenants
        ),
        e,
    );
    Ok(())
}

/// Heartbeats over `--agents` agents of one tenant.
async fn heartbeat(o: Options) -> Result<()> {
    let key = tenant(&o).await?;
    let agents = Arc::new(register_agents(&o, &key, o.agents).await?);
    let count = agents.len();
    let conns = pool(&o.addr, o.clients);
    let addr = o.addr.clone();
    let (s, e, errors) = drive(&o, o.clients, move |client, i| {
        let (conns, addr, agents, key) = (conns.clone(), addr.clone(), agents.clone(), key.clone());
        async move {
            let agent = &agents[(client * 7919 + i as usize * 104_729) % agents.len()];
            let mut g = with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            let (st, body) = c
                .call(
                    "POST",
                    &format!("/api/v1/agents/{agent}/heartbeat"),
                    &[("X-API-Key", &key)],
                    None,
                )
                .await?;
            expect_status(st, 200, &body)
        }
    })
    .await?;
    s.report(
        &format!(
            "heartbeat ({} clients, {count} agents, {errors} errors)",
            o.clients
        ),
        e,
    );
    Ok(())
}

/// Policy checks with varied inputs (rows of the contract's decision table, resources
/// numbered per request, so no two consecutive requests of a client are alike) against a
/// tenant with the three default policies plus one from the `hitl` template, over `--agents`
/// registered agents.
async fn check(o: Options) -> Result<()> {
    let key = tenant(&o).await?;
    {
        let mut c = Conn::open(&o.addr).await?;
        let (st, body) = c
            .call(
                "POST",
                "/api/v1/policies",
                &[("X-API-Key", &key)],
                Some(&json!({"name": "hitl", "template": "hitl"})),
            )
            .await?;
        if st != 201 {
            bail!("creating the hitl policy answered {st}: {body}");
        }
    }
    let agents = Arc::new(register_agents(&o, &key, o.agents.clamp(1, 1000)).await?);
    let cases: Arc<Vec<(&str, &str, Value)>> = Arc::new(vec![
        ("read_data", "crm/contacts", json!({})),
        (
            "read_data",
            "crm/contacts",
            json!({"personal_data": true, "consent": true, "purpose": "support"}),
        ),
        (
            "read_data",
            "crm/contacts",
            json!({"personal_data": true, "purpose": "support"}),
        ),
        ("read_phi", "ehr/patients", json!({"purpose": "treatment"})),
        ("read_phi", "ehr/patients", json!({"purpose": "marketing"})),
        (
            "read_data",
            "ehr/patients",
            json!({"phi": true, "authorization": true}),
        ),
        (
            "export_phi",
            "ehr/exports",
            json!({"purpose": "treatment", "encrypted": true}),
        ),
        (
            "export_phi",
            "ehr/exports",
            json!({"purpose": "treatment", "encrypted": true, "approved": true}),
        ),
        (
            "read_data",
            "ru/citizens",
            json!({"personal_data": true, "consent": true, "purpose": "support", "data_subject_country": "RU", "storage_location": "RU"}),
        ),
        ("write_data", "crm/notes", json!({"note": "called back"})),
        ("delete_data", "crm/contacts", json!({})),
        (
            "send_email",
            "mail/outbox",
            json!({"to": "someone@example.com"}),
        ),
    ]);
    let conns = pool(&o.addr, o.clients);
    let addr = o.addr.clone();
    let (s, e, errors) = drive(&o, o.clients, move |client, i| {
        let (conns, addr, key, agents, cases) = (
            conns.clone(),
            addr.clone(),
            key.clone(),
            agents.clone(),
            cases.clone(),
        );
        async move {
            let (action, resource, context) = &cases[(client * 5 + i as usize) % cases.len()];
            let agent = &agents[(client * 31 + i as usize * 7) % agents.len()];
            let body = json!({"agent_id": agent, "action": action,
                              "resource": format!("{resource}/{i}"), "context": context});
            let mut g = with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            let (st, body) = c
                .call(
                    "POST",
                    "/api/v1/policies/check",
                    &[("X-API-Key", &key)],
                    Some(&body),
                )
                .await?;
            expect_status(st, 200, &body)
        }
    })
    .await?;
    s.report(
        &format!(
            "policy check ({} clients, {} agents, {errors} errors)",
            o.clients,
            agents_len(&o)
        ),
        e,
    );
    Ok(())
}

fn agents_len(o: &Options) -> usize {
    o.agents.clamp(1, 1000)
}

/// `GET /agents/search` over `--agents` agents of one tenant.
async fn search(o: Options) -> Result<()> {
    let key = tenant(&o).await?;
    let t = Instant::now();
    let n = register_agents(&o, &key, o.agents).await?.len();
    println!(
        "registered {n} agents in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let queries = [
        "invoice parser",
        "support chat",
        "fraud risk",
        "billing report",
        "etl",
        "crm mail search",
    ];
    let conns = pool(&o.addr, o.clients);
    let addr = o.addr.clone();
    let (s, e, errors) = drive(&o, o.clients, move |client, i| {
        let (conns, addr, key) = (conns.clone(), addr.clone(), key.clone());
        async move {
            let q = queries[(client + i as usize) % queries.len()].replace(' ', "%20");
            let mut g = with_conn(&conns[client], &addr).await?;
            let c = g.as_mut().ok_or_else(|| anyhow!("no connection"))?;
            let (st, body) = c
                .call(
                    "GET",
                    &format!("/api/v1/agents/search?q={q}&limit=20"),
                    &[("X-API-Key", &key)],
                    None,
                )
                .await?;
            expect_status(st, 200, &body)
        }
    })
    .await?;
    s.report(
        &format!(
            "search ({} clients, {n} agents, {errors} errors)",
            o.clients
        ),
        e,
    );
    Ok(())
}

impl Options {
    fn with_addr(mut self, o: &Options) -> Options {
        self.addr = o.addr.clone();
        self.admin_key = o.admin_key.clone();
        self
    }
}

/// The start of an answer's body, for an error message.
pub(crate) fn excerpt(body: &Value) -> String {
    let text = body.to_string();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// `Ok(true)` when a step got the status it wanted, else an error that says what it got.
pub(crate) fn expect_status(status: u16, want: u16, body: &Value) -> Result<bool> {
    if status == want {
        Ok(true)
    } else {
        Err(anyhow!(
            "status {status} (wanted {want}): {}",
            excerpt(body)
        ))
    }
}
