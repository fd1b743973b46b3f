//! Redis implementations of the kernel's `Cache` and `EventBus` (used when `REDIS_URL` is set).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_redis::{Config, Pool, PoolConfig, Runtime, Timeouts};
use futures_util::StreamExt;
use redis::AsyncCommands;
use steward_core::bus::SUBSCRIBER_BUFFER;
use steward_core::{Cache, Error, EventBus, Result};
use tokio::sync::{broadcast, watch};

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::unavailable("cache", e)
}

/// A Redis connection pool with a key prefix shared by the cache and the bus.
#[derive(Clone)]
pub struct RedisHandle {
    pool: Pool,
    client: redis::Client,
    prefix: String,
}

impl RedisHandle {
    /// Builds the pool (connections open lazily). `prefix` namespaces every key and channel,
    /// followed by `db<N>:` for a database other than 0.
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> Result<RedisHandle> {
        let client = redis::Client::open(url)
            .map_err(|e| Error::internal_msg(format!("REDIS_URL is not a valid Redis URL: {e}")))?;
        let mut cfg = Config::from_url(url);
        cfg.pool = Some(PoolConfig {
            max_size: 32,
            timeouts: Timeouts {
                wait: Some(timeout),
                create: Some(timeout),
                recycle: Some(timeout),
            },
            ..PoolConfig::default()
        });
        let pool = cfg
            .create_pool(Some(Runtime::Tokio1))
            .map_err(|e| Error::internal_msg(format!("cannot build the Redis pool: {e}")))?;
        // Pub/sub channels ignore the database number, so deployments sharing one Redis on
        // different databases would hear each other's notices: the database joins the prefix
        // (database 0 keeps the plain prefix).
        let db = client.get_connection_info().redis.db;
        let prefix = if db == 0 {
            prefix.to_owned()
        } else {
            format!("{prefix}db{db}:")
        };
        Ok(RedisHandle {
            pool,
            client,
            prefix,
        })
    }

    async fn conn(&self) -> Result<deadpool_redis::Connection> {
        self.pool.get().await.map_err(unavailable)
    }

    fn key(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }
}

fn millis(ttl: Option<Duration>) -> Option<u64> {
    ttl.map(|t| (t.as_millis() as u64).max(1))
}

/// The Redis `Cache`.
#[derive(Clone)]
pub struct RedisCache(pub RedisHandle);

const INCR_SCRIPT: &str = r#"
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 and redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return v
"#;

#[async_trait]
impl Cache for RedisCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut c = self.0.conn().await?;
        c.get(self.0.key(key)).await.map_err(unavailable)
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        let mut c = self.0.conn().await?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.0.key(key)).arg(value);
        if let Some(ms) = millis(ttl) {
            cmd.arg("PX").arg(ms);
        }
        cmd.query_async::<()>(&mut *c).await.map_err(unavailable)
    }

    async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        let mut c = self.0.conn().await?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.0.key(key)).arg(value).arg("NX");
        if let Some(ms) = millis(ttl) {
            cmd.arg("PX").arg(ms);
        }
        let reply: Option<String> = cmd.query_async(&mut *c).await.map_err(unavailable)?;
        Ok(reply.is_some())
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        let mut c = self.0.conn().await?;
        let n: i64 = c.del(self.0.key(key)).await.map_err(unavailable)?;
        Ok(n > 0)
    }

    async fn take(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut c = self.0.conn().await?;
        redis::cmd("GETDEL")
            .arg(self.0.key(key))
            .query_async(&mut *c)
            .await
            .map_err(unavailable)
    }

    async fn incr(&self, key: &str, by: i64, ttl: Option<Duration>) -> Result<i64> {
        let mut c = self.0.conn().await?;
        redis::Script::new(INCR_SCRIPT)
            .key(self.0.key(key))
            .arg(by)
            .arg(millis(ttl).unwrap_or(0))
            .invoke_async(&mut *c)
            .await
            .map_err(unavailable)
    }

    async fn ping(&self) -> Result<()> {
        let mut c = self.0.conn().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut *c)
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

/// The Redis `EventBus`: one pub/sub connection per subscribed channel, fanned out locally.
///
/// A channel's local broadcast lives as long as its Redis subscription: when the subscription
/// ends (Redis restarted or unreachable), the broadcast is closed, so that every subscriber
/// sees `Closed`, subscribes again, and treats the gap as notices it may have missed (the
/// listeners reload or invalidate everything). A reconnection that subscribers did not see
/// would lose the notices published meanwhile without anyone knowing.
#[derive(Clone)]
pub struct RedisBus {
    handle: RedisHandle,
    hubs: Hubs,
}

/// Per channel: the local broadcast and whether its Redis subscription is established.
type Hubs = Arc<Mutex<HashMap<String, (broadcast::Sender<Vec<u8>>, watch::Receiver<bool>)>>>;

impl RedisBus {
    pub fn new(handle: RedisHandle) -> Self {
        Self {
            handle,
            hubs: Arc::default(),
        }
    }
}

