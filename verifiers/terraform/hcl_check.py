"""Fast pure-Python `terraform validate` + `plan` gate on python-hcl2 and a provider schema.

check(files, schema) -> (stage, errors, warnings); stage in iac_taxonomy.STAGES (never OPA_FAIL).
Messages follow terraform's wording ("Unsupported argument: An argument named ... is not
expected here.") so a repair loop can act on them.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_ast import Body, HclSyntaxError, parse_body
from verifirst.verifiers.terraform._hcl_json import parse_json_body
from verifirst.verifiers.terraform._hcl_config import (META_ARGS, Module, build_module, raw_traversals, parse_ref,
                                                       RefError)
from verifirst.verifiers.terraform import _hcl_modules as M
from verifirst.verifiers.terraform._hcl_model import PLAN, VALIDATE, ModelEval
from verifirst.verifiers.terraform._hcl_refs import _suggest, check_references
from verifirst.verifiers.terraform._hcl_walk import reported_by_walk
from verifirst.verifiers.base import VerifierError
from verifirst.verifiers.terraform import tf_schema
from verifirst.verifiers.terraform.tf_schema import ProviderSchema, default_schema_path, load_schema


class Analysis:
    """Parsed + evaluated configuration shared by check() and synthesize_plan()."""

    def __init__(self, module: Module | None, ev: ModelEval | None, syntax: list,
                 limit: limits.LimitExceeded | None = None):
        self.module, self.ev, self.syntax, self.limit = module, ev, syntax, limit


def _schema(schema) -> ProviderSchema | None:
    if schema is None:
        p = default_schema_path()
        return load_schema(p) if p else None
    return load_schema(schema)


def analyze(files: dict, schema=None, variables: dict | None = None,
            base_dir: str | None = None) -> Analysis:
    """Parse and evaluate a configuration within the ceilings of limits.py.

    Args:
        files: {file name: text}; *.tf files are read.
        schema: a ProviderSchema or schema path (default: the shipped AWS one).
        variables: input variable values.
        base_dir: the directory file() and local modules are read from.
    """
    return _bounded(files, _schema(schema), variables, base_dir)


def ceiling_errors(files: dict, variables: dict | None = None, base_dir: str | None = None) -> tuple[str, list]:
    """(stage, [LIMIT errors]) of a configuration against limits.py, no schema needed: what the
    terraform backend checks before terraform runs (stage PASS and [] when within them; other
    findings are terraform's to report).

    Args:
        files: {file name: text}.
        variables: input variable values.
        base_dir: the configuration's directory (its local modules' depth is checked).
    """
    a = _bounded(files, None, variables, base_dir)
    if a.limit is not None:
        return a.limit.stage, [VerifierError(T.LIMIT, a.limit.text, None)]
    found = [f for f in (a.ev.findings if a.ev else []) if f.cls == T.LIMIT]
    if not found:
        return T.PASS, []
    return found[0].stage, [VerifierError(f.cls, f.text(), f.address) for f in found]


def _bounded(files, schema, variables, base_dir) -> Analysis:
    try:
        with limits.budget():
            return _analyze(files, schema, variables, base_dir)
    except limits.LimitExceeded as e:
        return Analysis(None, None, [], e)
    except RecursionError:  # nesting the text scan does not see (a long operator chain)
        return Analysis(None, None, [], limits.LimitExceeded(limits.message(
            "the configuration's expression depth", "deeper than the parser's stack",
            limits.MAX_NESTING)))


def _analyze(files, schema, variables, base_dir) -> Analysis:
    tf = {n: t for n, t in files.items() if n.endswith((".tf", ".tf.json")) or "." not in os.path.basename(n)}
    limits.check_text(tf)
    bodies, syntax = {}, []
    for name, text in tf.items():
        try:  # terraform reads *.tf.json too; a UTF-8 BOM is allowed
            text = text[1:] if text.startswith("\ufeff") else text
            bodies[name] = parse_json_body(text, name, schema) if name.endswith(".tf.json") else parse_body(text, name)
        except HclSyntaxError as e:
            syntax.append(e)
    if syntax:
        return Analysis(None, None, syntax)
    blocks = sum(len(b.blocks) for b in bodies.values())
    if blocks > limits.MAX_BLOCKS:
        raise limits.LimitExceeded(limits.message("the number of top-level blocks", blocks, limits.MAX_BLOCKS))
    module = build_module(bodies)
    ev = ModelEval(module, schema, variables, base_dir)
    ev.counts["bytes"], ev.counts["blocks"] = sum(len(t) for t in tf.values()), blocks
    _check_module(ev)
    ev.evaluate_all()  # module instances too
    ev.output_values()
    if not any(f.cls == T.CYCLE for f in ev.findings):  # terraform reports a cycle alone
        ev.findings = reported_by_walk(ev.findings, ev.graph, VALIDATE, M.config_path)
    return Analysis(module, ev, [])


def _check_module(ev: ModelEval) -> None:
    """What terraform validate checks in a module before evaluating it, then the same in every
    module it calls that can be read (_hcl_modules), their findings under the module's address."""
    for cls, msg, addr, fname, line in ev.m.problems:
        ev.add(VALIDATE, cls, msg, addr, fname, line)
    M.load_children(ev)
    _check_names(ev)
    _check_schema(ev)
    check_references(ev)
    g = dependency_graph(ev.m, ev.block_schema)
    _check_cycles(ev, g)
    M.check_calls(ev)
    ev.sink.graph.update({ev.qualify(n): {ev.qualify(d) for d in ds} for n, ds in g.items()})
    for child in ev.children.values():  # a module's variable waits on what its argument references
        for arg in child.call.body.attributes.values():
            if arg.name not in M.CALL_META:
                b = Body()
                b.attributes[arg.name] = arg
                ev.sink.graph[ev.qualify(f"module.{child.name}.var.{arg.name}")] = {ev.qualify(d) for d in body_deps(b)}
    for child in ev.children.values():
        child.static = ModelEval(child.module, ev.schema, None, child.dir, parent=ev,
                                 prefix=ev.qualify(f"module.{child.name}"))
        _check_module(child.static)
    if ev.sink is not ev:
        ev.sink.unchecked += [(ev.qualify(a), why) for a, why in ev.unchecked]


