DROP TRIGGER audit_entries_daily_remove ON audit_entries;
DROP TRIGGER audit_entries_daily_add ON audit_entries;
DROP FUNCTION audit_daily_counts_remove();
DROP FUNCTION audit_daily_counts_add();
DROP TABLE audit_daily_counts;
