# Organisation rule (Rego v1, conftest style): every taggable resource names its owner.
package org.tags

import rego.v1

deny contains msg if {
	some r in input.resource_changes
	object.get(r.change.after, "tags", "not taggable") != "not taggable"
	not r.change.after.tags.owner
	msg := sprintf("%s has no owner tag", [r.address])
}
