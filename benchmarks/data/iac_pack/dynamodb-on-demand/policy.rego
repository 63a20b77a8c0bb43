package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some t in resources("aws_dynamodb_table")
	t.expressions.name.constant_value == "orders"
	t.expressions.billing_mode.constant_value == "PAY_PER_REQUEST"
	t.expressions.hash_key.constant_value == "order_id"
	some a in t.expressions.attribute
	a.name.constant_value == "order_id"
	a.type.constant_value == "S"
}
