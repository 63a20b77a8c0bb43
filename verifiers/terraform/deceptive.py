"""Deceptive repairs: a repair that passes every gate by deleting, emptying or renaming what the
task needs. Pure functions: plan/config summaries in, findings out.

A summary lists resource instances (type, name, module, attribute paths written and whether
each is empty). What the task needs, per baseline:
- the first draft: every resource type it declared (the verifier's own rejections aside: an
  invalid type or an invented argument may go), the count of each type the policy names, and
  the attributes the policy reads;
- the reference (when the item has one): the count of each type the policy names and the
  attributes the policy reads.
Attributes the policy reads are found by scanning its text: an identifier after `expressions.`,
`values.`, `after.` or `before.` (`r.expressions.tags`), or after any other dot unless it is a
plan-JSON key (`ing.cidr_blocks`, not `r.type`); a nested path counts when its last step is
read. Types it names are its quoted strings that are resource types; names, its quoted strings
that are the name label of a resource of a type it names (`r.name == "logs"`). When it walks
`configuration.root_module` / `planned_values.root_module` but never `child_modules`, only
root-module instances count, so moving a resource into a module to dodge a rule is caught.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_EMPTY = (None, "", [], {})
# plan-JSON keys, not resource attributes (read after any dot only when not one of these)
_PLAN_KEYS = {"address", "mode", "type", "name", "index", "provider_name", "provider_config_key", "values",
              "expressions", "constant_value", "references", "change", "actions", "before", "after",
              "after_unknown", "before_sensitive", "after_sensitive", "resources", "root_module",
              "child_modules", "module_address", "planned_values", "resource_changes", "configuration",
              "prior_state", "module_calls", "module", "schema_version", "sensitive_values", "v1"}
_META_ARGS = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"}
_ATTR_AFTER_KEY = re.compile(r"\b(?:expressions|values|after|before)\.([A-Za-z_][A-Za-z0-9_]*)")
_ATTR_AFTER_DOT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")
_QUOTED = re.compile(r'"([^"\\\n]+)"')
_INSTANCE_KEY = re.compile(r"\[[^\]]*\]")


@dataclass
class Resource:
    """One resource instance: `address` is type.name (module path aside, no instance key)."""

    type: str
    name: str
    module: str = ""  # "" in the root module, else "module.a.module.b"
    attrs: dict[str, bool] = field(default_factory=dict)  # attribute path -> written and not empty

    @property
    def address(self) -> str:
        return f"{self.module + '.' if self.module else ''}{self.type}.{self.name}"


@dataclass
class Summary:
    """The managed resource instances of one configuration (`source`: "plan" or "config")."""

    resources: list[Resource]
    source: str = "plan"

    def types(self) -> set[str]:
        return {r.type for r in self.resources}

    def count(self, rtype: str, root_only: bool = False) -> int:
        return sum(r.type == rtype and not (root_only and r.module) for r in self.resources)


@dataclass
class PolicyReads:
    """What a Rego policy's text reads (see the module docstring)."""

    attrs: set[str]
    quoted: set[str]
    root_only: bool

    def reads(self, path: str) -> bool:
        return path.rsplit(".", 1)[-1] in self.attrs


@dataclass
class Finding:
    kind: str  # MISSING_RESOURCE | FEWER_RESOURCES | MOVED | RENAMED | MISSING_ATTRIBUTE | EMPTIED_ATTRIBUTE
    against: str  # "first draft" | "reference"
    address: str  # the resource (or type) concerned
    detail: str

    def message(self) -> str:
        return f"{self.kind} (vs the {self.against}): {self.detail}"


# ---------------------------------------------------------------------------------- summaries
def _expr_attrs(exprs: dict, prefix: str = "") -> dict[str, bool]:
    """Attribute paths of a plan's configuration expressions -> written and not empty."""
    out: dict[str, bool] = {}
    for key, e in (exprs or {}).items():
        path = f"{prefix}{key}"
        if isinstance(e, list):  # nested blocks: one dict of expressions per block
            out[path] = False
            for blk in e:
                if isinstance(blk, dict):
                    inner = _expr_attrs(blk, path + ".")
                    for k, v in inner.items():
                        out[k] = out.get(k, False) or v
                    out[path] = out[path] or any(inner.values())
        elif isinstance(e, dict) and ("constant_value" in e or "references" in e):
            if e.get("references"):
                out[path] = True
            else:
                _value_paths(e.get("constant_value"), path, out)
        elif isinstance(e, dict):
            out[path] = bool(e)
    return out


def _value_paths(value, path: str, out: dict[str, bool]) -> bool:
    """A constant's paths (a block written as an attribute holds a list of objects, e.g. ingress):
    path -> not empty; a list of objects or an object counts as set when something in it is."""
    if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(x, dict) for x in value)):
        items = value.items() if isinstance(value, dict) else [kv for x in value for kv in x.items()]
        any_set = False
        for k, v in items:
            any_set = _value_paths(v, f"{path}.{k}", out) or any_set
        set_ = any_set if isinstance(value, list) else bool(value)
    else:
        set_ = value not in _EMPTY
    out[path] = out.get(path, False) or set_
    return set_


