package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some c in changes("aws_instance")
	c.change.after.ami == "ami-0c55b159cbfafe1f0"
	c.change.after.instance_type == "t3.micro"
	c.change.after.tags.Name == "app-server"
}
