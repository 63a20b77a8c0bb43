"""Static reference checks of a module (what terraform validate reports before evaluating):
undeclared variables, locals, resources, modules and module outputs, count/each misuse,
instance keys; plus the body terraform reads references from (schema_body, _body_exprs)."""
from __future__ import annotations

import difflib

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform._hcl_config import RefError, parse_ref, raw_traversals

VALIDATE = "VALIDATE_FAIL"


def _suggest(name, options):
    m = difflib.get_close_matches(name, list(options), n=1, cutoff=0.75)
    return f' Did you mean "{m[0]}"?' if m else ""


def check_references(ev):
    """Static reference checks over every expression (like terraform validate)."""
    m = ev.m
    for decl in m.resources:
        counted = "count" in decl.body.attributes
        each = "for_each" in decl.body.attributes
        # `provider = google.west` names a provider configuration, not a value
        # only what the schema declares is decoded: an unsupported block's references are not read
        for expr, line, in_dynamic in _body_exprs(schema_body(decl.body, ev.block_schema(decl)), skip=("provider",)):
            _check_expr_refs(ev, expr, decl.address, decl.file, counted, each, in_dynamic)
    for name, attr in m.locals.items():
        _check_expr_refs(ev, attr.expr, f"local.{name}", m.where.get(f"local.{name}"), False, False, ())
    for name, blk in m.outputs.items():
        for expr, line, dyn in _body_exprs(blk.body):
            _check_expr_refs(ev, expr, f"output.{name}", m.where.get(f"output.{name}"), False, False, dyn)
    for blk in m.providers:
        for expr, line, dyn in _body_exprs(blk.body):
            _check_expr_refs(ev, expr, f"provider.{blk.labels[0] if blk.labels else ''}", None,
                             False, False, dyn)
    for name, blk in m.module_calls.items():
        counted = "count" in blk.body.attributes
        each = "for_each" in blk.body.attributes
        for expr, line, dyn in _body_exprs(blk.body, skip=("providers",)):
            _check_expr_refs(ev, expr, f"module.{name}", m.where.get(f"module.{name}"), counted, each, dyn)


def _expanded(call) -> bool:
    """A module call with count or for_each (its value is a list or map of instances)."""
    return "count" in call.body.attributes or "for_each" in call.body.attributes


def _module_splats(ev, expr, address, file) -> None:
    """`module.x[*].out`: the output named after the splat must be one the module declares
    (terraform validate knows a module's output names even when its instances are unknown)."""
    for n in A.walk(expr):
        if type(n) is not A.Splat or type(n.src) is not A.GetAttr or type(n.src.obj) is not A.Var \
                or n.src.obj.name != "module" or n.src.name not in ev.children:
            continue
        first = n.each
        while type(first) is A.GetAttr and type(first.obj) is not A.SplatItem:
            first = first.obj
        outputs = ev.children[n.src.name].module.outputs
        if type(first) is A.GetAttr and first.name not in outputs:
            ev.add(VALIDATE, "SELF_DEFINED_PROPERTY", f'Unsupported attribute: This object does not have an '
                   f'attribute named "{first.name}".{_suggest(first.name, outputs)}', address, file, first.line or n.line)


_META_ARGS = ("count", "for_each", "depends_on", "provider")
_META_BLOCKS = ("lifecycle", "provisioner", "connection")


def schema_body(body: A.Body, bs: dict | None, top: bool = True) -> A.Body:
    """The part of a resource body that terraform reads for references: the arguments and blocks
    its schema declares (and the meta-arguments); an unsupported argument or block is an error
    of its own, and its references are in no dependency graph.

    Args:
        body: a resource's (or nested block's) body.
        bs: its block schema; None keeps the body as it is.
        top: the resource's own body, where meta-arguments and meta-blocks are allowed.
    """
    if bs is None:
        return body
    attrs, types = bs.get("attributes") or {}, bs.get("block_types") or {}
    out = A.Body()
    out.attributes = {n: a for n, a in body.attributes.items() if n in attrs or (top and n in _META_ARGS)}
    for b in body.blocks:
        name = b.labels[0] if b.type == "dynamic" and b.labels else b.type
        if name in types:
            out.blocks.append(b if b.type == "dynamic" else
                              A.Block(b.type, b.labels, schema_body(b.body, types[name].get("block"), False), b.line))
        elif name in attrs or (top and b.type in _META_BLOCKS):
            out.blocks.append(b)
    return out


def _body_exprs(body: A.Body, dyn=(), skip=()):
    for a in body.attributes.values():
        if a.name not in skip:
            yield a.expr, a.line, dyn
    for b in body.blocks:
        inner = dyn + (b.labels[0],) if b.type == "dynamic" and b.labels else dyn
        if b.type == "dynamic" and "iterator" in b.body.attributes:
            ie = b.body.attributes["iterator"].expr
            if isinstance(ie, A.Var):
                inner = dyn + (ie.name,)
        if b.type == "dynamic":
            for a in b.body.attributes.values():
                yield a.expr, a.line, dyn if a.name == "for_each" else inner
            for c in b.body.blocks:
                yield from _body_exprs(c.body, inner)
        else:
            yield from _body_exprs(b.body, dyn)


