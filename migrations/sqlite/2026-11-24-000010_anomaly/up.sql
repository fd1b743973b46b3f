-- Anomaly reports (contract 15.1) and labelled feedback samples (15.3).
CREATE TABLE anomaly_reports (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id BLOB CHECK (agent_id IS NULL OR length(agent_id) = 16),
    risk_score REAL NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('auto', 'manual')),
    status TEXT NOT NULL CHECK (status IN ('open', 'investigating', 'resolved', 'false_positive')),
    event_data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX anomaly_reports_tenant_idx ON anomaly_reports (tenant_id, created_at DESC, id DESC);
CREATE TABLE anomaly_feedback (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_data TEXT NOT NULL,
    label INTEGER NOT NULL CHECK (label IN (0, 1)),
    source TEXT NOT NULL,
    report_id BLOB CHECK (report_id IS NULL OR length(report_id) = 16),
    created_at TEXT NOT NULL
);
CREATE INDEX anomaly_feedback_tenant_idx ON anomaly_feedback (tenant_id, created_at);
