package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some c in changes("aws_sqs_queue")
	c.change.after.name == "billing"
	c.change.after.sqs_managed_sse_enabled == true
	c.change.after.message_retention_seconds == 345600
}
