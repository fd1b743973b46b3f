package steward.policies.hipaa_test

import rego.v1

import data.steward.policies.hipaa

use_msg := "HIPAA: PHI may be used only for treatment, payment or operations, or with the patient's authorization"

encrypt_msg := "HIPAA: PHI exports must be encrypted"

req(action, ctx) := {"action": action, "resource": "ehr/patients/42", "context": ctx, "tenant_id": "t1"}

test_non_phi_allowed if {
	hipaa.allow with input as req("read_data", {})
}

test_phi_action_for_treatment_allowed if {
	hipaa.allow with input as req("read_phi", {"purpose": "treatment"})
	hipaa.allow with input as req("write_phi", {"purpose": "payment"})
	hipaa.allow with input as req("read_phi", {"purpose": "operations"})
}

test_phi_action_for_marketing_denied if {
	d := hipaa.deny with input as req("read_phi", {"purpose": "marketing"})
	d == {use_msg}
	not hipaa.allow with input as req("read_phi", {"purpose": "marketing"})
}

test_phi_action_without_purpose_denied if {
	d := hipaa.deny with input as req("read_phi", {})
	d == {use_msg}
}

test_phi_flag_with_authorization_allowed if {
	hipaa.allow with input as req("read_data", {"phi": true, "authorization": true})
}

test_phi_flag_alone_denied if {
	d := hipaa.deny with input as req("read_data", {"phi": true})
	d == {use_msg}
}

test_authorization_must_be_boolean_true if {
	d := hipaa.deny with input as req("read_data", {"phi": true, "authorization": "yes"})
	d == {use_msg}
}

test_encrypted_export_allowed if {
	hipaa.allow with input as req("export_phi", {"purpose": "treatment", "encrypted": true})
}

test_unencrypted_export_denied if {
	d := hipaa.deny with input as req("export_phi", {"purpose": "treatment"})
	d == {encrypt_msg}
}

test_unencrypted_export_without_purpose_both if {
	d := hipaa.deny with input as req("export_phi", {"encrypted": false})
	d == {use_msg, encrypt_msg}
}

test_severity_high if {
	hipaa.severity == "high"
}
