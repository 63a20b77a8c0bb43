package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some b in resources("google_storage_bucket")
	b.expressions.public_access_prevention.constant_value == "enforced"
	some r in b.expressions.lifecycle_rule
	some a in r.action
	a.type.constant_value == "Delete"
	some c in r.condition
	c.age.constant_value == 365
}
