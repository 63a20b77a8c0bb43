"""A parsed Terraform root module: resources, data, variables, locals, outputs, providers,
module calls; plus terraform-style references of an expression."""
from __future__ import annotations

from dataclasses import dataclass, field

from verifirst.verifiers.terraform import _hcl_ast as A

META_ARGS = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner",
             "connection"}


@dataclass
class ResourceDecl:
    mode: str  # "managed" | "data"
    type: str
    name: str
    body: A.Body
    file: str
    line: int

    @property
    def address(self) -> str:
        return (f"data.{self.type}.{self.name}" if self.mode == "data"
                else f"{self.type}.{self.name}")


@dataclass
class Module:
    resources: list[ResourceDecl] = field(default_factory=list)
    variables: dict[str, A.Block] = field(default_factory=dict)
    locals: dict[str, A.Attribute] = field(default_factory=dict)
    outputs: dict[str, A.Block] = field(default_factory=dict)
    providers: list[A.Block] = field(default_factory=list)
    module_calls: dict[str, A.Block] = field(default_factory=dict)
    terraform: list[A.Block] = field(default_factory=list)
    problems: list[tuple] = field(default_factory=list)  # (cls, message, address, file, line)
    where: dict[str, str] = field(default_factory=dict)  # "var.x" / "output.x" / "module.x" -> its file

    def by_address(self) -> dict[str, ResourceDecl]:
        return {r.address: r for r in self.resources}


def build_module(bodies: dict[str, A.Body]) -> Module:
    m = Module()
    seen: dict[str, ResourceDecl] = {}
    for fname, body in bodies.items():
        for dup in body.duplicates:
            m.problems.append(("SYNTAX", f'Attribute redefined: The argument "{dup.name}" was '
                               "already set. Each argument may be set only once.", None, fname,
                               dup.line))
        if body.attributes:
            a = next(iter(body.attributes.values()))
            m.problems.append(("SYNTAX", f'Unsupported argument: An argument named "{a.name}" is '
                               "not expected here.", None, fname, a.line))
        for b in body.blocks:
            kind, labels = b.type, b.labels
            need = {"resource": 2, "data": 2, "variable": 1, "output": 1, "module": 1,
                    "provider": 1, "locals": 0, "terraform": 0, "moved": 0, "import": 0,
                    "check": 1, "removed": 0, "ephemeral": 2}.get(kind)
            if need is None:
                m.problems.append(("SYNTAX", f'Unsupported block type: Blocks of type "{kind}" '
                                   "are not expected here.", None, fname, b.line))
                continue
            if len(labels) != need:
                what = {2: "a type and a name", 1: "a name", 0: "no labels"}[need]
                m.problems.append(("SYNTAX", f'{"Missing" if len(labels) < need else "Extraneous"}'
                                   f' label for {kind}: a {kind} block requires {what}.', None,
                                   fname, b.line))
                continue
            if kind in ("resource", "data"):
                r = ResourceDecl("managed" if kind == "resource" else "data", labels[0],
                                 labels[1], b.body, fname, b.line)
                if r.address in seen:
                    m.problems.append(("SYNTAX", f"Duplicate resource \"{r.type}\" configuration: "
                                       f"A {r.type} resource named \"{r.name}\" was already "
                                       "declared. Resource names must be unique per type in each "
                                       "module.", r.address, fname, b.line))
                    continue
                seen[r.address] = r
                m.resources.append(r)
            elif kind == "variable":
                m.variables[labels[0]] = b
                m.where[f"var.{labels[0]}"] = fname
            elif kind == "output":
                m.outputs[labels[0]] = b
                m.where[f"output.{labels[0]}"] = fname
            elif kind == "module":
                m.module_calls[labels[0]] = b
                m.where[f"module.{labels[0]}"] = fname
            elif kind == "provider":
                m.providers.append(b)
            elif kind == "locals":
                for name, attr in b.body.attributes.items():
                    m.locals[name] = attr
                    m.where[f"local.{name}"] = fname
            elif kind == "terraform":
                m.terraform.append(b)
    return m


# --- references -------------------------------------------------------------------------
def _traversal(node):
    """(root, steps) if node is a root variable followed by attr / literal-index steps."""
    steps = []
    while True:
        t = type(node)
        if t is A.GetAttr:
            steps.append(("attr", node.name))
            node = node.obj
        elif t is A.Index and type(node.key) is A.Lit and isinstance(node.key.value, (int, str)):
            steps.append(("index", node.key.value))
            node = node.obj
        elif t is A.Index and type(node.key) is A.Template and len(node.key.parts) == 1 \
                and isinstance(node.key.parts[0], str):
            steps.append(("index", node.key.parts[0]))
            node = node.obj
        elif t is A.Var:
            return node.name, steps[::-1]
        else:
            return None


def raw_traversals(node, bound=frozenset()):
    """Root-variable traversals in source order, as HCL's Variables() finds them."""
    out: list = []
    _collect(node, bound, out)
    return out


