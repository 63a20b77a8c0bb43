package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some s in resources("azurerm_storage_account")
	s.expressions.allow_nested_items_to_be_public.constant_value == false
	some c in resources("azurerm_storage_container")
	c.expressions.name.constant_value == "uploads"
	c.expressions.container_access_type.constant_value == "private"
}
