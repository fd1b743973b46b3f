//! `cargo xtask guard-train [--data DIR] [--out PATH]`: trains the guard's shipped model on the
//! public sets of `../shared/guard-data` plus the built-in corpus and writes
//! `fixtures/guard/model.bin`.
//!
//! `cargo xtask guard-eval [--data DIR] [--misses PATH]`: leave-one-source-out over the files of the data
//! directory, then a 5-fold split over all; per source: recall, false-positive rate, F1 and
//! ROC-AUC for the rule detector alone, the ML detector alone and the whole guard (the rule,
//! ML and policy-engine detectors — the shipped `policies/guard.rego` on the embedded engine —
//! aggregated as contract 17.2 with the default settings).
//!
//! `--misses PATH` writes the held-out prompts the whole guard gets wrong (attacks not blocked,
//! benign prompts blocked) as JSONL with each detector's score, for error analysis.
//!
//! `--external PATH` (repeatable) scores further labelled JSONL files (`{text, label,
//! source?}`) instead: the whole guard with a model trained on all of `--data` and the corpus,
//! the share blocked per source (the part of `source` before `#`) and label.
//!
//! `--onnx PATH [--backend onnx|hybrid]` adds an ONNX classifier to the ML detector, as
//! `GUARD_MODEL_PATH` and `GUARD_MODEL_BACKEND` (default `hybrid`) do in the server: a model
//! of the feature vector, or a transformer with its `tokenizer.json` beside it. The file is
//! the operator's and is not retrained per split, so its held-out figures are held out only
//! if it never saw those sources.
//!
//! Both read the built-in corpus from `--corpus` (default `fixtures/guard/corpus.jsonl`), so a
//! corpus change is evaluated without rebuilding.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use steward_guard::onnx::{Backend, TextClassifier};
use steward_guard::policy::{PolicyDetector, Signals, CONFIDENT_ML};
use steward_guard::{aggregate, AggregateConfig, GuardEngine, MlModel, TrainOptions};

/// The shipped guard policy module.
const GUARD_REGO: &str = include_str!("../../policies/guard.rego");

struct Sample {
    text: String,
    attack: bool,
    file: String,
    /// The file's group for training (1, 2, …; the built-in corpus is 0).
    group: u32,
}

fn load(dir: &Path) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    for (group, f) in (1u32..).zip(files) {
        let name = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (text, attack, _) in labelled(&f)? {
            out.push(Sample {
                text,
                attack,
                file: name.clone(),
                group,
            });
        }
    }
    if out.is_empty() {
        bail!("no samples in {}", dir.display());
    }
    Ok(out)
}

/// The `{text, label, source?}` lines of a JSONL file: (text, is attack, source); lines
/// without a text or a label are skipped.
fn labelled(path: &Path) -> Result<Vec<(String, bool, String)>> {
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path)
        .with_context(|| format!("read {}", path.display()))?
        .lines()
    {
        let v: Value = serde_json::from_str(line)?;
        let (Some(text), Some(label)) = (v["text"].as_str(), v["label"].as_i64()) else {
            continue;
        };
        let source = v["source"].as_str().unwrap_or_default().to_owned();
        out.push((text.to_owned(), label == 1, source));
    }
    Ok(out)
}

/// One prompt the whole guard gets wrong, with each detector's score (`--misses`).
fn miss(row: &Row, text: &str, key: &str, name: &str) -> Value {
    serde_json::json!({
        key: name,
        "label": u8::from(row.attack),
        "text": text,
        "rule": row.rule,
        "ml": row.ml,
        "phrases": row.phrases,
        "whole": row.whole,
    })
}

/// Writes the misses as JSONL and says where.
fn write_misses(path: &Path, wrong: &[Value]) -> Result<()> {
    let lines: Vec<String> = wrong.iter().map(|v| v.to_string()).collect();
    std::fs::write(path, lines.join("\n") + "\n")
        .with_context(|| format!("write {}", path.display()))?;
    println!(
        "\n{} prompts the whole guard gets wrong written to {}",
        wrong.len(),
        path.display()
    );
    Ok(())
}

