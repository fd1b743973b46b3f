DROP TRIGGER tenants_delete_audit_entries ON tenants;
DROP FUNCTION audit_entries_of_deleted_tenant();
ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
