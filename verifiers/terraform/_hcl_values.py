"""Values of the python evaluator: UNKNOWN (known after apply), the scope of root names, and
terraform's conversions of primitives (string, number, bool) with its error wording."""
from __future__ import annotations

import math

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