struct Args {
    data: PathBuf,
    out: PathBuf,
    corpus: PathBuf,
    /// `guard-eval --misses PATH`: the held-out prompts the whole guard gets wrong, as JSONL.
    misses: Option<PathBuf>,
    /// `guard-eval --external PATH` (repeatable): further labelled JSONL files scored by the
    /// whole guard with a model trained on all of `--data` and the corpus (the shipped model's
    /// training), per `source` (the part before `#`).
    external: Vec<PathBuf>,
    /// `--onnx PATH`: an ONNX classifier beside the native model (`GUARD_MODEL_PATH`).
    onnx: Option<PathBuf>,
    /// `--backend onnx|hybrid` (default `hybrid`): how it combines (`GUARD_MODEL_BACKEND`).
    backend: String,
}

/// The ONNX classifier of `--onnx`, with its backend.
type Onnx = Option<(std::sync::Arc<dyn TextClassifier>, Backend)>;

/// Loads `--onnx` as the server would; a file that does not load is an error here.
fn onnx_of(a: &Args) -> Result<Onnx> {
    let Some(path) = &a.onnx else {
        return Ok(None);
    };
    let backend = Backend::parse(&a.backend);
    if backend == Backend::Native {
        bail!("--backend must be onnx or hybrid, not {}", a.backend);
    }
    let (model, what) = steward_guard::onnx::load_file(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    println!(
        "ML detector: the native model and {}, {what} ({})",
        path.display(),
        a.backend
    );
    Ok(Some((model, backend)))
}

fn args(rest: &[String]) -> Result<Args> {
    let mut a = Args {
        data: PathBuf::from("../shared/guard-data"),
        out: PathBuf::from("fixtures/guard/model.bin"),
        corpus: PathBuf::from("fixtures/guard/corpus.jsonl"),
        misses: None,
        external: Vec::new(),
        onnx: None,
        backend: "hybrid".to_owned(),
    };
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        if flag == "--misses" {
            a.misses = Some(it.next().context("--misses needs a value")?.into());
            continue;
        }
        if flag == "--onnx" {
            a.onnx = Some(it.next().context("--onnx needs a value")?.into());
            continue;
        }
        if flag == "--backend" {
            a.backend = it.next().context("--backend needs a value")?.clone();
            continue;
        }
        if flag == "--external" {
            a.external
                .push(it.next().context("--external needs a value")?.into());
            continue;
        }
        let slot = match flag.as_str() {
            "--data" => &mut a.data,
            "--out" => &mut a.out,
            "--corpus" => &mut a.corpus,
            other => bail!("unknown option {other}"),
        };
        *slot = it
            .next()
            .with_context(|| format!("{flag} needs a value"))?
            .into();
    }
    Ok(a)
}

fn corpus(path: &Path) -> Result<Vec<(String, bool)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let samples = steward_guard::parse_corpus(&text);
    if samples.is_empty() {
        bail!("no samples in {}", path.display());
    }
    Ok(samples)
}

/// Trains on samples, each with its group (its file; the built-in corpus is 0): the
/// calibration leaves one group out at a time (`MlModel::train_with`).
fn train(samples: &[(String, bool, u32)]) -> Result<MlModel> {
    let texts: Vec<(String, bool)> = samples.iter().map(|(t, y, _)| (t.clone(), *y)).collect();
    let groups: Vec<u32> = samples.iter().map(|s| s.2).collect();
    MlModel::train_with(&texts, Some(&groups), &TrainOptions::default(), &mut |_| {
        true
    })
    .map_err(|e| anyhow::anyhow!("training: {e:?}"))
}

pub fn guard_train(rest: &[String]) -> Result<()> {
    let Args {
        data,
        out,
        corpus: corpus_path,
        ..
    } = args(rest)?;
    let mut samples: Vec<(String, bool, u32)> = load(&data)?
        .into_iter()
        .map(|s| (s.text, s.attack, s.group))
        .collect();
    samples.extend(corpus(&corpus_path)?.into_iter().map(|(t, y)| (t, y, 0)));
    let started = std::time::Instant::now();
    let model = train(&samples)?;
    std::fs::write(&out, model.to_bytes())?;
    println!(
        "trained on {} samples in {:.1} s (calibration {:?}); wrote {} ({} bytes)",
        samples.len(),
        started.elapsed().as_secs_f64(),
        model.calibration,
        out.display(),
        model.to_bytes().len()
    );
    Ok(())
}

