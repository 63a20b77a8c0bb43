package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some s in resources("azurerm_storage_account")
	s.expressions.account_replication_type.constant_value == "GRS"
	s.expressions.min_tls_version.constant_value == "TLS1_2"
	s.expressions.https_traffic_only_enabled.constant_value == true
}
