# FZ-152 (Russian Federation): personal data of Russian citizens needs consent, a stated
# purpose and storage in Russia.
package steward.policies.fz152

import rego.v1

russian_subject if {
	is_string(input.context.data_subject_country)
	upper(input.context.data_subject_country) == "RU"
}

stored_in_russia if {
	is_string(input.context.storage_region)
	upper(input.context.storage_region) == "RU"
}

consent_given if input.context.consent == true

valid_purpose if {
	is_string(input.context.purpose)
	trim_space(input.context.purpose) != ""
}

deny contains "FZ-152: consent of the data subject is required" if {
	russian_subject
	not consent_given
}

deny contains "FZ-152: a processing purpose must be stated" if {
	russian_subject
	not valid_purpose
}

deny contains "FZ-152: personal data of Russian citizens must be stored in Russia" if {
	russian_subject
	not stored_in_russia
}

default allow := false

allow if count(deny) == 0

severity := "high"