#[derive(Default)]
struct Scores {
    /// (score, attack)
    rows: Vec<(f64, bool)>,
}

impl Scores {
    fn line(&self, label: &str, threshold: f64) -> String {
        let (mut tp, mut fp, mut fneg, mut tn) = (0f64, 0f64, 0f64, 0f64);
        for (s, y) in &self.rows {
            match (*s >= threshold, *y) {
                (true, true) => tp += 1.0,
                (true, false) => fp += 1.0,
                (false, true) => fneg += 1.0,
                (false, false) => tn += 1.0,
            }
        }
        let recall = if tp + fneg > 0.0 {
            tp / (tp + fneg)
        } else {
            f64::NAN
        };
        let fpr = if fp + tn > 0.0 {
            fp / (fp + tn)
        } else {
            f64::NAN
        };
        let precision = if tp + fp > 0.0 {
            tp / (tp + fp)
        } else {
            f64::NAN
        };
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            f64::NAN
        };
        format!(
            "| {label} | {} | {} | {} | {} | {} |",
            self.rows.len(),
            fmt(recall),
            fmt(fpr),
            fmt(f1),
            fmt(auc(&self.rows))
        )
    }
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else {
        format!("{x:.3}")
    }
}

/// ROC-AUC by the rank statistic (ties count half); NaN with one class only.
fn auc(rows: &[(f64, bool)]) -> f64 {
    let pos: Vec<f64> = rows.iter().filter(|r| r.1).map(|r| r.0).collect();
    let neg: Vec<f64> = rows.iter().filter(|r| !r.1).map(|r| r.0).collect();
    if pos.is_empty() || neg.is_empty() {
        return f64::NAN;
    }
    let mut sorted = neg.clone();
    sorted.sort_by(f64::total_cmp);
    let mut sum = 0.0;
    for p in &pos {
        let below = sorted.partition_point(|n| n < p);
        let equal = sorted[below..].partition_point(|n| n <= p);
        sum += below as f64 + 0.5 * equal as f64;
    }
    sum / (pos.len() as f64 * neg.len() as f64)
}

/// What the detectors said about one test prompt.
#[derive(Clone, Copy)]
struct Row {
    /// Index of the prompt in the test split.
    index: usize,
    attack: bool,
    rule: f64,
    ml: f64,
    /// The policy engine without the classifier (its phrasings alone).
    phrases: f64,
    whole: f64,
}

/// Per-prompt detector outputs of `test` with a model trained on `train_set`.
fn score_split(
    train_set: &[&Sample],
    test: &[&Sample],
    builtin: &[(String, bool)],
    policy: &PolicyDetector,
    onnx: &Onnx,
) -> Result<Vec<Row>> {
    let mut samples: Vec<(String, bool, u32)> = train_set
        .iter()
        .map(|s| (s.text.clone(), s.attack, s.group))
        .collect();
    samples.extend(builtin.iter().map(|(t, y)| (t.clone(), *y, 0)));
    let model = train(&samples)?;
    let cfg = AggregateConfig::default();
    let mut engine = GuardEngine::new(cfg, Some(model));
    if let Some((m, backend)) = onnx {
        engine = engine.with_onnx(Some(m.clone()), *backend);
    }
    let mut rows = Vec::with_capacity(test.len());
    for (index, s) in test.iter().enumerate() {
        let a = engine.analyze(&s.text);
        let pe = |ml: Option<f64>| {
            policy
                .score(&a.normalized, Signals { rule: a.rule, ml })
                .map(|(score, _)| score)
                .context("guard.rego did not evaluate")
        };
        let full = pe(a.ml)?;
        rows.push(Row {
            index,
            attack: s.attack,
            rule: a.rule,
            ml: a.ml.unwrap_or(0.0),
            phrases: pe(None)?,
            whole: aggregate(&cfg, a.rule, a.ml, Some(full)).0,
        });
    }
    Ok(rows)
}

