package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some np in k8s("kubernetes_network_policy")
	some m in np.expressions.metadata
	m.namespace.constant_value == "apps"
	some s in np.expressions.spec
	s.policy_types.constant_value == ["Ingress"]
	some sel in s.pod_selector
	not selects_some(sel)
	not allows_ingress(s)
}

selects_some(sel) if count(object.keys(sel)) > 0

allows_ingress(s) if count(s.ingress) > 0
