# The prompt guard's policy-engine detector (module `guard.main`): a score in [0, 1] from
# well-known injection phrasings. Listed with the templates for reference; not a policy.
package guard.main

import rego.v1

signals := {
	"ignore_instructions": `(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all)\b.{0,20}\b(instructions|rules|prompts?|directives)`,
	"system_prompt_leak": `(reveal|print|show|repeat|output|leak)\b.{0,30}\b(system prompt|hidden instructions|initial instructions)`,
	"dan_jailbreak": `do anything now`,
}

matches contains name if {
	some name, pattern in signals
	regex.match(pattern, lower(input.prompt))
}

default score := 0.0

score := 0.95 if count(matches) > 0
