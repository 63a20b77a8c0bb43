package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some n in resources("azurerm_virtual_network")
	n.expressions.address_space.constant_value == ["10.1.0.0/16"]
	prefixes := {p |
		some s in resources("azurerm_subnet")
		some ref in s.expressions.virtual_network_name.references
		startswith(ref, "azurerm_virtual_network.")
		some p in s.expressions.address_prefixes.constant_value
	}
	prefixes == {"10.1.1.0/24", "10.1.2.0/24"}
}
