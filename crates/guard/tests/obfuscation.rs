//! Robustness to obfuscation: an attack the guard blocks in plain form is still blocked when
//! spaced out, in leetspeak, with zero-width characters, with homoglyphs, base64-wrapped, in
//! Unicode tag characters or in variation selectors after an emoji ("emoji smuggling"). Attacks come from the built-in corpus and, when it is beside the
//! checkout (CI), from `../shared/guard-data`; each set must hold on its own.

use base64::Engine;
use steward_guard::{aggregate, AggregateConfig, GuardEngine, ThreatLevel};

/// The attack sets: the built-in corpus always (what a fresh clone has), and the attacks of
/// `../shared/guard-data` when it is beside the checkout (CI).
fn attack_sets() -> Vec<(&'static str, Vec<String>)> {
    let builtin: Vec<String> = steward_guard::builtin_corpus()
        .into_iter()
        .filter(|(_, y)| *y)
        .map(|(t, _)| t)
        .collect();
    let mut sets = vec![("built-in corpus", builtin)];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/guard-data");
    let mut shared = Vec::new();
    for file in [
        "gandalf_ignore_instructions.jsonl",
        "deepset_prompt_injections.jsonl",
    ] {
        if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                    if v["label"] == 1 {
                        if let Some(t) = v["text"].as_str() {
                            shared.push(t.to_owned());
                        }
                    }
                }
            }
        }
    }
    if shared.is_empty() {
        eprintln!("../shared/guard-data not found: the built-in corpus only");
    } else {
        sets.push(("../shared/guard-data", shared));
    }
    sets
}

fn blocked(engine: &GuardEngine, text: &str) -> bool {
    let a = engine.analyze(text);
    aggregate(engine.config(), a.rule, a.ml, None).1 == ThreatLevel::Blocked
}

