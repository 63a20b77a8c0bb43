# The task's own check (Rego v1): the bucket exists and its versioning is enabled.
package terraform.validation

import rego.v1

default valid := false

valid if {
	some b in input.configuration.root_module.resources
	b.type == "aws_s3_bucket"
	some v in input.configuration.root_module.resources
	v.type == "aws_s3_bucket_versioning"
	v.expressions.versioning_configuration[0].status.constant_value == "Enabled"
}
