package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some r in resources("aws_iam_role")
	some f in resources("aws_lambda_function")
	f.expressions.function_name.constant_value == "hello"
	f.expressions.runtime.constant_value == "python3.12"
	f.expressions.handler.constant_value == "app.handler"
	f.expressions.timeout.constant_value == 10
	r.address in f.expressions.role.references
}
