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
	some sc in ps.security_context
	sc.run_as_non_root.constant_value == true
	to_number(sc.run_as_user.constant_value) == 10001
	some c in ps.container
	some csc in c.security_context
	csc.read_only_root_filesystem.constant_value == true
	csc.allow_privilege_escalation.constant_value == false
}
