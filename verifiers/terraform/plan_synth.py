"""Synthesize the JSON `terraform show -json tfplan` would print, for a create-from-empty
plan: planned_values, resource_changes (computed attributes unknown), configuration
(expressions with constant_value / references), variables, outputs. OPA policies written
against real plans (IaC-Eval) read these fields."""
from __future__ import annotations

import datetime as _dt

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform._hcl_config import reference_strings, raw_traversals
from verifirst.verifiers.terraform._hcl_eval import UNKNOWN, EvalError, Scope, evaluate, has_unknown
from verifirst.verifiers.terraform._hcl_types import attr_type, convert, strip_unknown, unknown_shape
from verifirst.verifiers.terraform.hcl_check import analyze

FORMAT_VERSION = "1.2"
TERRAFORM_VERSION = "1.11.4"


class PlanSynthesisError(ValueError):
    """The configuration does not parse; no plan can be made."""

    def __init__(self, errors):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def synthesize_plan(files: dict, schema=None, variables: dict | None = None,
                    base_dir: str | None = None, terraform_version: str = TERRAFORM_VERSION,
                    analysis=None) -> dict:
    """The plan JSON; `analysis` (hcl_check.analyze of the same files) saves parsing them again."""
    a = analysis if analysis is not None else analyze(files, schema, variables, base_dir)
    if a.syntax:
        raise PlanSynthesisError(a.syntax)
    ev, m = a.ev, a.module
    schema = ev.schema
    changes, prior = [], []
    tree: dict = {"resources": []}
    _module_plan(ev, schema, tree, changes, prior)
    changes.sort(key=lambda c: c["address"])
    outputs = ev.output_values()
    plan: dict = {"format_version": FORMAT_VERSION, "terraform_version": terraform_version}
    if m.variables:
        plan["variables"] = {n: {"value": strip_unknown(ev.var_value(n))}
                             for n in sorted(m.variables) if ev.var_value(n) is not UNKNOWN}
    pv: dict = {}
    if outputs:
        pv["outputs"] = {}
        for n, v in sorted(outputs.items()):
            o = {"sensitive": _output_sensitive(m.outputs[n])}
            if not has_unknown(v):
                o["value"] = v
            pv["outputs"][n] = o
    pv["root_module"] = {k: v for k, v in tree.items() if v}
    plan["planned_values"] = pv
    if changes:
        plan["resource_changes"] = changes
    if outputs:
        plan["output_changes"] = {n: _output_change(v, _output_sensitive(m.outputs[n])) for n, v in sorted(outputs.items())}
    if prior:
        plan["prior_state"] = {"format_version": "1.0", "terraform_version": terraform_version,
                               "values": {"root_module": {"resources": prior}}}
    plan["configuration"] = configuration(ev)
    plan["timestamp"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan["applyable"] = bool(changes)
    plan["complete"] = True
    plan["errored"] = False
    return plan


def _module_plan(ev, schema, node: dict, changes: list, prior: list) -> None:
    """One module instance's planned resources into `node` (planned_values' module), its
    resource changes and data reads into `changes` / `prior`, with terraform's addresses
    (module.net[0].aws_subnet.a); the modules it calls as node's child_modules."""
    mod_addr = ev.prefix
    for decl in sorted(ev.m.resources, key=lambda r: r.address):
        bs = ev.block_schema(decl)
        if bs is None and schema is not None and ev.known_provider(decl.type):
            continue  # invalid type: terraform would not plan at all
        provider = _provider_name(schema, decl)
        version = schema.schema_version(decl.mode, decl.type) if schema is not None else 0
        for inst in ev.instances(decl):
            value = inst.value if isinstance(inst.value, dict) else {}
            head = {"address": ev.qualify(inst.address), "mode": decl.mode, "type": decl.type,
                    "name": decl.name}
            if inst.index is not None:
                head["index"] = inst.index
            after = _sorted(strip_unknown(value))
            sens = _sensitive(value, bs)
            known_config = not _config_unknown(value, decl.body)
            if decl.mode == "data" and known_config:
                prior.append({**head, "provider_name": provider, "schema_version": version,
                              "values": after, "sensitive_values": sens})
                continue
            node["resources"].append({**head, "provider_name": provider, "schema_version": version,
                                      "values": after, "sensitive_values": sens})
            change = {"actions": ["read"] if decl.mode == "data" else ["create"], "before": None,
                      "after": after, "after_unknown": _sorted(unknown_shape(value) or {}),
                      "before_sensitive": False, "after_sensitive": sens}
            rc = {**head, **({"module_address": mod_addr} if mod_addr else {}), "provider_name": provider,
                  "change": change}
            if decl.mode == "data":
                rc["action_reason"] = "read_because_config_unknown"
            changes.append(rc)
    for name in sorted(ev.module_instances):
        for inst_addr, _key, iev in ev.module_instances[name]:
            child = {"resources": [], "address": iev.prefix}
            _module_plan(iev, schema, child, changes, prior)
            if child["resources"] or child.get("child_modules"):
                node.setdefault("child_modules", []).append({k: v for k, v in child.items() if v})


def _output_change(v, sensitive: bool) -> dict:
    """An output's change as terraform shows it: `after` left out when wholly unknown, a partly
    known value with its unknown parts null and marked in after_unknown."""
    out: dict = {"actions": ["create"], "before": None}
    if v is not UNKNOWN:
        out["after"] = strip_unknown(v)
    out["after_unknown"] = True if v is UNKNOWN else (unknown_shape(v) if has_unknown(v) else False)
    out.update({"before_sensitive": False, "after_sensitive": sensitive})
    return out


def _provider_name(schema, decl) -> str:
    if schema is None:
        return "registry.terraform.io/hashicorp/" + decl.type.split("_", 1)[0]
    if schema.block(decl.mode, decl.type) is not None:
        return schema.provider_address(decl.mode, decl.type)
    return "registry.terraform.io/hashicorp/" + decl.type.split("_", 1)[0]


def _config_unknown(value, body) -> bool:
    """Is any value written in the configuration (not computed ones) unknown?"""
    if value is UNKNOWN:
        return True
    if not isinstance(value, dict):
        return False
    for k in body.attributes:
        if k in value and has_unknown(value[k]):
            return True
    for b in body.blocks:
        if b.type == "dynamic" and b.labels and value.get(b.labels[0]) is UNKNOWN:
            return True
        v = value.get(b.type)
        items = v if isinstance(v, list) else [v]
        if any(_config_unknown(x, b.body) for x in items if isinstance(x, dict) or x is UNKNOWN):
            return True
    return False


def _sorted(v):
    if isinstance(v, dict):
        return {k: _sorted(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    return v


def _output_sensitive(blk) -> bool:
    a = blk.body.attributes.get("sensitive")
    return bool(a is not None and isinstance(a.expr, A.Lit) and a.expr.value is True)


def _shape(v, ty):
    """after_sensitive shape of a non-sensitive value of type ty."""
    if isinstance(ty, list) and ty[0] in ("list", "set", "tuple"):
        if v is UNKNOWN:
            return []
        if isinstance(v, list):
            inner = ty[1] if ty[0] != "tuple" else "dynamic"
            return [_shape(x, inner) for x in v]
    if isinstance(ty, list) and ty[0] in ("map", "object"):
        if v is UNKNOWN:
            return {}
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                s = _shape(x, ty[1] if ty[0] == "map" else ty[1].get(k, "dynamic"))
                if s is not False:
                    out[k] = s
            return out
    if ty == "dynamic" and isinstance(v, (list, dict)):
        return [_shape(x, "dynamic") for x in v] if isinstance(v, list) else {}
    return False


def _sensitive(value, bs) -> dict:
    if not isinstance(value, dict):
        return {}
    if bs is None:
        return {}
    out = {}
    for name, a in (bs.get("attributes") or {}).items():
        v = value.get(name)
        if a.get("sensitive"):
            out[name] = True
            continue
        if v is None:
            continue
        s = _shape(v, attr_type(a))
        if s is not False:
            out[name] = s
    for name, bt in (bs.get("block_types") or {}).items():
        v = value.get(name)
        inner = bt.get("block", {})
        if v is UNKNOWN:
            out[name] = [] if bt.get("nesting_mode") in ("list", "set") else {}
        elif isinstance(v, list):
            out[name] = [_sensitive(x, inner) for x in v]
        elif isinstance(v, dict) and bt.get("nesting_mode") == "map":
            out[name] = {k: _sensitive(x, inner) for k, x in v.items()}
        elif isinstance(v, dict):
            out[name] = _sensitive(v, inner)
    return out


# --- configuration ----------------------------------------------------------------------------
def _is_constant(expr) -> bool:
    for n in A.walk(expr):
        if type(n) in (A.Var, A.Call, A.ForExpr, A.Splat):
            return False
    return True


def _no_roots(name, node):
    raise EvalError("Variables not allowed", "", 0)


def marshal_expression(expr) -> dict:
    out = {}
    if _is_constant(expr):
        try:
            out["constant_value"] = evaluate(expr, Scope(_no_roots))
        except EvalError:
            pass
    refs = reference_strings(expr)
    if refs:
        out["references"] = refs
    return out


def _attr_blocks_expr(blocks, obj_ty) -> dict:
    """Blocks written for a list-of-object attribute (legacy attributes-as-blocks)."""
    refs, const, vals = [], True, []
    for b in blocks:
        row = {}
        for k, t in obj_ty[1].items():
            a = b.body.attributes.get(k)
            if a is None:
                row[k] = None
                continue
            m = marshal_expression(a.expr)
            refs += m.get("references", [])
            if "constant_value" not in m:
                const = False
                continue
            try:
                row[k] = convert(m["constant_value"], t)
            except EvalError:
                const = False
        vals.append(row)
    out = {}
    if const:
        out["constant_value"] = vals
    if refs:
        out["references"] = refs
    return out


def marshal_expressions(body: A.Body, bs: dict | None, skip=()) -> dict:
    out = {}
    if bs is None:
        for name, a in body.attributes.items():
            if name not in skip:
                out[name] = marshal_expression(a.expr)
        return out
    attrs = bs.get("attributes") or {}
    for name, a in body.attributes.items():
        if name in attrs and name not in skip:
            out[name] = marshal_expression(a.expr)
    for name, sch in attrs.items():
        ty = sch.get("type")
        if name not in body.attributes and body.blocks_of(name) and isinstance(ty, list) \
                and ty[0] in ("list", "set") and isinstance(ty[1], list) and ty[1][0] == "object":
            out[name] = _attr_blocks_expr(body.blocks_of(name), ty[1])
    for name, bt in (bs.get("block_types") or {}).items():
        blocks = body.blocks_of(name)
        if not blocks:
            continue
        inner = bt.get("block", {})
        mode = bt.get("nesting_mode", "list")
        if mode in ("single", "group"):
            out[name] = marshal_expressions(blocks[0].body, inner)
        elif mode == "map":
            out[name] = {(b.labels[0] if b.labels else ""): marshal_expressions(b.body, inner)
                         for b in blocks}
        else:
            out[name] = [marshal_expressions(b.body, inner) for b in blocks]
    return out


def _depends_on(attr) -> list[str]:
    if attr is None:
        return []
    items = attr.expr.items if isinstance(attr.expr, A.TupleCons) else [attr.expr]
    out = []
    for it in items:
        for root, steps, _line in raw_traversals(it):
            out.append(root + "".join("." + v if k == "attr" else f"[{v!r}]" for k, v in steps))
    return out


def _provider_key(decl) -> str:
    p = decl.body.attributes.get("provider")
    if p is not None:
        tr = raw_traversals(p.expr)
        if tr:
            root, steps, _ = tr[0]
            return root + "".join("." + v for k, v in steps if k == "attr")
    return decl.type.split("_", 1)[0]


def _required_versions(ev) -> dict:
    out = {}
    for tb in ev.m.terraform:
        for rp in tb.body.blocks_of("required_providers"):
            for name, a in rp.body.attributes.items():
                try:
                    v = evaluate(a.expr, Scope(_no_roots))
                except EvalError:
                    continue
                if isinstance(v, dict) and v.get("version"):
                    out[name] = v["version"]
    return out


def _child_configuration(ev, name: str, provider_config: dict) -> dict:
    """A called module's configuration (its resources, variables, outputs, module calls), as
    terraform show -json nests it under module_calls.<name>.module; {} when it was not read."""
    insts = ev.module_instances.get(name) or []
    child = ev.children.get(name)
    cev = insts[0][2] if insts else (child.static if child is not None else None)
    if cev is None:
        return {}
    conf = configuration(cev)
    for k, v in conf["provider_config"].items():
        provider_config.setdefault(k, v)
    return conf["root_module"]


def configuration(ev) -> dict:
    """terraform show -json's `configuration` of a module (the root's with every module it calls).

    Args:
        ev: the module's ModelEval (the root's, or an instance of a module call).
    """
    m, schema = ev.m, ev.schema
    versions = _required_versions(ev)
    provider_config: dict = {}
    for p in m.providers:
        name = p.labels[0] if p.labels else ""
        alias_a = p.body.attributes.get("alias")
        alias = alias_a.expr.parts[0] if alias_a is not None and isinstance(alias_a.expr, A.Template) \
            and alias_a.expr.parts and isinstance(alias_a.expr.parts[0], str) else None
        key = f"{name}.{alias}" if alias else name
        entry = {"name": name, "full_name": _full_name(schema, name)}
        if alias:
            entry["alias"] = alias
        if name in versions:
            entry["version_constraint"] = versions[name]
        bs = schema.provider_config(name) if schema is not None and name in ev.provider_names else None
        exprs = marshal_expressions(p.body, bs, skip=("alias", "version"))
        if exprs:
            entry["expressions"] = exprs
        provider_config[key] = entry
    resources = []
    for decl in sorted(m.resources, key=lambda r: r.address):
        bs = ev.block_schema(decl)
        if bs is None and schema is not None and ev.known_provider(decl.type):
            continue
        key = _provider_key(decl)
        local = key.split(".")[0]
        if local not in provider_config and key not in provider_config:
            e = {"name": local, "full_name": _full_name(schema, local)}
            if local in versions:
                e["version_constraint"] = versions[local]
            provider_config[local] = e
        r = {"address": decl.address, "mode": decl.mode, "type": decl.type, "name": decl.name,
             "provider_config_key": key,
             "expressions": marshal_expressions(decl.body, bs,
                                                skip=("count", "for_each", "depends_on", "provider")),
             "schema_version": schema.schema_version(decl.mode, decl.type) if schema else 0}
        if "count" in decl.body.attributes:
            r["count_expression"] = marshal_expression(decl.body.attributes["count"].expr)
        if "for_each" in decl.body.attributes:
            r["for_each_expression"] = marshal_expression(decl.body.attributes["for_each"].expr)
        deps = _depends_on(decl.body.attributes.get("depends_on"))
        if deps:
            r["depends_on"] = deps
        resources.append(r)
    root: dict = {}
    if m.outputs:
        root["outputs"] = {}
        for n, blk in sorted(m.outputs.items()):
            o = {}
            if "value" in blk.body.attributes:
                o["expression"] = marshal_expression(blk.body.attributes["value"].expr)
            if _output_sensitive(blk):
                o["sensitive"] = True
            d = blk.body.attributes.get("description")
            if d is not None:
                o["description"] = marshal_expression(d.expr).get("constant_value")
            root["outputs"][n] = o
    if resources:
        root["resources"] = resources
    if m.module_calls:
        root["module_calls"] = {}
        for n, blk in sorted(m.module_calls.items()):
            src = blk.body.attributes.get("source")
            root["module_calls"][n] = {
                "source": marshal_expression(src.expr).get("constant_value") if src else None,
                "expressions": marshal_expressions(blk.body, None, skip=(
                    "source", "version", "count", "for_each", "depends_on", "providers")),
                "module": _child_configuration(ev, n, provider_config)}
            for meta in ("count", "for_each"):
                if meta in blk.body.attributes:
                    root["module_calls"][n][f"{meta}_expression"] = marshal_expression(blk.body.attributes[meta].expr)
    if m.variables:
        root["variables"] = {}
        for n, blk in sorted(m.variables.items()):
            v = {}
            if "default" in blk.body.attributes:
                v["default"] = strip_unknown(ev.var_value(n)) if n not in ev.inputs else \
                    marshal_expression(blk.body.attributes["default"].expr).get("constant_value")
            d = blk.body.attributes.get("description")
            if d is not None:
                v["description"] = marshal_expression(d.expr).get("constant_value")
            s = blk.body.attributes.get("sensitive")
            if s is not None and isinstance(s.expr, A.Lit) and s.expr.value is True:
                v["sensitive"] = True
            root["variables"][n] = v
    return {"provider_config": provider_config, "root_module": root}


def _full_name(schema, local: str) -> str:
    if schema is not None:
        for a in schema.raw.get("provider_schemas", {}):
            if a.rsplit("/", 1)[-1] == local:
                return a
    return f"registry.terraform.io/hashicorp/{local}"
