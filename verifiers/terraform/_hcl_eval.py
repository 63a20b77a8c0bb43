"""Evaluate _hcl_ast expressions the way terraform plan does: values may be UNKNOWN
(known after apply); the common functions are implemented, file() reads relative to the
config dir. Errors carry terraform's summaries so a repair loop can act on them."""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import math
import os
import re

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_errors import EvalError


class _Unknown:
    __slots__ = ()

    def __repr__(self):
        return "(known after apply)"


UNKNOWN = _Unknown()


def has_unknown(v) -> bool:
    """Whether an unknown is anywhere inside v; a list or map shared many times is looked at once
    (a structure doubled 40 times over holds 2^40 leaves but 40 distinct lists)."""
    if v is UNKNOWN:
        return True
    if not isinstance(v, (list, dict)):
        return False
    seen, stack = set(), [v]
    while stack:
        x = stack.pop()
        if x is UNKNOWN:
            return True
        if isinstance(x, (list, dict)) and id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.values() if isinstance(x, dict) else x)
    return False


class Scope:
    """Root-name resolution. `resolve(name, node)` returns the value of a root variable;
    `locals_` holds for-expression bindings (innermost last)."""

    def __init__(self, resolver, base_dir: str | None = None, bindings: dict | None = None):
        self.resolver, self.base_dir, self.bindings = resolver, base_dir, bindings or {}

    def child(self, extra: dict) -> "Scope":
        b = dict(self.bindings)
        b.update(extra)
        return Scope(self.resolver, self.base_dir, b)


def tf_str(v, line=0) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _num_str(v)
    if isinstance(v, str):
        return v
    if v is None:
        raise EvalError("Invalid template interpolation value",
                        "The expression result is null. Cannot include a null value in a string "
                        "template.", line, "TYPE")
    raise EvalError("Invalid template interpolation value",
                    f"Cannot include the given value in a string template: string required, "
                    f"got {type_name(v)}.", line, "TYPE")


