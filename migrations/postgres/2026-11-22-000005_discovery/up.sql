-- Discovery of unregistered ("shadow") agents: candidates and per-source event counts.
CREATE TABLE discovery_candidates (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name text NOT NULL,
    -- The merge key: the fingerprint given at ingest, else the name trimmed and lowercased.
    fingerprint text NOT NULL,
    -- The source of the event that created the candidate.
    source text NOT NULL,
    suggested_type text,
    capabilities jsonb NOT NULL,
    score double precision NOT NULL CHECK (score >= 0 AND score <= 1),
    event_count bigint NOT NULL CHECK (event_count >= 1),
    -- The 50 newest events, oldest first: [{source, observed_at, data}].
    evidence jsonb NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'dismissed')),
    first_seen timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    -- The agent registered by confirm (kept when the agent is deleted: the history link).
    agent_id uuid,
    decided_at timestamptz
);
-- One pending candidate per fingerprint: concurrent ingests merge instead of duplicating.
CREATE UNIQUE INDEX discovery_candidates_pending_key
    ON discovery_candidates (tenant_id, fingerprint) WHERE status = 'pending';
CREATE INDEX discovery_candidates_list_idx
    ON discovery_candidates (tenant_id, status, first_seen DESC, id DESC);
CREATE INDEX discovery_candidates_agent_idx
    ON discovery_candidates (tenant_id, agent_id) WHERE agent_id IS NOT NULL;

-- Events received per source (integration status `events_received`).
CREATE TABLE discovery_source_counts (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    source text NOT NULL,
    events bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, source)
);
