package steward.policies.custom_test

import rego.v1

import data.steward.policies.custom

test_allows_everything if {
	custom.allow with input as {"action": "delete_data", "resource": "r", "context": {}}
	count(custom.deny) == 0 with input as {"action": "delete_data", "resource": "r", "context": {}}
}

test_no_approval_no_severity if {
	not custom.require_approval
	not custom.severity
}
