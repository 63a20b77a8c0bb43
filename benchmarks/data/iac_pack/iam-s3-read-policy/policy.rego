package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

allows_get(doc) if {
	some st in doc.Statement
	st.Effect == "Allow"
	"s3:GetObject" in st.Action
	st.Resource == "arn:aws:s3:::verifirst-data/*"
}

valid if {
	some role in resources("aws_iam_role")
	some pol in resources("aws_iam_policy")
	some c in changes("aws_iam_policy")
	c.address == pol.address
	allows_get(json.unmarshal(c.change.after.policy))
	some att in resources("aws_iam_role_policy_attachment")
	role.address in att.expressions.role.references
	pol.address in att.expressions.policy_arn.references
}
