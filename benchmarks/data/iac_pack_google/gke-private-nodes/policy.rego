package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some c in resources("google_container_cluster")
	c.expressions.remove_default_node_pool.constant_value == true
	some p in c.expressions.private_cluster_config
	p.enable_private_nodes.constant_value == true
	p.master_ipv4_cidr_block.constant_value == "172.16.0.0/28"
	some np in resources("google_container_node_pool")
	np.expressions.node_count.constant_value == 3
	some nc in np.expressions.node_config
	nc.machine_type.constant_value == "e2-standard-4"
}
