# GDPR: personal data needs the data subject's consent and a stated processing purpose.
#
# Written so that every engine (the embedded one and OPA) decides alike: conditions on
# possibly-missing input members are helper rules, never negated membership tests.
package steward.policies.gdpr

import rego.v1

# Applies only when the request declares that personal data is processed.
personal_data if input.context.personal_data == true

consent_given if input.context.consent == true

valid_purpose if {
	is_string(input.context.purpose)
	trim_space(input.context.purpose) != ""
}

deny contains "GDPR: consent of the data subject is required to process personal data" if {
	personal_data
	not consent_given
}

deny contains "GDPR: a processing purpose must be stated" if {
	personal_data
	not valid_purpose
}

default allow := false

allow if count(deny) == 0

severity := "high"
