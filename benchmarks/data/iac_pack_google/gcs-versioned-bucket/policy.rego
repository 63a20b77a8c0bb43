package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some b in resources("google_storage_bucket")
	b.expressions.name.constant_value == "acme-artifacts"
	b.expressions.location.constant_value == "EU"
	b.expressions.uniform_bucket_level_access.constant_value == true
	some v in b.expressions.versioning
	v.enabled.constant_value == true
}
