-- Periodic work claimed by one instance per interval (sweeps, retention, housekeeping).
CREATE TABLE schedules (
    name TEXT PRIMARY KEY NOT NULL,
    owner TEXT,
    next_run_at TEXT NOT NULL
);

-- Background jobs (exports, clustering, training): claimed with a lease, taken over by
-- another instance when the lease expires.
CREATE TABLE jobs (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    progress REAL NOT NULL DEFAULT 0,
    payload TEXT NOT NULL,
    result TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires_at TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX jobs_claim_idx ON jobs (status, created_at) WHERE status IN ('queued', 'running');
CREATE INDEX jobs_tenant_kind_idx ON jobs (tenant_id, kind, created_at DESC);