fn scores(rows: &[Row], f: impl Fn(&Row) -> f64) -> Scores {
    Scores {
        rows: rows.iter().map(|r| (f(r), r.attack)).collect(),
    }
}

/// Which detector makes the whole guard block: the rules (a rule at the block threshold), the
/// policy engine's phrasings, the confident classifier (`ml ≥ CONFIDENT_ML`, the only one for
/// "ML only"); and the whole guard with the classifier's confidence cut at other values.
fn breakdown(label: &str, rows: &[Row], cfg: &AggregateConfig) -> String {
    let n = rows.len().max(1) as f64;
    let rate = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count() as f64 / n;
    let by_rule = |r: &Row| r.rule >= cfg.threshold_block;
    let by_phrase = |r: &Row| r.phrases >= 0.9;
    let mut cuts = String::new();
    for cut in CUTS {
        let f = |r: &Row| by_rule(r) || by_phrase(r) || r.ml >= cut;
        cuts.push_str(&format!(" {:.3} |", rate(&f)));
    }
    format!(
        "| {label} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |{cuts}",
        rows.len(),
        rate(&|r| r.whole >= cfg.threshold_block),
        rate(&by_rule),
        rate(&by_phrase),
        rate(&|r| r.ml >= CONFIDENT_ML),
        rate(&|r| r.ml >= CONFIDENT_ML && !by_rule(r) && !by_phrase(r)),
    )
}

/// The classifier confidence cuts of the breakdown.
const CUTS: [f64; 6] = [0.6, 0.65, 0.7, 0.75, 0.8, 0.85];

const BREAKDOWN_HEAD: &str = "| held-out prompts | n | blocked | by rules | by policy phrasings | confident ML | ML only | cut 0.60 | cut 0.65 | cut 0.70 | cut 0.75 | cut 0.80 | cut 0.85 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|";

pub fn guard_eval(rest: &[String]) -> Result<()> {
    let a = args(rest)?;
    let onnx = onnx_of(&a)?;
    let Args {
        data,
        corpus: corpus_path,
        misses,
        external,
        ..
    } = a;
    if !external.is_empty() {
        return external_eval(&data, &corpus_path, &external, misses.as_deref(), &onnx);
    }
    let mut wrong: Vec<serde_json::Value> = Vec::new();
    let all = load(&data)?;
    let builtin = corpus(&corpus_path)?;
    let policy = PolicyDetector::new(GUARD_REGO);
    let cfg = AggregateConfig::default();
    let mut files: Vec<String> = all.iter().map(|s| s.file.clone()).collect();
    files.sort();
    files.dedup();
    println!(
        "Leave-one-source-out (train on the other files + the built-in corpus, test on this file)."
    );
    println!(
        "Thresholds: ML {:.2}, whole guard = block {:.2}.\n",
        cfg.ml_threshold, cfg.threshold_block
    );
    println!("| held-out file / detector | n | recall | FPR | F1 | ROC-AUC |");
    println!("|---|---|---|---|---|---|");
    let mut why: Vec<String> = Vec::new();
    for f in &files {
        let train_set: Vec<&Sample> = all.iter().filter(|s| &s.file != f).collect();
        let test: Vec<&Sample> = all.iter().filter(|s| &s.file == f).collect();
        let rows = score_split(&train_set, &test, &builtin, &policy, &onnx)?;
        for row in rows
            .iter()
            .filter(|r| (r.whole >= cfg.threshold_block) != r.attack)
        {
            wrong.push(miss(row, &test[row.index].text, "file", f));
        }
        let (r, m, w) = (
            scores(&rows, |r| r.rule),
            scores(&rows, |r| r.ml),
            scores(&rows, |r| r.whole),
        );
        println!("{}", r.line(&format!("{f} / rules"), cfg.rule_threshold));
        println!("{}", m.line(&format!("{f} / ML"), cfg.ml_threshold));
        println!(
            "{}",
            w.line(&format!("{f} / whole guard"), cfg.threshold_block)
        );
        for (kind, part) in by_class(&rows) {
            if !part.is_empty() {
                why.push(breakdown(&format!("{f} ({kind})"), &part, &cfg));
            }
        }
    }
    if let Some(path) = &misses {
        write_misses(path, &wrong)?;
    }
    println!("\nWhat blocks on the held-out file (fractions of its attacks / benign prompts; the");
    println!("cut columns: the whole guard if the classifier's confidence cut were that value).\n");
    println!("{BREAKDOWN_HEAD}");
    for line in &why {
        println!("{line}");
    }
    println!("\n5-fold over all files (stratified by position).\n");
    println!("| detector | n | recall | FPR | F1 | ROC-AUC |");
    println!("|---|---|---|---|---|---|");
    let mut rows: Vec<Row> = Vec::new();
    for fold in 0..5 {
        let train_set: Vec<&Sample> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 != fold)
            .map(|(_, s)| s)
            .collect();
        let test: Vec<&Sample> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 == fold)
            .map(|(_, s)| s)
            .collect();
        rows.extend(score_split(&train_set, &test, &builtin, &policy, &onnx)?);
    }
    println!(
        "{}",
        scores(&rows, |r| r.rule).line("rules", cfg.rule_threshold)
    );
    println!("{}", scores(&rows, |r| r.ml).line("ML", cfg.ml_threshold));
    println!(
        "{}",
        scores(&rows, |r| r.whole).line("whole guard", cfg.threshold_block)
    );
    println!("\n{BREAKDOWN_HEAD}");
    for (kind, part) in by_class(&rows) {
        println!("{}", breakdown(&format!("5-fold ({kind})"), &part, &cfg));
    }
    Ok(())
}

