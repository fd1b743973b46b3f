//! Resolved API keys kept in memory, so that the hot path (an agent calling with its key) does
//! not read the database on every request.
//!
//! An entry holds what the key resolved to (the principal, the key's expiry). It is dropped:
//! - on every instance, when any credential changes (a key revoked, a session logged out, a
//!   user blocked, re-roled or deleted): the instance that makes the change clears its own
//!   entries before answering and publishes a notice on `CREDENTIAL_CHANGES_CHANNEL`, on which
//!   every instance clears its entries;
//! - after `TTL` in any case, which bounds staleness should a notice be lost (a bus outage:
//!   resubscribing clears everything too);
//! - when the key expires (checked on every hit).
//!
//! Only successful resolutions are kept; unknown, revoked and blocked keys always go to the
//! database.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use steward_core::Principal;
use steward_store::Id;
use time::OffsetDateTime;

/// The bus channel of "some credential changed" notices.
pub const CREDENTIAL_CHANGES_CHANNEL: &str = "credential-changes";

/// Longest time an entry is used without asking the database again.
pub const TTL: Duration = Duration::from_secs(30);

/// Entries kept at most; beyond it the map is cleared (and refills from the hot keys).
const MAX_ENTRIES: usize = 100_000;

#[derive(Clone)]
pub(crate) struct Resolved {
    pub principal: Principal,
    pub key_id: Id,
    pub expires_at: Option<OffsetDateTime>,
    /// The last-use time as last written (or read) for the key.
    pub last_used_at: Option<OffsetDateTime>,
    cached: Instant,
}

impl Resolved {
    pub fn new(
        principal: Principal,
        key_id: Id,
        expires_at: Option<OffsetDateTime>,
        last_used_at: Option<OffsetDateTime>,
    ) -> Self {
        Self {
            principal,
            key_id,
            expires_at,
            last_used_at,
            cached: Instant::now(),
        }
    }
}

/// Key hash → resolution.
#[derive(Default)]
pub(crate) struct ResolvedKeys {
    map: RwLock<HashMap<String, Resolved>>,
}

impl ResolvedKeys {
    /// The fresh, unexpired resolution of a key hash.
    pub fn get(&self, hash: &str, now: OffsetDateTime) -> Option<Resolved> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|r| r.cached.elapsed() < TTL && r.expires_at.is_none_or(|e| e > now))
            .cloned()
    }

    pub fn insert(&self, hash: String, resolved: Resolved) {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(hash, resolved);
    }

    /// Records a written last-use time.
    pub fn used(&self, hash: &str, at: OffsetDateTime) {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = map.get_mut(hash) {
            r.last_used_at = Some(at);
        }
    }

    pub fn clear(&self) {
        self.map.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steward_core::principal::CredentialKind;
    use steward_core::{Role, TenantId};

    fn principal() -> Principal {
        Principal {
            tenant: TenantId::new(),
            role: Role::Admin,
            user: None,
            key: None,
            kind: CredentialKind::TenantKey,
            jti: None,
        }
    }

    #[test]
    fn expired_keys_and_cleared_entries_are_not_served() {
        let keys = ResolvedKeys::default();
        let now = OffsetDateTime::now_utc();
        let id = Id(uuid::Uuid::now_v7());
        keys.insert("a".into(), Resolved::new(principal(), id, None, None));
        keys.insert(
            "b".into(),
            Resolved::new(
                principal(),
                id,
                Some(now - time::Duration::seconds(1)),
                None,
            ),
        );
        assert!(keys.get("a", now).is_some());
        assert!(keys.get("b", now).is_none(), "expired");
        assert!(keys.get("c", now).is_none());
        keys.used("a", now);
        assert_eq!(keys.get("a", now).and_then(|r| r.last_used_at), Some(now));
        keys.clear();
        assert_eq!(keys.len(), 0);
        assert!(keys.get("a", now).is_none());
    }
}
