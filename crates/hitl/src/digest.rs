//! The digest that binds an approval to one action.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Context members that say *whether* an action is approved, not *what* it is: left out of
/// the digest.
const APPROVAL_MEMBERS: [&str; 2] = ["approved", "approval_id"];

/// SHA-256 (hex) of the RFC 8785 JSON of `{tenant_id, agent_id, action, resource, context}`,
/// with `approved` and `approval_id` removed from the context's top level.
pub fn action_digest(
    tenant_id: &str,
    agent_id: &str,
    action: &str,
    resource: &str,
    context: &Value,
) -> String {
    let context = match context {
        Value::Object(map) => {
            let mut map = map.clone();
            for m in APPROVAL_MEMBERS {
                map.remove(m);
            }
            Value::Object(map)
        }
        other => other.clone(),
    };
    let doc = json!({
        "tenant_id": tenant_id,
        "agent_id": agent_id.to_ascii_lowercase(),
        "action": action,
        "resource": resource,
        "context": context,
    });
    // Canonicalisation of a `Value` cannot fail (no non-finite numbers exist in one); fall back
    // to serde's own order-stable text rather than panic.
    let bytes = serde_json_canonicalizer::to_vec(&doc)
        .unwrap_or_else(|_| serde_json::to_vec(&doc).unwrap_or_default());
    hex::encode(Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_approval_members_do_not_matter() {
        let a = action_digest(
            "t",
            "A",
            "delete",
            "r",
            &json!({"x": 1, "y": [1, 2], "approved": true}),
        );
        let b = action_digest(
            "t",
            "a",
            "delete",
            "r",
            &json!({"y": [1, 2], "approval_id": "z", "x": 1}),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn every_bound_member_changes_the_digest() {
        let base = action_digest("t", "a", "delete", "r", &json!({"x": 1}));
        for other in [
            action_digest("u", "a", "delete", "r", &json!({"x": 1})),
            action_digest("t", "b", "delete", "r", &json!({"x": 1})),
            action_digest("t", "a", "read", "r", &json!({"x": 1})),
            action_digest("t", "a", "delete", "s", &json!({"x": 1})),
            action_digest("t", "a", "delete", "r", &json!({"x": 2})),
            action_digest(
                "t",
                "a",
                "delete",
                "r",
                &json!({"x": 1, "nested": {"approved": true}}),
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