def _num_str(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return str(v)


def type_name(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "tuple"
    if isinstance(v, dict):
        return "object"
    return "null" if v is None else "dynamic"


def to_number(v, line=0):
    if isinstance(v, bool):
        raise EvalError("Invalid value", "a number is required, got bool", line, "TYPE")
    if isinstance(v, int) and v.bit_length() > 512:  # terraform's numbers have 512-bit precision
        return float(v) if v.bit_length() < 1024 else math.copysign(math.inf, v)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            raise EvalError("Invalid value", f'cannot convert "{v}" to number: a number is '
                            "required", line, "TYPE") from None
        return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
    raise EvalError("Invalid value", f"a number is required, got {type_name(v)}", line, "TYPE")


def to_bool(v, line=0):
    if isinstance(v, bool):
        return v
    if v in ("true", "false"):
        return v == "true"
    raise EvalError("Invalid value", f"a bool is required, got {type_name(v)}", line, "TYPE")


def evaluate(node, scope: Scope):
    """Value of an expression node (python natives, UNKNOWN inside where not known)."""
    t = type(node)
    if t is A.Lit:
        return node.value
    if t is A.Template:
        parts = node.parts
        if len(parts) == 1 and not isinstance(parts[0], str):
            return evaluate(parts[0], scope)
        out = []
        for p in parts:
            if isinstance(p, str):
                out.append(p)
                continue
            v = evaluate(p, scope)
            if has_unknown(v):
                return UNKNOWN
            out.append(tf_str(v, p.line))
        text = "".join(out)
        if len(text) > limits.MAX_STRING:
            limits.check_size(text, "a template")
        return text
    if t is A.Var:
        if node.name in scope.bindings:
            return scope.bindings[node.name]
        return scope.resolver(node.name, node)
    if t is A.GetAttr:
        return get_attr(evaluate(node.obj, scope), node.name, node)
    if t is A.Index:
        return index(evaluate(node.obj, scope), evaluate(node.key, scope), node)
    if t is A.TupleCons:
        return [evaluate(x, scope) for x in node.items]
    if t is A.ObjectCons:
        out = {}
        for k, v in node.items:
            kv = evaluate(k, scope)
            if kv is UNKNOWN:
                return UNKNOWN
            out[tf_str(kv, k.line)] = evaluate(v, scope)
        return out
    if t is A.Call:
        return call(node, scope)
    if t is A.Cond:
        c = evaluate(node.cond, scope)
        if c is UNKNOWN:
            evaluate(node.true, scope), evaluate(node.false, scope)
            return UNKNOWN
        return evaluate(node.true if to_bool(c, node.line) else node.false, scope)
    if t is A.BinOp:
        return binop(node, scope)
    if t is A.Unary:
        v = evaluate(node.expr, scope)
        if v is UNKNOWN:
            return UNKNOWN
        return (not to_bool(v, node.line)) if node.op == "!" else -to_number(v, node.line)
    if t is A.Splat:
        src = evaluate(node.src, scope)
        if src is UNKNOWN:
            return UNKNOWN
        if src is None:
            return []
        items = src if isinstance(src, list) else [src]
        limits.spend(len(items), "splat expressions")
        return [evaluate(node.each, scope.child({"\0splat": x})) for x in items]
    if t is A.SplatItem:
        return scope.bindings["\0splat"]
    if t is A.ForExpr:
        return for_expr(node, scope)
    raise EvalError("Unsupported expression", type(node).__name__, getattr(node, "line", 0))


def get_attr(obj, name, node):
    if obj is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        raise EvalError("Unsupported attribute",
                        f'This object does not have an attribute named "{name}".', node.line,
                        "BAD_REFERENCE")
    if obj is None:
        raise EvalError("Attempt to get attribute from null value",
                        "This value is null, so it does not have any attributes.", node.line, "TYPE")
    if isinstance(obj, list):
        raise EvalError("Unsupported attribute",
                        f'Can\'t access attributes on a list of objects. Did you mean to access '
                        f'attribute "{name}" for a specific element of the list, or across all '
                        f'elements of the list?', node.line, "BAD_REFERENCE")
    raise EvalError("Unsupported attribute", f"Can't access attributes on a primitive-typed value "
                    f"({type_name(obj)}).", node.line, "TYPE")


def index(obj, key, node):
    if obj is UNKNOWN or key is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, list):
        try:
            i = to_number(key, node.line)
        except EvalError:
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: a number is required.", node.line, "TYPE") from None
        if not isinstance(i, int) and not float(i).is_integer():
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: indexing a sequence requires a whole number.",
                            node.line, "TYPE")
        i = int(i)
        if i < 0 or i >= len(obj):
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: the given index is greater than or equal to the "
                            "length of the collection.", node.line, "BAD_REFERENCE")
        return obj[i]
    if isinstance(obj, dict):
        k = tf_str(key, node.line)
        if k not in obj:
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value.", node.line, "BAD_REFERENCE")
        return obj[k]
    if obj is None:
        raise EvalError("Attempt to index null value", "This value is null, so it does not have "
                        "any indices.", node.line, "TYPE")
    raise EvalError("Invalid index", "This value does not have any indices.", node.line, "TYPE")


def _equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def binop(node, scope):
    op = node.op
    left, right = evaluate(node.left, scope), evaluate(node.right, scope)
    if op in ("&&", "||"):
        if left is not UNKNOWN and right is not UNKNOWN:
            lb, rb = to_bool(left, node.line), to_bool(right, node.line)
            return (lb and rb) if op == "&&" else (lb or rb)
        if op == "&&" and (left is False or right is False):
            return False
        if op == "||" and (left is True or right is True):
            return True
        return UNKNOWN
    if has_unknown(left) or has_unknown(right):
        return UNKNOWN
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    a, b = to_number(left, node.line), to_number(right, node.line)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise EvalError("Operation failed", "Error during operation: divide by zero.", node.line)
        r = a / b
        return int(r) if float(r).is_integer() else r
    if op == "%":
        return a % b
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def for_expr(node, scope):
    coll = evaluate(node.coll, scope)
    if coll is UNKNOWN:
        return UNKNOWN
    if isinstance(coll, dict):
        pairs = list(coll.items())
    elif isinstance(coll, list):
        pairs = list(enumerate(coll))
    else:
        raise EvalError("Iteration over non-iterable value", "A value of type "
                        f"{type_name(coll)} cannot be used as the collection in a 'for' expression.",
                        node.line, "TYPE")
    limits.spend(len(pairs), "for expressions")
    is_obj = node.key is not None
    out_list, out_obj = [], {}
    for k, v in pairs:
        b = {node.vvar: v}
        if node.kvar:
            b[node.kvar] = k
        s = scope.child(b)
        if node.cond is not None:
            c = evaluate(node.cond, s)
            if c is UNKNOWN:
                return UNKNOWN
            if not to_bool(c, node.line):
                continue
        if is_obj:
            kv = evaluate(node.key, s)
            if kv is UNKNOWN:
                return UNKNOWN
            kv = tf_str(kv, node.line)
            val = evaluate(node.value, s)
            if node.group:
                out_obj.setdefault(kv, []).append(val)
            elif kv in out_obj:
                raise EvalError("Duplicate object key", f'Two different items produced the key "{kv}" '
                                "in this 'for' expression.", node.line)
            else:
                out_obj[kv] = val
        else:
            out_list.append(evaluate(node.value, s))
    return out_obj if is_obj else out_list


