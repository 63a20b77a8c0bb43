"""FEH rule parameters on disk (JSON written by benchmarks/studies/feh_quality.py)."""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from verifirst.core.errors import InputError

from ._feh_compare import FehParams

_TYPES = {f.name: f.type for f in fields(FehParams)}
FITTED_NL2SH = Path(__file__).resolve().parent / "data" / "feh_params_nl2sh.json"


def fitted_nl2sh() -> FehParams:
    """Parameters fitted on the 600 NL2SH-ALFA pairs: for other data (generated candidates,
    InterCode, EAbench), never for scoring those pairs."""
    return load_params(FITTED_NL2SH)


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
        kind = str(_TYPES[k])
        if kind == "bool":
            ok, expected = isinstance(v, bool), "true/false"
        elif kind == "int":
            ok, expected = isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"
        else:  # thresholds; a value above 1 switches a similarity rule off
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.01
            expected = "a number in [0, 1.01]"
        if not ok:
            raise InputError(f"bad value {v!r}", path=str(p), field=k, expected=expected)
    return FehParams.from_dict(d)
