//! Inbound signed webhooks (contract 21): `agent.action` from an agent integration becomes an
//! audit entry for a registered agent, or feeds a discovery candidate for an unknown one.

use hmac::{Hmac, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;
use steward_core::validate::Fields;
use steward_core::{AgentId, Body, Error, ErrorKind, Op, Principal, Result};

use crate::state::AppState;

/// Checks `sha256=<hex>` (or bare hex, any case) against the HMAC-SHA256 of the raw bytes,
/// in constant time.
pub fn signature_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(header) = header.map(str::trim) else {
        return false;
    };
    let hex_part = header
        .strip_prefix("sha256=")
        .or_else(|| header.strip_prefix("SHA256="))
        .unwrap_or(header);
    let Ok(expected) = hex::decode(hex_part.to_ascii_lowercase()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// `POST /webhooks/agent`. Order of checks: key (extractor), role, signature, JSON, fields.
pub async fn receive(
    state: &AppState,
    p: &Principal,
    signature: Option<&str>,
    body: &Body,
) -> Result<Value> {
    p.authorize(Op::AuditWrite)?;
    if !signature_valid(
        state.settings.webhook_secret.expose().as_bytes(),
        body.bytes(),
        signature,
    ) {
        return Err(Error::new(
            ErrorKind::InvalidSignature,
            "X-Webhook-Signature must be sha256=<hex HMAC-SHA256 of the raw body with WEBHOOK_SECRET>",
        ));
    }
    let value = body.parse::<Value>()?;
    let mut f = Fields::root(&value);
    let event = f
        .required_enum("event", &["agent.action"])
        .map(str::to_owned);
    let payload = f.required_object("payload").cloned();
    if let Some(p) = &payload {
        let as_value = Value::Object(p.clone());
        let mut pf = Fields::nested(&as_value, "payload");
        let agent_id = pf.optional_str("agent_id", 1, 256);
        let agent_name = pf.optional_str("agent_name", 1, 128);
        if agent_id.is_none() && agent_name.is_none() && !pf.has_errors() {
            pf.error("agent_id", "agent_id or agent_name is required");
        }
        if let Some(a) = pf.required_str("action", 1, 128) {
            // Checked here too, so that the error names `payload.action`.
            if steward_audit::service::is_reserved_action(a) {
                pf.error(
                    "action",
                    "must not start with a reserved prefix (user., api_key., policy., hitl., guard., system.)",
                );
            }
        }
        pf.required_str("resource", 0, 512);
        pf.optional_object("input");
        pf.optional_object("output");
        pf.optional_str_array("reasoning", 10_000);
        pf.optional_f64("risk_score", 0.0, 1.0);
        f.absorb(pf);
    }
    f.finish()?;
    let (Some(event), Some(payload)) = (event, payload) else {
        return Err(Error::internal_msg("validated webhook fields missing"));
    };
    let agent_id_text = payload
        .get("agent_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let known = match agent_id_text
        .as_deref()
        .and_then(|s| s.parse::<AgentId>().ok())
    {
        Some(id) => state.registry.find(p.tenant, id).await?.map(|_| id),
        None => None,
    };
    if let Some(agent) = known {
        let mut log = Map::new();
        log.insert("agent_id".into(), json!(agent.to_string()));
        for k in [
            "action",
            "resource",
            "input",
            "output",
            "reasoning",
            "risk_score",
        ] {
            if let Some(v) = payload.get(k).filter(|v| !v.is_null()) {
                log.insert(k.into(), v.clone());
            }
        }
        let entry = state.audit.log(p, &Body::json(&Value::Object(log))).await?;
        return Ok(
            json!({"accepted": true, "event": event, "audit_id": entry.id, "candidate_id": null}),
        );
    }
    let agent_name = payload
        .get("agent_name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (name, fingerprint) = match (&agent_id_text, &agent_name) {
        (Some(id), Some(n)) => (n.clone(), Some(id.clone())),
        (Some(id), None) => (
            format!("unknown-{}", id.chars().take(8).collect::<String>()),
            Some(id.clone()),
        ),
        (None, Some(n)) => (n.clone(), Some(n.trim().to_lowercase())),
        (None, None) => {
            return Err(Error::invalid_field(
                "payload.agent_id",
                "agent_id or agent_name is required",
            ))
        }
    };
    let candidate = state
        .discovery
        .feed(
            p.tenant,
            &name,
            fingerprint.as_deref(),
            "webhook",
            Value::Object(payload),
        )
        .await?;
    Ok(json!({"accepted": true, "event": event, "audit_id": null, "candidate_id": candidate.id}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let body = br#"{"event":"agent.action"}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s").unwrap();
        mac.update(body);
        let hex = hex::encode(mac.finalize().into_bytes());
        assert!(signature_valid(b"s", body, Some(&format!("sha256={hex}"))));
        assert!(signature_valid(b"s", body, Some(&hex.to_uppercase())));
        assert!(!signature_valid(b"other", body, Some(&hex)));
        assert!(!signature_valid(
            b"s",
            br#"{"event": "agent.action"}"#,
            Some(&hex)
        ));
        assert!(!signature_valid(b"s", body, None));
        assert!(!signature_valid(b"s", body, Some("sha256=zz")));
    }
}
