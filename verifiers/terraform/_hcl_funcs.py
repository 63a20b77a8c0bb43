"""terraform's built-in functions for the python evaluator (split from _hcl_eval): FUNCTIONS by
name, the path functions that read relative to the configuration directory (never outside it),
and the functions that look only at a container's shape (unknown elements allowed)."""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import math
import os
import re

from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_errors import EvalError
from verifirst.verifiers.terraform._hcl_values import UNKNOWN, tf_str, to_bool, to_number, type_name


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
    "fileexists": _fileexists,  # templatefile: _hcl_eval adds it (it evaluates a template)
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
