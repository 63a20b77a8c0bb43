package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some s in resources("azurerm_postgresql_flexible_server")
	s.expressions.version.constant_value == "16"
	s.expressions.backup_retention_days.constant_value == 35
	s.expressions.geo_redundant_backup_enabled.constant_value == true
	s.expressions.public_network_access_enabled.constant_value == false
}
