package steward.policies.hitl_test

import rego.v1

import data.steward.policies.hitl

req(action, ctx) := {"action": action, "resource": "r", "context": ctx, "tenant_id": "self"}

test_ordinary_action_no_approval if {
	not hitl.require_approval with input as req("read_data", {})
	hitl.allow with input as req("read_data", {})
}

test_critical_actions_need_approval if {
	hitl.require_approval with input as req("delete_data", {})
	hitl.require_approval with input as req("export_phi", {})
	hitl.require_approval with input as req("change_security_policy", {})
	t := hitl.trigger with input as req("delete_data", {})
	t == {"critical action"}
}

test_approved_critical_action_passes if {
	not hitl.require_approval with input as req("delete_data", {"approved": true})
}

test_approved_must_be_boolean_true if {
	hitl.require_approval with input as req("delete_data", {"approved": "true"})
}

test_bulk_export_over_threshold if {
	hitl.require_approval with input as req("export_data", {"records": 5000})
	hitl.require_approval with input as req("bulk_export", {"records": 1001})
}

test_bulk_export_at_or_under_threshold if {
	not hitl.require_approval with input as req("export_data", {"records": 1000})
	not hitl.require_approval with input as req("export_data", {"records": 500})
}

test_bulk_export_records_must_be_a_number if {
	not hitl.require_approval with input as req("export_data", {"records": "5000"})
}

test_records_without_export_action if {
	not hitl.require_approval with input as req("read_data", {"records": 5000})
}

test_cross_tenant_needs_approval if {
	hitl.require_approval with input as req("read_data", {"target_tenant_id": "other"})
	t := hitl.trigger with input as req("read_data", {"target_tenant_id": "other"})
	t == {"cross-tenant operation"}
}

test_same_tenant_no_approval if {
	not hitl.require_approval with input as req("read_data", {"target_tenant_id": "self"})
}

test_cross_tenant_approved if {
	not hitl.require_approval with input as req("read_data", {"target_tenant_id": "other", "approved": true})
}

test_never_denies if {
	hitl.allow with input as req("delete_data", {})
	not hitl.deny with input as req("delete_data", {})
}

test_severity_high if {
	hitl.severity == "high"
}
