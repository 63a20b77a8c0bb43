package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some db in resources("google_sql_database_instance")
	db.expressions.database_version.constant_value == "POSTGRES_15"
	db.expressions.deletion_protection.constant_value == true
	some s in db.expressions.settings
	some ip in s.ip_configuration
	ip.ipv4_enabled.constant_value == false
	some ref in ip.private_network.references
	startswith(ref, "google_compute_network.")
	some b in s.backup_configuration
	b.enabled.constant_value == true
}
