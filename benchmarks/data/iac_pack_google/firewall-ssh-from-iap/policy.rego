package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some f in resources("google_compute_firewall")
	f.expressions.source_ranges.constant_value == ["35.235.240.0/20"]
	"ssh" in f.expressions.target_tags.constant_value
	some a in f.expressions.allow
	a.protocol.constant_value == "tcp"
	a.ports.constant_value == ["22"]
}
