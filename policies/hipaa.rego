# HIPAA: protected health information (PHI) only for treatment, payment or operations (or
# with the patient's authorization); PHI exports encrypted.
package steward.policies.hipaa

import rego.v1

phi_actions := {"read_phi", "write_phi", "export_phi"}

permitted_purposes := {"treatment", "payment", "operations"}

phi if input.context.phi == true

phi if {
	action := input.action
	action in phi_actions
}

permitted if {
	purpose := input.context.purpose
	purpose in permitted_purposes
}

permitted if input.context.authorization == true

encrypted if input.context.encrypted == true

deny contains "HIPAA: PHI may be used only for treatment, payment or operations, or with the patient's authorization" if {
	phi
	not permitted
}

deny contains "HIPAA: PHI exports must be encrypted" if {
	input.action == "export_phi"
	not encrypted
}

default allow := false

allow if count(deny) == 0

severity := "high"
