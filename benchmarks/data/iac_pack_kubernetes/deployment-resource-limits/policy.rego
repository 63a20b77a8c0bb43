package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some d in k8s("kubernetes_deployment")
	some s in d.expressions.spec
	some t in s.template
	some ps in t.spec
	some c in ps.container
	some r in c.resources
	r.requests.constant_value == {"cpu": "250m", "memory": "256Mi"}
	r.limits.constant_value == {"cpu": "500m", "memory": "512Mi"}
}
