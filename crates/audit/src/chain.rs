//! Canonical form, hash and signature of an entry (contract 14.3).

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// `prev_hash` of a tenant's first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The members of the signed object, in the entry's emitted form.
#[derive(Clone, Debug)]
pub struct SignedFields<'a> {
    pub seq: i64,
    pub id: &'a str,
    pub tenant_id: &'a str,
    pub agent_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub action: &'a str,
    pub resource: &'a str,
    pub input: &'a Value,
    pub output: &'a Value,
    pub reasoning: &'a Value,
    pub risk_score: f64,
    pub is_approved: bool,
    pub timestamp: &'a str,
    pub prev_hash: &'a str,
}

/// RFC 8785 (JCS) bytes of the signed object.
pub fn canonical_bytes(f: &SignedFields<'_>) -> Vec<u8> {
    let object = json!({
        "seq": f.seq,
        "id": f.id,
        "tenant_id": f.tenant_id,
        "agent_id": f.agent_id,
        "user_id": f.user_id,
        "action": f.action,
        "resource": f.resource,
        "input": f.input,
        "output": f.output,
        "reasoning": f.reasoning,
        "risk_score": f.risk_score,
        "is_approved": f.is_approved,
        "timestamp": f.timestamp,
        "prev_hash": f.prev_hash,
    });
    // Serialising a `Value` cannot fail (no non-string keys, no non-finite numbers: the
    // validation refuses them before they get here).
    serde_json_canonicalizer::to_vec(&object).unwrap_or_default()
}

/// Computes hashes and signatures.
#[derive(Clone)]
pub struct ChainHasher {
    signing_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for ChainHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainHasher")
            .field("signing", &self.signing_key.is_some())
            .finish()
    }
}

impl ChainHasher {
    /// `signing_key` `None` disables signatures.
    pub fn new(signing_key: Option<&[u8]>) -> Self {
        Self {
            signing_key: signing_key.map(<[u8]>::to_vec),
        }
    }

    pub fn signs(&self) -> bool {
        self.signing_key.is_some()
    }

    pub fn hash(canonical: &[u8]) -> String {
        hex::encode(Sha256::digest(canonical))
    }

    pub fn sign(&self, canonical: &[u8]) -> Option<String> {
        let key = self.signing_key.as_ref()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
        mac.update(canonical);
        Some(hex::encode(mac.finalize().into_bytes()))
    }

    /// Checks a stored signature in constant time.
    pub fn verify_signature(&self, canonical: &[u8], signature: Option<&str>) -> bool {
        let Some(key) = &self.signing_key else {
            return true;
        };
        let Some(sig) = signature.and_then(|s| hex::decode(s).ok()) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
            return false;
        };
        mac.update(canonical);
        mac.verify_slice(&sig).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(input: &'a Value, reasoning: &'a Value) -> SignedFields<'a> {
        SignedFields {
            seq: 1,
            id: "0193a1b2-0000-7000-8000-000000000001",
            tenant_id: "0193a1b2-0000-7000-8000-000000000002",
            agent_id: None,
            user_id: Some("u"),
            action: "read_data",
            resource: "crm/contacts",
            input,
            output: input,
            reasoning,
            risk_score: 1.0,
            is_approved: true,
            timestamp: "2026-03-01T12:30:05.123456Z",
            prev_hash: GENESIS_HASH,
        }
    }

    #[test]
    fn canonical_form_is_jcs() {
        let input = json!({"b": 2.50, "a": "é\n"});
        let reasoning = json!(["x"]);
        let c = String::from_utf8(canonical_bytes(&fields(&input, &reasoning))).unwrap();
        assert!(
            c.starts_with(r#"{"action":"read_data","agent_id":null,"id":"#),
            "{c}"
        );
        assert!(c.contains(r#""input":{"a":"é\n","b":2.5}"#), "{c}");
        assert!(c.contains(r#""risk_score":1,"#), "{c}");
        assert!(!c.contains(' '));
    }

    #[test]
    fn signatures_verify_and_detect_tampering() {
        let h = ChainHasher::new(Some(b"key"));
        let sig = h.sign(b"payload");
        assert!(h.verify_signature(b"payload", sig.as_deref()));
        assert!(!h.verify_signature(b"payload!", sig.as_deref()));
        assert!(!h.verify_signature(b"payload", None));
        let unsigned = ChainHasher::new(None);
        assert_eq!(unsigned.sign(b"payload"), None);
        assert_eq!(ChainHasher::hash(b"abc").len(), 64);
    }
}
