"""Modules for the python backend, read and expanded as terraform does.

A module call whose source is a local directory ("./x", "../x", relative to the calling
module), or a registry / git module vendored under the root's `.terraform/modules` (listed in
its modules.json, as `terraform init` leaves it), is read: its files are parsed (file names
relative to the root, e.g. modules/net/main.tf), its body is checked like the root's (schema,
names, references, cycles) once per module, and it is evaluated once per instance of the call
(`count` / `for_each`), its input variables typed, defaulted and validated, its outputs giving
`module.<name>.<output>`. What cannot be read (a registry or remote module not vendored) leaves
its resources unchecked: INCONCLUSIVE, the reason named. Ceilings (limits.py) hold across all
modules together: configuration size, top-level blocks, instances (resources, data sources and
module instances), nesting of module calls (MAX_MODULE_DEPTH).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_config import Module, build_module
from verifirst.verifiers.terraform._hcl_eval import UNKNOWN, EvalError, Scope, evaluate, has_unknown
from verifirst.verifiers.terraform._hcl_types import convert

VALIDATE, PLAN = "VALIDATE_FAIL", "PLAN_FAIL"
CALL_META = {"source", "version", "count", "for_each", "depends_on", "providers"}
_LOCAL_SOURCE_RE = re.compile(r'^\s*"?source"?\s*[=:]\s*"(\.\.?/[^"\n]*)"', re.M)
_CYCLE = 10 ** 6  # the depth given to module calls that loop
_KEY_RE = re.compile(r"(module\.[^.\[\]]+)\[[^\]]*\]")


@dataclass
class Child:
    """A module call this backend reads: its block, where the module lives, its parsed body."""
    name: str
    call: A.Block
    call_file: str | None
    source: str
    dir: str  # absolute
    module: Module
    static: object = None  # the ModelEval its body is checked with (once per module call)


def config_path(address: str | None) -> str | None:
    """An address with its module instance keys removed (module.a[0].x -> module.a.x)."""
    return _KEY_RE.sub(r"\1", address) if address and "[" in address else address


def literal(expr) -> str | None:
    """A quoted string without interpolation, else None."""
    parts = getattr(expr, "parts", None)
    if parts is not None and all(isinstance(x, str) for x in parts):
        return "".join(parts)
    value = getattr(expr, "value", None)
    return value if isinstance(value, str) else None


def is_local(source: str) -> bool:
    return source.startswith(("./", "../"))


# --- reading modules ---------------------------------------------------------------------------
def _manifest(root: str) -> dict:
    """{module key ("net", "net.sub"): (source, directory)} of a vendored .terraform/modules tree."""
    p = Path(root, ".terraform", "modules", "modules.json")
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
    except (OSError, ValueError):
        return {}
    out = {}
    for rec in (doc.get("Modules") or []) if isinstance(doc, dict) else []:
        if isinstance(rec, dict) and rec.get("Key") and isinstance(rec.get("Dir"), str):
            out[rec["Key"]] = (str(rec.get("Source") or ""), os.path.join(root, rec["Dir"]))
    return out


def _same_source(a: str, b: str) -> bool:
    strip = "registry.terraform.io/"
    return a.removeprefix(strip).rstrip("/") == b.removeprefix(strip).rstrip("/")


def _inside(path: str, root: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def read_module(directory: str, root: str) -> dict[str, str]:
    """{file name relative to root: text} of a module directory's *.tf and *.tf.json files
    (regular files inside root only: a link out of the configuration is not read)."""
    out = {}
    for f in sorted([*Path(directory).glob("*.tf"), *Path(directory).glob("*.tf.json")]):
        if f.is_file() and not f.is_symlink() and _inside(str(f), root):
            out[os.path.relpath(f, root)] = f.read_text(encoding="utf-8", errors="replace")
    return out


_PARSED: dict = {}  # (file name, text) -> parsed body: a module library's files parse once per process
_PARSED_MAX, _PARSED_MAX_TEXT = 512, 256_000


def _parse(files: dict, schema) -> tuple[dict, list]:
    """Parse a module's files; an HCL file's parse is kept (bodies are never changed after parsing)."""
    from verifirst.verifiers.terraform._hcl_ast import HclSyntaxError, parse_body
    from verifirst.verifiers.terraform._hcl_json import parse_json_body
    bodies, errors = {}, []
    for name, text in files.items():
        text = text[1:] if text.startswith("\ufeff") else text
        if name.endswith(".tf.json"):  # its parse depends on the schema
            try:
                bodies[name] = parse_json_body(text, name, schema)
            except HclSyntaxError as e:
                errors.append(e)
            continue
        hit = _PARSED.get((name, text))
        if hit is None:
            try:
                hit = parse_body(text, name)
            except HclSyntaxError as e:
                errors.append(e)
                continue
            if len(text) <= _PARSED_MAX_TEXT:
                if len(_PARSED) >= _PARSED_MAX:
                    _PARSED.pop(next(iter(_PARSED)))
                _PARSED[(name, text)] = hit
        bodies[name] = hit
    return bodies, errors


def _source_dir(ev, name: str, src: str) -> tuple[str | None, str | None]:
    """(module directory, None) or (None, why it cannot be read)."""
    if is_local(src):
        d = os.path.join(ev.module_dir, src) if ev.module_dir else None
        if d is not None and ev.root_dir and not _inside(d, ev.root_dir):  # read nothing from the host
            return None, (f'module "{name}": the local module "{src}" lies outside the configuration\'s '
                          "directory and was not read; its resources were not checked")
        if d is None or not os.path.isdir(d):
            return None, "missing"
        return d, None
    key = ".".join([*ev.key_path, name])
    rec = _manifest(ev.root_dir).get(key) if ev.root_dir else None
    if rec and _same_source(rec[0], src) and os.path.isdir(rec[1]) and _inside(rec[1], ev.root_dir):
        return rec[1], None
    why = (f'module "{name}": source "{src}" is a registry or remote module, not vendored here (no '
           f'.terraform/modules/modules.json entry "{key}" for it); its resources were not checked')
    if rec:
        why = (f'module "{name}": the vendored module "{key}" was installed from "{rec[0]}", not "{src}" '
               "(run terraform init again); its resources were not checked")
    return None, why


def load_children(ev) -> None:
    """Read the modules ev's module calls name into ev.children; a call that cannot be read is a
    finding (a local source that is no directory: terraform cannot install it; past the depth
    ceiling: LIMIT) or an unchecked part (a registry module not vendored)."""
    for name, blk in ev.m.module_calls.items():
        attr = blk.body.attributes.get("source")
        src = literal(attr.expr) if attr else None
        fname = ev.m.where.get(f"module.{name}")
        if not src:
            continue
        d, why = _source_dir(ev, name, src)
        if d is None and why != "missing":
            ev.unchecked.append((f"module.{name}", why))
            continue
        if d is None:
            ev.add(VALIDATE, "OTHER", f'Module not installed: the local module source "{src}" of module '
                   f'"{name}" is not a directory here; terraform init cannot install it.',
                   f"module.{name}", fname, blk.line)
            continue
        depth = ev.depth + module_depth(d, os.path.realpath(ev.root_dir))
        if depth > limits.MAX_MODULE_DEPTH:
            ev.add(VALIDATE, limits.LIMIT, f"{limits.SUMMARY}: " + limits.message(
                f'the nesting of local module calls below module "{name}"',
                "a cycle" if depth >= _CYCLE else depth, limits.MAX_MODULE_DEPTH,
                "" if depth >= _CYCLE else "levels"), f"module.{name}", fname, blk.line)
            continue
        files = read_module(d, ev.root_dir)
        ev.counts["bytes"] += sum(len(t) for t in files.values())
        if ev.counts["bytes"] > limits.MAX_CONFIG_BYTES:
            raise limits.LimitExceeded(limits.message("the configuration's size with its modules",
                                                      ev.counts["bytes"], limits.MAX_CONFIG_BYTES, "characters"))
        limits.check_text(files)
        bodies, syntax = _parse(files, ev.schema)
        for e in syntax:
            ev.add(VALIDATE, "SYNTAX", e.summary, f"module.{name}", e.filename, e.line)
        ev.counts["blocks"] += sum(len(b.blocks) for b in bodies.values())
        if ev.counts["blocks"] > limits.MAX_BLOCKS:
            raise limits.LimitExceeded(limits.message("the number of top-level blocks with its modules",
                                                      ev.counts["blocks"], limits.MAX_BLOCKS))
        if not files:
            ev.add(VALIDATE, "OTHER", f'Module not installed: the module directory "{src}" of module "{name}" '
                   "holds no .tf files.", f"module.{name}", fname, blk.line)
            continue
        ev.children[name] = Child(name, blk, fname, src, d, build_module(bodies))


def module_depth(directory: str, root: str, _memo: dict | None = None, _stack: set | None = None) -> int:
    """How many levels of local module calls a module directory holds (1: none below it); a loop
    counts as deeper than any ceiling. Only directories inside root are read.

    Args:
        directory: the module's directory.
        root: the configuration's directory (realpath); sources leaving it are not followed.
    """
    memo, stack = (_memo if _memo is not None else {}), (_stack if _stack is not None else set())
    d = os.path.realpath(directory)
    if d in stack:
        return _CYCLE
    if d in memo:
        return memo[d]
    stack.add(d)
    deepest = 1
    for f in sorted([*Path(d).glob("*.tf"), *Path(d).glob("*.tf.json")]):
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for src in _LOCAL_SOURCE_RE.findall(text):
            sub = os.path.realpath(os.path.join(d, src))
            if (sub == root or sub.startswith(root + os.sep)) and os.path.isdir(sub):
                deepest = max(deepest, 1 + module_depth(sub, root, memo, stack))
            if deepest > limits.MAX_MODULE_DEPTH:
                break
    stack.discard(d)
    memo[d] = deepest
    return deepest


def module_files(files: dict, base_dir: str | None) -> dict[str, str]:
    """The files of every local or vendored module a configuration calls, nested ones too (file
    names relative to base_dir), within the depth ceiling: what picks the schemas it needs."""
    if not base_dir:
        return {}
    root, out, seen = os.path.realpath(base_dir), {}, set()
    manifest = _manifest(base_dir)
    todo = [(base_dir, files, 0)]
    while todo:
        d, texts, depth = todo.pop()
        if depth >= limits.MAX_MODULE_DEPTH:
            continue
        subs = {os.path.join(d, s) for t in texts.values() if isinstance(t, str) for s in _LOCAL_SOURCE_RE.findall(t)}
        if depth == 0:
            subs |= {rec[1] for rec in manifest.values()}
        for sub in sorted(subs):
            real = os.path.realpath(sub)
            if real in seen or not os.path.isdir(sub) or not _inside(sub, root):
                continue
            seen.add(real)
            got = read_module(sub, base_dir)
            out.update(got)
            todo.append((sub, got, depth + 1))
    return out


# --- module calls ------------------------------------------------------------------------------
def check_calls(ev) -> None:
    """A call's arguments against its module's variables, as terraform validate checks them: an
    argument no variable declares, a required variable (no default) given no value."""
    for name, child in ev.children.items():
        body, fname = child.call.body, child.call_file
        for a in body.attributes.values():
            if a.name not in CALL_META and a.name not in child.module.variables:
                ev.add(VALIDATE, "SELF_DEFINED_PROPERTY", f'Unsupported argument: An argument named "{a.name}" '
                       f'is not expected here.{_near(a.name, child.module.variables)}', f"module.{name}", fname, a.line)
        for b in body.blocks:
            ev.add(VALIDATE, "SELF_DEFINED_PROPERTY", f'Unsupported block type: Blocks of type "{b.type}" are '
                   "not expected here.", f"module.{name}", fname, b.line)
        for var, blk in child.module.variables.items():
            if var not in body.attributes and "default" not in blk.body.attributes:
                ev.add(VALIDATE, "MISSING_REQUIRED", f'Missing required argument: The argument "{var}" is '
                       "required, but no definition was found.", f"module.{name}", fname, child.call.line)


def _near(name, options) -> str:
    from verifirst.verifiers.terraform._hcl_refs import _suggest
    return _suggest(name, options)


def known_at_validate(expr) -> bool:
    """Whether terraform validate knows an expression's value: it reads only locals, path and
    terraform (validate gives every input variable, root or module, an unknown value of its type;
    resources, count and each are unknown too)."""
    from verifirst.verifiers.terraform._hcl_config import raw_traversals
    return all(root in ("local", "path", "terraform") for root, _steps, _line in raw_traversals(expr))


def module_value(ev, name: str):
    """The value of `module.<name>` in ev: its outputs (a list of them under count, a map under
    for_each); UNKNOWN when the module was not read. Instances are evaluated once."""
    if name in ev.module_values:
        return ev.module_values[name]
    child = ev.children.get(name)
    if child is None or ev.depth >= limits.MAX_MODULE_DEPTH:
        ev.module_values[name] = UNKNOWN
        return UNKNOWN
    ev.module_values[name] = UNKNOWN  # a call reaching itself through its arguments sees UNKNOWN
    body, address, fname = child.call.body, f"module.{name}", child.call_file
    scope = Scope(ev.resolve, ev.base_dir)
    count_a, each_a = body.attributes.get("count"), body.attributes.get("for_each")
    keys: list = [None]
    if count_a is not None:
        n = ev._safe_eval(count_a.expr, scope, address, fname, count_a.line)
        if n is UNKNOWN:
            return _unknown_count(ev, address, fname, count_a.line, "count")
        try:
            n = int(convert(n, "number"))
        except (EvalError, TypeError):
            ev.add(PLAN, "TYPE", 'Invalid count argument: The given "count" argument value is unsuitable: a '
                   "number is required.", address, fname, count_a.line)
            n = 0
        keys = list(range(max(n, 0)))
    elif each_a is not None:
        fe = ev._safe_eval(each_a.expr, scope, address, fname, each_a.line)
        if fe is UNKNOWN or isinstance(fe, list) and has_unknown(fe):
            return _unknown_count(ev, address, fname, each_a.line, "for_each")
        if isinstance(fe, dict):
            keys = sorted(fe.items())
        elif isinstance(fe, list) and all(isinstance(x, str) for x in fe):
            keys = [(k, k) for k in sorted(set(fe))]
        else:
            ev.add(PLAN, "TYPE", 'Invalid for_each argument: The given "for_each" argument value is unsuitable: '
                   'the "for_each" argument must be a map, or set of strings.', address, fname, each_a.line)
            keys = []
    if not ev.within_ceiling(address, fname, (count_a or each_a or child.call).line,
                             "count" if count_a else "for_each", len(keys) if (count_a or each_a) else 1):
        keys = []
    outs = []
    for k in keys:
        if count_a is not None:
            s, inst, key = scope.child({"count": {"index": k}}), f"{address}[{k}]", k
        elif each_a is not None:
            s, inst, key = scope.child({"each": {"key": k[0], "value": k[1]}}), f'{address}["{k[0]}"]', k[0]
        else:
            s, inst, key = scope, address, None
        iev = _instance(ev, child, s, ev.qualify(inst))
        ev.module_instances.setdefault(name, []).append((inst, key, iev))
        outs.append((key, iev.output_values()))
    if count_a is not None:
        value = [o for _, o in outs]
    elif each_a is not None:
        value = {k: o for k, o in outs}
    else:
        value = outs[0][1] if outs else UNKNOWN
    ev.module_values[name] = value
    return value


def _unknown_count(ev, address, file, line, what: str):
    """terraform plan's error for a module call whose count / for_each depends on a value known
    only after apply (the call's value stays UNKNOWN)."""
    ev.add(PLAN, "OTHER", f"Invalid {what} argument: The \"{what}\" value depends on resource attributes that "
           "cannot be determined until apply, so Terraform cannot predict how many instances will be created.",
           address, file, line)
    return UNKNOWN


def _instance(ev, child: Child, scope, address: str):
    """A ModelEval for one instance of a module call, its inputs evaluated in the caller."""
    inputs, known, where = {}, set(), {}
    for a in child.call.body.attributes.values():
        if a.name in CALL_META:
            continue
        inputs[a.name] = ev._safe_eval(a.expr, scope, f"module.{child.name}", child.call_file, a.line)
        if known_at_validate(a.expr):  # a module's variable is checked at validate against it
            known.add(a.name)
        where[a.name] = (child.call_file, a.line)
    known |= {v for v, b in child.module.variables.items() if v not in inputs and "default" in b.body.attributes}
    iev = type(ev)(child.module, ev.schema, inputs, child.dir, parent=ev, prefix=address,
                   validate_vars=known, input_where=where)
    iev.children = child.static.children if child.static is not None else {}
    iev.evaluate_all()
    return iev


# --- input variables ---------------------------------------------------------------------------
_PRIMITIVES = {"string": "string", "number": "number", "bool": "bool", "any": "dynamic"}


def type_constraint(expr):
    """A variable's `type` as a schema type ("string", ["list", "string"], ["object", {...}, [optional]]);
    None when it is no type expression this backend reads (then values are not converted)."""
    t = type(expr)
    if t is A.Var:
        return _PRIMITIVES.get(expr.name)
    if t is A.Template and len(expr.parts) == 1 and not isinstance(expr.parts[0], str):
        return type_constraint(expr.parts[0])
    if t is not A.Call or not expr.args:
        return None
    name, arg = expr.name, expr.args[0]
    if name in ("list", "set", "map"):
        inner = type_constraint(arg)
        return None if inner is None else [name, inner]
    if name == "tuple" and type(arg) is A.TupleCons:
        items = [type_constraint(x) for x in arg.items]
        return None if None in items else ["tuple", items]
    if name == "object" and type(arg) is A.ObjectCons:
        attrs, optional = {}, []
        for k, v in arg.items:
            key = getattr(k, "name", None) or literal(k)
            if type(v) is A.Call and v.name == "optional" and v.args:
                optional.append(key)
                v = v.args[0]
            ty = type_constraint(v)
            if key is None or ty is None:
                return None
            attrs[key] = ty
        return ["object", attrs, optional]
    return None


def typed_input(ev, name: str, blk: A.Block, value, given: bool):
    """A module variable's value converted to its declared type; a value that does not convert is
    terraform's "Invalid value for input variable" at the call's argument (TYPE)."""
    ta = blk.body.attributes.get("type")
    ty = type_constraint(ta.expr) if ta is not None else None
    if ty is None or value is UNKNOWN:
        return value
    try:
        return convert(value, ty)
    except EvalError as e:
        file, line = ev.input_where.get(name, (ev.m.where.get(f"var.{name}"), blk.line)) if given else \
            (ev.m.where.get(f"var.{name}"), blk.line)
        what = "Invalid value for input variable" if given else "Invalid default value for variable"
        # validate knows a literal argument, and an argument's shape (a list for a string) whatever its values
        ev.add(VALIDATE if name in ev.validate_vars or _shape_differs(value, ty) else PLAN, "TYPE",
               f"{what}: The given value is not suitable for {ev.prefix}.var.{name} declared at "
               f"{ev.m.where.get(f'var.{name}')}:{blk.line}: {e.detail}.", f"var.{name}", file, line)
        return UNKNOWN


def _shape_differs(value, ty) -> bool:
    """A collection given for a primitive type, or a primitive for a collection type."""
    if ty == "dynamic":
        return False
    return isinstance(value, (list, dict)) != isinstance(ty, list)


def run_validations(ev, name: str, blk: A.Block) -> None:
    """A module variable's validation blocks: a known condition that is false is terraform's
    "Invalid value for variable" with the block's error_message, at the call's argument."""
    value = ev._var_values.get(name, UNKNOWN)
    if has_unknown(value):
        return
    decl = ev.m.where.get(f"var.{name}")
    file, line = ev.input_where.get(name, (decl, blk.line))
    for vb in blk.body.blocks_of("validation"):
        cond, msg = vb.body.attributes.get("condition"), vb.body.attributes.get("error_message")
        if cond is None:
            continue
        try:
            ok = evaluate(cond.expr, Scope(ev.resolve, ev.base_dir))
            text = evaluate(msg.expr, Scope(ev.resolve, ev.base_dir)) if msg is not None else ""
        except EvalError as e:
            ev.add(VALIDATE if name in ev.validate_vars else PLAN, e.cls, f"Invalid validation condition: "
                   f"{e.summary}: {e.detail}", f"var.{name}", decl, e.line or vb.line)
            continue
        if ok is False:
            ev.add(VALIDATE if name in ev.validate_vars else PLAN, "TYPE", f"Invalid value for variable: "
                   f"{text if isinstance(text, str) else ''}\n\nThis was checked by the validation rule at "
                   f"{decl}:{vb.line}.", f"var.{name}", file, line)
