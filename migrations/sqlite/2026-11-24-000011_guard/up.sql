-- Prompt-guard feedback labels (contract 17.4): samples for training and the detector metrics.
CREATE TABLE guard_feedback (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    prompt TEXT NOT NULL,
    label INTEGER NOT NULL CHECK (label IN (0, 1)),
    audit_id BLOB CHECK (audit_id IS NULL OR length(audit_id) = 16),
    created_at TEXT NOT NULL
);
CREATE INDEX guard_feedback_tenant_idx ON guard_feedback (tenant_id, created_at);
