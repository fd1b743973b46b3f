-- Retention checkpoint: the last purged entry of each tenant's chain, so that verification of
-- the retained entries starts from a known hash.
ALTER TABLE audit_heads ADD COLUMN purged_seq INTEGER;
ALTER TABLE audit_heads ADD COLUMN purged_hash TEXT;
