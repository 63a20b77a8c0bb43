package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some k in resources("aws_kms_key")
	k.expressions.enable_key_rotation.constant_value == true
	days := k.expressions.deletion_window_in_days.constant_value
	days >= 7
	days <= 30
}
