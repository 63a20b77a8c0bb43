package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some i in resources("aws_instance")
	some m in i.expressions.metadata_options
	m.http_tokens.constant_value == "required"
}
