# Every S3 bucket in the plan has versioning enabled (IaC-Eval style: all rules must hold).
package terraform.validation

import rego.v1

default has_bucket := false

default versioned := false

has_bucket if {
	some r in input.resource_changes
	r.type == "aws_s3_bucket"
}

versioned if {
	some r in input.resource_changes
	r.type == "aws_s3_bucket_versioning"
	r.change.after.versioning_configuration[_].status == "Enabled"
}
