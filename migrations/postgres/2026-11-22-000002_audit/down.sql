DROP TABLE audit_entries;
DROP TABLE audit_heads;
