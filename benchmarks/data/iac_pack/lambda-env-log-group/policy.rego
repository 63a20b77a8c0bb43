package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some f in resources("aws_lambda_function")
	f.expressions.function_name.constant_value == "worker"
	some env in f.expressions.environment
	env.variables.constant_value.STAGE == "prod"
	some g in resources("aws_cloudwatch_log_group")
	g.expressions.name.constant_value == "/aws/lambda/worker"
	g.expressions.retention_in_days.constant_value == 14
}
