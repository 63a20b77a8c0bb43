"""Evaluation of a root module against a provider schema: resource instance values as
terraform plan computes them (computed attributes unknown), plus every finding a
validate/plan would report. Shared by hcl_check and plan_synth."""
from __future__ import annotations

from dataclasses import dataclass, field

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform import _hcl_modules as M
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_config import META_ARGS, Module, ResourceDecl
from verifirst.verifiers.terraform._hcl_eval import UNKNOWN, EvalError, Scope, evaluate, has_unknown
from verifirst.verifiers.terraform._hcl_types import attr_type, convert

VALIDATE, PLAN = "VALIDATE_FAIL", "PLAN_FAIL"
RESOURCE_META_BLOCKS = {"lifecycle", "provisioner", "connection", "dynamic"}


@dataclass
class Finding:
    stage: str
    cls: str
    message: str
    address: str | None = None
    file: str | None = None
    line: int | None = None

    def text(self) -> str:
        where = f" (on {self.file} line {self.line})" if self.file and self.line else ""
        return f"{self.message}{where}"


@dataclass
class Instance:
    decl: ResourceDecl
    address: str
    index: object  # None, int or str
    value: object  # dict, or UNKNOWN
    sensitive: dict = field(default_factory=dict)


class _Namespace(dict):
    """Lazy `aws_s3_bucket.<name>` / `data.<type>` lookups that raise terraform's errors."""

    def __init__(self, getter):
        super().__init__()
        self._getter = getter

    def __contains__(self, k):
        return True

    def __getitem__(self, k):
        return self._getter(k)


