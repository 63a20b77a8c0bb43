"""Python/terraform agreement on configurations that call modules (issue 36).

    python benchmarks/studies/tf_module_agreement.py [--json] [--backend python]

Every configuration under tests/data/tf_modules/<case>/ (a root calling local modules, modules
called with `for_each` and with `count`, nested modules, Google, Azure and Kubernetes modules, a
vendored registry module) is verified as it is (it must pass), then once per injected fault:

- inside a module (every module file that declares a resource): the provider agreement study's
  six faults (tf_provider_agreement.mutate: unknown resource type, unknown attribute, missing
  required attribute, wrong type, bad reference, bad block nesting);
- at a module call: a required input left out (`missing_input`), an input of the wrong type
  (`bad_input_type`), an input its validation block refuses (`failed_validation`);
- at a reference: an output the module does not declare (`unknown_output`).

A case agrees when both backends give the same stage and error classes, and is right on a
backend when a valid configuration passes and a faulty one fails with its fault's class. Each
case's verify time is kept (goal: pure Python 20 ms per configuration).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from verifirst.benchmarks.studies import tf_provider_agreement as S  # the fault mutations, the outcome rules

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tf_modules"
CALL_FAULTS = ("missing_input", "bad_input_type", "failed_validation", "unknown_output")
EXPECTED = {**S.EXPECTED, "missing_input": "MISSING_REQUIRED", "bad_input_type": "TYPE",
            "failed_validation": "TYPE", "unknown_output": "SELF_DEFINED_PROPERTY"}
_CALL_RE = re.compile(r'^module\s+"([^"]+)"\s*\{$', re.M)
_OUTPUT_REF_RE = re.compile(r"\bmodule\.(\w+)((?:\[[^\]]*\])?)\.(\w+)")


def _schema(case: Path):
    """The shipped schemas of the providers a case uses, its modules' files included (the mutations
    look resource types up in them)."""
    from verifirst.verifiers.terraform import tf_schema
    used = tf_schema.providers_used({str(f): f.read_text(encoding="utf-8") for f in _tf_files(case)})
    paths = [str(tf_schema.shipped_schemas(p)[-1].path) for p in sorted(used) if tf_schema.shipped_schemas(p)]
    return tf_schema.load_schema(tuple(paths) if len(paths) > 1 else paths[0])


def _tf_files(case: Path) -> list[Path]:
    return sorted(p for p in case.rglob("*.tf") if p.is_file())


def _calls(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each module block in terraform fmt layout."""
    lines, out = text.split("\n"), []
    for m in _CALL_RE.finditer(text):
        start = text.count("\n", 0, m.start())
        end = next(i for i in range(start, len(lines)) if lines[i] == "}")
        out.append((m.group(1), start, end))
    return out


def _module_variables(case: Path, file: Path, text: str, name: str) -> dict:
    """{variable: block text} of the module a call in `file` names (local or vendored)."""
    m = re.search(rf'module\s+"{name}"\s*\{{[^}}]*?source\s*=\s*"([^"]+)"', text, re.S)
    src = m.group(1) if m else ""
    d = (file.parent / src) if src.startswith(".") else case / ".terraform" / "modules" / name
    out = {}
    for f in sorted(d.glob("*.tf")):
        for v in re.finditer(r'^variable\s+"(\w+)"\s*\{\n(.*?)^\}', f.read_text(), re.S | re.M):
            out[v.group(1)] = v.group(2)
    return out


def call_mutation(case: Path, file: Path, text: str, fault: str) -> str | None:
    """A module call (or a reference to a module output) in `file` made faulty; None when the
    file has no place for it."""
    lines = text.split("\n")
    if fault == "unknown_output":
        m = _OUTPUT_REF_RE.search(text)
        return None if m is None else text[:m.end(3)] + "_old" + text[m.end(3):]
    for name, start, end in _calls(text):
        variables = _module_variables(case, file, text, name)
        for i in range(start + 1, end):
            am = re.match(r"^(\s*)(\w+)\s*=\s*(.*)$", lines[i])
            if not am or am.group(2) not in variables or S._multiline(am.group(3)):
                continue
            body = variables[am.group(2)]
            if fault == "missing_input" and "default" not in body:
                return "\n".join(lines[:i] + lines[i + 1:])
            if fault == "bad_input_type" and re.search(r"type\s*=\s*string\b", body):
                lines[i] = f'{am.group(1)}{am.group(2)} = ["not", "a", "string"]'
                return "\n".join(lines)
            if fault == "failed_validation" and "validation {" in body and am.group(3).startswith('"'):
                lines[i] = f'{am.group(1)}{am.group(2)} = "x"'
                return "\n".join(lines)
    return None


