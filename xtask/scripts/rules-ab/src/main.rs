//! The guard's rule patterns (`crates/guard/src/rules.rs`, included as is) over the prompts of
//! `../shared/guard-data`, lower-cased: the former form (one `RegexSet` with Unicode `\b`,
//! overlapping search) against the current one (one `Regex` per pattern with ASCII `\b`), with
//! a check that both find the same patterns on every prompt. Timings per prompt, one thread.

#[path = "../../../../crates/guard/src/rules.rs"]
#[allow(dead_code)]
mod rules;

use std::time::Instant;

use regex::{Regex, RegexBuilder, RegexSetBuilder};

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "../shared/guard-data".into());
    let mut prompts = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                prompts.push(v["text"].as_str().unwrap_or_default().to_lowercase());
            }
        }
    }
    let long: String = prompts.iter().take(200).cloned().collect::<Vec<_>>().join(" ");
    let long: String = long.chars().take(32 * 1024).collect();
    let patterns: Vec<&str> = rules::PATTERNS
        .iter()
        .filter(|p| !p.case_sensitive)
        .map(|p| p.regex)
        .collect();
    let ascii: Vec<String> = patterns.iter().map(|s| s.replace(r"\b", r"(?-u:\b)")).collect();

    let set = RegexSetBuilder::new(&patterns)
        .case_insensitive(true)
        .dot_matches_new_line(true)
        .size_limit(64 << 20)
        .build()
        .unwrap();
    let before = |t: &str| set.matches(t).into_iter().collect::<Vec<_>>();
    let ascii_set = RegexSetBuilder::new(&ascii)
        .case_insensitive(true)
        .dot_matches_new_line(true)
        .size_limit(64 << 20)
        .build()
        .unwrap();
    let set_ascii = |t: &str| ascii_set.matches(t).into_iter().collect::<Vec<_>>();
    let singles: Vec<Regex> = ascii
        .iter()
        .map(|p| {
            RegexBuilder::new(p)
                .case_insensitive(true)
                .dot_matches_new_line(true)
                .size_limit(16 << 20)
                .build()
                .unwrap()
        })
        .collect();
    let after = |t: &str| {
        singles
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_match(t))
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let differ = prompts.iter().filter(|p| before(p) != after(p)).count();
    println!(
        "{} prompts from {dir}, {} patterns; prompts where the matches differ: {differ}",
        prompts.len(),
        patterns.len()
    );
    let variants: [(&str, &dyn Fn(&str) -> Vec<usize>); 3] = [
        ("before: one RegexSet, Unicode \\b", &before),
        ("one RegexSet, ASCII \\b", &set_ascii),
        ("after: one Regex per pattern, ASCII \\b", &after),
    ];
    for (name, scan) in variants {
        for p in &prompts {
            std::hint::black_box(scan(p));
        }
        let mut times = Vec::with_capacity(prompts.len() * 3);
        let t = Instant::now();
        for _ in 0..3 {
            for p in &prompts {
                let s = Instant::now();
                std::hint::black_box(scan(p));
                times.push(s.elapsed().as_nanos() as f64 / 1000.0);
            }
        }
        let mean = t.elapsed().as_secs_f64() * 1e6 / times.len() as f64;
        times.sort_by(f64::total_cmp);
        let q = |f: f64| times[((times.len() as f64 * f) as usize).min(times.len() - 1)];
        let s = Instant::now();
        for _ in 0..20 {
            std::hint::black_box(scan(&long));
        }
        let long_us = s.elapsed().as_secs_f64() * 1e6 / 20.0;
        println!(
            "{name:42} mean {mean:7.1} µs  p50 {:6.1} µs  p99 {:8.1} µs  32 KiB text {long_us:8.1} µs",
            q(0.5),
            q(0.99)
        );
    }
}
