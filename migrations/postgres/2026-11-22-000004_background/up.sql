-- Periodic work claimed by one instance per interval (sweeps, retention, housekeeping).
CREATE TABLE schedules (
    name text PRIMARY KEY,
    owner text,
    next_run_at timestamptz NOT NULL
);

-- Background jobs (exports, clustering, training): claimed with a lease, taken over by
-- another instance when the lease expires.
CREATE TABLE jobs (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind text NOT NULL,
    status text NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    progress double precision NOT NULL DEFAULT 0,
    payload jsonb NOT NULL,
    result jsonb,
    error text,
    attempts integer NOT NULL DEFAULT 0,
    lease_owner text,
    lease_expires_at timestamptz,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX jobs_claim_idx ON jobs (status, created_at) WHERE status IN ('queued', 'running');
CREATE INDEX jobs_tenant_kind_idx ON jobs (tenant_id, kind, created_at DESC);
