package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some s in resources("google_compute_subnetwork")
	s.expressions.ip_cidr_range.constant_value == "10.20.0.0/20"
	s.expressions.private_ip_google_access.constant_value == true
	some l in s.expressions.log_config
	l.flow_sampling.constant_value == 0.5
}
