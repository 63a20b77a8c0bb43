package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some t in resources("aws_sns_topic")
	t.expressions.name.constant_value == "alerts"
	t.expressions.display_name.constant_value == "Alerts"
	t.expressions.kms_master_key_id.constant_value == "alias/aws/sns"
}
