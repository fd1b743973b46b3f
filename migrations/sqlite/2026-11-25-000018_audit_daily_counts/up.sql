-- Audit entries per tenant and UTC day, kept current by triggers (issue 18), as on PostgreSQL
-- (see its migration). `day` is the UTC midnight that starts the day, in the stored timestamp
-- form (RFC 3339 with 6 digits and `Z`), so the first 10 characters of an entry's timestamp
-- are its day. SQLite has row triggers only: one upsert per entry.
CREATE TABLE audit_daily_counts (
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, day)
);

INSERT INTO audit_daily_counts (tenant_id, day, count)
SELECT e.tenant_id, substr(e."timestamp", 1, 10) || 'T00:00:00.000000Z', count(*)
FROM audit_entries e JOIN tenants t ON t.id = e.tenant_id
GROUP BY 1, 2;

CREATE TRIGGER audit_entries_daily_add AFTER INSERT ON audit_entries
BEGIN
    INSERT INTO audit_daily_counts (tenant_id, day, count)
    VALUES (NEW.tenant_id, substr(NEW."timestamp", 1, 10) || 'T00:00:00.000000Z', 1)
    ON CONFLICT (tenant_id, day) DO UPDATE SET count = count + 1;
END;

CREATE TRIGGER audit_entries_daily_remove AFTER DELETE ON audit_entries
BEGIN
    UPDATE audit_daily_counts SET count = count - 1
    WHERE tenant_id = OLD.tenant_id AND day = substr(OLD."timestamp", 1, 10) || 'T00:00:00.000000Z';
END;
