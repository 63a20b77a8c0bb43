package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some t in resources("google_pubsub_topic")
	t.expressions.name.constant_value == "orders"
	some s in resources("google_pubsub_subscription")
	some ref in s.expressions.topic.references
	startswith(ref, "google_pubsub_topic.")
	s.expressions.ack_deadline_seconds.constant_value == 60
	s.expressions.message_retention_duration.constant_value == "604800s"
}
