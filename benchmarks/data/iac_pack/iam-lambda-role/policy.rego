package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

lambda_principal(doc) if {
	some st in doc.Statement
	st.Effect == "Allow"
	st.Action == "sts:AssumeRole"
	st.Principal.Service == "lambda.amazonaws.com"
}

valid if {
	some c in changes("aws_iam_role")
	c.change.after.name == "lambda-exec"
	lambda_principal(json.unmarshal(c.change.after.assume_role_policy))
}
