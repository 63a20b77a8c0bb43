package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some cj in k8s("kubernetes_cron_job")
	some s in cj.expressions.spec
	s.schedule.constant_value == "0 2 * * *"
	s.concurrency_policy.constant_value == "Forbid"
}
