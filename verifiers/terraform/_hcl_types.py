"""Conversion of values to schema types (cty rules, simplified) and schema-derived shapes."""
from __future__ import annotations

from verifirst.verifiers.terraform._hcl_eval import UNKNOWN, EvalError, _num_str, has_unknown, type_name


def _need(kind, v):
    return EvalError("Incorrect attribute value type", f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} is required, got {type_name(v)}", 0,
                     "TYPE")


def convert(v, ty):
    """v converted to schema type `ty`; UNKNOWN stays; raises EvalError(cls TYPE)."""
    if v is UNKNOWN or v is None or ty == "dynamic":
        return v
    if ty == "string":
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return _num_str(v)
        if isinstance(v, str):
            return v
        raise _need("string", v)
    if ty == "number":
        if isinstance(v, bool):
            raise _need("number", v)
        if isinstance(v, (int, float)):
            return v
        if isinstance(v, str):
            try:
                f = float(v)
            except ValueError:
                raise EvalError("Incorrect attribute value type", f'a number is required, got '
                                f'string "{v}"', 0, "TYPE") from None
            return int(f) if f.is_integer() else f
        raise _need("number", v)
    if ty == "bool":
        if isinstance(v, bool):
            return v
        if v in ("true", "false"):
            return v == "true"
        raise _need("bool", v)
    if isinstance(ty, list):
        kind = ty[0]
        if kind in ("list", "set"):
            if isinstance(v, dict):
                raise _need(kind + " of " + _tname(ty[1]), v)
            if not isinstance(v, list):
                raise _need(kind + " of " + _tname(ty[1]), v)
            out = [convert(x, ty[1]) for x in v]
            if kind == "set":
                if any(has_unknown(x) for x in out):
                    return UNKNOWN  # a set with unknown members is wholly unknown in a plan
                out = _set_order(out)
            return out
        if kind == "map":
            if not isinstance(v, dict):
                raise _need("map of " + _tname(ty[1]), v)
            return {k: convert(x, ty[1]) for k, x in sorted(v.items())}
        if kind == "object":
            if not isinstance(v, dict):
                raise _need("object", v)
            attrs, out = ty[1], {}
            optional = set(ty[2]) if len(ty) > 2 else set()
            for k in v:
                if k not in attrs:
                    raise EvalError("Incorrect attribute value type",
                                    f'attribute "{k}" is not expected here', 0, "TYPE")
            for k, at in attrs.items():
                if k not in v and k not in optional:
                    raise EvalError("Incorrect attribute value type",
                                    f'attribute "{k}" is required', 0, "TYPE")
                out[k] = convert(v.get(k), at)
            return out
        if kind == "tuple":
            if not isinstance(v, list) or len(v) != len(ty[1]):
                raise _need("tuple", v)
            return [convert(x, t) for x, t in zip(v, ty[1])]
    return v


def _tname(ty) -> str:
    return ty if isinstance(ty, str) else ty[0]


def _set_order(items):
    if any(x is UNKNOWN for x in items):
        return items
    uniq = []
    for x in items:
        if x not in uniq:
            uniq.append(x)
    if all(isinstance(x, str) for x in uniq):
        return sorted(uniq)
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in uniq):
        return sorted(uniq)
    return uniq


def nested_type_to_type(nt: dict):
    """Schema `nested_type` (protocol 6 nested attributes) as a plain cty-like type."""
    attrs = {k: (a["type"] if "type" in a else nested_type_to_type(a["nested_type"]))
             for k, a in nt.get("attributes", {}).items()}
    optional = [k for k, a in nt.get("attributes", {}).items() if not a.get("required")]
    obj = ["object", attrs, optional]
    mode = nt.get("nesting_mode", "single")
    return obj if mode == "single" else [mode, obj]


def attr_type(a: dict):
    return a["type"] if "type" in a else nested_type_to_type(a.get("nested_type", {}))


def unknown_shape(v):
    """after_unknown for a value: true where unknown; containers keep their shape."""
    if v is UNKNOWN:
        return True
    if isinstance(v, list):
        return [unknown_shape(x) for x in v]
    if isinstance(v, dict):
        return {k: u for k, u in ((k, unknown_shape(x)) for k, x in v.items()) if u is not False}
    return False


def sensitive_shape(v, sens=False):
    if sens:
        return True
    if isinstance(v, list):
        return [sensitive_shape(x) for x in v]
    if isinstance(v, dict):
        return {k: s for k, s in ((k, sensitive_shape(x)) for k, x in v.items()) if s is not False}
    return False


def strip_unknown(v):
    """planned values: unknown attributes are left out of objects."""
    if isinstance(v, dict):
        return {k: strip_unknown(x) for k, x in v.items() if x is not UNKNOWN}
    if isinstance(v, list):
        return [None if x is UNKNOWN else strip_unknown(x) for x in v]
    return v
