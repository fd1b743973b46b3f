//! A key-value cache with TTLs, shared by every server instance when backed by Redis.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::{Error, Result};

/// The cache used for revocations, one-time codes, SSO state and result caches.
#[async_trait]
pub trait Cache: Send + Sync + 'static {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Stores `value`; `ttl` `None` keeps it until deleted.
    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;
    /// Stores a value that can be computed again (a result cache): like `set`, except that a
    /// cache with a memory budget may drop it before `ttl` ends to stay within the budget.
    /// Never use it for what must not be forgotten early (one-time codes, counters, state).
    async fn set_volatile(&self, key: &str, value: &[u8], ttl: Duration) -> Result<()> {
        self.set(key, value, Some(ttl)).await
    }
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

/// A volatile entry: the value and when it expires.
#[derive(Clone)]
struct Volatile {
    value: Arc<[u8]>,
    expires: Instant,
}

/// Bytes an entry is counted for beyond its key and value (the map's own bookkeeping).
const ENTRY_OVERHEAD: u64 = 64;

#[derive(Clone)]
struct VolatileWeight;

impl quick_cache::Weighter<String, Volatile> for VolatileWeight {
    fn weight(&self, key: &String, v: &Volatile) -> u64 {
        key.len() as u64 + v.value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// The in-process memory budget of volatile entries when none is given (`CACHE_MEMORY_MB`).
pub const DEFAULT_VOLATILE_BYTES: u64 = 128 * 1024 * 1024;

/// The in-process cache: a map with TTLs, swept lazily and on every 1024th write, for what
/// must be kept until it expires; and, for volatile entries (result caches), a concurrent
/// cache bounded by a memory budget that drops the entries least likely to be read again
/// when it is full, so that a flood of distinct requests cannot grow the process.
pub struct MemoryCache {
    map: Mutex<HashMap<String, Entry>>,
    writes: std::sync::atomic::AtomicU64,
    volatile: quick_cache::sync::Cache<String, Volatile, VolatileWeight>,
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::with_volatile_budget(DEFAULT_VOLATILE_BYTES)
    }
}

impl MemoryCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache whose volatile entries take at most about `bytes` bytes (keys, values and a
    /// fixed overhead per entry).
    pub fn with_volatile_budget(bytes: u64) -> Self {
        let bytes = bytes.max(ENTRY_OVERHEAD);
        // quick_cache sizes its tables from an estimate of the number of entries: guard
        // results of about 512 bytes.
        let estimated = usize::try_from(bytes / 512)
            .unwrap_or(usize::MAX)
            .clamp(16, 1 << 20);
        Self {
            map: Mutex::new(HashMap::new()),
            writes: std::sync::atomic::AtomicU64::new(0),
            volatile: quick_cache::sync::Cache::with_weighter(estimated, bytes, VolatileWeight),
        }
    }

    /// The bytes held by volatile entries (as weighed against the budget).
    pub fn volatile_bytes(&self) -> u64 {
        self.volatile.weight()
    }

    /// A live volatile entry (an expired one is removed).
    fn volatile_get(&self, key: &str, now: Instant) -> Option<Volatile> {
        let v = self.volatile.get(key)?;
        if v.expires > now {
            Some(v)
        } else {
            // Unless a fresh value replaced it meanwhile.
            self.volatile.remove_if(key, |v| v.expires <= now);
            None
        }
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
        let now = Instant::now();
        let kept = self
            .lock()
            .get(key)
            .filter(|e| e.live(now))
            .map(|e| e.value.clone());
        Ok(match kept {
            Some(v) => Some(v),
            None => self.volatile_get(key, now).map(|v| v.value.to_vec()),
        })
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        self.volatile.remove(key);
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

    async fn set_volatile(&self, key: &str, value: &[u8], ttl: Duration) -> Result<()> {
        // One key lives in one of the two stores.
        self.lock().remove(key);
        self.volatile.insert(
            key.to_owned(),
            Volatile {
                value: Arc::from(value),
                expires: Instant::now() + ttl,
            },
        );
        Ok(())
    }

    async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        let now = Instant::now();
        let mut map = self.lock();
        if map.get(key).is_some_and(|e| e.live(now)) || self.volatile_get(key, now).is_some() {
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
        let kept = self.lock().remove(key).is_some_and(|e| e.live(now));
        let volatile = self
            .volatile
            .remove(key)
            .is_some_and(|(_, v)| v.expires > now);
        Ok(kept || volatile)
    }

    async fn take(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let now = Instant::now();
        let kept = self
            .lock()
            .remove(key)
            .filter(|e| e.live(now))
            .map(|e| e.value);
        Ok(match kept {
            Some(v) => Some(v),
            None => self
                .volatile
                .remove(key)
                .filter(|(_, v)| v.expires > now)
                .map(|(_, v)| v.value.to_vec()),
        })
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
        cache
            .set_volatile(&k("vol"), b"r", Duration::from_secs(2))
            .await?;
        check(
            cache.get(&k("vol")).await?.as_deref() == Some(&b"r"[..]),
            "volatile set then get",
        )?;
        check(
            !cache.set_nx(&k("vol"), b"s", None).await?,
            "set_nx on a present volatile key",
        )?;
        cache.set(&k("vol"), b"kept", None).await?;
        check(
            cache.get(&k("vol")).await?.as_deref() == Some(&b"kept"[..]),
            "set replaces a volatile value",
        )?;
        cache
            .set_volatile(&k("vol"), b"again", Duration::from_secs(2))
            .await?;
        check(
            cache.get(&k("vol")).await?.as_deref() == Some(&b"again"[..]),
            "set_volatile replaces a kept value",
        )?;
        check(cache.delete(&k("vol")).await?, "delete a volatile key")?;
        check(
            cache.get(&k("vol")).await?.is_none(),
            "a deleted volatile key reads None",
        )?;
        cache
            .set_volatile(&k("vol"), b"once", Duration::from_secs(1))
            .await?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        check(
            cache.get(&k("vol")).await?.is_none(),
            "volatile key after expiry",
        )?;
        for key in ["n", "ttl", "vol"] {
            cache.delete(&k(key)).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn volatile_entries_stay_within_the_budget_and_never_push_out_kept_ones() {
        let budget = 256 * 1024;
        let cache = MemoryCache::with_volatile_budget(budget);
        cache
            .set("sso:state:1", b"must stay", Some(Duration::from_secs(600)))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let value = vec![b'x'; 400];
        // Ten times the budget of distinct results.
        for i in 0..6_000 {
            cache
                .set_volatile(&format!("guard:{i}"), &value, Duration::from_secs(600))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                cache.volatile_bytes() <= budget,
                "{} bytes held after {i} results",
                cache.volatile_bytes()
            );
        }
        assert!(
            cache.volatile_bytes() > budget / 2,
            "the budget is used: {}",
            cache.volatile_bytes()
        );
        let mut present = 0;
        for i in 0..6_000 {
            let key = format!("guard:{i}");
            if cache
                .get(&key)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_some()
            {
                present += 1;
            }
        }
        assert!(present > 100 && present < 6_000, "{present} results kept");
        assert_eq!(
            cache
                .get("sso:state:1")
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .as_deref(),
            Some(&b"must stay"[..]),
            "an entry stored with set is never dropped for volatile ones"
        );
    }

    #[tokio::test]
    async fn memory_cache_conformance() {
        let cache = MemoryCache::new();
        conformance::run(&cache, "t")
            .await
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