def cases() -> list[tuple[str, Path, str | None, str | None, str | None]]:
    """(case id, configuration directory, file changed (relative), its new text, fault or None)."""
    out = []
    for case in sorted(p for p in DATA.iterdir() if p.is_dir()):
        schema = _schema(case)
        out.append((case.name, case, None, None, None))
        for f in _tf_files(case):
            rel, text = str(f.relative_to(case)), f.read_text(encoding="utf-8")
            in_module = f.parent != case
            for fault in (S.FAULTS if in_module else ()) + CALL_FAULTS:
                bad = S.mutate(text, fault, schema) if fault in S.FAULTS else call_mutation(case, f, text, fault)
                if bad is not None and bad != text:
                    out.append((f"{case.name}/{rel}/{fault}", case, rel, bad, fault))
    return out


def materialize(case: Path, rel: str | None, text: str | None, into: Path) -> Path:
    """A copy of a case directory with one file replaced; the case itself when nothing changes."""
    if rel is None:
        return case
    dst = into / case.name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(case, dst)
    (dst / rel).write_text(text, encoding="utf-8")
    return dst


def outcome_of(v) -> dict:
    """What a verdict says, for comparison: stage and error classes."""
    return S.outcome(v)


def right(o: dict, fault: str | None) -> bool:
    """A valid configuration passed, or a faulty one failed with its fault's class."""
    if fault is None:
        return o["stage"] == "PASS"
    return o["stage"] in ("VALIDATE_FAIL", "PLAN_FAIL") and EXPECTED[fault] in o["classes"]


def run_backend(backend: str, items: list) -> tuple[dict, list]:
    """Verdicts and per-case milliseconds of one backend."""
    from verifirst.verifiers.terraform.verifier import TerraformVerifier
    v = TerraformVerifier(backend=backend)
    res, ms = {}, []
    with tempfile.TemporaryDirectory(prefix="vf-modstudy-") as tmp:
        for _cid, case, rel, _text, _fault in items:  # each provider's schema parse, provider start: once
            if rel is None:
                v.verify_config(str(case))
        for cid, case, rel, text, _fault in items:
            d = materialize(case, rel, text, Path(tmp))
            t0 = time.perf_counter()
            verdict = v.verify_config(str(d))
            ms.append((time.perf_counter() - t0) * 1000)
            res[cid] = {**outcome_of(verdict), "feedback": verdict.feedback[:400]}
    return res, ms


def study(backends=("python", "terraform")) -> dict:
    """The module agreement study; see the module docstring.

    Args:
        backends: the backends to run (both by default: then agreement is reported).
    """
    items = cases()
    faults = {c[0]: c[4] for c in items}
    per = {b: run_backend(b, items) for b in backends}
    report: dict = {"benchmark": "tf_module_agreement", "faults": {k: EXPECTED[k] for k in (*S.FAULTS, *CALL_FAULTS)},
                    "configs": sorted(p.name for p in DATA.iterdir() if p.is_dir()), "cases": len(items),
                    "by_fault": {f: sum(1 for x in faults.values() if x == f) for f in (None, *S.FAULTS, *CALL_FAULTS)
                                 if f is not None},
                    "ms_per_config": {b: {"median": round(statistics.median(ms), 2), "mean": round(statistics.mean(ms), 2),
                                          "max": round(max(ms), 2), "n": len(ms)} for b, (_, ms) in per.items()},
                    "right": {b: sum(right(o, faults[c]) for c, o in res.items()) for b, (res, _) in per.items()},
                    "wrong": {b: {c: o for c, o in res.items() if not right(o, faults[c])} for b, (res, _) in per.items()}}
    if len(backends) == 2:
        a, b = (per[x][0] for x in backends)
        strip = {c: {k: v for k, v in o.items() if k != "feedback"} for c, o in a.items()}
        strip_b = {c: {k: v for k, v in o.items() if k != "feedback"} for c, o in b.items()}
        report["stage_agreement"] = round(sum(a[c]["stage"] == b[c]["stage"] for c in a) / len(a), 4)
        report["stage_and_class_agreement"] = round(sum(strip[c] == strip_b[c] for c in a) / len(a), 4)
        report["disagreements"] = {c: {backends[0]: a[c], backends[1]: b[c]} for c in a if strip[c] != strip_b[c]}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the JSON report")
    ap.add_argument("--backend", action="append", choices=("python", "terraform"), help="only these (repeatable)")
    args = ap.parse_args(argv)
    rep = study(tuple(args.backend or ("python", "terraform")))
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{rep['cases']} cases over {len(rep['configs'])} configurations; right {rep['right']}; agreement stage "
          f"{rep.get('stage_agreement')}, stage+class {rep.get('stage_and_class_agreement')}; ms/config "
          + ", ".join(f"{b} {m['median']}" for b, m in rep["ms_per_config"].items()))
    for b, wrong in rep["wrong"].items():
        for c, o in wrong.items():
            print(f"  wrong on {b}: {c}: {o}")
    for c, d in rep.get("disagreements", {}).items():
        print(f"  differ: {c}: {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
