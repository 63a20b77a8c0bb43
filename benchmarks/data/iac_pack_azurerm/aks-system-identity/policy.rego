package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some c in resources("azurerm_kubernetes_cluster")
	c.expressions.role_based_access_control_enabled.constant_value == true
	some id in c.expressions.identity
	id.type.constant_value == "SystemAssigned"
	some p in c.expressions.default_node_pool
	p.node_count.constant_value == 3
	p.vm_size.constant_value == "Standard_D4s_v5"
}
