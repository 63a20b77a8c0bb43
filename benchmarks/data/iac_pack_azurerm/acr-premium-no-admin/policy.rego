package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some r in resources("azurerm_container_registry")
	r.expressions.sku.constant_value == "Premium"
	r.expressions.admin_enabled.constant_value == false
}
