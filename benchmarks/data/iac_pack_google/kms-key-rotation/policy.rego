package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some r in resources("google_kms_key_ring")
	r.expressions.location.constant_value == "europe-west1"
	some k in resources("google_kms_crypto_key")
	some ref in k.expressions.key_ring.references
	startswith(ref, "google_kms_key_ring.")
	k.expressions.rotation_period.constant_value == "7776000s"
}
