//! API keys: `stw_` + 64 lowercase hex characters (32 random bytes), stored as SHA-256,
//! masked as the first 8 characters, `...`, the last 4.

use std::fmt;

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub const KEY_PREFIX: &str = "stw_";

/// A raw API key. Shown once; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct RawKey(String);

impl RawKey {
    /// A new random key.
    pub fn generate() -> RawKey {
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        RawKey(format!("{KEY_PREFIX}{}", hex::encode(bytes)))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> String {
        hash_key(&self.0)
    }

    pub fn masked(&self) -> String {
        mask_key(&self.0)
    }
}

impl fmt::Debug for RawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawKey({})", self.masked())
    }
}

/// SHA-256 of a presented key, lowercase hex.
pub fn hash_key(raw: &str) -> String {
    hex::encode(Sha256::digest(raw.as_bytes()))
}

/// The masked display form.
pub fn mask_key(raw: &str) -> String {
    let chars: Vec<char> = raw.chars().collect();
    if chars.len() <= 12 {
        return "****".to_owned();
    }
    let head: String = chars[..8].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}...{tail}")
}

/// True when `raw` has the shape of a Steward key (cheap rejection before any lookup).
pub fn well_formed(raw: &str) -> bool {
    raw.len() == KEY_PREFIX.len() + 64
        && raw.starts_with(KEY_PREFIX)
        && raw[KEY_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Constant-time comparison of two secrets.
pub fn secrets_equal(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_hash_and_mask() {
        let k = RawKey::generate();
        assert!(well_formed(k.expose()));
        assert_eq!(k.hash().len(), 64);
        assert_ne!(k.hash(), k.expose());
        let m = k.masked();
        assert!(
            m.starts_with("stw_") && m.contains("...") && m.len() == 15,
            "{m}"
        );
        assert!(!format!("{k:?}").contains(k.expose()));
        assert!(!well_formed("stw_XYZ"));
        assert!(secrets_equal("abc", "abc") && !secrets_equal("abc", "abd"));
    }
}
