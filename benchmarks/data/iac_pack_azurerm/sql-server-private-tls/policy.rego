package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some s in resources("azurerm_mssql_server")
	s.expressions.minimum_tls_version.constant_value == "1.2"
	s.expressions.public_network_access_enabled.constant_value == false
	some d in resources("azurerm_mssql_database")
	d.expressions.name.constant_value == "appdb"
	d.expressions.sku_name.constant_value == "S0"
	some ref in d.expressions.server_id.references
	startswith(ref, "azurerm_mssql_server.")
}
