-- Discovery of unregistered ("shadow") agents: candidates and per-source event counts.
CREATE TABLE discovery_candidates (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    -- The merge key: the fingerprint given at ingest, else the name trimmed and lowercased.
    fingerprint TEXT NOT NULL,
    -- The source of the event that created the candidate.
    source TEXT NOT NULL,
    suggested_type TEXT,
    capabilities TEXT NOT NULL,
    score REAL NOT NULL CHECK (score >= 0 AND score <= 1),
    event_count INTEGER NOT NULL CHECK (event_count >= 1),
    -- The 50 newest events, oldest first: [{source, observed_at, data}].
    evidence TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'dismissed')),
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    -- The agent registered by confirm (kept when the agent is deleted: the history link).
    agent_id BLOB CHECK (agent_id IS NULL OR length(agent_id) = 16),
    decided_at TEXT
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
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    events INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, source)
);
