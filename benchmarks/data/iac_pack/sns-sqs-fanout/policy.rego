package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some t in resources("aws_sns_topic")
	t.expressions.name.constant_value == "order-events"
	some q in resources("aws_sqs_queue")
	q.expressions.name.constant_value == "order-events-worker"
	some s in resources("aws_sns_topic_subscription")
	s.expressions.protocol.constant_value == "sqs"
	t.address in s.expressions.topic_arn.references
	q.address in s.expressions.endpoint.references
}
