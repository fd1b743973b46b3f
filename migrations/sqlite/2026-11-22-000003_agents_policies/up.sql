-- Agents (registry) and policies.
CREATE TABLE agents (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    permissions TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'inactive', 'error', 'suspended')),
    version TEXT,
    predicted_type TEXT,
    type_confidence REAL,
    risk_score REAL,
    embedding BLOB,
    embedding_updated_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    profile_changed_at TEXT NOT NULL,
    last_heartbeat TEXT,
    active_since TEXT NOT NULL
);
CREATE UNIQUE INDEX agents_tenant_name_key ON agents (tenant_id, lower(name));
CREATE INDEX agents_tenant_created_idx ON agents (tenant_id, created_at DESC, id DESC);
CREATE INDEX agents_active_clock_idx ON agents (active_since) WHERE status = 'active';

CREATE TABLE policies (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    template TEXT,
    rego TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
    priority INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX policies_tenant_name_key ON policies (tenant_id, lower(name));
CREATE INDEX policies_tenant_order_idx ON policies (tenant_id, priority DESC, created_at ASC);
