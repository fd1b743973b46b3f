# A starting point for your own policy: add deny rules; whatever no rule denies is allowed.
#
# The input document: {"action", "resource", "context", "tenant_id",
# "agent": {"id", "name", "type", "capabilities", "permissions", "status"}}.
# A module may define `allow` (boolean), `deny` (set of messages), `require_approval`
# (boolean) and `severity` ("low", "medium", "high" or "critical").
package steward.policies.custom

import rego.v1

# Add deny rules; the policy allows whatever no rule denies.
deny contains msg if {
	false
	msg := "never"
}

default allow := false

allow if count(deny) == 0
