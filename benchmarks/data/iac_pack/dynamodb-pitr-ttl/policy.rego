package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some t in resources("aws_dynamodb_table")
	t.expressions.name.constant_value == "sessions"
	t.expressions.hash_key.constant_value == "session_id"
	some p in t.expressions.point_in_time_recovery
	p.enabled.constant_value == true
	some ttl in t.expressions.ttl
	ttl.enabled.constant_value == true
	ttl.attribute_name.constant_value == "expires_at"
}
