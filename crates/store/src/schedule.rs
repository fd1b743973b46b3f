//! Periodic work that must run once per interval across every server instance: an instance
//! runs a tick only when it moves the schedule's `next_run_at` forward itself (a conditional
//! UPDATE, atomic on both backends).

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use steward_core::{clock, Result};

use crate::schema::schedules;
use crate::{with_conn, DbPool, DbResultExt, Ts};

/// A name for this process in schedules and leases.
pub fn instance_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "steward".into());
        format!(
            "{host}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        )
    })
    .clone()
}

/// True when this instance claimed the tick of `name` (due now); the next tick is then due
/// `interval` later. Exactly one instance wins each tick.
pub async fn claim_tick(db: &DbPool, name: &str, interval: Duration) -> Result<bool> {
    let now = clock::now();
    let next = Ts(now + time::Duration::try_from(interval).unwrap_or(time::Duration::SECOND));
    let owner = instance_id();
    with_conn!(db, conn => {
        diesel::insert_into(schedules::table)
            .values((
                schedules::name.eq(name),
                schedules::owner.eq(None::<String>),
                schedules::next_run_at.eq(Ts(now)),
            ))
            .on_conflict_do_nothing()
            .execute(conn)
            .await
            .db()?;
        let won = diesel::update(
            schedules::table
                .filter(schedules::name.eq(name))
                .filter(schedules::next_run_at.le(Ts(now))),
        )
        .set((schedules::next_run_at.eq(next), schedules::owner.eq(Some(owner))))
        .execute(conn)
        .await
        .db()?;
        Ok(won == 1)
    })
}
