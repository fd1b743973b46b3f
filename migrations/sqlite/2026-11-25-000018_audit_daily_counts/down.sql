DROP TRIGGER audit_entries_daily_remove;
DROP TRIGGER audit_entries_daily_add;
DROP TABLE audit_daily_counts;
