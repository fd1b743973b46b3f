//! Counts of live things (WebSocket connections) summed over every server instance.
//!
//! Each instance sets its own count per key; `total` sums the counts of the instances that are
//! alive. In process there is one instance; on Redis an instance that stops refreshing its
//! liveness (killed) stops counting within `PRESENCE_TTL`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use crate::Result;

/// How long an instance counts after its last liveness refresh (refreshed every third of it).
pub const PRESENCE_TTL: Duration = Duration::from_secs(30);

#[async_trait]
pub trait Presence: Send + Sync + 'static {
    /// Sets this instance's count for `key` (0 removes it).
    async fn set_local(&self, key: &str, count: i64) -> Result<()>;
    /// The sum of the counts of every live instance for `key`.
    async fn total(&self, key: &str) -> Result<i64>;
    /// Marks this instance alive for `PRESENCE_TTL`.
    async fn refresh(&self) -> Result<()>;
}

/// One instance: the totals are the local counts.
#[derive(Default)]
pub struct MemoryPresence {
    counts: Mutex<HashMap<String, i64>>,
}

impl MemoryPresence {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Presence for MemoryPresence {
    async fn set_local(&self, key: &str, count: i64) -> Result<()> {
        let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if count <= 0 {
            map.remove(key);
        } else {
            map.insert(key.to_owned(), count);
        }
        Ok(())
    }

    async fn total(&self, key: &str) -> Result<i64> {
        let map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.get(key).copied().unwrap_or(0))
    }

    async fn refresh(&self) -> Result<()> {
        Ok(())
    }
}

/// The behaviour every `Presence` must show, for two instances `a` and `b` on one store.
pub mod conformance {
    use super::*;
    use crate::Error;

    pub async fn run(a: &dyn Presence, b: &dyn Presence, ns: &str) -> Result<()> {
        let key = format!("{ns}:k");
        a.refresh().await?;
        b.refresh().await?;
        a.set_local(&key, 2).await?;
        b.set_local(&key, 3).await?;
        let (ta, tb) = (a.total(&key).await?, b.total(&key).await?);
        if ta != 5 || tb != 5 {
            return Err(Error::internal_msg(format!(
                "presence conformance: totals {ta}/{tb}, expected 5"
            )));
        }
        b.set_local(&key, 0).await?;
        if a.total(&key).await? != 2 {
            return Err(Error::internal_msg(
                "presence conformance: zero not removed",
            ));
        }
        a.set_local(&key, 0).await?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[tokio::test]
        async fn memory_presence_counts_its_own() {
            let p = MemoryPresence::new();
            p.set_local("k", 2).await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.total("k").await.unwrap_or_default(), 2);
            p.set_local("k", 0).await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.total("k").await.unwrap_or_default(), 0);
        }
    }
}
