-- SIEM export (contract 22): a durable outbox of exported events, delivered in id order by
-- one sender across instances (lease in `schedules`), and the delivery counters.
CREATE TABLE siem_outbox (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL,
    event_type text NOT NULL,
    -- The export object (already scrubbed of secrets): {event_type, timestamp, severity, ...}.
    payload jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    -- A failed attempt may have delivered this event (a retry then duplicates it).
    maybe_sent boolean NOT NULL DEFAULT false,
    next_attempt_at timestamptz NOT NULL,
    last_error text,
    created_at timestamptz NOT NULL
);
CREATE INDEX siem_outbox_pending_idx ON siem_outbox (status, id);

CREATE TABLE siem_stats (
    name text PRIMARY KEY,
    sent bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    duplicates bigint NOT NULL DEFAULT 0,
    retries bigint NOT NULL DEFAULT 0,
    last_error text
);
