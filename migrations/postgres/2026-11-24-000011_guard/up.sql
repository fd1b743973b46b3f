-- Prompt-guard feedback labels (contract 17.4): samples for training and the detector metrics.
CREATE TABLE guard_feedback (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    prompt text NOT NULL,
    label integer NOT NULL CHECK (label IN (0, 1)),
    audit_id uuid,
    created_at timestamptz NOT NULL
);
CREATE INDEX guard_feedback_tenant_idx ON guard_feedback (tenant_id, created_at);
