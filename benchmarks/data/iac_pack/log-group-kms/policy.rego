package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some k in resources("aws_kms_key")
	some g in resources("aws_cloudwatch_log_group")
	g.expressions.name.constant_value == "app-audit"
	g.expressions.retention_in_days.constant_value == 30
	k.address in g.expressions.kms_key_id.references
}
