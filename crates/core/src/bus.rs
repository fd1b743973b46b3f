//! Publish/subscribe between server instances (events, "policy set changed" notices).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::Result;

/// Messages waiting for a slow subscriber before it starts losing the oldest.
pub const SUBSCRIBER_BUFFER: usize = 1024;

/// A message bus. Delivery is at most once; subscribers that fall behind lose messages.
#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    async fn publish(&self, channel: &str, payload: &[u8]) -> Result<()>;
    /// Subscribes to `channel`; messages published after this returns are received.
    async fn subscribe(&self, channel: &str) -> Result<broadcast::Receiver<Vec<u8>>>;
    async fn ping(&self) -> Result<()>;
    fn kind(&self) -> &'static str;
}

/// The in-process bus: one broadcast channel per name.
#[derive(Default)]
pub struct MemoryBus {
    channels: Mutex<HashMap<String, broadcast::Sender<Vec<u8>>>>,
}

impl MemoryBus {
    pub fn new() -> Self {
        Self::default()
    }

    fn sender(&self, channel: &str) -> broadcast::Sender<Vec<u8>> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(channel.to_owned())
            .or_insert_with(|| broadcast::channel(SUBSCRIBER_BUFFER).0)
            .clone()
    }
}

#[async_trait]
impl EventBus for MemoryBus {
    async fn publish(&self, channel: &str, payload: &[u8]) -> Result<()> {
        // No subscriber is not an error: the message is simply not delivered.
        let _ = self.sender(channel).send(payload.to_vec());
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<broadcast::Receiver<Vec<u8>>> {
        Ok(self.sender(channel).subscribe())
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "in-process"
    }
}

/// Follows `channel` until the task is aborted: `on_message` for each message, `on_gap`
/// whenever messages may have been missed (on every subscription, since nothing published
/// while unsubscribed arrives; when the receiver lags; when the subscription is lost, as a
/// Redis bus closes its subscribers on a lost connection). A failed subscription is tried
/// again every second. The listeners of invalidation notices (credentials, policies, agents,
/// search indexes) all run on it.
pub async fn follow(
    bus: std::sync::Arc<dyn EventBus>,
    channel: &str,
    mut on_message: impl FnMut(&[u8]) + Send,
    on_gap: impl Fn() + Send,
) {
    loop {
        match bus.subscribe(channel).await {
            Ok(mut rx) => {
                on_gap();
                loop {
                    match rx.recv().await {
                        Ok(msg) => on_message(&msg),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::warn!(channel, missed, "bus messages lost");
                            on_gap();
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                }
            }
            Err(e) => tracing::warn!(channel, error = %e, "cannot subscribe"),
        }
        on_gap();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The behaviour every `EventBus` implementation must show.
pub mod conformance {
    use std::time::Duration;

    use super::*;
    use crate::Error;

    async fn recv(rx: &mut broadcast::Receiver<Vec<u8>>, what: &str) -> Result<Vec<u8>> {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(e)) => Err(Error::internal_msg(format!("bus conformance: {what}: {e}"))),
            Err(_) => Err(Error::internal_msg(format!(
                "bus conformance: {what}: timed out"
            ))),
        }
    }

    /// Runs the shared checks on channels prefixed with `ns`.
    pub async fn run(bus: &dyn EventBus, ns: &str) -> Result<()> {
        bus.ping().await?;
        let a = format!("{ns}:a");
        let b = format!("{ns}:b");
        let mut rx1 = bus.subscribe(&a).await?;
        let mut rx2 = bus.subscribe(&a).await?;
        let mut rx_b = bus.subscribe(&b).await?;
        bus.publish(&a, b"one").await?;
        bus.publish(&a, b"two").await?;
        bus.publish(&b, b"other").await?;
        for rx in [&mut rx1, &mut rx2] {
            if recv(rx, "first message").await? != b"one"
                || recv(rx, "second message").await? != b"two"
            {
                return Err(Error::internal_msg(
                    "bus conformance: messages out of order",
                ));
            }
        }
        if recv(&mut rx_b, "channel b").await? != b"other" {
            return Err(Error::internal_msg(
                "bus conformance: wrong message on channel b",
            ));
        }
        // Nothing from channel a leaks into channel b.
        if tokio::time::timeout(Duration::from_millis(200), rx_b.recv())
            .await
            .is_ok()
        {
            return Err(Error::internal_msg(
                "bus conformance: channels are not separate",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_bus_conformance() {
        let bus = MemoryBus::new();
        if let Err(e) = conformance::run(&bus, "t").await {
            panic!("{e}");
        }
    }
}
