package terraform.validation

import rego.v1

default valid := false

resources(t) := [r | some r in input.configuration.root_module.resources; r.type == t]

changes(t) := [c | some c in input.resource_changes; c.type == t; "create" in c.change.actions]

# a resource type and its _v1 twin (kubernetes_deployment and kubernetes_deployment_v1 are the same object)
k8s(t) := [r | some r in input.configuration.root_module.resources; trim_suffix(r.type, "_v1") == t]

valid if {
	some role in k8s("kubernetes_role")
	some rule in role.expressions.rule
	rule.resources.constant_value == ["pods"]
	verbs := {v | some v in rule.verbs.constant_value}
	count(verbs) > 0
	count(verbs - {"get", "list", "watch"}) == 0
	some b in k8s("kubernetes_role_binding")
	some rr in b.expressions.role_ref
	rr.name.constant_value == "pod-reader"
	some sub in b.expressions.subject
	sub.kind.constant_value == "ServiceAccount"
	sub.name.constant_value == "ci"
}
