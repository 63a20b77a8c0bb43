package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

subnet_ok(vpc, cidr, az) if {
	some s in resources("aws_subnet")
	vpc.address in s.expressions.vpc_id.references
	s.expressions.cidr_block.constant_value == cidr
	s.expressions.availability_zone.constant_value == az
}

valid if {
	some v in resources("aws_vpc")
	v.expressions.cidr_block.constant_value == "10.10.0.0/16"
	subnet_ok(v, "10.10.1.0/24", "us-east-1a")
	subnet_ok(v, "10.10.2.0/24", "us-east-1b")
}
