//! A key-value cache with TTLs, shared by every server instance when backed by Redis.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::{Error, Result};

/// The cache used for revocations, one-time codes, SSO state and result caches.
#[async_trait]
pub trait Cache: Send + Sync + 'static {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Stores `value`; `ttl` `None` keeps it until deleted.
    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;
    /// Stores `value` only when `key` is absent; true when stored.
    async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool>;
    /// Removes `key`; true when it existed.
    async fn delete(&self, key: &str) -> Result<bool>;
    /// Reads and removes `key` atomically (one-time codes).
    async fn take(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Adds `by` to an integer counter (created at 0) and returns the new value.
    async fn incr(&self, key: &str, by: i64, ttl: Option<Duration>) -> Result<i64>;
    /// Checks that the cache answers.
    async fn ping(&self) -> Result<()>;
    /// A short name for logs and status (`in-process`, `redis`).
    fn kind(&self) -> &'static str;
}

struct Entry {
    value: Vec<u8>,
    expires: Option<Instant>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|e| e > now)
    }
}

/// The in-process cache: a map with TTLs, swept lazily and on every 1024th write.
#[derive(Default)]
pub struct MemoryCache {
    map: Mutex<HashMap<String, Entry>>,
    writes: std::sync::atomic::AtomicU64,
}

impl MemoryCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent (every update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wrote(&self, map: &mut HashMap<String, Entry>) {
        let n = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % 1024 == 1023 {
            let now = Instant::now();
            map.retain(|_, e| e.live(now));
        }
    }
}

fn expiry(ttl: Option<Duration>) -> Option<Instant> {
    ttl.map(|t| Instant::now() + t)
}

#[async_trait]
impl Cache for MemoryCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let map = self.lock();
        let now = Instant::now();
        Ok(map
            .get(key)
            .filter(|e| e.live(now))
            .map(|e| e.value.clone()))
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        let mut map = self.lock();
        map.insert(
            key.to_owned(),
            Entry {
                value: value.to_vec(),
                expires: expiry(ttl),
            },
        );
        self.wrote(&mut map);
        Ok(())
    }

    async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        let mut map = self.lock();
        let now = Instant::now();
        if map.get(key).is_some_and(|e| e.live(now)) {
            return Ok(false);
        }
        map.insert(
            key.to_owned(),
            Entry {
                value: value.to_vec(),
                expires: expiry(ttl),
            },
        );
        self.wrote(&mut map);
        Ok(true)
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        let now = Instant::now();
        Ok(self.lock().remove(key).is_some_and(|e| e.live(now)))
    }

    async fn take(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let now = Instant::now();
        Ok(self
            .lock()
            .remove(key)
            .filter(|e| e.live(now))
            .map(|e| e.value))
    }

    async fn incr(&self, key: &str, by: i64, ttl: Option<Duration>) -> Result<i64> {
        let mut map = self.lock();
        let now = Instant::now();
        let current = match map.get(key).filter(|e| e.live(now)) {
            Some(e) => std::str::from_utf8(&e.value)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| Error::internal_msg(format!("cache key {key} is not a counter")))?,
            None => 0,
        };
        let next = current + by;
        let expires = match map.get(key).filter(|e| e.live(now)) {
            Some(e) => e.expires,
            None => expiry(ttl),
        };
        map.insert(
            key.to_owned(),
            Entry {
                value: next.to_string().into_bytes(),
                expires,
            },
        );
        self.wrote(&mut map);
        Ok(next)
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "in-process"
    }
}

/// The behaviour every `Cache` implementation must show; run by each implementation's tests.
pub mod conformance {
    use super::*;

    fn fail(what: &str) -> Error {
        Error::internal_msg(format!("cache conformance: {what}"))
    }

    fn check(ok: bool, what: &str) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(fail(what))
        }
    }

    /// Runs the shared checks; keys are prefixed with `ns` so runs do not collide.
    pub async fn run(cache: &dyn Cache, ns: &str) -> Result<()> {
        let k = |s: &str| format!("{ns}:{s}");
        cache.ping().await?;
        check(
            cache.get(&k("absent")).await?.is_none(),
            "absent key reads None",
        )?;

        cache.set(&k("a"), b"1", None).await?;
        check(
            cache.get(&k("a")).await?.as_deref() == Some(&b"1"[..]),
            "set then get",
        )?;
        cache.set(&k("a"), b"2", None).await?;
        check(
            cache.get(&k("a")).await?.as_deref() == Some(&b"2"[..]),
            "overwrite",
        )?;

        check(
            !cache.set_nx(&k("a"), b"3", None).await?,
            "set_nx on present key",
        )?;
        check(
            cache.set_nx(&k("b"), b"x", None).await?,
            "set_nx on absent key",
        )?;

        check(cache.delete(&k("a")).await?, "delete present")?;
        check(!cache.delete(&k("a")).await?, "delete absent")?;

        check(
            cache.take(&k("b")).await?.as_deref() == Some(&b"x"[..]),
            "take returns",
        )?;
        check(cache.take(&k("b")).await?.is_none(), "take removes")?;

        check(cache.incr(&k("n"), 2, None).await? == 2, "incr from zero")?;
        check(cache.incr(&k("n"), 3, None).await? == 5, "incr adds")?;

        cache
            .set(&k("ttl"), b"v", Some(Duration::from_secs(2)))
            .await?;
        check(
            cache.get(&k("ttl")).await?.is_some(),
            "ttl key before expiry",
        )?;
        tokio::time::sleep(Duration::from_millis(3000)).await;
        check(
            cache.get(&k("ttl")).await?.is_none(),
            "ttl key after expiry",
        )?;
        check(
            cache.set_nx(&k("ttl"), b"w", None).await?,
            "set_nx after expiry",
        )?;
        for key in ["n", "ttl"] {
            cache.delete(&k(key)).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_cache_conformance() {
        let cache = MemoryCache::new();
        conformance::run(&cache, "t")
            .await
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
