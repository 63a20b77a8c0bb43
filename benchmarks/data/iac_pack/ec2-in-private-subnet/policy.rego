package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some v in resources("aws_vpc")
	some s in resources("aws_subnet")
	v.address in s.expressions.vpc_id.references
	some sg in resources("aws_security_group")
	v.address in sg.expressions.vpc_id.references
	some i in resources("aws_instance")
	s.address in i.expressions.subnet_id.references
	sg.address in i.expressions.vpc_security_group_ids.references
	i.expressions.associate_public_ip_address.constant_value == false
}
