-- Audit entries drop their foreign key to tenants, as on PostgreSQL (see its migration): an
-- entry is written only with its tenant's head row (`audit_heads`, which keeps its foreign
-- key), and the trigger below deletes a deleted tenant's entries instead of the cascade.
-- SQLite cannot drop a constraint, so the table is rebuilt with the same columns and indexes.
CREATE TABLE audit_entries_new (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL,
    seq INTEGER NOT NULL,
    agent_id BLOB,
    user_id BLOB,
    action TEXT NOT NULL,
    resource TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT NOT NULL,
    reasoning TEXT NOT NULL,
    risk_score REAL NOT NULL,
    is_approved INTEGER NOT NULL CHECK (is_approved IN (0, 1)),
    "timestamp" TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    signature TEXT
);
INSERT INTO audit_entries_new (id, tenant_id, seq, agent_id, user_id, action, resource, input, output, reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
    SELECT id, tenant_id, seq, agent_id, user_id, action, resource, input, output, reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature FROM audit_entries;
DROP TABLE audit_entries;
ALTER TABLE audit_entries_new RENAME TO audit_entries;
CREATE UNIQUE INDEX audit_entries_tenant_seq_key ON audit_entries (tenant_id, seq);
CREATE INDEX audit_entries_tenant_action_idx ON audit_entries (tenant_id, action, seq DESC);
CREATE INDEX audit_entries_tenant_agent_idx ON audit_entries (tenant_id, agent_id, seq DESC);
CREATE INDEX audit_entries_tenant_time_idx ON audit_entries (tenant_id, "timestamp");
CREATE TRIGGER tenants_delete_audit_entries AFTER DELETE ON tenants
BEGIN
    DELETE FROM audit_entries WHERE tenant_id = OLD.id;
END;