def check(files: dict, schema=None, variables: dict | None = None, base_dir: str | None = None):
    """-> (stage, [VerifierError], [warning str]). files: {filename: HCL text}."""
    return check_analysis(analyze(files, schema, variables, base_dir))


def check_analysis(a: Analysis):
    """check() on an analysis already made (the verifier hands the same one to synthesize_plan)."""
    if a.limit is not None:
        return a.limit.stage, [VerifierError(T.LIMIT, a.limit.text, None)], []
    if a.syntax:
        return T.VALIDATE_FAIL, [VerifierError(T.SYNTAX, f"{e.summary} (on {e.filename} line "
                                               f"{e.line})", None) for e in a.syntax], []
    ev = a.ev
    for stage in (VALIDATE, PLAN):
        found = [f for f in ev.findings if f.stage == stage]
        if found:
            return stage, [VerifierError(f.cls, f.text(), f.address) for f in found], ev.warnings
    if ev.unchecked:  # nothing failed, but not everything was observed: no verdict
        return T.INCONCLUSIVE, [VerifierError(T.NOT_CHECKED, why, addr) for addr, why in ev.unchecked], ev.warnings
    return T.PASS, [], ev.warnings


def check_dir(path, schema=None, variables=None):
    """check() on every *.tf in a directory (or one file); file() reads relative to it."""
    from verifirst.verifiers.terraform.confine import check_references, read_inside

    p = Path(path)
    if p.is_file():
        files = {p.name: read_inside(p, p.absolute().parent)}
        check_references(files)
        return check(files, schema, variables, str(p.parent))
    files = {f.name: read_inside(f, p) for f in sorted([*p.glob("*.tf"), *p.glob("*.tf.json")])}  # a link out: refused
    check_references(files)
    return check(files, schema, variables, str(p))


def feedback(stage: str, errors: list, warnings: list) -> str:
    """Plain text for a repair loop."""
    if stage == T.PASS:
        lines = ["terraform validate and plan succeeded."]
    elif stage == T.INCONCLUSIVE:
        lines = ["INCONCLUSIVE: part of the configuration could not be checked, and nothing else failed"]
        lines += [f"Not checked: {e.message}" for e in errors]
    else:
        lines = [f"{stage}: {len(errors)} error(s)"]
        lines += [f"Error [{e.cls}]{' at ' + e.address if e.address else ''}: {e.message}"
                  for e in errors]
    lines += [f"Warning: {w}" for w in warnings]
    return "\n".join(lines)


def cli_check(path: str, schema: str | None = None, as_json: bool = False) -> int:
    """CLI hook: prints the verdict; exit 0 on PASS, 1 on a failing stage, 3 INCONCLUSIVE."""
    t0 = time.perf_counter()
    stage, errors, warnings = check_dir(path, schema)
    ms = (time.perf_counter() - t0) * 1000
    if as_json:
        print(json.dumps({"stage": stage, "backend": "python",
                          "errors": [e.as_dict() for e in errors], "warnings": warnings,
                          "feedback": feedback(stage, errors, warnings),
                          "timings": {"total_ms": round(ms, 2)}}, indent=2))
    else:
        print(feedback(stage, errors, warnings))
    return 0 if stage == T.PASS else 3 if stage == T.INCONCLUSIVE else 1


