-- Audit entries per tenant and UTC day, kept current by triggers (issue 18): the dashboard's
-- 7-day activity (`GET /stats`) reads at most 7 rows instead of counting up to every entry of
-- the week in the (tenant_id, "timestamp") index (about 100 ms for 1,000,000 entries in one
-- week, docs/benchmarks.md). `day` is the UTC midnight that starts the day.
-- Statement-level triggers with transition tables: one grouped upsert per INSERT statement
-- (an audit batch is one statement), one grouped update per DELETE statement (retention).
CREATE TABLE audit_daily_counts (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day timestamptz NOT NULL,
    count bigint NOT NULL,
    PRIMARY KEY (tenant_id, day)
);

INSERT INTO audit_daily_counts (tenant_id, day, count)
SELECT e.tenant_id, date_trunc('day', e."timestamp" AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*)
FROM audit_entries e JOIN tenants t ON t.id = e.tenant_id
GROUP BY 1, 2;

CREATE FUNCTION audit_daily_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_daily_counts AS c (tenant_id, day, count)
    SELECT tenant_id, date_trunc('day', "timestamp" AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*)
    FROM new_entries GROUP BY 1, 2
    ON CONFLICT (tenant_id, day) DO UPDATE SET count = c.count + EXCLUDED.count;
    RETURN NULL;
END
$$;

-- Only an update: the rows of a deleted tenant are already gone (cascade), and a count is
-- never created by a delete.
CREATE FUNCTION audit_daily_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_daily_counts AS c SET count = c.count - o.n
    FROM (SELECT tenant_id, date_trunc('day', "timestamp" AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day, count(*) AS n
          FROM old_entries GROUP BY 1, 2) o
    WHERE c.tenant_id = o.tenant_id AND c.day = o.day;
    RETURN NULL;
END
$$;

CREATE TRIGGER audit_entries_daily_add AFTER INSERT ON audit_entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION audit_daily_counts_add();

CREATE TRIGGER audit_entries_daily_remove AFTER DELETE ON audit_entries
    REFERENCING OLD TABLE AS old_entries
    FOR EACH STATEMENT EXECUTE FUNCTION audit_daily_counts_remove();
