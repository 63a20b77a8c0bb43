"""Per-resource documentation built from a provider schema: what a model needs to write a
block that validates (arguments, required/optional, read-only attributes, nested blocks).

One overview doc per resource type plus one doc per top-level nested block, so a search for
"versioning status" can land on the block that holds `status`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

SCHEMA_DOC_VERSION = 1  # bump when the text layout changes: stores rebuild


@dataclass
class Doc:
    id: str
    type: str  # resource or data source type
    kind: str  # "resource" | "data"
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


def load(schema) -> Any:
    """A ProviderSchema from a path or an already loaded schema."""
    from verifirst.verifiers.terraform.tf_schema import load_schema

    return load_schema(schema)


def _type_str(t: Any) -> str:
    if isinstance(t, str):
        return t
    if isinstance(t, list) and len(t) == 2 and t[0] in ("list", "set", "map"):
        return f"{t[0]}({_type_str(t[1])})"
    if isinstance(t, list) and len(t) == 2 and t[0] == "object":
        return "object({" + ", ".join(f"{k}={_type_str(v)}" for k, v in t[1].items()) + "})"
    return json.dumps(t)


def _attr_line(name: str, a: dict) -> str:
    flags = []
    if a.get("deprecated"):
        flags.append("deprecated")
    if a.get("sensitive"):
        flags.append("sensitive")
    tail = f" [{', '.join(flags)}]" if flags else ""
    return f"{name} ({_type_str(a.get('type', a.get('nested_type', '?')))}){tail}"


def split_attributes(block: dict) -> tuple[list[str], list[str], list[str]]:
    """(required, optional, read-only) attribute lines. Optional+computed counts as optional:
    the user may set it; computed-only attributes must never be set."""
    req, opt, ro = [], [], []
    for name, a in sorted((block.get("attributes") or {}).items()):
        if name == "id" and not a.get("required"):
            ro.append(_attr_line(name, a))
        elif a.get("required"):
            req.append(_attr_line(name, a))
        elif a.get("optional"):
            opt.append(_attr_line(name, a))
        else:
            ro.append(_attr_line(name, a))
    return req, opt, ro


def _count(bt: dict) -> str:
    lo, hi = bt.get("min_items", 0) or 0, bt.get("max_items", 0) or 0
    mode = bt.get("nesting_mode", "list")
    if mode == "single":
        return "single block"
    if lo and lo == hi == 1:
        return "exactly one block, required"
    if hi == 1:
        return "at most one block"
    if lo:
        return f"at least {lo} block(s), required"
    return f"any number of blocks ({mode})"


def describe_block(name: str, bt: dict, depth: int = 0, max_depth: int = 3) -> list[str]:
    ind = "  " * depth
    b = bt.get("block") or {}
    dep = " [deprecated]" if b.get("deprecated") else ""
    lines = [f"{ind}block {name} {{ }}: {_count(bt)}{dep}"]
    req, opt, _ = split_attributes(b)
    if req:
        lines.append(f"{ind}  required: " + "; ".join(req))
    if opt:
        lines.append(f"{ind}  optional: " + "; ".join(opt))
    if depth < max_depth:
        for sub, sbt in sorted((b.get("block_types") or {}).items()):
            lines.extend(describe_block(sub, sbt, depth + 1, max_depth))
    return lines


def skeleton(type_name: str, block: dict, kind: str = "resource") -> str:
    """A minimal block with only the required arguments and required nested blocks."""
    keyword = "resource" if kind == "resource" else "data"
    lines = [f'{keyword} "{type_name}" "example" {{']
    for name, a in sorted((block.get("attributes") or {}).items()):
        if a.get("required"):
            lines.append(f"  {name} = <{_type_str(a.get('type'))}>")
    for name, bt in sorted((block.get("block_types") or {}).items()):
        if (bt.get("min_items") or 0) >= 1:
            lines.append(f"  {name} {{")
            for an, a in sorted(((bt.get("block") or {}).get("attributes") or {}).items()):
                if a.get("required"):
                    lines.append(f"    {an} = <{_type_str(a.get('type'))}>")
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def resource_doc(type_name: str, block: dict, kind: str = "resource") -> str:
    """The full text the lookup tool returns for one type."""
    label = "Resource" if kind == "resource" else "Data source"
    req, opt, ro = split_attributes(block)
    out = [f"{label} {type_name}" + (" [deprecated]" if block.get("deprecated") else "")]
    out.append("Required arguments: " + ("; ".join(req) if req else "none"))
    out.append("Optional arguments: " + ("; ".join(opt) if opt else "none"))
    if ro:
        out.append("Read-only attributes (computed, never set them): " + ", ".join(
            line.split(" ", 1)[0] for line in ro))
    blocks = block.get("block_types") or {}
    if blocks:
        out.append("Nested blocks (write them as blocks, not as arguments):")
        for name, bt in sorted(blocks.items()):
            out.extend("  " + ln for ln in describe_block(name, bt))
    out.append("Any argument or block not listed here is not supported by this type.")
    out.append("Minimal example:\n" + skeleton(type_name, block, kind))
    return "\n".join(out)


def overview_doc(type_name: str, block: dict, kind: str = "resource") -> str:
    """Shorter text for embedding (the embedder reads ~256 tokens)."""
    req, opt, _ = split_attributes(block)
    names = lambda lines: ", ".join(ln.split(" ", 1)[0] for ln in lines)
    blocks = ", ".join(sorted(block.get("block_types") or {}))
    label = "resource" if kind == "resource" else "data source"
    words = type_name.replace("aws_", "").replace("_", " ")
    return (f"{label} {type_name} ({words}). required: {names(req) or 'none'}. "
            f"optional: {names(opt) or 'none'}. blocks: {blocks or 'none'}.")


def iter_docs(schema, include_data_sources: bool = True) -> Iterator[Doc]:
    sch = load(schema)
    kinds = [("resource", sch.resource_types(), sch.resource)]
    if include_data_sources:
        kinds.append(("data", sch.data_source_types(), sch.data_source))
    for kind, types, get in kinds:
        for t in types:
            block = get(t) or {}
            prefix = "r" if kind == "resource" else "d"
            yield Doc(f"{prefix}:{t}", t, kind, overview_doc(t, block, kind),
                      {"type": t, "kind": kind, "part": "overview"})
            for name, bt in sorted((block.get("block_types") or {}).items()):
                if name == "timeouts":
                    continue
                text = f"{kind} {t} nested block {name}:\n" + "\n".join(describe_block(name, bt))
                yield Doc(f"{prefix}:{t}#{name}", t, kind, text,
                          {"type": t, "kind": kind, "part": name})


def build_docs(schema, include_data_sources: bool = True) -> list[Doc]:
    return list(iter_docs(schema, include_data_sources))


def schema_fingerprint(schema) -> str:
    """Stable id of a schema's content (a store built from another schema is rebuilt)."""
    import hashlib

    sch = load(schema)
    h = hashlib.sha256(json.dumps(sch.raw, sort_keys=True).encode())
    h.update(str(SCHEMA_DOC_VERSION).encode())
    return h.hexdigest()[:16]


def lookup_text(schema, resource_type: str) -> str:
    """Doc for a resource (or `data.<type>` for a data source); unknown -> close matches."""
    import difflib

    sch = load(schema)
    name = resource_type.strip().strip('"')
    kind = "resource"
    if name.startswith("data."):
        kind, name = "data", name[5:]
    block = sch.resource(name) if kind == "resource" else sch.data_source(name)
    if block is None and kind == "resource" and sch.data_source(name) is not None:
        kind, block = "data", sch.data_source(name)
    if block is not None:
        return resource_doc(name, block, kind)
    pool = sch.resource_types() if kind == "resource" else sch.data_source_types()
    close = difflib.get_close_matches(name, pool, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"Unknown {'resource' if kind == 'resource' else 'data source'} type {name!r}: " \
           f"the provider has no such type.{hint}"


def default_store_dir() -> str:
    return os.environ.get("VERIFIRST_DOCS_STORE", os.path.join(".verifirst", "docs-store"))