# --- schema conformance ---------------------------------------------------------------------
def _check_schema(ev: ModelEval):
    schema = ev.schema
    if schema is None:
        ev.warn("no provider schema given: arguments and resource types not checked")
        ev.unchecked += [(d.address, "no provider schema given; not checked") for d in ev.m.resources]
        return
    required = _required(ev.m)
    for decl in ev.m.resources:
        bs = ev.block_schema(decl)
        where = f'in {"resource" if decl.mode == "managed" else "data"} "{decl.type}" "{decl.name}"'
        ptype = _provider_of(decl, required)
        if ptype not in ev.provider_names:  # no schema of its provider here: not checked, never passed
            ev.unchecked.append((decl.address, f'provider "{ptype}" has no schema here ({_have(ev)}); this '
                                 f"{'resource' if decl.mode == 'managed' else 'data source'} was not checked. "
                                 + NO_SCHEMA_FIX))
            continue
        if bs is None:
            prov = schema.provider_address(decl.mode, decl.type).split("/", 1)[-1]
            options = schema.resource_types() if decl.mode == "managed" else schema.data_source_types()
            if decl.mode == "managed":
                msg = (f'Invalid resource type: The provider {prov} does not support resource type '
                       f'"{decl.type}".')
            else:
                msg = f'Invalid data source: The provider {prov} does not support data source "{decl.type}".'
            ev.add(VALIDATE, T.INVALID_RESOURCE_TYPE, msg + _suggest(decl.type, options),
                   decl.address, decl.file, decl.line)
            continue
        if bs.get("deprecated"):
            ev.warn(f'Deprecated resource: The {"resource" if decl.mode == "managed" else "data source"}'
                    f' type "{decl.type}" is deprecated ({decl.address}). Refer to the provider '
                    "documentation for its replacement.")
        _check_body(ev, decl.body, bs, decl.address, decl.file, where, top=True)
    for p in ev.m.providers:
        name = tf_schema.provider_type(p.labels[0], required) if p.labels else ""
        if name not in ev.provider_names:
            ev.unchecked.append((f"provider.{name}", f'provider "{name}" has no schema here ({_have(ev)}); its '
                                 "configuration was not checked. " + NO_SCHEMA_FIX))
            continue
        bs = schema.provider_config(name) or {"attributes": {}}
        body = p.body
        extra = {"alias", "version"}
        before = len(ev.findings)
        _check_body(ev, body, bs, f"provider.{name}", None, f'in provider "{name}"', top=False,
                    skip=extra)
        for f in ev.findings[before:]:  # terraform finds a provider block's missing parts at plan
            if f.cls in (T.BLOCK_COUNT, T.MISSING_REQUIRED):
                f.stage = PLAN


_RESERVED_VARIABLES = {"source", "version", "providers", "count", "for_each", "lifecycle", "depends_on", "locals"}
_NAME_RULE = "A name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes."


def valid_name(name: str) -> bool:
    """terraform's identifier rule (hclsyntax.ValidIdentifier): Unicode letters allowed."""
    return bool(name) and name[0] != "-" and name.replace("-", "_").isidentifier()


def _check_names(ev: ModelEval) -> None:
    """Names terraform refuses, with its messages: block names that are no identifier, reserved
    variable names, version constraints that are no constraint."""
    m = ev.m
    named = [("resource" if r.mode == "managed" else "data source", r.name, r.address, r.file, r.line)
             for r in m.resources]
    named += [(kind, n, f"{pre}.{n}", m.where.get(f"{pre}.{n}"), b.line) for kind, pre, blocks in (
        ("variable", "var", m.variables), ("output", "output", m.outputs), ("module", "module", m.module_calls))
        for n, b in blocks.items()]
    for kind, name, address, file, line in named:
        if not valid_name(name):
            ev.add(VALIDATE, T.OTHER, f"Invalid {kind} name: {_NAME_RULE}", address, file, line)
        elif kind == "variable" and name in _RESERVED_VARIABLES:
            ev.add(VALIDATE, T.OTHER, f'Invalid variable name: The variable name "{name}" is reserved due to its '
                   "special meaning inside module blocks.", address, file, line)
    for local, entry in _required(m).items():
        c = entry.get("version")
        if c is not None and not tf_schema.constraint_is_valid(c):
            ev.add(VALIDATE, T.OTHER, f'Invalid version constraint: This string does not use correct version '
                   f'constraint syntax ("{c}" for provider {local}).', f"terraform.required_providers.{local}")


