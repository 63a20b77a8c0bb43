package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some sg in resources("aws_security_group")
	sg.expressions.name.constant_value == "web-https"
	some r in resources("aws_vpc_security_group_ingress_rule")
	sg.address in r.expressions.security_group_id.references
	r.expressions.ip_protocol.constant_value == "tcp"
	r.expressions.from_port.constant_value == 443
	r.expressions.to_port.constant_value == 443
	r.expressions.cidr_ipv4.constant_value == "0.0.0.0/0"
}
