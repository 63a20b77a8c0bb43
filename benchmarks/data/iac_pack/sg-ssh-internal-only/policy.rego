package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

open_to_world if {
	some r in resources("aws_vpc_security_group_ingress_rule")
	r.expressions.cidr_ipv4.constant_value == "0.0.0.0/0"
}

valid if {
	some sg in resources("aws_security_group")
	some r in resources("aws_vpc_security_group_ingress_rule")
	sg.address in r.expressions.security_group_id.references
	r.expressions.from_port.constant_value == 22
	r.expressions.to_port.constant_value == 22
	r.expressions.cidr_ipv4.constant_value == "10.0.0.0/8"
	not open_to_world
}
