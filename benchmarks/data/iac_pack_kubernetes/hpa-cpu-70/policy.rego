package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some h in resources("kubernetes_horizontal_pod_autoscaler_v2")
	some s in h.expressions.spec
	s.min_replicas.constant_value == 2
	s.max_replicas.constant_value == 10
	some ref in s.scale_target_ref
	ref.kind.constant_value == "Deployment"
	ref.name.constant_value == "web"
	some m in s.metric
	some r in m.resource
	r.name.constant_value == "cpu"
	some t in r.target
	t.average_utilization.constant_value == 70
}