/// The rows of attacks and of benign prompts, named for the breakdown.
fn by_class(rows: &[Row]) -> [(&'static str, Vec<Row>); 2] {
    let of = |attack: bool| {
        rows.iter()
            .filter(|r| r.attack == attack)
            .copied()
            .collect()
    };
    [("attacks", of(true)), ("benign", of(false))]
}

/// `guard-eval --external PATH…`: the whole guard, with a model trained on all of `data` and
/// the corpus, on further labelled files; the share blocked per source and label.
fn external_eval(
    data: &Path,
    corpus_path: &Path,
    files: &[PathBuf],
    misses: Option<&Path>,
    onnx: &Onnx,
) -> Result<()> {
    let all = load(data)?;
    let builtin = corpus(corpus_path)?;
    let policy = PolicyDetector::new(GUARD_REGO);
    let cfg = AggregateConfig::default();
    let train_set: Vec<&Sample> = all.iter().collect();
    let mut tests: Vec<(String, Sample)> = Vec::new();
    for f in files {
        for (text, attack, source) in labelled(f)? {
            let source = source.split('#').next().unwrap_or_default().to_owned();
            let sample = Sample {
                text,
                attack,
                file: String::new(),
                group: 0,
            };
            tests.push((source, sample));
        }
    }
    let test: Vec<&Sample> = tests.iter().map(|(_, s)| s).collect();
    let rows = score_split(&train_set, &test, &builtin, &policy, onnx)?;
    let mut per: std::collections::BTreeMap<(String, bool), (usize, usize)> =
        std::collections::BTreeMap::new();
    let mut wrong = Vec::new();
    for row in &rows {
        let blocked = row.whole >= cfg.threshold_block;
        let e = per
            .entry((tests[row.index].0.clone(), row.attack))
            .or_default();
        e.0 += 1;
        e.1 += usize::from(blocked);
        if blocked != row.attack {
            wrong.push(miss(
                row,
                &test[row.index].text,
                "source",
                &tests[row.index].0,
            ));
        }
    }
    println!("| source | label | n | blocked |\n|---|---|---|---|");
    let mut totals = [(0usize, 0usize); 2];
    for ((source, attack), (n, b)) in &per {
        println!(
            "| {source} | {} | {n} | {:.3} |",
            if *attack { "attack" } else { "benign" },
            *b as f64 / *n as f64
        );
        let t = &mut totals[usize::from(*attack)];
        t.0 += n;
        t.1 += b;
    }
    for (label, (n, b)) in ["benign", "attack"].iter().zip(totals) {
        if n > 0 {
            println!("| all | {label} | {n} | {:.3} |", b as f64 / n as f64);
        }
    }
    if let Some(path) = misses {
        write_misses(path, &wrong)?;
    }
    Ok(())
}