fn spaced(t: &str) -> String {
    t.split(' ')
        .map(|w| w.chars().map(String::from).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("   ")
}

fn leet(t: &str) -> String {
    t.chars()
        .map(|c| match c {
            'o' | 'O' => '0',
            'e' | 'E' => '3',
            'a' | 'A' => '4',
            'i' | 'I' => '1',
            's' | 'S' => '5',
            other => other,
        })
        .collect()
}

fn zero_width(t: &str) -> String {
    t.chars().flat_map(|c| [c, '\u{200B}']).collect()
}

fn homoglyphs(t: &str) -> String {
    t.chars()
        .map(|c| match c {
            'a' => '\u{0430}',
            'e' => '\u{0435}',
            'o' => '\u{043E}',
            'p' => '\u{0440}',
            'c' => '\u{0441}',
            other => other,
        })
        .collect()
}

fn base64_wrapped(t: &str) -> String {
    format!(
        "Please process this data: {}",
        base64::engine::general_purpose::STANDARD.encode(t)
    )
}

fn tags(t: &str) -> String {
    let hidden: String = t
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .filter_map(|c| char::from_u32(c as u32 + 0xE0000))
        .collect();
    format!("Hello! {hidden}")
}

/// The "emoji smuggling" encoding: each byte of the text as a variation selector after an
/// emoji (bytes 0–15 as U+FE00–U+FE0F, 16–255 as U+E0100–U+E01EF).
fn variation_selectors(t: &str) -> String {
    let hidden: String = t
        .bytes()
        .filter_map(|b| match b {
            0..=15 => char::from_u32(0xFE00 + u32::from(b)),
            _ => char::from_u32(0xE0100 + u32::from(b) - 16),
        })
        .collect();
    format!("Nice weather today 😀{hidden}")
}

/// Every character as a decimal HTML character reference.
fn html_entities(t: &str) -> String {
    t.chars().map(|c| format!("&#{};", c as u32)).collect()
}

/// Every letter as a hexadecimal HTML character reference, the rest as it is.
fn hex_entities(t: &str) -> String {
    t.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("&#x{:x};", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Every letter as a JavaScript `\uXXXX` escape.
fn js_escapes(t: &str) -> String {
    t.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Every vowel with an acute accent (precomposed).
fn accents(t: &str) -> String {
    t.chars()
        .map(|c| match c {
            'a' => 'á',
            'e' => 'é',
            'i' => 'í',
            'o' => 'ó',
            'u' => 'ú',
            'A' => 'Á',
            'E' => 'É',
            'I' => 'Í',
            'O' => 'Ó',
            'U' => 'Ú',
            other => other,
        })
        .collect()
}

/// A combining acute accent after every letter.
fn combining_marks(t: &str) -> String {
    t.chars()
        .flat_map(|c| {
            if c.is_ascii_alphabetic() {
                vec![c, '\u{0301}']
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Small capitals (`x` has none and stays).
fn small_caps(t: &str) -> String {
    const CAPS: [char; 26] = [
        'ᴀ', 'ʙ', 'ᴄ', 'ᴅ', 'ᴇ', 'ꜰ', 'ɢ', 'ʜ', 'ɪ', 'ᴊ', 'ᴋ', 'ʟ', 'ᴍ', 'ɴ', 'ᴏ', 'ᴘ', 'ǫ', 'ʀ',
        'ꜱ', 'ᴛ', 'ᴜ', 'ᴠ', 'ᴡ', 'x', 'ʏ', 'ᴢ',
    ];
    t.chars()
        .map(|c| match c.to_ascii_lowercase() {
            l @ 'a'..='z' => CAPS[(l as u8 - b'a') as usize],
            _ => c,
        })
        .collect()
}

/// Negative squared capital letters (🅰 … 🆉).
fn squared_letters(t: &str) -> String {
    t.chars()
        .map(|c| match c.to_ascii_uppercase() {
            u @ 'A'..='Z' => char::from_u32(0x1F170 + u32::from(u as u8 - b'A')).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// Each word's letters joined by `sep`, words apart as they were.
fn separated(t: &str, sep: &str) -> String {
    t.split(' ')
        .map(|w| w.chars().map(String::from).collect::<Vec<_>>().join(sep))
        .collect::<Vec<_>>()
        .join(" ")
}

fn underscores(t: &str) -> String {
    separated(t, "_")
}

fn dots(t: &str) -> String {
    separated(t, ".")
}

/// One letter per line, a blank line between words.
fn one_letter_per_line(t: &str) -> String {
    t.split(' ')
        .map(|w| w.chars().map(String::from).collect::<Vec<_>>().join("\n"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Markdown emphasis inside every longer word (`**Ig**nore`).
fn markdown_inside_words(t: &str) -> String {
    t.split(' ')
        .map(|w| match w.char_indices().nth(2) {
            Some((i, _)) if w.len() >= 4 => format!("**{}**{}", &w[..i], &w[i..]),
            _ => w.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An empty HTML element between every two letters of a word.
fn html_tags_inside_words(t: &str) -> String {
    t.split(' ')
        .map(|w| {
            w.chars()
                .map(String::from)
                .collect::<Vec<_>>()
                .join("<b></b>")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Base64 in groups of four characters.
fn base64_grouped(t: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(t.as_bytes());
    b.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn reversed(t: &str) -> String {
    t.chars().rev().collect()
}

fn reversed_words(t: &str) -> String {
    t.split(' ')
        .map(|w| w.chars().rev().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

fn caesar3(t: &str) -> String {
    t.chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a') + 3) % 26 + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A') + 3) % 26 + b'A') as char,
            other => other,
        })
        .collect()
}

fn atbash(t: &str) -> String {
    t.chars()
        .map(|c| match c {
            'a'..='z' => (b'z' - (c as u8 - b'a')) as char,
            'A'..='Z' => (b'Z' - (c as u8 - b'A')) as char,
            other => other,
        })
        .collect()
}

/// Upside-down text: letters turned, read from the end.
fn upside_down(t: &str) -> String {
    t.chars()
        .rev()
        .map(|c| match c.to_ascii_lowercase() {
            'a' => 'ɐ',
            'b' => 'q',
            'c' => 'ɔ',
            'd' => 'p',
            'e' => 'ǝ',
            'f' => 'ɟ',
            'g' => 'ƃ',
            'h' => 'ɥ',
            'i' => 'ᴉ',
            'j' => 'ɾ',
            'k' => 'ʞ',
            'm' => 'ɯ',
            'n' => 'u',
            'p' => 'd',
            'q' => 'b',
            'r' => 'ɹ',
            't' => 'ʇ',
            'u' => 'n',
            'v' => 'ʌ',
            'w' => 'ʍ',
            'y' => 'ʎ',
            '.' => '˙',
            '?' => '¿',
            '!' => '¡',
            other => other,
        })
        .collect()
}

fn pluses(t: &str) -> String {
    t.replace(' ', "+")
}

type Transform = (&'static str, fn(&str) -> String);

/// Applies each transform to the attacks of every set that the guard blocks in plain form
/// (ASCII, so that every transform applies; every third, at most 120), prints the share still
/// blocked, and fails when a transform keeps less than `at_least` of them blocked.
fn assert_still_blocked(transforms: &[Transform], at_least: f64) {
    let engine = GuardEngine::new(AggregateConfig::default(), steward_guard::bootstrap_model());
    let mut failures = Vec::new();
    for (source, attacks) in attack_sets() {
        let plain: Vec<String> = attacks
            .into_iter()
            .filter(|t| t.is_ascii() && t.len() < 400 && blocked(&engine, t))
            .step_by(3)
            .take(120)
            .collect();
        assert!(
            plain.len() >= 20,
            "{source}: too few blocked plain attacks: {}",
            plain.len()
        );
        for (name, f) in transforms {
            let missed: Vec<&String> = plain.iter().filter(|t| !blocked(&engine, &f(t))).collect();
            let rate = 1.0 - missed.len() as f64 / plain.len() as f64;
            println!(
                "{source}, {name}: {:.1} % of {} blocked attacks still blocked",
                rate * 100.0,
                plain.len()
            );
            if rate < at_least {
                failures.push(format!(
                    "{source}, {name}: only {:.1} % still blocked; e.g. {:?}",
                    rate * 100.0,
                    missed.iter().take(3).map(|t| f(t)).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rewritten_attacks_stay_blocked() {
    // Forms a model reads as the attack but a byte-level reader does not (a black-box probe,
    // twenty-ninth session): each must keep at least 85 % of the blocked attacks blocked. (The
    // misses left are attacks the corpus already holds obfuscated — leetspeak, reversed
    // instructions, documents of many lines — rewritten a second time.)
    let transforms: [Transform; 20] = [
        ("decimal HTML character references", html_entities),
        ("hexadecimal HTML character references", hex_entities),
        ("JavaScript escapes", js_escapes),
        ("accented vowels", accents),
        ("combining marks", combining_marks),
        ("small capitals", small_caps),
        ("negative squared letters", squared_letters),
        ("letters joined by underscores", underscores),
        ("letters joined by dots", dots),
        ("one letter per line", one_letter_per_line),
        ("Markdown emphasis inside words", markdown_inside_words),
        ("HTML tags inside words", html_tags_inside_words),
        ("base64 in groups of four", base64_grouped),
        ("reversed", reversed),
        ("each word reversed", reversed_words),
        ("Caesar shift 3", caesar3),
        ("Atbash", atbash),
        ("upside down", upside_down),
        ("plus signs for spaces", pluses),
        ("spaced out", spaced),
    ];
    assert_still_blocked(&transforms, 0.85);
}

#[test]
fn obfuscated_attacks_stay_blocked() {
    let transforms: [Transform; 7] = [
        ("spaced out", spaced),
        ("leetspeak", leet),
        ("zero-width characters", zero_width),
        ("homoglyphs", homoglyphs),
        ("base64-wrapped", base64_wrapped),
        ("Unicode tag characters", tags),
        ("variation selectors", variation_selectors),
    ];
    assert_still_blocked(&transforms, 0.95);
}