# --- functions ----------------------------------------------------------------------------
def call(node, scope):
    name = node.name.split("::")[-1]
    if name == "__directive__":
        return UNKNOWN
    if name in ("try", "can"):
        for a in node.args:
            try:
                v = evaluate(a, scope)
                return True if name == "can" else v
            except EvalError:
                if name == "can":
                    return False
        if name == "can":
            return False
        raise EvalError("Error in function call", 'Call to function "try" failed: no expression '
                        "succeeded.", node.line)
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise EvalError("Call to unknown function", f'There is no function named "{name}".',
                        node.line)
    args = [evaluate(a, scope) for a in node.args]
    if node.expand and args:
        last = args.pop()
        if last is UNKNOWN:
            return UNKNOWN
        args.extend(last if isinstance(last, list) else list(last.values()))
    if name in _PATH_FUNCS:
        return fn(scope.base_dir, *args) if not has_unknown(args) else UNKNOWN
    if name in _SHALLOW:
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
    elif has_unknown(args):
        return UNKNOWN
    limits.guard_call(name, args)  # refused before it is built when past a ceiling
    try:
        out = fn(*args)
        if isinstance(out, (list, dict, str)):
            limits.check_size(out, f'function "{name}"')
        return out
    except EvalError as e:
        e.line = e.line or node.line
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError) as exc:
        raise EvalError("Invalid function argument",
                        f'Call to function "{name}" failed: {exc}.', node.line, "TYPE") from None


def _outside(base, path) -> bool:
    """A path that leaves the configuration directory (absolute, ~, .., or a symlink out of it); with
    no directory every path does: a candidate's text reads nothing from the host."""
    from verifirst.verifiers.terraform.confine import is_inside

    if base is None:
        return True
    return not is_inside(os.path.join(base, os.path.expanduser(path)), base)


def _refuse_outside(path):
    raise EvalError("Invalid function argument",
                    f'Invalid value for "path" parameter: "{path}" is outside the configuration directory; '
                    "this function reads only files that are distributed as part of the configuration "
                    "source code, inside its directory.")


def _read(base, path, mode="r"):
    if base is not None and _outside(base, path):
        _refuse_outside(path)
    if base is None and (os.path.isabs(path) or path.startswith("~") or ".." in re.split(r"[\\/]", path)):
        _refuse_outside(path)
    full = path if os.path.isabs(path) or base is None else os.path.join(base, path)
    if base is None and not os.path.isabs(path) or not os.path.isfile(full):
        raise EvalError("Invalid function argument",
                        f'Invalid value for "path" parameter: no file exists at "{path}"; this '
                        "function works only with files that are distributed as part of the "
                        "configuration source code, so if this file will be created by a resource "
                        "in this configuration you must instead obtain this result from an "
                        "attribute of that resource.")
    with open(full, mode) as fh:
        return fh.read()


def _file(base, path):
    return _read(base, path)


def _filebytes(base, path):
    return _read(base, path, "rb")


def _templatefile(base, path, vars_=None):
    from verifirst.verifiers.terraform._hcl_ast import Template, _Converter
    text = _read(base, path)
    node = Template(_Converter(path)._template_parts(text, 1))
    return evaluate(node, Scope(lambda n, nd: (vars_ or {})[n] if n in (vars_ or {}) else
                                _raise_undeclared(n, nd), base))


def _raise_undeclared(name, node):
    raise EvalError("Invalid function argument", f'vars map does not contain key "{name}"',
                    node.line)


def _fileexists(base, path):
    if _outside(base, path):
        return False
    return os.path.isfile(os.path.join(base, path))


