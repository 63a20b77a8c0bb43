package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some b in resources("aws_s3_bucket")
	b.expressions.bucket.constant_value == "verifirst-artifacts"
	some v in resources("aws_s3_bucket_versioning")
	b.address in v.expressions.bucket.references
	some vc in v.expressions.versioning_configuration
	vc.status.constant_value == "Enabled"
}