/// Forwards one Redis channel into a local broadcast: connects (retrying each second until it
/// succeeds), marks the hub ready, forwards until the subscription ends, then removes the hub
/// and drops the broadcast (subscribers see `Closed`).
async fn forward(
    client: redis::Client,
    channel: String,
    tx: broadcast::Sender<Vec<u8>>,
    ready: watch::Sender<bool>,
    hubs: Hubs,
) {
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                Ok(()) => {
                    let _ = ready.send(true);
                    let mut messages = pubsub.on_message();
                    while let Some(msg) = messages.next().await {
                        let _ = tx.send(msg.get_payload_bytes().to_vec());
                    }
                    tracing::warn!(channel = %channel, "redis subscription ended; subscribers resubscribe");
                    break;
                }
                Err(e) => tracing::warn!(channel = %channel, error = %e, "redis subscribe failed"),
            },
            Err(e) => {
                tracing::warn!(channel = %channel, error = %e, "redis pub/sub connection failed")
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut map = hubs.lock().unwrap_or_else(|p| p.into_inner());
    if map
        .get(&channel)
        .is_some_and(|(hub, _)| hub.same_channel(&tx))
    {
        map.remove(&channel);
    }
}

#[async_trait]
impl EventBus for RedisBus {
    async fn publish(&self, channel: &str, payload: &[u8]) -> Result<()> {
        let mut c = self.handle.conn().await?;
        let _: i64 = c
            .publish(self.handle.key(channel), payload)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<broadcast::Receiver<Vec<u8>>> {
        let full = self.handle.key(channel);
        let (rx, mut ready) = {
            let mut hubs = self.hubs.lock().unwrap_or_else(|p| p.into_inner());
            match hubs.get(&full) {
                Some((tx, ready)) => (tx.subscribe(), ready.clone()),
                None => {
                    let (tx, rx) = broadcast::channel(SUBSCRIBER_BUFFER);
                    let (ready_tx, ready_rx) = watch::channel(false);
                    hubs.insert(full.clone(), (tx.clone(), ready_rx.clone()));
                    tokio::spawn(forward(
                        self.handle.client.clone(),
                        full,
                        tx,
                        ready_tx,
                        self.hubs.clone(),
                    ));
                    (rx, ready_rx)
                }
            }
        };
        // Subscribed only once Redis delivers the channel: before that, notices would be
        // missed without the caller knowing.
        let subscribed = tokio::time::timeout(Duration::from_secs(5), ready.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok());
        if subscribed {
            Ok(rx)
        } else {
            // The forwarder keeps retrying; the caller learns that messages may be missed now.
            Err(Error::unavailable(
                "cache",
                steward_core::error::Message(format!("cannot subscribe to {channel}")),
            ))
        }
    }

    async fn ping(&self) -> Result<()> {
        RedisCache(self.handle.clone()).ping().await
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

/// The Redis `Presence`: per key a hash `presence:<key>` of instance → count, and per instance
/// a liveness key `presence-alive:<instance>` with a TTL. `total` sums the live instances'
/// counts and drops the dead ones' in one script.
#[derive(Clone)]
pub struct RedisPresence {
    handle: RedisHandle,
    instance: String,
}

impl RedisPresence {
    pub fn new(handle: RedisHandle) -> Self {
        Self {
            handle,
            instance: crate::schedule::instance_id(),
        }
    }
}

const PRESENCE_TOTAL_SCRIPT: &str = r#"
local fields = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #fields, 2 do
  if redis.call('EXISTS', ARGV[1] .. fields[i]) == 1 then
    total = total + tonumber(fields[i + 1])
  else
    redis.call('HDEL', KEYS[1], fields[i])
  end
end
return total
"#;

#[async_trait]
impl steward_core::Presence for RedisPresence {
    async fn set_local(&self, key: &str, count: i64) -> Result<()> {
        let mut c = self.handle.conn().await?;
        let hash = self.handle.key(&format!("presence:{key}"));
        if count <= 0 {
            let _: i64 = c.hdel(hash, &self.instance).await.map_err(unavailable)?;
        } else {
            let _: i64 = c
                .hset(hash, &self.instance, count)
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn total(&self, key: &str) -> Result<i64> {
        let mut c = self.handle.conn().await?;
        redis::Script::new(PRESENCE_TOTAL_SCRIPT)
            .key(self.handle.key(&format!("presence:{key}")))
            .arg(self.handle.key("presence-alive:"))
            .invoke_async(&mut *c)
            .await
            .map_err(unavailable)
    }

    async fn refresh(&self) -> Result<()> {
        let mut c = self.handle.conn().await?;
        redis::cmd("SET")
            .arg(
                self.handle
                    .key(&format!("presence-alive:{}", self.instance)),
            )
            .arg(1)
            .arg("PX")
            .arg(steward_core::presence::PRESENCE_TTL.as_millis() as u64)
            .query_async::<()>(&mut *c)
            .await
            .map_err(unavailable)
    }
}

impl RedisPresence {
    /// Another instance's view of the same store (tests of the cross-instance sum).
    pub fn as_instance(handle: RedisHandle, instance: &str) -> Self {
        Self {
            handle,
            instance: instance.to_owned(),
        }
    }
}