NO_SCHEMA_FIX = ("Fix: use a provider the verifier ships a schema for (`verifirst schema list`), or give --schema "
                 "(verifier option schema) a `terraform providers schema -json` output that includes this one.")


def _required(m: Module) -> dict:
    """{local name: {"source", "version"}} of the module's required_providers (literal values)."""
    out: dict = {}
    for t in m.terraform:
        for rp in t.body.blocks_of("required_providers"):
            for local, attr in rp.body.attributes.items():
                entry = out.setdefault(local, {})
                for k, v in getattr(attr.expr, "items", None) or []:
                    key, value = M.literal(k) or getattr(k, "name", None), M.literal(v)
                    if key in ("source", "version") and value is not None:
                        entry[key] = value
    return out


def _provider_of(decl, required: dict) -> str:
    """The provider type a resource or data source belongs to: its `provider =` local name (or
    its type's prefix) through required_providers' source."""
    local = decl.type.split("_", 1)[0]
    arg = decl.body.attributes.get("provider")
    if arg is not None:
        node = arg.expr
        while hasattr(node, "obj"):  # google.west -> google
            node = node.obj
        local = getattr(node, "name", None) or local
    return tf_schema.provider_type(local, required)


def _have(ev: ModelEval) -> str:
    return "schemas: " + (", ".join(sorted(ev.provider_names)) or "none")


def _obj_attrs_schema(ty):
    return {"attributes": {k: {"type": t, "optional": True} for k, t in ty[1][1].items()}}


def _is_obj_collection(a):
    ty = a.get("type")
    return isinstance(ty, list) and ty[0] in ("list", "set") and isinstance(ty[1], list) \
        and ty[1][0] == "object"


def _check_body(ev, body, bs, address, file, where, top=False, skip=frozenset()):
    attrs = bs.get("attributes", {}) or {}
    btypes = bs.get("block_types", {}) or {}
    for name, a in body.attributes.items():
        if (top and name in META_ARGS) or name in skip:
            continue
        sch = attrs.get(name)
        if sch is None:
            if name in btypes:
                msg = (f'Unsupported argument: An argument named "{name}" is not expected here. '
                       f'Did you mean to define a block of type "{name}"?')
            else:
                msg = (f'Unsupported argument: An argument named "{name}" is not expected here.'
                       + _suggest(name, list(attrs)))
            ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, msg, address, file, a.line)
            continue
        if sch.get("computed") and not sch.get("optional") and not sch.get("required"):
            ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, f'Value for unconfigurable attribute: '
                   f'Can\'t configure a value for "{name}": its value will be decided automatically '
                   "based on the result of applying this configuration.", address, file, a.line)
        if sch.get("deprecated"):
            ev.warn(f'Deprecated attribute: The attribute "{name}" is deprecated ({address}). Refer '
                    "to the provider documentation for details.")
    counts: dict[str, int] = {}
    dynamic_types = set()
    for blk in body.blocks:
        t = blk.type
        if top and t in ("lifecycle", "provisioner", "connection"):
            continue
        if t == "dynamic":
            label = blk.labels[0] if blk.labels else ""
            dynamic_types.add(label)
            content = blk.body.blocks_of("content")
            inner = None
            if label in btypes:
                inner = btypes[label].get("block", {})
            elif label in attrs and _is_obj_collection(attrs[label]):
                inner = _obj_attrs_schema(attrs[label]["type"])
            else:
                ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, f'Unsupported block type: Blocks of type '
                       f'"{label}" are not expected here.' + _suggest(label, list(btypes)),
                       address, file, blk.line)
                continue
            for c in content:
                _check_body(ev, c.body, inner, address, file, where)
            continue
        if t in btypes:
            counts[t] = counts.get(t, 0) + 1
            inner = btypes[t].get("block", {})
            if inner.get("deprecated"):
                ev.warn(f'Deprecated block: The block "{t}" is deprecated ({address}). Refer to '
                        "the provider documentation for details.")
            _check_body(ev, blk.body, inner, address, file, where)
        elif t in attrs and _is_obj_collection(attrs[t]):
            if attrs[t].get("computed") and not attrs[t].get("optional"):
                ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, f'Value for unconfigurable attribute: '
                       f'Can\'t configure a value for "{t}": its value will be decided '
                       "automatically based on the result of applying this configuration.",
                       address, file, blk.line)
                continue
            _check_body(ev, blk.body, _obj_attrs_schema(attrs[t]["type"]), address, file, where)
        elif t in attrs:
            ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, f'Unsupported block type: Blocks of type '
                   f'"{t}" are not expected here. Did you mean to define argument "{t}"? If so, '
                   "use the equals sign to assign it a value.", address, file, blk.line)
        else:
            ev.add(VALIDATE, T.SELF_DEFINED_PROPERTY, f'Unsupported block type: Blocks of type '
                   f'"{t}" are not expected here.' + _suggest(t, list(btypes)), address, file,
                   blk.line)
    for name, a in attrs.items():
        if a.get("required") and name not in body.attributes and not body.blocks_of(name) \
                and name not in dynamic_types:
            ev.add(VALIDATE, T.MISSING_REQUIRED, f'Missing required argument: The argument '
                   f'"{name}" is required, but no definition was found.', address, file,
                   _first_line(body))
    for name, bt in btypes.items():
        if name in dynamic_types:
            continue
        n = counts.get(name, 0)
        mode = bt.get("nesting_mode")
        lo, hi = bt.get("min_items", 0) or 0, bt.get("max_items", 0) or 0
        if mode in ("single", "group"):
            hi = 1
        if n < lo:
            ev.add(VALIDATE, T.BLOCK_COUNT, f'Insufficient {name} blocks: At least {lo} "{name}" '
                   f'block{"s are" if lo > 1 else " is"} required.', address, file, _first_line(body))
        if hi and n > hi:
            msg = (f'Duplicate {name} block: Only one {name} block is allowed. Another was defined '
                   "earlier." if mode in ("single", "group") else
                   f'Too many {name} blocks: No more than {hi} "{name}" blocks are allowed.')
            line = [b.line for b in body.blocks_of(name)][hi]
            ev.add(VALIDATE, T.BLOCK_COUNT, msg, address, file, line)


