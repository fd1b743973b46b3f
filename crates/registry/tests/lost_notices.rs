//! A search index kept across a lost bus subscription is dropped, so changes whose notices
//! were missed show in the next search (both backends).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use steward_core::principal::CredentialKind;
use steward_core::{Body, EventBus, Principal, Role, TenantId};
use steward_registry::{NoActivity, Registry};
use steward_store::db_test;
use tokio::sync::broadcast;

/// A bus that delivers nothing and whose subscriptions can be closed, as a Redis bus closes
/// them when its connection is lost.
#[derive(Default)]
struct ClosableBus {
    senders: Mutex<Vec<broadcast::Sender<Vec<u8>>>>,
}

impl ClosableBus {
    fn close_all(&self) {
        self.senders.lock().unwrap().clear();
    }

    fn subscribers(&self) -> usize {
        self.senders
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.receiver_count())
            .sum()
    }
}

#[async_trait]
impl EventBus for ClosableBus {
    async fn publish(&self, _channel: &str, _payload: &[u8]) -> steward_core::Result<()> {
        Ok(())
    }

    async fn subscribe(
        &self,
        _channel: &str,
    ) -> steward_core::Result<broadcast::Receiver<Vec<u8>>> {
        let (tx, rx) = broadcast::channel(16);
        self.senders.lock().unwrap().push(tx);
        Ok(rx)
    }

    async fn ping(&self) -> steward_core::Result<()> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "closable"
    }
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

db_test!(an_index_is_dropped_after_a_lost_subscription, |db| {
    let pool = &db.pool;
    let tenant: TenantId = steward_store::testing::insert_tenant(pool).await.unwrap();
    let principal = Principal {
        tenant,
        role: Role::Developer,
        user: None,
        key: None,
        kind: CredentialKind::TenantKey,
        jti: None,
    };
    let new = |bus: Arc<ClosableBus>| {
        Registry::new(
            pool.clone(),
            bus,
            Arc::new(NoActivity),
            Duration::from_secs(300),
        )
    };
    // Two instances on one database whose notices never reach each other.
    let (bus_a, bus_b) = (
        Arc::new(ClosableBus::default()),
        Arc::new(ClosableBus::default()),
    );
    let (a, b) = (new(bus_a.clone()), new(bus_b.clone()));
    let listener = tokio::spawn(b.clone().listen_for_changes());
    wait_for("the listener's subscription", || bus_b.subscribers() == 1).await;

    let register = |name: &str| Body::json(&json!({"name": name, "type": "workflow"}));
    a.register(&principal, &register("quillfeather ledger"))
        .await
        .unwrap();
    let query = [("q".to_owned(), "quillfeather".to_owned())];
    assert_eq!(b.search(&principal, &query).await.unwrap().total, 1);

    // A registers a second agent; B's index, loaded before, does not know it.
    a.register(&principal, &register("quillfeather archive"))
        .await
        .unwrap();
    assert_eq!(b.search(&principal, &query).await.unwrap().total, 1);

    // B's subscription is lost: the notice may have been among those missed.
    bus_b.close_all();
    wait_for("the listener to subscribe again", || {
        bus_b.subscribers() == 1
    })
    .await;
    assert_eq!(b.search(&principal, &query).await.unwrap().total, 2);
    listener.abort();
});
