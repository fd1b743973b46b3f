package steward.policies.fz152_test

import rego.v1

import data.steward.policies.fz152

consent_msg := "FZ-152: consent of the data subject is required"

purpose_msg := "FZ-152: a processing purpose must be stated"

storage_msg := "FZ-152: personal data of Russian citizens must be stored in Russia"

req(ctx) := {"action": "write_data", "resource": "users/ru/1001", "context": ctx, "tenant_id": "t1"}

test_compliant_allowed if {
	fz152.allow with input as req({"data_subject_country": "RU", "consent": true, "purpose": "account", "storage_region": "RU"})
}

test_case_insensitive if {
	fz152.allow with input as req({"data_subject_country": "ru", "consent": true, "purpose": "account", "storage_region": "ru"})
}

test_stored_abroad_denied if {
	d := fz152.deny with input as req({"data_subject_country": "RU", "consent": true, "purpose": "account", "storage_region": "EU"})
	d == {storage_msg}
}

test_storage_missing_denied if {
	d := fz152.deny with input as req({"data_subject_country": "RU", "consent": true, "purpose": "account"})
	d == {storage_msg}
}

test_consent_missing_denied if {
	d := fz152.deny with input as req({"data_subject_country": "RU", "purpose": "account", "storage_region": "RU"})
	d == {consent_msg}
}

test_purpose_missing_denied if {
	d := fz152.deny with input as req({"data_subject_country": "RU", "consent": true, "storage_region": "RU"})
	d == {purpose_msg}
}

test_everything_missing if {
	d := fz152.deny with input as req({"data_subject_country": "RU"})
	d == {consent_msg, purpose_msg, storage_msg}
}

test_other_country_allowed if {
	fz152.allow with input as req({"data_subject_country": "DE", "storage_region": "EU"})
}

test_no_country_allowed if {
	fz152.allow with input as req({})
}

test_non_string_country_ignored if {
	fz152.allow with input as req({"data_subject_country": 7})
}

test_severity_high if {
	fz152.severity == "high"
}