def _collect(node, bound, out):
    if not isinstance(node, A.Node):
        return
    tr = _traversal(node)
    if tr is not None:
        if tr[0] not in bound:
            out.append((tr[0], tr[1], node.line))
        return
    t = type(node)
    if t is A.GetAttr:
        _collect(node.obj, bound, out)
    elif t is A.Index:
        _collect(node.obj, bound, out)
        _collect(node.key, bound, out)
    elif t is A.Template:
        for p in node.parts:
            _collect(p, bound, out)
    elif t is A.TupleCons:
        for x in node.items:
            _collect(x, bound, out)
    elif t is A.ObjectCons:
        for k, v in node.items:
            _collect(k, bound, out)
            _collect(v, bound, out)
    elif t is A.Call:
        for x in node.args:
            _collect(x, bound, out)
    elif t is A.Cond:
        _collect(node.cond, bound, out)
        _collect(node.true, bound, out)
        _collect(node.false, bound, out)
    elif t is A.BinOp:
        _collect(node.left, bound, out)
        _collect(node.right, bound, out)
    elif t is A.Unary:
        _collect(node.expr, bound, out)
    elif t is A.Splat:
        _collect(node.src, bound, out)
        _collect(node.each, bound, out)
    elif t is A.ForExpr:
        _collect(node.coll, bound, out)
        inner = bound | {node.vvar} | ({node.kvar} if node.kvar else set())
        for x in (node.key, node.value, node.cond):
            _collect(x, inner, out)


def _step_str(step) -> str:
    kind, v = step
    if kind == "attr":
        return "." + v
    if isinstance(v, int):
        return f"[{v}]"
    return '["' + v.replace("\\", "\\\\").replace('"', '\\"') + '"]'


class RefError(Exception):
    def __init__(self, message, line):
        self.message, self.line = message, line
        super().__init__(message)


def parse_ref(root: str, steps: list, line: int = 0):
    """(kind, subject address, key, remaining steps) as terraform's addrs.ParseRef splits it."""
    def need_attr(i, what):
        if len(steps) <= i or steps[i][0] != "attr":
            raise RefError(f"Invalid reference: The \"{root}\" object must be followed by "
                           f"{what}.", line)
        return steps[i][1]
    if root == "var":
        n = need_attr(0, "an attribute name")
        return "var", f"var.{n}", None, steps[1:]
    if root == "local":
        n = need_attr(0, "an attribute name")
        return "local", f"local.{n}", None, steps[1:]
    if root in ("count", "each", "path", "terraform"):
        n = need_attr(0, "an attribute name")
        return root, f"{root}.{n}", None, steps[1:]
    if root == "self":
        return "self", "self", None, steps
    if root == "module":
        n = need_attr(0, "a module name")
        rest = steps[1:]
        key = None
        if rest and rest[0][0] == "index":
            key, rest = rest[0][1], rest[1:]
        call = f"module.{n}"
        inst = call + (_step_str(("index", key)) if key is not None else "")
        if rest and rest[0][0] == "attr":
            return "module_output", f"{inst}.{rest[0][1]}", (call, key), rest[1:]
        return "module", inst, (call, key), rest
    if root in ("data", "resource", "ephemeral"):
        t = need_attr(0, "a resource type name")
        if len(steps) < 2 or steps[1][0] != "attr":
            raise RefError(f'Invalid reference: The "{root}" object must be followed by two '
                           "attribute names: the resource type and the resource name.", line)
        n = steps[1][1]
        prefix = "data." if root == "data" else ""
        mode = "data" if root == "data" else "managed"
        base, rest = f"{prefix}{t}.{n}", steps[2:]
    else:
        if not steps or steps[0][0] != "attr":
            raise RefError(f'Invalid reference: A reference to a resource type must be followed by '
                           f'at least one attribute access, specifying the resource name.', line)
        mode, base, rest = "managed", f"{root}.{steps[0][1]}", steps[1:]
    key = None
    if rest and rest[0][0] == "index":
        key, rest = rest[0][1], rest[1:]
    subject = base + (_step_str(("index", key)) if key is not None else "")
    return mode, subject, (base, key), rest


def reference_strings(node, bound=frozenset()) -> list[str]:
    """terraform show -json `references`: each ref with its remaining traversal unwrapped."""
    out: list[str] = []
    for root, steps, line in raw_traversals(node, bound):
        try:
            kind, subject, extra, remains = parse_ref(root, steps, line)
        except RefError:
            continue
        remains = list(remains)
        while remains:
            out.append(subject + "".join(_step_str(s) for s in remains))
            remains.pop()
        out.append(subject)
        if kind in ("managed", "data") and extra[1] is not None:
            out.append(extra[0])
        elif kind == "module" and extra[1] is not None:
            out.append(extra[0])
        elif kind == "module_output":
            out.append(extra[0] + (_step_str(("index", extra[1])) if extra[1] is not None else ""))
    return out
