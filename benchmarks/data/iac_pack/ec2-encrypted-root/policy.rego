package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some i in resources("aws_instance")
	i.expressions.instance_type.constant_value == "t3.small"
	some rbd in i.expressions.root_block_device
	rbd.encrypted.constant_value == true
	rbd.volume_size.constant_value == 20
	rbd.volume_type.constant_value == "gp3"
}
