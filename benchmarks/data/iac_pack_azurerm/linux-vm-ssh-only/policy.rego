package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

valid if {
	some vm in resources("azurerm_linux_virtual_machine")
	vm.expressions.size.constant_value == "Standard_B2s"
	vm.expressions.disable_password_authentication.constant_value == true
	count(vm.expressions.admin_ssh_key) == 1
	some nic in resources("azurerm_network_interface")
	some ipc in nic.expressions.ip_configuration
	some ref in ipc.subnet_id.references
	startswith(ref, "azurerm_subnet.")
}
