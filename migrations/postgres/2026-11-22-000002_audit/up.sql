-- The audit log: one hash chain per tenant. `audit_heads` holds each tenant's last sequence
-- number and hash; appends lock that row, so the chain never forks or skips.
CREATE TABLE audit_heads (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    hash text NOT NULL
);

CREATE TABLE audit_entries (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    agent_id uuid,
    user_id uuid,
    action text NOT NULL,
    resource text NOT NULL,
    input jsonb NOT NULL,
    output jsonb NOT NULL,
    reasoning jsonb NOT NULL,
    risk_score double precision NOT NULL,
    is_approved boolean NOT NULL,
    "timestamp" timestamptz NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    signature text
);
CREATE UNIQUE INDEX audit_entries_tenant_seq_key ON audit_entries (tenant_id, seq);
CREATE INDEX audit_entries_tenant_action_idx ON audit_entries (tenant_id, action, seq DESC);
CREATE INDEX audit_entries_tenant_agent_idx ON audit_entries (tenant_id, agent_id, seq DESC);
CREATE INDEX audit_entries_tenant_time_idx ON audit_entries (tenant_id, "timestamp");
