-- Human-in-the-loop approval requests (contract 16), bound to the exact action they approve.
CREATE TABLE hitl_requests (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id uuid NOT NULL,
    action text NOT NULL,
    resource text NOT NULL,
    context jsonb NOT NULL,
    -- SHA-256 (hex) of the RFC 8785 JSON of {tenant_id, agent_id, action, resource, context
    -- without approved/approval_id}: a check presenting this approval must match it.
    digest text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    requested_at timestamptz NOT NULL,
    decided_at timestamptz,
    approver text,
    rejection_reason text,
    -- The user whose credential decided.
    decided_by uuid,
    -- Set once, by the first allowed policy check that presented this approval.
    consumed_at timestamptz
);
CREATE INDEX hitl_requests_pending_idx ON hitl_requests (tenant_id, requested_at, id) WHERE status = 'pending';
