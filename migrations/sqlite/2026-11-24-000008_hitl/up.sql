-- Human-in-the-loop approval requests (contract 16), bound to the exact action they approve.
CREATE TABLE hitl_requests (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id BLOB NOT NULL CHECK (length(agent_id) = 16),
    action TEXT NOT NULL,
    resource TEXT NOT NULL,
    context TEXT NOT NULL,
    -- SHA-256 (hex) of the RFC 8785 JSON of {tenant_id, agent_id, action, resource, context
    -- without approved/approval_id}: a check presenting this approval must match it.
    digest TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    requested_at TEXT NOT NULL,
    decided_at TEXT,
    approver TEXT,
    rejection_reason TEXT,
    -- The user whose credential decided.
    decided_by BLOB CHECK (decided_by IS NULL OR length(decided_by) = 16),
    -- Set once, by the first allowed policy check that presented this approval.
    consumed_at TEXT
);
CREATE INDEX hitl_requests_pending_idx ON hitl_requests (tenant_id, requested_at, id) WHERE status = 'pending';
