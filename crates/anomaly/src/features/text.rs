//! Hashing and string helpers of the feature definition.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::TRIGRAMS;

/// A hasher for keys that are already hashes.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub(super) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

pub(super) const FNV: u64 = 0xcbf2_9ce4_8422_2325;
pub(super) const PRIME: u64 = 0x0000_0100_0000_01b3;

#[inline]
pub(super) fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

#[inline]
pub(super) fn mix(h: u64, k: u64) -> u64 {
    let x = (h ^ k.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 31)
}

/// Kinds of counted categories (salts of their hashes).
pub(super) mod kind {
    pub const ACTION: u64 = 1;
    pub const ACTION_PREFIX: u64 = 2;
    pub const AGENT_ACTION: u64 = 3;
    pub const AGENT_ACTION_PREFIX: u64 = 4;
    pub const TOKEN: u64 = 5;
    pub const STR_VALUE: u64 = 6;
    pub const NUM_VALUE: u64 = 7;
    pub const KEY_SET: u64 = 8;
    pub const KEY: u64 = 9;
    pub const AGENT: u64 = 10;
    pub const SHAPE: u64 = 11;
    pub const AGENT_HOUR: u64 = 12;
}

/// Folds a byte for the character model: ASCII lowercase, digits to `0`.
#[inline]
pub(super) fn fold(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b'0',
        b'A'..=b'Z' => b + 32,
        _ => b,
    }
}

#[inline]
pub(super) fn is_meta(b: u8) -> bool {
    matches!(
        b,
        b'<' | b'>'
            | b'\''
            | b'"'
            | b'('
            | b')'
            | b';'
            | b'{'
            | b'}'
            | b'['
            | b']'
            | b'$'
            | b'|'
            | b'`'
            | b'\\'
            | b'%'
            | b'*'
            | b'!'
            | b'^'
            | b'~'
    ) || b < 0x20
}

/// Percent-decodes `s` into `buf` when it holds an escape (strings longer than the buffer
/// are read as they are).
pub(super) fn decode<'a>(s: &'a [u8], buf: &'a mut [u8; 512]) -> &'a [u8] {
    if s.len() > buf.len() || !s.contains(&b'%') {
        return s;
    }
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let (mut i, mut n) = (0, 0);
    while i < s.len() {
        let b = s[i];
        if b == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                buf[n] = h * 16 + l;
                n += 1;
                i += 3;
                continue;
            }
        }
        buf[n] = b;
        n += 1;
        i += 1;
    }
    &buf[..n]
}

/// The query parameters of a resource (`?k=v&k2=v2`), raw.
pub(super) fn query(resource: &str) -> impl Iterator<Item = (&[u8], &[u8])> {
    pairs(resource.split_once('?').map_or("", |(_, q)| q))
}

/// A string leaf that reads as form-encoded parameters (`k=v&k2=v2`, no spaces).
pub(super) fn form(s: &str) -> Option<&str> {
    (s.len() <= 4096 && s.contains('=') && !s.contains(' ')).then_some(s)
}

/// `k=v` pairs separated by `&`, raw.
pub(super) fn pairs(q: &str) -> impl Iterator<Item = (&[u8], &[u8])> {
    q.split('&').filter(|p| !p.is_empty()).map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k.as_bytes(), v.as_bytes())
    })
}

/// Hash of a (key, value) pair, the value folded.
pub(super) fn value_hash(key: u64, v: &[u8]) -> u64 {
    v.iter().fold(key, |h, b| fnv(h, &[fold(*b)]))
}

/// Hash of a (key, shape) pair: the character classes present and the length's magnitude.
pub(super) fn shape(key: u64, v: &[u8]) -> u64 {
    let mut bits = 0u32;
    for &b in v {
        bits |= match b {
            b'a'..=b'z' => 1,
            b'A'..=b'Z' => 2,
            b'0'..=b'9' => 4,
            b' ' | b'+' => 8,
            b'-' | b'_' | b'.' | b'@' | b':' | b'/' | b',' => 16,
            b'%' => 32,
            0x80.. => 64,
            _ if is_meta(b) => 128,
            _ => 256,
        };
    }
    let len = usize::BITS - v.len().leading_zeros();
    mix(key, u64::from(bits) << 8 | u64::from(len))
}

pub(super) fn bump_map(m: &mut IdMap<u32>, h: u64) {
    *m.entry(h).or_insert(0) += 1;
}

#[inline]
pub(super) fn trigram(a: u8, b: u8, c: u8) -> usize {
    let h = (u32::from(a).wrapping_mul(0x9E37_79B1) ^ u32::from(b).wrapping_mul(0x85EB_CA77))
        .wrapping_add(u32::from(c).wrapping_mul(0xC2B2_AE3D));
    ((h ^ (h >> 15)) as usize) & (TRIGRAMS - 1)
}
