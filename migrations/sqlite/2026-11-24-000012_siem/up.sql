-- SIEM export (contract 22): a durable outbox of exported events, delivered in id order by
-- one sender across instances (lease in `schedules`), and the delivery counters.
CREATE TABLE siem_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id BLOB NOT NULL CHECK (length(tenant_id) = 16),
    event_type TEXT NOT NULL,
    -- The export object (already scrubbed of secrets): {event_type, timestamp, severity, ...}.
    payload TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    -- A failed attempt may have delivered this event (a retry then duplicates it).
    maybe_sent INTEGER NOT NULL DEFAULT 0 CHECK (maybe_sent IN (0, 1)),
    next_attempt_at TEXT NOT NULL,
    last_error TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX siem_outbox_pending_idx ON siem_outbox (status, id);

CREATE TABLE siem_stats (
    name TEXT PRIMARY KEY NOT NULL,
    sent BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    duplicates BIGINT NOT NULL DEFAULT 0,
    retries BIGINT NOT NULL DEFAULT 0,
    last_error TEXT
);
