-- Trained detector models (anomaly, guard): every version per (tenant, detector), the bytes
-- in the row, and one active pointer per (tenant, detector). A version and its activation
-- are written in one transaction at the end of a training task (docs/adr/0003).
CREATE TABLE model_versions (
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    detector TEXT NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    model BLOB NOT NULL,
    feature_version TEXT NOT NULL,
    library_version TEXT NOT NULL,
    metrics TEXT NOT NULL,
    sample_count BIGINT NOT NULL,
    task_id BLOB CHECK (task_id IS NULL OR length(task_id) = 16),
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, detector, version)
);
CREATE TABLE model_active (
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    detector TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, detector)
);
-- At most one queued or running training task per (tenant, detector): a racing second
-- enqueue fails on this index (409).
CREATE UNIQUE INDEX jobs_one_training_idx ON jobs (tenant_id, kind)
    WHERE status IN ('queued', 'running') AND kind LIKE 'train:%';