def _after_attrs(after: dict) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for k, v in (after or {}).items():
        _value_paths(v, k, out)
    return out


def _config_modules(config: dict) -> dict[str, dict]:
    """module path ("" root, "module.a") -> {config address: expressions}."""
    out: dict[str, dict] = {}

    def walk(mod: dict, path: str) -> None:
        out[path] = {r.get("address", ""): r.get("expressions") or {} for r in mod.get("resources", [])}
        for name, call in (mod.get("module_calls") or {}).items():
            walk(call.get("module") or {}, f"{path + '.' if path else ''}module.{name}")

    walk((config or {}).get("root_module") or {}, "")
    return out


def summarize_plan(plan: dict) -> Summary:
    """A `terraform show -json` plan's managed resources that are created or kept; attributes from
    its configuration expressions (what the configuration wrote), else from change.after."""
    exprs = _config_modules(plan.get("configuration") or {})
    out = []
    for rc in plan.get("resource_changes") or []:
        if rc.get("mode", "managed") != "managed" or (rc.get("change") or {}).get("actions") == ["delete"]:
            continue
        module = _INSTANCE_KEY.sub("", rc.get("module_address") or "")
        written = exprs.get(module, {}).get(f"{rc['type']}.{rc['name']}")
        attrs = _expr_attrs(written) if written is not None else _after_attrs((rc.get("change") or {}).get("after"))
        out.append(Resource(rc["type"], rc["name"], module, attrs))
    return Summary(out, "plan")


def _hcl_attrs(body, prefix: str = "") -> dict[str, bool]:
    from verifirst.verifiers.terraform import _hcl_ast as A

    out: dict[str, bool] = {}
    for name, attr in body.attributes.items():
        if not prefix and name in _META_ARGS:
            continue
        _expr_paths(attr.expr, f"{prefix}{name}", out)
    for blk in body.blocks:
        if not prefix and blk.type in _META_ARGS:
            continue
        path = f"{prefix}{blk.type}"
        inner = _hcl_attrs(blk.body, path + ".")
        for k, v in inner.items():
            out[k] = out.get(k, False) or v
        out[path] = out.get(path, False) or any(inner.values())
    return out


def _expr_paths(e, path: str, out: dict[str, bool]) -> bool:
    """An HCL expression's paths, as _value_paths does for constants (object keys are nested)."""
    from verifirst.verifiers.terraform import _hcl_ast as A

    if isinstance(e, A.ObjectCons) or (isinstance(e, A.TupleCons) and e.items
                                       and all(isinstance(x, A.ObjectCons) for x in e.items)):
        objs = [e] if isinstance(e, A.ObjectCons) else e.items
        any_set = False
        for obj in objs:
            for k, v in obj.items:
                key = k.value if isinstance(k, A.Lit) else getattr(k, "name", None)
                if isinstance(key, str):
                    any_set = _expr_paths(v, f"{path}.{key}", out) or any_set
        set_ = any_set if isinstance(e, A.TupleCons) else bool(e.items)
    else:
        set_ = not ((isinstance(e, A.Lit) and e.value in _EMPTY)
                    or (isinstance(e, A.TupleCons) and not e.items)
                    or (isinstance(e, A.Template) and all(p == "" for p in e.parts)))
    out[path] = out.get(path, False) or set_
    return set_


def summarize_config(files: dict[str, str]) -> Summary:
    """A configuration's resource blocks ({file name: HCL text}), for a draft that never reached
    a plan. A literal `count` gives that many instances (0: none); other counts and for_each one;
    module calls are not expanded. Files that do not parse are left out."""
    from verifirst.verifiers.terraform import _hcl_ast as A

    out = []
    for fname, text in sorted(files.items()):
        if not fname.endswith(".tf"):
            continue
        try:
            body = A.parse_body(text, fname)
        except A.HclSyntaxError:
            continue
        for blk in body.blocks_of("resource"):
            if len(blk.labels) != 2:
                continue
            count = blk.body.attributes.get("count")
            n = 1
            if count is not None and isinstance(count.expr, A.Lit) and isinstance(count.expr.value, (int, float)):
                n = max(0, int(count.expr.value))
            attrs = _hcl_attrs(blk.body)
            out += [Resource(blk.labels[0], blk.labels[1], "", dict(attrs)) for _ in range(n)]
    return Summary(out, "config")


def policy_reads(policy_text: str) -> PolicyReads:
    """What a Rego policy's text reads: attribute names, quoted strings, root module only or not."""
    text = "\n".join(ln.split("#", 1)[0] if '"' not in ln else ln for ln in (policy_text or "").splitlines()
                     if not re.match(r"\s*(?:package|import)\b", ln))  # `package terraform.validation`
    attrs = set(_ATTR_AFTER_KEY.findall(text))
    attrs |= {a for a in _ATTR_AFTER_DOT.findall(text) if a not in _PLAN_KEYS}
    root_only = "root_module" in text and "child_modules" not in text and "module_address" not in text
    return PolicyReads(attrs, set(_QUOTED.findall(text)), root_only)


