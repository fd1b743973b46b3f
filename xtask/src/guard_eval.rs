//! `cargo xtask guard-train [--data DIR] [--out PATH]`: trains the guard's shipped model on the
//! public sets of `../shared/guard-data` plus the built-in corpus and writes
//! `fixtures/guard/model.bin`.
//!
//! `cargo xtask guard-eval [--data DIR]`: leave-one-source-out over the files of the data
//! directory, then a 5-fold split over all; per source: recall, false-positive rate, F1 and
//! ROC-AUC for the rule detector alone, the ML detector alone and the whole guard (the rule,
//! ML and policy-engine detectors — the shipped `policies/guard.rego` on the embedded engine —
//! aggregated as contract 17.2 with the default settings).
//!
//! Both read the built-in corpus from `--corpus` (default `fixtures/guard/corpus.jsonl`), so a
//! corpus change is evaluated without rebuilding.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use steward_guard::policy::{PolicyDetector, Signals};
use steward_guard::{aggregate, AggregateConfig, GuardEngine, MlModel};

/// The shipped guard policy module.
const GUARD_REGO: &str = include_str!("../../policies/guard.rego");

struct Sample {
    text: String,
    attack: bool,
    file: String,
}

fn load(dir: &Path) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    for f in files {
        let name = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for line in std::fs::read_to_string(&f)?.lines() {
            let v: Value = serde_json::from_str(line)?;
            let (Some(text), Some(label)) = (v["text"].as_str(), v["label"].as_i64()) else {
                continue;
            };
            out.push(Sample {
                text: text.to_owned(),
                attack: label == 1,
                file: name.clone(),
            });
        }
    }
    if out.is_empty() {
        bail!("no samples in {}", dir.display());
    }
    Ok(out)
}

struct Args {
    data: PathBuf,
    out: PathBuf,
    corpus: PathBuf,
}

fn args(rest: &[String]) -> Result<Args> {
    let mut a = Args {
        data: PathBuf::from("../shared/guard-data"),
        out: PathBuf::from("fixtures/guard/model.bin"),
        corpus: PathBuf::from("fixtures/guard/corpus.jsonl"),
    };
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
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

fn train(samples: &[(String, bool)]) -> Result<MlModel> {
    MlModel::train(samples, &mut |_| true).map_err(|e| anyhow::anyhow!("training: {e:?}"))
}

pub fn guard_train(rest: &[String]) -> Result<()> {
    let Args {
        data,
        out,
        corpus: corpus_path,
    } = args(rest)?;
    let mut samples: Vec<(String, bool)> = load(&data)?
        .into_iter()
        .map(|s| (s.text, s.attack))
        .collect();
    samples.extend(corpus(&corpus_path)?);
    let started = std::time::Instant::now();
    let model = train(&samples)?;
    std::fs::write(&out, model.to_bytes())?;
    println!(
        "trained on {} samples in {:.1} s; wrote {} ({} bytes)",
        samples.len(),
        started.elapsed().as_secs_f64(),
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

/// Rule, ML and whole-guard scores of `test` with a model trained on `train`.
fn score_split(
    train_set: &[&Sample],
    test: &[&Sample],
    builtin: &[(String, bool)],
    policy: &PolicyDetector,
) -> Result<(Scores, Scores, Scores)> {
    let mut samples: Vec<(String, bool)> = train_set
        .iter()
        .map(|s| (s.text.clone(), s.attack))
        .collect();
    samples.extend_from_slice(builtin);
    let model = train(&samples)?;
    let cfg = AggregateConfig::default();
    let engine = GuardEngine::new(cfg, Some(model));
    let (mut rules, mut ml, mut whole) = (Scores::default(), Scores::default(), Scores::default());
    for s in test {
        let a = engine.analyze(&s.text);
        let signals = Signals {
            rule: a.rule,
            ml: a.ml,
        };
        let pe = policy
            .score(&a.normalized, signals)
            .map(|(score, _)| score)
            .context("guard.rego did not evaluate")?;
        rules.rows.push((a.rule, s.attack));
        ml.rows.push((a.ml.unwrap_or(0.0), s.attack));
        whole
            .rows
            .push((aggregate(&cfg, a.rule, a.ml, Some(pe)).0, s.attack));
    }
    Ok((rules, ml, whole))
}

pub fn guard_eval(rest: &[String]) -> Result<()> {
    let Args {
        data,
        corpus: corpus_path,
        ..
    } = args(rest)?;
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
    for f in &files {
        let train_set: Vec<&Sample> = all.iter().filter(|s| &s.file != f).collect();
        let test: Vec<&Sample> = all.iter().filter(|s| &s.file == f).collect();
        let (r, m, w) = score_split(&train_set, &test, &builtin, &policy)?;
        println!("{}", r.line(&format!("{f} / rules"), cfg.rule_threshold));
        println!("{}", m.line(&format!("{f} / ML"), cfg.ml_threshold));
        println!(
            "{}",
            w.line(&format!("{f} / whole guard"), cfg.threshold_block)
        );
    }
    println!("\n5-fold over all files (stratified by position).\n");
    println!("| detector | n | recall | FPR | F1 | ROC-AUC |");
    println!("|---|---|---|---|---|---|");
    let (mut r, mut m, mut w) = (Scores::default(), Scores::default(), Scores::default());
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
        let (a, b, c) = score_split(&train_set, &test, &builtin, &policy)?;
        r.rows.extend(a.rows);
        m.rows.extend(b.rows);
        w.rows.extend(c.rows);
    }
    println!("{}", r.line("rules", cfg.rule_threshold));
    println!("{}", m.line("ML", cfg.ml_threshold));
    println!("{}", w.line("whole guard", cfg.threshold_block));
    Ok(())
}
