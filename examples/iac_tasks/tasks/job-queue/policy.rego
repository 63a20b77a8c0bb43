# The task's own check (Rego v0, IaC-Eval style): one queue keeping messages 4 days.
package terraform.validation

default has_queue = false

has_queue {
	q := input.resource_changes[_]
	q.type == "aws_sqs_queue"
	q.change.after.message_retention_seconds == 345600
}