class ModelEval:
    """One module's evaluation: the root (no parent) or an instance of a module call (its
    findings go to the root's list, their addresses under `prefix`, e.g. module.net[0]).

    Args:
        module: the parsed module.
        schema: the provider schema (None: nothing is checked against one).
        variables: input variable values (tfvars for the root, the call's arguments for a module).
        base_dir: the module's directory: its local module sources and path.module are relative
            to it; file() and the other path functions read relative to the root's, as terraform does.
        parent: the calling module's ModelEval (None for the root).
        prefix: this module instance's address ("" for the root).
        validate_vars: the variables whose values terraform validate knows (a module's literal inputs).
        input_where: variable -> (file, line) of the call argument that sets it.
    """

    def __init__(self, module: Module, schema, variables: dict | None = None,
                 base_dir: str | None = None, files: dict | None = None, *, parent=None, prefix: str = "",
                 validate_vars=frozenset(), input_where: dict | None = None):
        self.m, self.schema, self.module_dir = module, schema, base_dir
        self.base_dir = parent.base_dir if parent is not None else base_dir  # where file() reads: the root's
        self.parent, self.prefix = parent, prefix
        self.sink = parent.sink if parent is not None else self  # where findings go: the root
        self.root_dir = parent.root_dir if parent is not None else base_dir
        self.counts = parent.counts if parent is not None else {"instances": 0, "bytes": 0, "blocks": 0}
        self.depth = parent.depth + 1 if parent is not None else 0
        self.key_path = [*parent.key_path, M.config_path(prefix).rsplit(".", 1)[-1]] if parent is not None else []
        self.validate_vars, self.input_where = set(validate_vars), dict(input_where or {})
        self.children: dict = {}  # call name -> _hcl_modules.Child (the modules read)
        self.module_values: dict = {}
        self.module_instances: dict = {}  # call name -> [(address, key, ModelEval)] once evaluated
        self.graph: dict = {}  # the dependency graph of every module, addresses in full (the root's)
        self.inputs = dict(variables or {})
        self.findings: list[Finding] = []
        self.warnings: list[str] = []
        self.decls = module.by_address()
        self._types = {(r.mode, r.type) for r in module.resources}
        self._values: dict[str, object] = {}
        self._instances: dict[str, list[Instance]] = {}
        self._busy: set[str] = set()
        self._locals: dict[str, object] = {}
        self._var_values: dict[str, object] = {}
        self._seen_msgs: set = set()
        self.unchecked: list[tuple] = []  # (address, why): parts no schema or module let us check
        self.provider_names = set(schema.provider_names()) if schema is not None else set()

    # -- findings ---------------------------------------------------------------------------
    def qualify(self, address: str | None) -> str:
        """An address of this module's as the root names it (module.net[0].aws_vpc.this)."""
        return f"{self.prefix}.{address}" if self.prefix and address else (address or self.prefix or None)

    def add(self, stage, cls, message, address=None, file=None, line=None):
        if self.sink is not self:
            return self.sink.add(stage, cls, message, self.qualify(address), file, line)
        key = (cls, message, M.config_path(address), file, line)  # a module's error once, not per instance
        if key in self._seen_msgs:
            return
        self._seen_msgs.add(key)
        self.findings.append(Finding(stage, cls, message, address, file, line))

    def warn(self, message):
        if self.sink is not self:
            return self.sink.warn(message)
        if message not in self.warnings:
            self.warnings.append(message)

    # -- schema helpers ---------------------------------------------------------------------
    def block_schema(self, decl: ResourceDecl):
        if self.schema is None:
            return None
        return self.schema.block(decl.mode, decl.type)

    def known_provider(self, type_name: str) -> bool:
        return type_name.split("_", 1)[0] in self.provider_names

    # -- variables ----------------------------------------------------------------------------
    def var_value(self, name, node=None):
        if name in self._var_values:
            return self._var_values[name]
        blk = self.m.variables.get(name)
        if blk is None:
            raise EvalError("Reference to undeclared input variable",
                            f'An input variable with the name "{name}" has not been declared. '
                            f'This variable can be declared with a variable "{name}" {{}} block.',
                            getattr(node, "line", 0), "BAD_REFERENCE")
        if name in self.inputs:
            v = self.inputs[name]
            if self.prefix:
                v = M.typed_input(self, name, blk, v, True)
        elif "default" in blk.body.attributes:
            v = self._safe_eval(blk.body.attributes["default"].expr, Scope(self.resolve, self.base_dir),
                                f"var.{name}", self.m.where.get(f"var.{name}"), blk.line)
            if self.prefix:
                v = M.typed_input(self, name, blk, v, False)
        elif self.prefix:  # the call's missing argument is reported at the call
            v = UNKNOWN
        else:
            v = UNKNOWN
            self.add(PLAN, "MISSING_REQUIRED", f'No value for required variable: The root module '
                     f'input variable "{name}" is not set, and has no default value. Use a -var or '
                     '-var-file command line argument to provide a value for this variable.',
                     f"var.{name}", None, blk.line)
        self._var_values[name] = v
        if self.prefix:
            M.run_validations(self, name, blk)
        return v

    def local_value(self, name, node=None):
        if name in self._locals:
            return self._locals[name]
        attr = self.m.locals.get(name)
        if attr is None:
            raise EvalError("Reference to undeclared local value",
                            f'A local value with the name "{name}" has not been declared.',
                            getattr(node, "line", 0), "BAD_REFERENCE")
        key = f"local.{name}"
        if key in self._busy:
            return UNKNOWN
        self._busy.add(key)
        v = self._safe_eval(attr.expr, Scope(self.resolve, self.base_dir), key, self.m.where.get(key), attr.line)
        self._busy.discard(key)
        self._locals[name] = v
        return v

    # -- root name resolution ---------------------------------------------------------------
    def resolve(self, name, node):
        if name == "var":
            return _Namespace(lambda k: self.var_value(k, node))
        if name == "local":
            return _Namespace(lambda k: self.local_value(k, node))
        if name == "data":
            return _Namespace(lambda t: _Namespace(lambda n: self.resource_value("data", t, n, node)))
        if name == "module":
            return _Namespace(lambda k: self._module(k, node))
        if name == "path":
            d = self.base_dir or "."
            return {"module": self.module_dir or d, "root": d, "cwd": d}
        if name == "terraform":
            return {"workspace": "default"}
        if name in ("count", "each", "self"):
            raise EvalError(f'Reference to "{name}" in non-counted context',
                            f'The "{name}" object can only be used in "module", "resource", and '
                            f'"data" blocks, and only when the "{"for_each" if name == "each" else "count"}" '
                            "argument is set.", getattr(node, "line", 0), "BAD_REFERENCE")
        if name == "resource":
            return _Namespace(lambda t: _Namespace(lambda n: self.resource_value("managed", t, n, node)))
        return _Namespace(lambda n: self.resource_value("managed", name, n, node))

    def _module(self, name, node):
        if name not in self.m.module_calls:
            raise EvalError("Reference to undeclared module", f'No module call named "{name}" is '
                            "declared in the root module.", getattr(node, "line", 0), "BAD_REFERENCE")
        return M.module_value(self, name)

    def resource_value(self, mode, type_name, name, node=None):
        addr = (f"data.{type_name}.{name}" if mode == "data" else f"{type_name}.{name}")
        if addr not in self.decls:
            kind = "data resource" if mode == "data" else "managed resource"
            raise EvalError("Reference to undeclared resource", f'A {kind} "{type_name}" "{name}" '
                            "has not been declared in the root module.", getattr(node, "line", 0),
                            "BAD_REFERENCE")
        if addr in self._values:
            return self._values[addr]
        if addr in self._busy:  # a cycle: reported by the graph check
            return UNKNOWN
        self.instances(self.decls[addr])
        return self._values.get(addr, UNKNOWN)

    # -- evaluation -------------------------------------------------------------------------
    def _safe_eval(self, expr, scope, address, file, line, stage=None):
        try:
            return evaluate(expr, scope)
        except EvalError as e:
            st = stage or self._stage_for(expr)
            self.add(st, e.cls, f"{e.summary}: {e.detail}" if e.detail else e.summary, address,
                     file, e.line or line)
            return UNKNOWN
        except RecursionError:
            self.add(VALIDATE, "OTHER", "Expression too deeply nested", address, file, line)
            return UNKNOWN

    def _stage_for(self, expr) -> str:
        """Errors in expressions that reference nothing are found by validate already."""
        return VALIDATE if M.known_at_validate(expr) else PLAN

    def instances(self, decl: ResourceDecl) -> list[Instance]:
        addr = decl.address
        if addr in self._instances:
            return self._instances[addr]
        self._busy.add(addr)
        body = decl.body
        scope = Scope(self.resolve, self.base_dir)
        out: list[Instance] = []
        count_a, each_a = body.attributes.get("count"), body.attributes.get("for_each")
        if count_a is not None:
            n = self._safe_eval(count_a.expr, scope, addr, decl.file, count_a.line)
            if n is UNKNOWN:
                self._unknown_count(decl, count_a, "count")
                self._values[addr] = UNKNOWN
            else:
                try:
                    n = int(convert(n, "number"))
                except (EvalError, TypeError):
                    self.add(PLAN, "TYPE", 'Invalid count argument: The given "count" argument '
                             "value is unsuitable: a number is required.", addr, decl.file,
                             count_a.line)
                    n = 0
                if not self.within_ceiling(decl.address, decl.file, count_a.line, "count", n):
                    n = 0
                for i in range(max(n, 0)):
                    s = scope.child({"count": {"index": i}})
                    out.append(self._instance(decl, f"{addr}[{i}]", i, s))
                self._values[addr] = [x.value for x in out]
        elif each_a is not None:
            fe = self._safe_eval(each_a.expr, scope, addr, decl.file, each_a.line)
            if fe is UNKNOWN or (isinstance(fe, list) and any(x is UNKNOWN for x in fe)) or \
                    (isinstance(fe, dict) and False):
                self._unknown_count(decl, each_a, "for_each")
                self._values[addr] = UNKNOWN
            elif isinstance(fe, dict) or (isinstance(fe, list) and not isinstance(each_a.expr, A.TupleCons)
                                          and all(isinstance(x, str) for x in fe)):
                items = fe.items() if isinstance(fe, dict) else [(k, k) for k in fe]
                if not self.within_ceiling(decl.address, decl.file, each_a.line, "for_each", len(items)):
                    items = []
                for k, v in sorted(items):
                    s = scope.child({"each": {"key": k, "value": v}})
                    out.append(self._instance(decl, f'{addr}["{k}"]', k, s))
                self._values[addr] = {x.index: x.value for x in out}
            else:
                self.add(PLAN, "TYPE", 'Invalid for_each argument: The given "for_each" argument '
                         'value is unsuitable: the "for_each" argument must be a map, or set of '
                         f"strings, and you have provided a value of type "
                         f"{'tuple' if isinstance(fe, list) else type(fe).__name__}.", addr,
                         decl.file, each_a.line)
                self._values[addr] = {}
        else:
            inst = self._instance(decl, addr, None, scope)
            out.append(inst)
            self._values[addr] = inst.value
        self._busy.discard(addr)
        self._instances[addr] = out
        return out

    def within_ceiling(self, address, file, line, what, n) -> bool:
        """Whether n more instances (of a resource, data source or module call, in every module
        together) stay within limits.MAX_INSTANCES; else a LIMIT finding."""
        done = self.counts["instances"]
        if n <= 0 or done + n <= limits.MAX_INSTANCES:
            self.counts["instances"] += max(n, 0)
            return True
        total = f" ({done:,} already)" if done else ""
        self.add(PLAN, limits.LIMIT, limits.SUMMARY + ": " + limits.message(
            f'the "{what}" of {self.qualify(address)}{total}', n, limits.MAX_INSTANCES, "instances"),
            address, file, line)
        return False

    def _unknown_count(self, decl, attr, what):
        detail = ('The "count" value depends on resource attributes that cannot be determined '
                  "until apply, so Terraform cannot predict how many instances will be created."
                  if what == "count" else
                  'The "for_each" set includes values derived from resource attributes that '
                  "cannot be determined until apply, and so Terraform cannot determine the full "
                  "set of keys that will identify the instances of this resource.")
        self.add(PLAN, "OTHER", f"Invalid {what} argument: {detail}", decl.address, decl.file,
                 attr.line)

    def _instance(self, decl, address, index, scope) -> Instance:
        bs = self.block_schema(decl)
        if bs is None:
            vals = {}
            for name, a in decl.body.attributes.items():
                if name not in META_ARGS:
                    vals[name] = self._safe_eval(a.expr, scope, address, decl.file, a.line)
            vals.setdefault("id", UNKNOWN)
            return Instance(decl, address, index, vals)
        value = self.block_value(decl.body, bs, scope, address, decl.file, top=True)
        self._provider_fixups(decl, bs, value)
        return Instance(decl, address, index, value)

    def block_value(self, body: A.Body, bs: dict, scope, address, file, top=False):
        attrs = bs.get("attributes", {}) or {}
        btypes = bs.get("block_types", {}) or {}
        out = {}
        for name, a in attrs.items():
            ty = attr_type(a)
            cfg = body.attributes.get(name)
            if cfg is not None:
                v = self._safe_eval(cfg.expr, scope, address, file, cfg.line)
                v = self._convert(v, ty, name, address, file, cfg.line, cfg.expr)
                if v is None and a.get("computed"):
                    v = UNKNOWN
            elif name not in body.attributes and self._blocks_as_attr(body, name, ty):
                v = self._attr_blocks(body, name, ty, scope, address, file)
            else:
                v = UNKNOWN if a.get("computed") else None
            out[name] = v
        for name, bt in btypes.items():
            mode = bt.get("nesting_mode", "list")
            inner = bt.get("block", {})
            blocks = body.blocks_of(name)
            dyn = [b for b in body.blocks_of("dynamic") if b.labels and b.labels[0] == name]
            vals = [self.block_value(b.body, inner, scope, address, file) for b in blocks]
            for d in dyn:
                dv = self._dynamic(d, inner, scope, address, file)
                if dv is UNKNOWN:
                    vals = UNKNOWN
                    break
                vals.extend(dv)
            if vals is UNKNOWN:
                out[name] = UNKNOWN
            elif mode in ("single", "group"):
                out[name] = vals[0] if vals else None
            elif mode == "map":
                out[name] = {b.labels[0] if b.labels else "": v for b, v in zip(blocks, vals)}
            else:
                out[name] = vals
        return out

    def _blocks_as_attr(self, body, name, ty) -> bool:
        return (isinstance(ty, list) and ty[0] in ("list", "set") and isinstance(ty[1], list)
                and ty[1][0] == "object" and bool(body.blocks_of(name) or
                [d for d in body.blocks_of("dynamic") if d.labels and d.labels[0] == name]))

    def _attr_blocks(self, body, name, ty, scope, address, file):
        obj = ty[1]
        fake = {"attributes": {k: {"type": t, "optional": True} for k, t in obj[1].items()}}
        vals = [self.block_value(b.body, fake, scope, address, file) for b in body.blocks_of(name)]
        for d in body.blocks_of("dynamic"):
            if d.labels and d.labels[0] == name:
                dv = self._dynamic(d, fake, scope, address, file)
                if dv is UNKNOWN:
                    return UNKNOWN
                vals.extend(dv)
        return vals

    def _dynamic(self, d: A.Block, inner, scope, address, file):
        fe = d.body.attributes.get("for_each")
        if fe is None:
            self.add(VALIDATE, "MISSING_REQUIRED", 'Missing required argument: The argument '
                     '"for_each" is required, but no definition was found.', address, file, d.line)
            return []
        coll = self._safe_eval(fe.expr, scope, address, file, fe.line)
        if coll is UNKNOWN:
            return UNKNOWN
        it = d.labels[0]
        if "iterator" in d.body.attributes:
            ie = d.body.attributes["iterator"].expr
            it = ie.name if isinstance(ie, A.Var) else it
        content = d.body.blocks_of("content")
        if not content:
            self.add(VALIDATE, "BLOCK_COUNT", "Missing dynamic content block: A dynamic block must have a nested "
                     'block of type "content" to describe the body of each generated block.', address, file, d.line)
            return []
        pairs = list(coll.items() if isinstance(coll, dict) else enumerate(coll or []))
        try:  # each content block evaluates every argument of the block's schema
            limits.spend(len(pairs) * (1 + len(inner.get("attributes") or {})), "dynamic blocks")
        except EvalError as e:
            self.add(PLAN, e.cls, f"{e.summary}: {e.detail}", address, file, fe.line)
            return UNKNOWN
        return [self.block_value(content[0].body, inner, scope.child({it: {"key": k, "value": v}}),
                                 address, file) for k, v in pairs]

    def _convert(self, v, ty, name, address, file, line, expr):
        try:
            return convert(v, ty)
        except EvalError as e:
            self.add(self._stage_for(expr), "TYPE", f'Incorrect attribute value type: '
                     f'Inappropriate value for attribute "{name}": {e.detail}.', address, file, line)
            return UNKNOWN

    def _provider_fixups(self, decl, bs, value):
        """AWS: tags_all = provider default_tags merged with tags (known when both are)."""
        if not isinstance(value, dict) or "tags_all" not in value:
            return
        if value.get("tags_all") is not UNKNOWN:
            return
        tags, defaults = value.get("tags"), self.default_tags()
        if tags is UNKNOWN or defaults is UNKNOWN or has_unknown(tags):
            return
        if tags is None and not defaults:
            return
        merged = dict(defaults or {})
        merged.update(tags or {})
        value["tags_all"] = merged

    def default_tags(self):
        for p in self.m.providers:
            if p.labels and p.labels[0] == "aws" and "alias" not in p.body.attributes:
                for dt in p.body.blocks_of("default_tags"):
                    t = dt.body.attributes.get("tags")
                    if t is not None:
                        return self._safe_eval(t.expr, Scope(self.resolve, self.base_dir),
                                               "provider.aws", None, t.line)
        return {}

    # -- whole-module passes ----------------------------------------------------------------
    def evaluate_all(self):
        for decl in self.m.resources:
            if self.schema is not None and self.block_schema(decl) is None:
                continue
            self.instances(decl)
        for name in self.m.locals:
            self.local_value(name)
        for name in self.m.variables:
            self.var_value(name)
        for name in self.m.module_calls:
            M.module_value(self, name)

    def output_values(self) -> dict:
        out = {}
        for name, blk in self.m.outputs.items():
            a = blk.body.attributes.get("value")
            if a is None:
                self.add(VALIDATE, "MISSING_REQUIRED", 'Missing required argument: The argument '
                         '"value" is required, but no definition was found.', f"output.{name}",
                         self.m.where.get(f"output.{name}"), blk.line)
                continue
            out[name] = self._safe_eval(a.expr, Scope(self.resolve, self.base_dir),
                                        f"output.{name}", self.m.where.get(f"output.{name}"), a.line)
        return out
