package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some n in resources("google_compute_network")
	n.expressions.auto_create_subnetworks.constant_value == false
	some s in resources("google_compute_subnetwork")
	s.expressions.ip_cidr_range.constant_value == "10.10.0.0/24"
	some i in resources("google_compute_instance")
	some nic in i.expressions.network_interface
	some ref in nic.subnetwork.references
	startswith(ref, "google_compute_subnetwork.")
	not has_access_config(nic)
}

has_access_config(nic) if count(nic.access_config) > 0
