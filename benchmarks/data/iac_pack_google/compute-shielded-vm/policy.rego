package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some i in resources("google_compute_instance")
	i.expressions.machine_type.constant_value == "e2-medium"
	some s in i.expressions.shielded_instance_config
	s.enable_secure_boot.constant_value == true
	s.enable_vtpm.constant_value == true
	s.enable_integrity_monitoring.constant_value == true
}