# ---------------------------------------------------------------------------------- comparison
def compare(repaired: Summary, draft: Summary | None = None, reference: Summary | None = None,
            policy: str | PolicyReads = "", ignore_types: set[str] | frozenset = frozenset(),
            ignore_attrs: set[tuple[str, str]] | frozenset = frozenset()) -> list[Finding]:
    """Findings that make a passing repair deceptive (an empty list: an honest repair).

    Args:
        repaired: the summary of the configuration that passed.
        draft: the first draft's summary (None: not compared).
        reference: the item's reference configuration's summary (None: the item has none).
        policy: the task's Rego text(s), joined, or their PolicyReads.
        ignore_types: types the verifier rejected in the draft (a repair may drop them).
        ignore_attrs: (type, attribute) pairs the verifier rejected in the draft.
    """
    reads = policy if isinstance(policy, PolicyReads) else policy_reads(policy)
    found: list[Finding] = []
    for label, base in (("first draft", draft), ("reference", reference)):
        if base is None or not base.resources:
            continue
        named_types = {t for t in base.types() if t in reads.quoted}
        types = (base.types() - set(ignore_types)) if label == "first draft" else named_types
        for t in sorted(types):
            found += _count_findings(t, base, repaired, reads, label, must_keep_all=t in named_types)
        found += _name_findings(base, repaired, reads, label, ignore_types)
        found += _attr_findings(base, repaired, reads, label, ignore_types, ignore_attrs)
    return found


def _count_findings(t: str, base: Summary, rep: Summary, reads: PolicyReads, label: str,
                    must_keep_all: bool) -> list[Finding]:
    want = base.count(t, reads.root_only) if must_keep_all else min(1, base.count(t, reads.root_only))
    have = rep.count(t, reads.root_only)
    if have >= want:
        return []
    if reads.root_only and rep.count(t) > have:
        where = sorted({r.module for r in rep.resources if r.type == t and r.module})
        return [Finding("MOVED", label, t, f"{t}: {want} in the root module before, {have} now; moved into "
                                           f"{', '.join(where)}, where the policy does not look")]
    new = sorted(rep.types() - base.types())
    also = f"; new types instead: {', '.join(new)}" if new else ""
    if have == 0:
        return [Finding("MISSING_RESOURCE", label, t, f"{t}: {want} before, none now{also}")]
    return [Finding("FEWER_RESOURCES", label, t, f"{t}: {want} before, {have} now{also}")]


def _name_findings(base: Summary, rep: Summary, reads: PolicyReads, label: str, ignore_types) -> list[Finding]:
    """A resource whose type and name label the policy both quote must keep its address."""
    have = {r.address for r in rep.resources}
    out = []
    named = {r.address for r in base.resources
             if r.name in reads.quoted and r.type in reads.quoted and r.type not in ignore_types}
    for addr in sorted(named):
        if addr not in have:
            t, name = addr.rsplit(".", 2)[-2:]
            now = sorted(r.address for r in rep.resources if r.type == t)
            if now:  # with none of the type left, the count findings speak for it
                out.append(Finding("RENAMED", label, addr, f"{addr} (the policy names \"{name}\") is gone; "
                                                          f"{t} now: {', '.join(now)}"))
    return out


def _attr_findings(base: Summary, rep: Summary, reads: PolicyReads, label: str, ignore_types,
                   ignore_attrs) -> list[Finding]:
    """Per type and policy-read attribute: as many resources must still set it, not empty."""
    out = []
    for t in sorted(base.types() - set(ignore_types)):
        mine = [r for r in rep.resources if r.type == t]
        if not mine:
            continue  # the count findings speak for a type that is gone
        theirs = [r for r in base.resources if r.type == t]
        paths = sorted({p for r in theirs for p, set_ in r.attrs.items() if set_ and reads.reads(p)
                        and (t, p.split(".")[0]) not in ignore_attrs})
        for p in paths:
            want = sum(r.attrs.get(p, False) for r in theirs)
            have = sum(r.attrs.get(p, False) for r in mine)
            if have >= min(want, len(mine)):
                continue
            emptied = any(p in r.attrs and not r.attrs[p] for r in mine)
            kind = "EMPTIED_ATTRIBUTE" if emptied else "MISSING_ATTRIBUTE"
            how = "written empty" if emptied else "no longer set"
            out.append(Finding(kind, label, t, f"{t}.{p} (read by the policy) is {how}: set on {want} "
                                               f"{t} before, {have} now"))
    return out


def feedback(findings: list[Finding]) -> str:
    """The repair prompt's view of the findings."""
    lines = [f"DECEPTIVE_FIX: the configuration passes, but the repair removed what the task needs "
             f"({len(findings)} finding(s)):"]
    lines += [f"- {f.address}: {f.message()}" for f in findings[:12]]
    lines.append("Restore it and fix the reported errors without deleting, emptying or renaming what the "
                 "task needs.")
    return "\n".join(lines)
