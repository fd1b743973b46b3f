//! Agent status writes that race: a heartbeat (or an update) computed from the row as it was
//! before a concurrent suspend must never bring the agent back (contract 11.3: a suspended
//! agent stays suspended until resumed). Both backends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Cred;
use serde_json::json;

app_test!(suspend_wins_over_a_concurrent_heartbeat_or_update, |app| {
    let t = app.tenant("races").await;
    let key = Cred::Key(t.key.clone());
    for round in 0..20 {
        let agent = app.agent(&t.key).await;
        let (suspend_path, heartbeat_path, update_path) = (
            format!("/api/v1/agents/{agent}/suspend"),
            format!("/api/v1/agents/{agent}/heartbeat"),
            format!("/api/v1/agents/{agent}"),
        );
        let suspend = app.call("POST", &suspend_path, &key, None);
        let heartbeat = app.call(
            "POST",
            &heartbeat_path,
            &key,
            Some(json!({"status": "active"})),
        );
        let update = app.call(
            "PUT",
            &update_path,
            &key,
            Some(json!({"version": format!("1.{round}")})),
        );
        let (s, h, u) = futures_util::join!(suspend, heartbeat, update);
        assert_eq!(s.status, 200, "{}", s.text());
        assert!(h.status == 200 || h.status == 403, "{}", h.text());
        assert_eq!(u.status, 200, "{}", u.text());
        let got = app
            .call("GET", &format!("/api/v1/agents/{agent}"), &key, None)
            .await;
        assert_eq!(
            got.json()["status"],
            "suspended",
            "round {round}: {}",
            got.text()
        );
        // A heartbeat after the suspension is refused.
        let late = app
            .call(
                "POST",
                &format!("/api/v1/agents/{agent}/heartbeat"),
                &key,
                None,
            )
            .await;
        late.problem(403, "agent_suspended");
    }
});
