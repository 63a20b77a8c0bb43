package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some b in resources("aws_s3_bucket")
	some pab in resources("aws_s3_bucket_public_access_block")
	b.address in pab.expressions.bucket.references
	pab.expressions.block_public_acls.constant_value == true
	pab.expressions.block_public_policy.constant_value == true
	pab.expressions.ignore_public_acls.constant_value == true
	pab.expressions.restrict_public_buckets.constant_value == true
}
