-- Trained detector models (anomaly, guard): every version per (tenant, detector), the bytes
-- in the row, and one active pointer per (tenant, detector). A version and its activation
-- are written in one transaction at the end of a training task (docs/adr/0003).
CREATE TABLE model_versions (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    detector text NOT NULL,
    version integer NOT NULL CHECK (version >= 1),
    model bytea NOT NULL,
    feature_version text NOT NULL,
    library_version text NOT NULL,
    metrics jsonb NOT NULL,
    sample_count bigint NOT NULL,
    task_id uuid,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, detector, version)
);
CREATE TABLE model_active (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    detector text NOT NULL,
    version integer NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, detector)
);
-- At most one queued or running training task per (tenant, detector): a racing second
-- enqueue fails on this index (409).
CREATE UNIQUE INDEX jobs_one_training_idx ON jobs (tenant_id, kind)
    WHERE status IN ('queued', 'running') AND kind LIKE 'train:%';
