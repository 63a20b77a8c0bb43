package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some dlq in resources("aws_sqs_queue")
	dlq.expressions.name.constant_value == "jobs-dlq.fifo"
	dlq.expressions.fifo_queue.constant_value == true
	some q in resources("aws_sqs_queue")
	q.expressions.name.constant_value == "jobs.fifo"
	q.expressions.fifo_queue.constant_value == true
	dlq.address in q.expressions.redrive_policy.references
}
