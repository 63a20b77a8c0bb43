"""Schema hints for a repair loop: for an invented argument, close names in the resource's schema
and sibling resource types that own it (aws_s3_bucket + versioning_enabled -> aws_s3_bucket_versioning)."""
from __future__ import annotations

import re

from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.base import VerifierError

_UNSUPPORTED_RE = re.compile(r'(?:argument|block type) named "([^"]+)" is not expected')


def _names(block: dict, prefix: str = "") -> dict[str, str]:
    """name -> where ("argument" / "block" / "argument of block x") over a resource's tree."""
    out = {}
    for n in block.get("attributes", {}):
        out.setdefault(n, f"argument{' of block ' + prefix if prefix else ''}")
    for n, bt in block.get("block_types", {}).items():
        out.setdefault(n, f"block{' inside ' + prefix if prefix else ''}")
        for k, v in _names(bt.get("block", {}), n).items():
            out.setdefault(k, v)
    return out


def schema_hints(errors: list[VerifierError], schema_path: str | None) -> list[str]:
    """For invented arguments: close names in the resource's schema, and sibling resource types
    (aws_s3_bucket + versioning_enabled -> aws_s3_bucket_versioning), S3's dominant failure."""
    if not schema_path:
        return []
    import difflib
    try:
        from verifirst.verifiers.terraform.tf_schema import load_schema
        schema = load_schema(schema_path)
    except Exception:
        return []
    hints = []
    for e in errors:
        m = _UNSUPPORTED_RE.search(e.message)
        if e.cls != T.SELF_DEFINED_PROPERTY or not m or not e.address:
            continue
        parts = e.address.split(".")
        mode, rtype = ("data", parts[1]) if parts[0] == "data" and len(parts) > 2 else ("managed", parts[0])
        block = schema.block(mode, rtype)
        if block is None:
            continue
        bad, names = m.group(1), _names(block)
        close = difflib.get_close_matches(bad, list(names), n=3, cutoff=0.6)
        text = []
        if close:
            text.append("close names in the schema: " + ", ".join(f"{c} ({names[c]})" for c in close))
        stems = dict.fromkeys([bad, bad.rsplit("_", 1)[0]])
        siblings = [t for t in schema.resource_types()
                    if any(t == f"{rtype}_{st}" or t.startswith(f"{rtype}_{st}_") for st in stems)][:3]
        if siblings:
            text.append("configure it with the separate resource " + " or ".join(siblings))
        if text:
            hints.append(f"{e.address}.{bad}: " + "; ".join(text))
    return hints
