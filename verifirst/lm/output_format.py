"""How the adapter describes a signature's fields to the model, without `{field}` placeholders.

DSPy's JSONAdapter shows the expected structure as `[[ ## task ## ]]\\n{task}` and
`{"command": "{command}"}`. A small model (the embedded SmolLM2-135M) copies that skeleton and
answers `{"command": "{command}"}`: a reply that parses but says nothing. Here each field is
described in words, and a reply that still copies a placeholder is detected so the adapter can
treat it as no output (an unusable reply), never as an answer to execute or judge.
"""
from __future__ import annotations

import re
from typing import Any

_PLACEHOLDER_RE = re.compile(r"^\s*\$?[{<\[]{1,2}\s*([A-Za-z_][A-Za-z0-9_]*)\s*[}>\]]{1,2}\s*$")


def _note(name: str, info: Any) -> str:
    """DSPy's type note for a field ("must be True or False", ...), without its placeholder."""
    from dspy.adapters.utils import translate_field_type

    text = translate_field_type(name, info)
    text = text[len(name) + 2:].strip()  # drop the leading "{name}"
    return text.removeprefix("# note: the value you produce ").strip()


def _desc(info: Any) -> str:
    extra = getattr(info, "json_schema_extra", None) or {}
    desc = str(extra.get("desc") or "").strip()
    return "" if desc.startswith("${") else desc  # DSPy's default desc is "${name}"


def field_structure(signature: Any) -> str:
    """The structure part of the system message: input sections and output keys, in words.

    Args:
        signature: the DSPy signature whose fields are described.
    """
    inputs = []
    for name, info in signature.input_fields.items():
        what = _desc(info) or f"the {name}"
        inputs.append(f"[[ ## {name} ## ]]\n(here comes the {name}: {what})")
    outputs = []
    for name, info in signature.output_fields.items():
        what = _desc(info) or f"the {name}"
        note = _note(name, info)
        outputs.append(f'- "{name}": {what}' + (f"; the value {note}" if note else ""))
    return "\n\n".join([
        "All interactions will be structured in the following way, with real values filled in.",
        "Inputs will have the following structure:",
        "\n\n".join(inputs),
        "Outputs will be a JSON object with the following keys, in this order:",
        "\n".join(outputs),
        "Each value is the actual content itself (a real answer written for this input), "
        "never a field name or a placeholder in braces.",
    ]).strip()


def placeholder_copies(signature: Any, values: dict) -> list[str]:
    """The output fields whose value is a bare copy of a field placeholder (`{command}`, `{task}`).

    Args:
        signature: the DSPy signature (its input and output field names are the placeholders).
        values: one parsed reply, output field -> value.
    """
    names = {n.lower() for n in (*signature.input_fields, *signature.output_fields)}
    copied = []
    for field in signature.output_fields:
        value = values.get(field)
        if isinstance(value, str):
            m = _PLACEHOLDER_RE.match(value)
            if m and m.group(1).lower() in names:
                copied.append(field)
    return copied
