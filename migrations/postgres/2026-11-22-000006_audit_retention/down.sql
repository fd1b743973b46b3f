ALTER TABLE audit_heads DROP COLUMN purged_hash;
ALTER TABLE audit_heads DROP COLUMN purged_seq;
