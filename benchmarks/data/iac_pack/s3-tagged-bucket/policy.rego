package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some c in changes("aws_s3_bucket")
	c.change.after.bucket == "verifirst-logs"
	c.change.after.tags.Environment == "prod"
	c.change.after.tags.Team == "platform"
}
