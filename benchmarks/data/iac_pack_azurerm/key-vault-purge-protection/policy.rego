package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some kv in resources("azurerm_key_vault")
	kv.expressions.sku_name.constant_value == "standard"
	kv.expressions.purge_protection_enabled.constant_value == true
	kv.expressions.soft_delete_retention_days.constant_value == 90
	some ref in kv.expressions.tenant_id.references
	startswith(ref, "data.azurerm_client_config.")
}
