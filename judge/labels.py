"""Labels as teams record them, read as PASS/FAIL by one rule for every path.

Outcome files (`verifirst calibrate --pass-at / --label-map`), `vf.calibrate(pass_at=, label_map=)`,
`--from-mlflow` traces and `AutoRefineAligner(pass_at=, label_map=)` read labels through a
`LabelRule`:

- no option: PASS/FAIL, booleans, yes/no, merged/abandoned-style words (verifirst.core.verdicts);
- `pass_at=4`: numeric ratings, PASS at or above 4 (a rating never reads as a word: 1 is not "yes");
- `label_map={"excellent": "PASS", "poor": "FAIL"}` (or "excellent=PASS,poor=FAIL"): categorical
  values, compared case-insensitively, before the words above; it may sit beside pass_at.

A value the rule does not cover is never guessed: `require` gathers every such record and refuses
them together, naming the record ids, the values and the option that would cover them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from verifirst.core.errors import InputError
from verifirst.core.verdicts import FAIL, PASS, normalize_label

SHOWN = 5  # record ids and values named in a refusal


def rating_value(value: Any) -> float | None:
    """A rating as a number: ints, floats and numeric text ("4", " 3.5 "); never a bool (None otherwise).

    Args:
        value: the recorded value.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        x = float(str(value).strip())
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def parse_label_map(spec: Any, field_name: str = "--label-map") -> dict[str, str]:
    """A label map from "excellent=PASS,good=PASS,poor=FAIL" or a dict; keys lower-cased.

    Args:
        spec: the option's text, a mapping, or None/"" (no map).
        field_name: the option named in an error.
    """
    if spec in (None, ""):
        return {}
    if isinstance(spec, str):
        pairs = []
        for part in (p for p in spec.split(",") if p.strip()):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise InputError(f"{part.strip()!r} is not VALUE=PASS or VALUE=FAIL", field=field_name,
                                 expected="e.g. excellent=PASS,good=PASS,poor=FAIL")
            pairs.append((key, value))
    elif isinstance(spec, Mapping):
        pairs = list(spec.items())
    else:
        raise InputError(f"a {type(spec).__name__} is not a label map", field=field_name,
                         expected="a dict or text like excellent=PASS,poor=FAIL")
    out: dict[str, str] = {}
    for key, value in pairs:
        target = str(value).strip().upper()
        if target not in (PASS, FAIL):
            raise InputError(f"{key!s}={value!s} maps to neither PASS nor FAIL", field=field_name,
                             expected="VALUE=PASS or VALUE=FAIL")
        out[str(key).strip().lower()] = target
    return out


@dataclass(frozen=True)
class LabelRule:
    """How recorded values read as PASS/FAIL.

    Args:
        pass_at: ratings at or above it are PASS, below it FAIL (None: ratings are not read).
        label_map: value (lower-cased) -> PASS/FAIL for categorical labels.
    """

    pass_at: float | None = None
    label_map: dict = field(default_factory=dict)

    @classmethod
    def of(cls, pass_at: Any = None, label_map: Any = None, *, field_prefix: str = "--") -> "LabelRule":
        """A checked rule from the user's options (InputError naming the option otherwise).

        Args:
            pass_at: the --pass-at value (a number) or None.
            label_map: the --label-map text or dict, or None.
            field_prefix: "--" for CLI option names, "" for API keywords.
        """
        th = None
        if pass_at not in (None, ""):
            th = rating_value(pass_at)
            if th is None:
                raise InputError(f"{pass_at!r} is not a number", field=f"{field_prefix}pass{'-' if field_prefix else '_'}at",
                                 expected="a rating threshold such as 4 (ratings >= it are PASS)")
        name = f"{field_prefix}label{'-' if field_prefix else '_'}map"
        return cls(th, parse_label_map(label_map, name))

    @property
    def given(self) -> bool:
        """True when the user gave pass_at or a label map."""
        return self.pass_at is not None or bool(self.label_map)

    def describe(self) -> str:
        """The rule in words, for reports and errors."""
        parts = []
        if self.label_map:
            parts.append("label_map " + ",".join(f"{k}={v}" for k, v in self.label_map.items()))
        if self.pass_at is not None:
            parts.append(f"pass_at {self.pass_at:g} (ratings >= {self.pass_at:g} are PASS)")
        return "; ".join(parts) or "PASS/FAIL, booleans, yes/no, merged/abandoned words"

    def read(self, value: Any) -> str | None:
        """PASS, FAIL, or None when the rule does not cover the value.

        Args:
            value: the recorded label (text, number or bool).
        """
        if value is None:
            return None
        if self.label_map and not isinstance(value, bool):
            hit = self.label_map.get(str(value).strip().lower())
            if hit is not None:
                return hit
        if isinstance(value, bool):
            return PASS if value else FAIL
        number = rating_value(value)
        if number is not None:
            if self.pass_at is not None:
                return PASS if number >= self.pass_at else FAIL
            if isinstance(value, (int, float)):
                return {0.0: FAIL, 1.0: PASS}.get(number)  # a bare 0/1 may be a boolean; others need pass_at
            return normalize_label(value)
        return normalize_label(value)

    def hint(self, values: Iterable[Any]) -> str:
        """The option that would cover these uncovered values.

        Args:
            values: the uncovered raw values.
        """
        vals = list(dict.fromkeys(str(v) for v in values))
        numbers = [rating_value(v) for v in vals]
        if vals and all(n is not None for n in numbers):
            return ("pass_at=N (--pass-at N): ratings >= N are PASS; "
                    f"the values seen run from {min(numbers):g} to {max(numbers):g}")
        example = ",".join(f"{v}=PASS|FAIL" for v in vals[:SHOWN])
        return f"label_map (--label-map {example}), mapping every value to PASS or FAIL"

    def require(self, records: Iterable[tuple[str, Any]], *, where: str, field_name: str = "label",
                error: type[InputError] = InputError) -> dict[str, str]:
        """Each record's label; refuses all uncovered records together (counted, ids and values named).

        Args:
            records: (record id, raw value) pairs.
            where: the source named in the error (a file, an experiment, "traces").
            field_name: the field or assessment holding the label.
            error: the error class raised (an InputError subclass).
        """
        out: dict[str, str] = {}
        bad: list[tuple[str, Any]] = []
        records = list(records)
        for rid, raw in records:
            label = self.read(raw)
            if label is None:
                bad.append((rid, raw))
            else:
                out[rid] = label
        if bad and self.pass_at is None and any(rating_value(v) is not None for _, v in bad):
            # ratings among the values: a 0 or 1 beside them is a rating too, not a boolean
            bad += [(rid, raw) for rid, raw in records if rating_value(raw) is not None and rid in out]
            for rid, _ in bad:
                out.pop(rid, None)
        if bad:
            values = list(dict.fromkeys(repr(v) if isinstance(v, str) else str(v) for _, v in bad))
            ids = ", ".join(str(r) for r, _ in bad[:SHOWN]) + (" ..." if len(bad) > SHOWN else "")
            raise error(f"{len(bad)} of {len(out) + len(bad)} label(s) in {where} are not covered by "
                        f"{self.describe()}: values {', '.join(values[:2 * SHOWN])} (records {ids})",
                        field=field_name, expected=self.hint(v for _, v in bad))
        return out
