"""Python/terraform agreement on Google, Azure and Kubernetes configurations (issue 36).

    python benchmarks/studies/tf_provider_agreement.py [--json] [--provider P] [--per-class N]

For each provider, every valid configuration under tests/data/tf_providers/<provider>/ (at least
30, written in `terraform fmt` layout) is verified by both backends, then one faulty variant per
fault class is made from it by a deterministic mutation (`mutate`) and verified again. A case
agrees when both backends give the same stage and the same set of error classes; a case is
right on a backend when a valid configuration passes and a faulty one fails with its class.
Each case's verify time is kept, so the same run gives the per-config speed of the pure-Python
backend (goal 20 ms) and of terraform + the schema provider (goal 1,500 ms) per provider.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tf_providers"
PROVIDERS = ("google", "azurerm", "kubernetes")
FAULTS = ("unknown_resource_type", "unknown_attribute", "missing_required", "wrong_type", "bad_reference",
          "bad_block_nesting")
# The error class each fault must be reported with (verifiers/terraform/iac_taxonomy.py).
EXPECTED = {"unknown_resource_type": "INVALID_RESOURCE_TYPE", "unknown_attribute": "SELF_DEFINED_PROPERTY",
            "missing_required": "MISSING_REQUIRED", "wrong_type": "TYPE", "bad_reference": "BAD_REFERENCE",
            "bad_block_nesting": "SELF_DEFINED_PROPERTY"}
GOALS_MS = {"python": 20, "terraform": 1500}

_HEAD_RE = re.compile(r'^(resource|data)\s+"([^"]+)"\s+"([^"]+)"\s*\{$')
_BLOCK_RE = re.compile(r'^(\s*)([A-Za-z_][\w-]*)(\s+"[^"]*")*\s*\{$')
_ATTR_RE = re.compile(r"^(\s*)([A-Za-z_][\w-]*)\s*=\s*(.*)$")
_OPENERS = {"{": "}", "[": "]", "(": ")"}


@dataclass
class Attr:
    line: int
    key: str
    path: tuple  # block names from the resource down to the attribute's block
    schema: dict | None


@dataclass
class Block:
    start: int
    end: int
    name: str
    path: tuple  # names of the enclosing blocks below the resource
    schema: dict | None  # this block's schema
    required: bool = False  # its parent needs at least one (moving it would hide the fault)


@dataclass
class Resource:
    mode: str
    type: str
    name: str
    start: int
    end: int
    attrs: list
    blocks: list


def _multiline(value: str) -> str | None:
    """The closing text a one-line value leaves open (a bracket or a heredoc marker), else None."""
    m = re.match(r"<<-?([A-Z]+)$", value.strip())
    if m:
        return m.group(1)
    depth = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', value):
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
    return "]" if depth > 0 else None


def parse(text: str, schema) -> list[Resource]:
    """The resources and data sources of a configuration in `terraform fmt` layout, with their
    one-line attributes and nested blocks, each looked up in the provider schema.

    Args:
        text: the configuration.
        schema: a tf_schema.ProviderSchema (or None: every schema entry is None).
    """
    lines = text.split("\n")
    out: list[Resource] = []
    i = 0
    while i < len(lines):
        m = _HEAD_RE.match(lines[i])
        if not m:
            i += 1
            continue
        mode = "managed" if m.group(1) == "resource" else "data"
        block = schema.block(mode, m.group(2)) if schema else None
        res = Resource(mode, m.group(2), m.group(3), i, i, [], [])
        stack = [(None, block, None)]  # (name, schema block, index in res.blocks)
        i += 1
        while i < len(lines) and stack:
            ln = lines[i]
            if ln.strip() == "}":
                name, _, idx = stack.pop()
                if idx is not None:
                    res.blocks[idx].end = i
                i += 1
                continue
            bm, am = _BLOCK_RE.match(ln), _ATTR_RE.match(ln)
            path = tuple(s[0] for s in stack[1:])
            if bm and not am:
                parent = stack[-1][1]
                entry = ((parent or {}).get("block_types") or {}).get(bm.group(2)) or {}
                sub = entry.get("block")
                res.blocks.append(Block(i, i, bm.group(2), path, sub, bool(entry.get("min_items"))))
                stack.append((bm.group(2), sub, len(res.blocks) - 1))
                i += 1
                continue
            if am:
                parent = stack[-1][1]
                res.attrs.append(Attr(i, am.group(2), path, ((parent or {}).get("attributes") or {}).get(am.group(2))))
                close = _multiline(am.group(3))
                if close:  # skip to the value's end at the same indentation
                    ind = am.group(1)
                    i += 1
                    while i < len(lines) and not (lines[i].strip() == close if close.isalpha()
                                                  else re.match(rf"^{ind}[\]}})]", lines[i])):
                        i += 1
            i += 1
        res.end = i - 1
        out.append(res)
    return out


def _typo(t: str, schema) -> str:
    """A misspelt type: the first vowel of its last word dropped (google_compute_instnce)."""
    head, _, last = t.rpartition("_")
    for k, ch in enumerate(last):
        if ch in "aeiou" and k > 0:
            cand = f"{head}_{last[:k]}{last[k + 1:]}"
            if schema is None or schema.resource(cand) is None:
                return cand
    return t + "x"


def _simple(a: Attr) -> bool:
    return a.schema is not None and a.key not in ("count", "for_each", "provider", "depends_on")


def mutate(text: str, fault: str, schema) -> str | None:
    """One faulty variant of a valid configuration, the same every time; None when the fault
    has no place in it.

    Args:
        text: a valid configuration in `terraform fmt` layout.
        fault: one of FAULTS.
        schema: the provider's tf_schema.ProviderSchema (required attributes, types, blocks).
    """
    lines = text.split("\n")
    resources = [r for r in parse(text, schema) if r.mode == "managed"]
    if not resources:
        return None
    first = resources[0]
    if fault == "unknown_resource_type":
        return re.sub(rf"\b{re.escape(first.type)}\b", _typo(first.type, schema), text)
    if fault == "unknown_attribute":
        lines.insert(first.start + 1, "  enable_turbo_mode = true")
        return "\n".join(lines)
    for r in resources:
        if fault == "missing_required":
            for a in r.attrs:
                if _simple(a) and a.schema.get("required") and not _multiline(_ATTR_RE.match(lines[a.line]).group(3)):
                    del lines[a.line]
                    return "\n".join(lines)
        elif fault == "wrong_type":
            for a in r.attrs:
                t = a.schema.get("type") if _simple(a) else None
                bad = {"bool": '"yes-please"', "number": '"ten"', "string": '["not", "a", "string"]'}.get(t)
                if bad and not _multiline(_ATTR_RE.match(lines[a.line]).group(3)):
                    ind = _ATTR_RE.match(lines[a.line]).group(1)
                    lines[a.line] = f"{ind}{a.key} = {bad}"
                    return "\n".join(lines)
        elif fault == "bad_block_nesting":
            moved = _nesting(lines, r, schema)
            if moved is not None:
                return moved
    if fault == "bad_reference":
        return _bad_reference(text, parse(text, schema), resources)
    if fault == "bad_block_nesting":
        return _elsewhere(lines, resources, schema)
    return None


def _accepts(level: dict | None, name: str) -> bool:
    return level is None or name in (level.get("block_types") or {}) or name in (level.get("attributes") or {})


def _nesting(lines: list, r: Resource, schema) -> str | None:
    """A nested block put where its schema does not allow it: moved one level up (after its
    parent), else into a sibling block, whichever comes first in the resource. A block its
    parent requires stays (terraform would report the parent's missing block and skip the rest)."""
    top = schema.block(r.mode, r.type) if schema else None
    for b in (b for b in r.blocks if not b.required):
        if b.path:
            parent = next(p for p in reversed(r.blocks) if p.start < b.start and p.end > b.end)
            grand = next((p for p in reversed(r.blocks) if p.start < parent.start and p.end > parent.end), None)
            if not _accepts(grand.schema if grand else top, b.name):
                return _relocate(lines, b, parent.end + 1, -2)
            continue
        for sib in r.blocks:
            if sib is not b and not sib.path and sib.schema is not None and not _accepts(sib.schema, b.name):
                return _relocate(lines, b, sib.end, 2)
    return None


def _elsewhere(lines: list, resources: list, schema) -> str | None:
    """A resource's first nested block moved into another resource whose schema lacks it."""
    for r in resources:
        for b in (b for b in r.blocks if not b.path and not b.required):
            for other in resources:
                if other is not r and not _accepts(schema.block(other.mode, other.type) if schema else None, b.name):
                    return _relocate(lines, b, other.end, 0)
    return None


def _relocate(lines: list, b: Block, target: int, shift: int) -> str:
    """Block b's lines moved before line `target` (an index in `lines`), indented by `shift`."""
    body = [(" " * shift + ln if shift > 0 else ln[-shift:] if ln.startswith(" " * -shift) else ln) if ln else ln
            for ln in lines[b.start:b.end + 1]]
    if target > b.end:
        out = lines[:b.start] + lines[b.end + 1:target] + body + lines[target:]
    else:
        out = lines[:target] + body + lines[target:b.start] + lines[b.end + 1:]
    return "\n".join(out)


def _bad_reference(text: str, every: list, resources: list) -> str:
    """The first reference to a declared resource or data source, its name misspelt; else the
    first string argument given an undeclared variable."""
    declared = {(r.mode, r.type, r.name) for r in every}
    for m in re.finditer(r"(?<![\w.\"])(data\.)?([a-z][a-z0-9_]*)\.([A-Za-z_][\w-]*)\.", text):
        mode = "data" if m.group(1) else "managed"
        if (mode, m.group(2), m.group(3)) in declared:
            return text[:m.start(3)] + m.group(3) + "_old" + text[m.end(3):]
    lines = text.split("\n")
    for r in resources:
        for a in r.attrs:
            if _simple(a) and a.schema.get("type") == "string" and re.match(r'^\s*\w+\s*=\s*"', lines[a.line]):
                ind = _ATTR_RE.match(lines[a.line]).group(1)
                lines[a.line] = f"{ind}{a.key} = var.undeclared_input"
                return "\n".join(lines)
    return text


def cases(provider: str, schema) -> list[tuple[str, str, str | None]]:
    """(case id, configuration, fault or None) for a provider's valid configurations and their variants.

    Args:
        provider: google, azurerm or kubernetes.
        schema: the provider's tf_schema.ProviderSchema.
    """
    out = []
    for f in sorted((DATA / provider).glob("*.tf")):
        text = f.read_text(encoding="utf-8")
        out.append((f.stem, text, None))
        for fault in FAULTS:
            bad = mutate(text, fault, schema)
            if bad is not None and bad != text:
                out.append((f"{f.stem}/{fault}", bad, fault))
    return out


def provider_schema(provider: str):
    """The shipped schema of a provider (the newest version)."""
    from verifirst.verifiers.terraform import tf_schema
    return tf_schema.load_schema(tf_schema.shipped_schemas(provider)[-1].path)


def outcome(v) -> dict:
    """What a verdict says, for comparison: stage and error classes."""
    return {"stage": v.stage, "classes": sorted(set(v.error_classes))}


def right(o: dict, fault: str | None) -> bool:
    """A valid configuration passed, or a faulty one failed with its fault's class."""
    if fault is None:
        return o["stage"] == "PASS"
    return o["stage"] in ("VALIDATE_FAIL", "PLAN_FAIL") and EXPECTED[fault] in o["classes"]


def run_backend(backend: str, items: list) -> tuple[dict, list]:
    """Verdicts and per-case milliseconds of one backend over (id, text, fault) cases."""
    from verifirst.verifiers.terraform.verifier import TerraformVerifier
    v = TerraformVerifier(backend=backend)
    v.verify_config(items[0][1])  # schema parse, provider start: once per process, not per config
    res, ms = {}, []
    for cid, text, _ in items:
        t0 = time.perf_counter()
        res[cid] = outcome(v.verify_config(text))
        ms.append((time.perf_counter() - t0) * 1000)
    return res, ms


def _ms(xs: list) -> dict:
    return {"median": round(statistics.median(xs), 1), "mean": round(statistics.mean(xs), 1),
            "max": round(max(xs), 1), "n": len(xs)}


def study(providers=PROVIDERS, backends=("python", "terraform")) -> dict:
    """The agreement study over the given providers; see the module docstring.

    Args:
        providers: which of PROVIDERS to run.
        backends: the backends to compare (both by default).
    """
    report: dict = {"benchmark": "tf_provider_agreement", "faults": dict(EXPECTED), "goals_ms": GOALS_MS,
                    "providers": {}}
    for p in providers:
        schema = provider_schema(p)
        items = cases(p, schema)
        faults = {c: f for c, _, f in items}
        per = {b: run_backend(b, items) for b in backends}
        row: dict = {"valid_configs": sum(1 for f in faults.values() if f is None),
                     "faulty": {f: sum(1 for x in faults.values() if x == f) for f in FAULTS},
                     "cases": len(items), "ms_per_config": {b: _ms(ms) for b, (_, ms) in per.items()},
                     "right": {b: sum(right(o, faults[c]) for c, o in res.items()) for b, (res, _) in per.items()},
                     "wrong": {b: {c: o for c, o in res.items() if not right(o, faults[c])}
                               for b, (res, _) in per.items()}}
        if len(backends) == 2:
            a, b = (per[x][0] for x in backends)
            same_stage = [c for c in a if a[c]["stage"] == b[c]["stage"]]
            same = [c for c in a if a[c] == b[c]]
            row["stage_agreement"] = round(len(same_stage) / len(a), 4)
            row["stage_and_class_agreement"] = round(len(same) / len(a), 4)
            row["disagreements"] = {c: {backends[0]: a[c], backends[1]: b[c]} for c in a if a[c] != b[c]}
        report["providers"][p] = row
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the JSON report")
    ap.add_argument("--provider", action="append", choices=PROVIDERS, help="only these (repeatable)")
    args = ap.parse_args(argv)
    rep = study(tuple(args.provider or PROVIDERS))
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    for p, row in rep["providers"].items():
        ms = row["ms_per_config"]
        print(f"{p}: {row['valid_configs']} valid, {row['cases']} cases; agreement stage "
              f"{row.get('stage_agreement')}, stage+class {row.get('stage_and_class_agreement')}; right "
              f"{row['right']}; ms/config " + ", ".join(f"{b} {m['median']}" for b, m in ms.items()))
        for c, d in row.get("disagreements", {}).items():
            print(f"  {c}: {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
