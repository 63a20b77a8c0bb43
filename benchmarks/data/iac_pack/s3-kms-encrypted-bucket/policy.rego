package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some k in resources("aws_kms_key")
	k.expressions.enable_key_rotation.constant_value == true
	some b in resources("aws_s3_bucket")
	some enc in resources("aws_s3_bucket_server_side_encryption_configuration")
	b.address in enc.expressions.bucket.references
	some rule in enc.expressions.rule
	some d in rule.apply_server_side_encryption_by_default
	d.sse_algorithm.constant_value == "aws:kms"
	k.address in d.kms_master_key_id.references
}
