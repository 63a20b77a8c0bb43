package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	count(resources("azurerm_network_security_group")) == 1
	some r in resources("azurerm_network_security_rule")
	r.expressions.direction.constant_value == "Inbound"
	r.expressions.access.constant_value == "Allow"
	r.expressions.protocol.constant_value == "Tcp"
	r.expressions.destination_port_range.constant_value == "22"
	r.expressions.source_address_prefix.constant_value == "VirtualNetwork"
	not ssh_from_internet
}

ssh_from_internet if {
	some r in resources("azurerm_network_security_rule")
	r.expressions.destination_port_range.constant_value == "22"
	r.expressions.source_address_prefix.constant_value in {"*", "Internet", "0.0.0.0/0"}
}
