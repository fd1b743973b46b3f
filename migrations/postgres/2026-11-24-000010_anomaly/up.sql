-- Anomaly reports (contract 15.1) and labelled feedback samples (15.3).
CREATE TABLE anomaly_reports (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id uuid,
    risk_score double precision NOT NULL,
    source text NOT NULL CHECK (source IN ('auto', 'manual')),
    status text NOT NULL CHECK (status IN ('open', 'investigating', 'resolved', 'false_positive')),
    event_data jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX anomaly_reports_tenant_idx ON anomaly_reports (tenant_id, created_at DESC, id DESC);
CREATE TABLE anomaly_feedback (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_data jsonb NOT NULL,
    label integer NOT NULL CHECK (label IN (0, 1)),
    source text NOT NULL,
    report_id uuid,
    created_at timestamptz NOT NULL
);
CREATE INDEX anomaly_feedback_tenant_idx ON anomaly_feedback (tenant_id, created_at);
