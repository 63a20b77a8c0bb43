"""A user's judge prompt as a template: its `{{ variable }}` slots, which record fields fill them, rendering.

Templates use MLflow's double-brace style (`{{ title }}`, and `{{ inputs }}` / `{{ outputs }}` as
`mlflow.genai.judges.make_judge` writes them). A view maps record fields to variables: `--view
title,diff` (each variable named as its field) or `--view diff=patch,title=title` (`field=variable`);
several fields may fill one variable (they are rendered as labelled blocks). Every variable must get
a field before any LM call: the error names the variable and the fields the records have.
"""
from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from verifirst.core.errors import InputError

VARIABLE_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def template_variables(text: str) -> list[str]:
    """The template's variable names in first-appearance order (each once)."""
    seen: list[str] = []
    for name in VARIABLE_RE.findall(text or ""):
        if name not in seen:
            seen.append(name)
    return seen


def missing_variables(text: str, variables: Sequence[str]) -> list[str]:
    """The variables of `variables` that `text` no longer contains (an edit dropped them)."""
    have = set(template_variables(text))
    return [v for v in variables if v not in have]


def parse_view(spec: str | Sequence[str] | None) -> list[tuple[str, str]]:
    """`--view` as (field, variable) pairs: "title,diff" -> same names; "diff=patch" -> field diff fills patch.

    Args:
        spec: the --view text (comma list), a sequence of such entries, or None.
    """
    if spec is None:
        return []
    parts = spec.split(",") if isinstance(spec, str) else [str(p) for p in spec]
    out = []
    for raw in parts:
        part = raw.strip()
        if not part:
            continue
        field, _, var = part.partition("=")
        field, var = field.strip(), (var.strip() or field.strip())
        if not field or not VARIABLE_RE.fullmatch("{{" + var + "}}"):
            raise InputError(f"--view entry {part!r} is not FIELD or FIELD=VARIABLE", field="--view",
                             expected="e.g. title,diff,test_plan or diff=patch,title=title")
        out.append((field, var))
    return out


def bind_view(template: str, view: str | Sequence[str] | None, record_fields: Sequence[str]) -> dict[str, list[str]]:
    """Which record fields fill each template variable: {variable: [field, ...]}.

    Without a view each variable is filled by the record field of the same name. A variable no field
    fills, or a view field the records lack, is an input error naming both sides.

    Args:
        template: the prompt text.
        view: the --view spec (see parse_view), or None.
        record_fields: the fields the records have.
    """
    variables = template_variables(template)
    have = sorted(record_fields)
    pairs = parse_view(view) if view else [(v, v) for v in variables if v in have]
    for field, var in pairs:
        if field not in have:
            raise InputError(f"--view names field {field!r} (for variable {{{{ {var} }}}}), which the records "
                             f"do not have", field="--view", expected="one of the record fields: " + ", ".join(have))
        if var not in variables:
            raise InputError(f"--view maps field {field!r} to variable {{{{ {var} }}}}, which the prompt does not "
                             f"contain", field="--view",
                             expected="one of the prompt's variables: " + (", ".join(variables) or "(none)"))
    binding: dict[str, list[str]] = {}
    for field, var in pairs:
        binding.setdefault(var, []).append(field)
    unfilled = [v for v in variables if v not in binding]
    if unfilled:
        raise InputError(f"prompt variable(s) {', '.join('{{ %s }}' % v for v in unfilled)} have no record field "
                         f"to fill them (records have: {', '.join(have) or 'no fields'})", field="--view",
                         expected="map them with --view FIELD=VARIABLE, or name the variables as record fields")
    return {v: binding[v] for v in variables}


def render_value(fields: Sequence[str], record: Mapping[str, Any]) -> str:
    """The text one variable gets: the field's value, or labelled blocks for several fields."""
    if len(fields) == 1:
        return _text(record.get(fields[0], ""))
    return "\n\n".join(f"{f}:\n{_text(record.get(f, ''))}" for f in fields)


def render(template: str, binding: Mapping[str, Sequence[str]], record: Mapping[str, Any]) -> str:
    """The template with every bound variable replaced by its fields' text from `record`."""
    values = {var: render_value(fields, record) for var, fields in binding.items()}
    return VARIABLE_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)
