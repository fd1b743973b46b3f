# Human in the loop: critical actions, bulk exports and cross-tenant operations need a
# human approval (`context.approved: true` once it was given). Never denies by itself.
package steward.policies.hitl

import rego.v1

critical_actions := {"delete_data", "export_phi", "change_security_policy"}

bulk_export_actions := {"export_data", "bulk_export"}

bulk_export_threshold := 1000

trigger contains "critical action" if {
	action := input.action
	action in critical_actions
}

trigger contains "bulk export" if {
	action := input.action
	action in bulk_export_actions
	is_number(input.context.records)
	input.context.records > bulk_export_threshold
}

trigger contains "cross-tenant operation" if {
	is_string(input.context.target_tenant_id)
	input.context.target_tenant_id != input.tenant_id
}

approved if input.context.approved == true

default require_approval := false

require_approval if {
	count(trigger) > 0
	not approved
}

default allow := true

severity := "high"
