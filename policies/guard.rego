# The prompt guard's policy-engine detector (module `guard.main`): a score in [0, 1] from
# well-known injection phrasings and from the other detectors' findings. Listed with the
# templates for reference; not a policy of the policy check.
#
# input: {"prompt": <canonical prompt>, "detectors": {"rule": <rule score>, "ml": <classifier
# probability, absent when the classifier is off>}}. A score of 0.9 or more is a strong signal
# and blocks (contract 17.2).
package guard.main

import rego.v1

signals := {
	"ignore_instructions": `(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all)\b.{0,20}\b(instructions|rules|prompts?|directives)`,
	"system_prompt_leak": `(reveal|print|show|repeat|output|leak)\b.{0,30}\b(system prompt|hidden instructions|initial instructions)`,
	"dan_jailbreak": `do anything now`,
}

# A classifier this confident is a strong signal: lower it, raise it, or delete this rule to
# keep the classifier's say soft (weighted only). The shipped classifier's probability is
# calibrated on sources it was not trained on (ADR 0017).
confident_classifier := 0.7

# A cheap first test: a phrasing can only match a prompt that holds one of its opening words
# and one of its closing words, so its regular expression runs only then (the same matches; on
# most prompts, and on most that say "ignore" or "show" innocently, no expression runs at all).
# A signal without an entry in a list is not held back by that list.
opening_words := {
	"ignore_instructions": ["ignore", "disregard", "forget"],
	"system_prompt_leak": ["reveal", "print", "show", "repeat", "output", "leak"],
	"dan_jailbreak": ["do anything now"],
}

closing_words := {
	"ignore_instructions": ["instructions", "rules", "prompt", "directives"],
	"system_prompt_leak": ["system prompt", "hidden instructions", "initial instructions"],
}

matches contains name if {
	prompt := lower(input.prompt)
	some name, pattern in signals
	opens(name, prompt)
	closes(name, prompt)
	regex.match(pattern, prompt)
}

opens(name, _) if not opening_words[name]

opens(name, prompt) if {
	some word in opening_words[name]
	contains(prompt, word)
}

closes(name, _) if not closing_words[name]

closes(name, prompt) if {
	some word in closing_words[name]
	contains(prompt, word)
}

matches contains "ml_classifier_confident" if {
	input.detectors.ml >= confident_classifier
}

default score := 0.0

score := 0.95 if count(matches) > 0