def _format(fmt, *args):
    args = list(args)
    out, i = [], 0

    def conv(m):
        nonlocal i
        spec = m.group(0)
        if spec == "%%":
            return "%"
        v = args[i]
        i += 1
        verb = spec[-1]
        if verb in "sv":
            return tf_str(v) if not isinstance(v, (list, dict)) else json.dumps(v)
        if verb == "q":
            return json.dumps(tf_str(v))
        if verb == "t":
            return "true" if to_bool(v) else "false"
        if verb in "dfeEgGxXob":
            return (spec[:-1] + (verb if verb != "b" else "d")) % (
                int(to_number(v)) if verb in "dxXob" else float(to_number(v)))
        return spec
    out = re.sub(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?[a-zA-Z])", conv, fmt)
    return out


def _merge(*maps):
    out = {}
    for m in maps:
        if m is None:
            continue
        if not isinstance(m, dict):
            raise EvalError("Invalid function argument", "arguments must be maps or objects, got "
                            f"{type_name(m)}.", 0, "TYPE")
        out.update(m)
    return out


def _flatten(v):
    out = []
    for x in v:
        if isinstance(x, list):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out


def _distinct(v):
    out = []
    for x in v:
        if x not in out:
            out.append(x)
    return out


def _toset(v):
    if isinstance(v, dict):
        raise EvalError("Invalid function argument", "cannot convert object to set", 0, "TYPE")
    d = _distinct(v)
    if all(isinstance(x, str) for x in d):
        return sorted(d)
    return d


def _lookup(m, k, *default):
    if k in m:
        return m[k]
    if default:
        return default[0]
    raise EvalError("Invalid function argument", f'the given object has no attribute "{k}".')


def _element(lst, i):
    if not lst:
        raise EvalError("Invalid function argument", "cannot use element function with an empty "
                        "list.")
    return lst[int(i) % len(lst)]


def _coalesce(*a):
    for x in a:
        if x is not None and x != "":
            return x
    raise EvalError("Invalid function argument", "no non-null, non-empty-string arguments.")


def _cidrsubnet(prefix, newbits, netnum):
    net = ipaddress.ip_network(prefix, strict=False)
    new_prefix = net.prefixlen + int(newbits)
    size = 2 ** (net.max_prefixlen - new_prefix)
    base = int(net.network_address) + int(netnum) * size
    return str(ipaddress.ip_network((base, new_prefix)))


def _cidrhost(prefix, hostnum):
    net = ipaddress.ip_network(prefix, strict=False)
    n = int(hostnum)
    addr = (int(net.network_address) + n) if n >= 0 else (int(net.broadcast_address) + 1 + n)
    return str(ipaddress.ip_address(addr))


def _cidrsubnets(prefix, *newbits):
    net = ipaddress.ip_network(prefix, strict=False)
    out, cur = [], int(net.network_address)
    for nb in newbits:
        plen = net.prefixlen + int(nb)
        size = 2 ** (net.max_prefixlen - plen)
        cur = (cur + size - 1) // size * size
        out.append(str(ipaddress.ip_network((cur, plen))))
        cur += size
    return out


