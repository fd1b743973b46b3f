package steward.policies.gdpr_test

import rego.v1

import data.steward.policies.gdpr

consent_msg := "GDPR: consent of the data subject is required to process personal data"

purpose_msg := "GDPR: a processing purpose must be stated"

req(ctx) := {"action": "read_data", "resource": "crm/contacts", "context": ctx, "tenant_id": "t1"}

test_no_personal_data_allowed if {
	gdpr.allow with input as req({})
	count(gdpr.deny) == 0 with input as req({})
}

test_personal_data_false_is_not_personal if {
	gdpr.allow with input as req({"personal_data": false})
}

test_personal_data_must_be_boolean_true if {
	gdpr.allow with input as req({"personal_data": "true"})
}

test_consent_and_purpose_allowed if {
	gdpr.allow with input as req({"personal_data": true, "consent": true, "purpose": "support"})
}

test_missing_consent_denied if {
	d := gdpr.deny with input as req({"personal_data": true, "purpose": "support"})
	d == {consent_msg}
	not gdpr.allow with input as req({"personal_data": true, "purpose": "support"})
}

test_consent_must_be_boolean_true if {
	d := gdpr.deny with input as req({"personal_data": true, "consent": "yes", "purpose": "support"})
	d == {consent_msg}
}

test_missing_purpose_denied if {
	d := gdpr.deny with input as req({"personal_data": true, "consent": true})
	d == {purpose_msg}
}

test_blank_purpose_denied if {
	d := gdpr.deny with input as req({"personal_data": true, "consent": true, "purpose": "   "})
	d == {purpose_msg}
}

test_non_string_purpose_denied if {
	d := gdpr.deny with input as req({"personal_data": true, "consent": true, "purpose": 42})
	d == {purpose_msg}
}

test_nothing_given_both_messages if {
	d := gdpr.deny with input as req({"personal_data": true})
	d == {consent_msg, purpose_msg}
}

test_severity_high if {
	gdpr.severity == "high"
}