def _first_line(body):
    lines = [a.line for a in body.attributes.values()] + [b.line for b in body.blocks]
    return min(lines) - 1 if lines else None


# --- dependency graph -------------------------------------------------------------------------
def body_deps(body) -> set:
    """The nodes a body's expressions reference: resources by base address, local.x, var.x,
    module.x, and module.x.output.y for an output read (the module's own graph holds that node).

    Args:
        body: an _hcl_ast.Body.
    """
    from verifirst.verifiers.terraform._hcl_refs import _body_exprs
    out = set()
    for expr, _line, dyn in _body_exprs(body):
        for root, steps, line in raw_traversals(expr, frozenset(dyn)):
            try:
                kind, subject, extra, _rem = parse_ref(root, steps, line)
            except RefError:
                continue
            if kind in ("managed", "data", "module"):
                out.add(extra[0])
            elif kind == "module_output":
                out |= {extra[0], f"{extra[0]}.output.{subject.rsplit('.', 1)[-1]}"}
            elif kind in ("local", "var"):
                out.add(subject)
    return out


def dependency_graph(m: Module, block_schema=None) -> dict[str, set]:
    """node -> nodes it references (resources by base address, local.x, var.x, module.x); with
    block_schema (a resource declaration -> its block schema), only what the schema declares."""
    from verifirst.verifiers.terraform._hcl_refs import schema_body
    g: dict[str, set] = {}
    deps = body_deps
    for r in m.resources:
        g[r.address] = deps(schema_body(r.body, block_schema(r) if block_schema else None))
    for name, a in m.locals.items():
        b = Body()
        b.attributes[name] = a
        g[f"local.{name}"] = deps(b)
    for name, blk in m.module_calls.items():
        g[f"module.{name}"] = deps(blk.body)
    for name, blk in m.outputs.items():
        g[f"output.{name}"] = deps(blk.body)
    return g


def _check_cycles(ev: ModelEval, g: dict):
    for node, ds in g.items():
        if node in ds:
            decl = ev.decls.get(node)
            ev.add(VALIDATE, T.CYCLE, f"Self-referential block: Configuration for {node} may not "
                   "refer to itself.", node, decl.file if decl else None, decl.line if decl else None)
    for comp in _sccs(g):
        if len(comp) > 1:
            decl = ev.decls.get(comp[0])
            ev.add(VALIDATE, T.CYCLE, "Cycle: " + ", ".join(comp), comp[0],
                   decl.file if decl else None, decl.line if decl else None)


def _sccs(g):
    """Tarjan, iterative; components sorted for stable messages."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


if __name__ == "__main__":  # python -m verifirst.verifiers.terraform.hcl_check DIR [--json]
    sys.exit(cli_check(sys.argv[1], None, "--json" in sys.argv))
