"""FEH rule parameters on disk (JSON written by benchmarks/feh_quality.py)."""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from verifirst.errors import InputError

from ._feh_compare import FehParams

_TYPES = {f.name: f.type for f in fields(FehParams)}


def load_params(path: str | Path) -> FehParams:
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("FEH params file not found", path=str(p)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", path=str(p), line=e.lineno) from None
    d = raw.get("params", raw) if isinstance(raw, dict) else None
    if not isinstance(d, dict):
        raise InputError("expected an object of FEH parameters", path=str(p))
    for k, v in d.items():
        if k not in _TYPES:
            raise InputError(f"unknown parameter {k!r}", path=str(p), field=k,
                             expected=", ".join(sorted(_TYPES)))
        want = bool if _TYPES[k] in (bool, "bool") else float
        if want is bool and not isinstance(v, bool) or want is float and (
                isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0):
            raise InputError(f"bad value {v!r}", path=str(p), field=k,
                             expected="true/false" if want is bool else "a number in [0, 1]")
    return FehParams.from_dict(d)
