package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some svc in k8s("kubernetes_service")
	some s in svc.expressions.spec
	s.type.constant_value == "ClusterIP"
	s.selector.constant_value.app == "api"
	some p in s.port
	p.port.constant_value == 80
	format_int(to_number(p.target_port.constant_value), 10) == "8080"
}
