package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some v in resources("aws_vpc")
	v.expressions.cidr_block.constant_value == "172.16.0.0/16"
	some g in resources("aws_internet_gateway")
	v.address in g.expressions.vpc_id.references
	g.expressions.tags.constant_value.Name == "main-igw"
}