def _jsonencode(v):
    return json.dumps(v, separators=(",", ":"), sort_keys=True, ensure_ascii=False).replace(
        "<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _range(*a):
    a = [to_number(x) for x in a]
    if len(a) == 1:
        start, stop, step = 0, a[0], 1
    elif len(a) == 2:
        start, stop, step = a[0], a[1], 1
    else:
        start, stop, step = a
    out, x = [], start
    while (x < stop) if step > 0 else (x > stop):
        out.append(x)
        x += step
    return out


def _rx(fn: str, *args):
    """re's function on terraform's RE2 patterns, with a time ceiling: the `regex` module (when
    installed) stops a catastrophic backtrack that RE2 would never start."""
    try:
        import regex as rx
    except ImportError:  # pragma: no cover - dspy brings it
        return getattr(re, fn)(*args)
    try:
        out = getattr(rx, fn)(*args, timeout=limits.REGEX_S)
        return list(out) if fn == "finditer" else out
    except TimeoutError:
        raise EvalError(limits.SUMMARY, limits.message("the regular expression's matching time", f"more than "
                                                       f"{limits.REGEX_S} s", limits.REGEX_S, "s"), 0, limits.LIMIT) from None


def _regex(pattern, s):
    m = _rx("search", _go_re(pattern), s)
    if not m:
        raise EvalError("Invalid function argument", "pattern did not match any part of the "
                        "given string.")
    if m.groupdict():
        return m.groupdict()
    return list(m.groups()) if m.groups() else m.group(0)


def _regexall(pattern, s):
    out = []
    for m in _rx("finditer", _go_re(pattern), s):
        out.append(m.groupdict() or (list(m.groups()) if m.groups() else m.group(0)))
    return out


def _go_re(p):
    return p.replace("(?P<", "(?P<")


def _yamlencode(v):
    return json.dumps(v)


def _tolist(v):
    return list(v.values()) if isinstance(v, dict) else list(v)


def _substr(s, off, length):
    off, length = int(off), int(length)
    if off < 0:
        off = len(s) + off
    return s[off:] if length < 0 else s[off:off + length]


def _slice(lst, a, b):
    return lst[int(a):int(b)]


FUNCTIONS = {
    "abs": abs, "ceil": lambda x: math.ceil(to_number(x)), "floor": lambda x: math.floor(to_number(x)),
    "max": lambda *a: max(to_number(x) for x in a), "min": lambda *a: min(to_number(x) for x in a),
    "pow": lambda a, b: to_number(a) ** (float(to_number(b)) if abs(to_number(b)) > 512 else to_number(b)), "signum": lambda x: (x > 0) - (x < 0),
    "log": lambda x, b: math.log(x, b), "parseint": lambda s, b: int(s, int(b)),
    "sum": lambda lst: sum(to_number(x) for x in lst),
    "chomp": lambda s: s.rstrip("\r\n"), "format": _format,
    "formatlist": lambda f, *a: [_format(f, *vals) for vals in zip(*[x if isinstance(x, list) else
                                                                      [x] * max(len(y) for y in a if isinstance(y, list)) for x in a])],
    "indent": lambda n, s: s.replace("\n", "\n" + " " * int(n)),
    "join": lambda sep, *lists: sep.join(tf_str(x) for lst in lists for x in lst),
    "lower": lambda s: s.lower(), "upper": lambda s: s.upper(), "title": lambda s: s.title(),
    "split": lambda sep, s: s.split(sep) if s != "" else [""],
    "replace": lambda s, a, b: _rx("sub", _go_re(a[1:-1]), re.sub(r"\$(\d)", r"\\\1", b), s)
    if len(a) > 1 and a.startswith("/") and a.endswith("/") else s.replace(a, b),
    "strrev": lambda s: s[::-1], "substr": _substr,
    "trim": lambda s, c: s.strip(c), "trimprefix": lambda s, p: s[len(p):] if s.startswith(p) else s,
    "trimsuffix": lambda s, p: s[:-len(p)] if p and s.endswith(p) else s,
    "trimspace": lambda s: s.strip(), "startswith": lambda s, p: s.startswith(p),
    "endswith": lambda s, p: s.endswith(p), "strcontains": lambda s, p: p in s,
    "regex": _regex, "regexall": _regexall,
    "alltrue": lambda lst: all(to_bool(x) for x in lst), "anytrue": lambda lst: any(to_bool(x) for x in lst),
    "chunklist": lambda lst, n: [lst[i:i + int(n)] for i in range(0, len(lst), int(n))],
    "coalesce": _coalesce, "coalescelist": lambda *a: next((x for x in a if x), []),
    "compact": lambda lst: [x for x in lst if x not in (None, "")],
    "concat": lambda *a: [x for lst in a for x in lst], "contains": lambda lst, v: v in lst,
    "distinct": _distinct, "element": _element, "flatten": _flatten,
    "index": lambda lst, v: lst.index(v), "keys": lambda m: sorted(m),
    "length": lambda v: len(v), "lookup": _lookup, "merge": _merge,
    "one": lambda lst: (lst[0] if lst else None) if len(lst) <= 1 else
    (_ for _ in ()).throw(EvalError("Invalid function argument", "must be a list, set, or tuple "
                                    "value with either zero or one elements.")),
    "range": _range, "reverse": lambda lst: list(reversed(lst)),
    "setintersection": lambda a, *r: [x for x in _toset(a) if all(x in o for o in r)],
    "setunion": lambda *a: _toset([x for s in a for x in s]),
    "setsubtract": lambda a, b: [x for x in _toset(a) if x not in b],
    "setproduct": lambda *a: [list(t) for t in __import__("itertools").product(*a)],
    "slice": _slice, "sort": lambda lst: sorted(tf_str(x) for x in lst),
    "transpose": lambda m: {v: sorted(k for k, vs in m.items() if v in vs) for vs in m.values() for v in vs},
    "values": lambda m: [m[k] for k in sorted(m)], "zipmap": lambda k, v: dict(zip(k, v)),
    "base64decode": lambda s: base64.b64decode(s).decode(),
    "base64encode": lambda s: base64.b64encode(s.encode()).decode(),
    "base64gzip": lambda s: base64.b64encode(__import__("gzip").compress(s.encode())).decode(),
    "jsondecode": lambda s: json.loads(s), "jsonencode": _jsonencode,
    "urlencode": lambda s: __import__("urllib.parse").parse.quote_plus(s),
    "yamlencode": _yamlencode, "yamldecode": lambda s: json.loads(s),
    "csvdecode": lambda s: list(__import__("csv").DictReader(s.splitlines())),
    "tobool": lambda v: None if v is None else to_bool(v),
    "tonumber": lambda v: None if v is None else to_number(v),
    "tostring": lambda v: None if v is None else tf_str(v),
    "tolist": _tolist, "toset": _toset, "tomap": lambda m: dict(m),
    "sensitive": lambda v: v, "nonsensitive": lambda v: v,
    "type": type_name,
    "md5": lambda s: hashlib.md5(s.encode()).hexdigest(),
    "sha1": lambda s: hashlib.sha1(s.encode()).hexdigest(),
    "sha256": lambda s: hashlib.sha256(s.encode()).hexdigest(),
    "sha512": lambda s: hashlib.sha512(s.encode()).hexdigest(),
    "base64sha256": lambda s: base64.b64encode(hashlib.sha256(s.encode()).digest()).decode(),
    "base64sha512": lambda s: base64.b64encode(hashlib.sha512(s.encode()).digest()).decode(),
    "uuid": lambda: UNKNOWN, "uuidv5": lambda ns, n: UNKNOWN,
    "bcrypt": lambda *a: UNKNOWN, "timestamp": lambda: UNKNOWN,
    "plantimestamp": lambda: UNKNOWN, "formatdate": lambda f, t: UNKNOWN,
    "timeadd": lambda t, d: UNKNOWN, "timecmp": lambda a, b: UNKNOWN,
    "cidrhost": _cidrhost, "cidrnetmask": lambda p: str(ipaddress.ip_network(p, strict=False).netmask),
    "cidrsubnet": _cidrsubnet, "cidrsubnets": _cidrsubnets,
    "basename": os.path.basename, "dirname": os.path.dirname,
    "pathexpand": os.path.expanduser, "abspath": os.path.abspath,
    "file": _file, "filebase64": lambda b, p: base64.b64encode(_filebytes(b, p)).decode(),
    "filemd5": lambda b, p: hashlib.md5(_filebytes(b, p)).hexdigest(),
    "filesha1": lambda b, p: hashlib.sha1(_filebytes(b, p)).hexdigest(),
    "filesha256": lambda b, p: hashlib.sha256(_filebytes(b, p)).hexdigest(),
    "filebase64sha256": lambda b, p: base64.b64encode(hashlib.sha256(_filebytes(b, p)).digest()).decode(),
    "filebase64sha512": lambda b, p: base64.b64encode(hashlib.sha512(_filebytes(b, p)).digest()).decode(),
    "fileexists": _fileexists, "templatefile": _templatefile,
    "fileset": lambda b, p, pat: [] if _outside(b, p) else sorted(
        os.path.relpath(x, os.path.join(b, p)) for x in __import__("glob").glob(os.path.join(b, p, pat), recursive=True)
        if not _outside(b, os.path.relpath(x, b))),
}
_PATH_FUNCS = {"file", "filebase64", "filemd5", "filesha1", "filesha256", "filebase64sha256",
               "filebase64sha512", "fileexists", "templatefile", "fileset"}
# these look only at the container shape, so unknown elements are fine
_SHALLOW = {"length", "concat", "merge", "tolist", "toset", "tomap", "flatten", "element",
            "lookup", "keys", "values", "compact", "coalescelist", "slice", "reverse", "one",
            "zipmap", "sensitive", "nonsensitive", "setunion", "distinct", "try", "can"}
