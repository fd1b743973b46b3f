-- Agents (registry) and policies.
CREATE TABLE agents (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name text NOT NULL,
    type text NOT NULL,
    capabilities jsonb NOT NULL,
    permissions jsonb NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'inactive', 'error', 'suspended')),
    version text,
    predicted_type text,
    type_confidence double precision,
    risk_score double precision,
    embedding bytea,
    embedding_updated_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- Last change of name, type or capabilities (an older embedding is stale).
    profile_changed_at timestamptz NOT NULL,
    last_heartbeat timestamptz,
    -- Start of the inactivity clock: last heartbeat, registration or resume.
    active_since timestamptz NOT NULL
);
CREATE UNIQUE INDEX agents_tenant_name_key ON agents (tenant_id, lower(name));
CREATE INDEX agents_tenant_created_idx ON agents (tenant_id, created_at DESC, id DESC);
CREATE INDEX agents_active_clock_idx ON agents (active_since) WHERE status = 'active';

CREATE TABLE policies (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    template text,
    rego text NOT NULL,
    is_active boolean NOT NULL DEFAULT true,
    priority bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX policies_tenant_name_key ON policies (tenant_id, lower(name));
CREATE INDEX policies_tenant_order_idx ON policies (tenant_id, priority DESC, created_at ASC);
