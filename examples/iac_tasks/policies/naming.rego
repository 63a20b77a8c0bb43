# Organisation rule (Rego v0, conftest style): bucket names start with the company prefix.
package org.naming

deny[msg] {
	r := input.resource_changes[_]
	r.type == "aws_s3_bucket"
	name := r.change.after.bucket
	not startswith(name, "acme-")
	msg := sprintf("%s: bucket name %v does not start with acme-", [r.address, name])
}