def _check_expr_refs(ev, expr, address, file, counted, each, dyn_names):
    if ev.children:
        _module_splats(ev, expr, address, file)
    for root, steps, line in raw_traversals(expr, frozenset(dyn_names)):
        try:
            kind, subject, extra, remains = parse_ref(root, steps, line)
        except RefError as e:
            ev.add(VALIDATE, "BAD_REFERENCE", e.message, address, file, line)
            continue
        if kind == "var" and subject[4:] not in ev.m.variables:
            n = subject[4:]
            ev.add(VALIDATE, "BAD_REFERENCE", f'Reference to undeclared input variable: An input '
                   f'variable with the name "{n}" has not been declared. This variable can be '
                   f'declared with a variable "{n}" {{}} block.', address, file, line)
        elif kind == "local" and subject[6:] not in ev.m.locals:
            ev.add(VALIDATE, "BAD_REFERENCE", f'Reference to undeclared local value: A local value '
                   f'with the name "{subject[6:]}" has not been declared.'
                   f'{_suggest(subject[6:], ev.m.locals)}', address, file, line)
        elif kind in ("module", "module_output") and extra[0][7:] not in ev.m.module_calls:
            ev.add(VALIDATE, "BAD_REFERENCE", f'Reference to undeclared module: No module call '
                   f'named "{extra[0][7:]}" is declared in the root module.', address, file, line)
        elif kind == "module_output" and extra[1] is None and _expanded(ev.m.module_calls[extra[0][7:]]):
            out = subject.rsplit(".", 1)[-1]
            ev.add(VALIDATE, "SELF_DEFINED_PROPERTY", "Unsupported attribute: " + (
                f"Can't access attributes on a list of objects. Did you mean to access attribute \"{out}\" for a "
                "specific element of the list, or across all elements of the list?"
                if "count" in ev.m.module_calls[extra[0][7:]].body.attributes else
                f'This object does not have an attribute named "{out}".'), address, file, line)
        elif kind == "module_output" and extra[0][7:] in ev.children and \
                subject.rsplit(".", 1)[-1] not in ev.children[extra[0][7:]].module.outputs:
            out, known = subject.rsplit(".", 1)[-1], ev.children[extra[0][7:]].module.outputs
            ev.add(VALIDATE, "SELF_DEFINED_PROPERTY", f'Unsupported attribute: This object does not have an '
                   f'attribute named "{out}".{_suggest(out, known)}', address, file, line)
        elif kind == "count" and not counted:
            ev.add(VALIDATE, "BAD_REFERENCE", 'Reference to "count" in non-counted context: The '
                   '"count" object can only be used in "module", "resource", and "data" blocks, '
                   'and only when the "count" argument is set.', address, file, line)
        elif kind == "count" and subject != "count.index":
            ev.add(VALIDATE, "BAD_REFERENCE", f'Invalid "count" attribute: The "count" object does '
                   f'not have an attribute named "{subject[6:]}". The only supported attribute is '
                   "count.index, which is the index of each instance of a resource block that has "
                   'the "count" argument set.', address, file, line)
        elif kind == "each" and not each:
            ev.add(VALIDATE, "BAD_REFERENCE", 'Reference to "each" in context without for_each: '
                   'The "each" object can be used only in "module" or "resource" blocks, and only '
                   'when the "for_each" argument is set.', address, file, line)
        elif kind == "each" and subject not in ("each.key", "each.value"):
            ev.add(VALIDATE, "BAD_REFERENCE", f'Invalid "each" attribute: The "each" object does '
                   f'not have an attribute named "{subject[5:]}". The supported attributes are '
                   "each.key and each.value, the current key and value pair of the \"for_each\" "
                   "attribute set.", address, file, line)
        elif kind in ("managed", "data"):
            _check_resource_ref(ev, kind, extra, remains, address, file, line)


def _check_resource_ref(ev, mode, extra, remains, address, file, line):
    base, key = extra
    decl = ev.decls.get(base)
    if decl is None:
        t, n = base.split(".")[-2:]
        kind = "data resource" if mode == "data" else "managed resource"
        known = [d.address for d in ev.m.resources if d.mode == mode]
        ev.add(VALIDATE, "BAD_REFERENCE", f'Reference to undeclared resource: A {kind} "{t}" '
               f'"{n}" has not been declared in {ev.prefix or "the root module"}.{_suggest(base, known)}', address,
               file, line)
        return
    multi = "count" in decl.body.attributes or "for_each" in decl.body.attributes
    if key is not None and not multi:
        ev.add(VALIDATE, "BAD_REFERENCE", f"Unexpected resource instance key: Because {base} does "
               'not have "count" or "for_each" set, references to it must not include an index '
               "key. Remove the bracketed index to refer to the single instance of this resource.",
               address, file, line)
        return
    if key is None and multi and remains and remains[0][0] == "attr":
        arg = "count" if "count" in decl.body.attributes else "for_each"
        ev.add(VALIDATE, "BAD_REFERENCE", f"Missing resource instance key: Because {base} has "
               f'"{arg}" set, its attributes must be accessed on specific instances.', address,
               file, line)
        return
    bs = ev.block_schema(decl)
    if bs is None or not remains or remains[0][0] != "attr" or (multi and key is None):
        return
    attr = remains[0][1]
    if attr not in (bs.get("attributes") or {}) and attr not in (bs.get("block_types") or {}):
        names = list(bs.get("attributes") or {}) + list(bs.get("block_types") or {})
        ev.add(VALIDATE, "BAD_REFERENCE", f'Unsupported attribute: This object has no argument, '
               f'nested block, or exported attribute named "{attr}".{_suggest(attr, names)}',
               address, file, line)
