"""`verifirst demo` end to end in a fresh temporary workdir (cold LM cache, new MLflow store):
process start, imports, model load, GEPA, reports. What `make demo` costs after install.

    python benchmarks/perf/demo.py [--budget 24] [--out F]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def demo_command(workdir: Path, budget: int | None) -> list[str]:
    """The installed `verifirst` script beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("verifirst")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "verifirst.cli"]
    cmd += ["demo", "--workdir", str(workdir), "--json"]
    return cmd + (["--budget", str(budget)] if budget is not None else [])


def split_pass(report: dict) -> dict:
    """{split: {"n", "before": {"pass", "scored", "lm_errors", "ci"}, "after": {...}}} from the report, as far
    as it says. `scored` leaves out items without a verdict (LM or verifier error, INCONCLUSIVE); ci is Wilson's."""
    out = {}
    for name, s in (report.get("splits") or {}).items():
        b, a = s.get("before") or {}, s.get("after") or {}
        out[name] = {"n": b.get("n"), **{k: {"pass": v.get("pass"), "scored": v.get("scored"),
                                             "lm_errors": v.get("lm_errors"), "ci": [v.get("ci_lo"), v.get("ci_hi")]}
                                         for k, v in (("before", b), ("after", a))}}
    return out


def answer_counts(run_dir: Path) -> dict:
    """Over the run's evaluated items: answers that are a bare format placeholder (`{command}`) and
    were verified anyway (must be 0), placeholder replies refused as LM errors, and other LM errors."""
    verified = refused = other = 0
    for path in sorted(Path(run_dir, "eval").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if str(row.get("output") or "").strip() in ("{command}", "{task}"):
                verified += 1
            elif "format placeholder" in str(row.get("error") or ""):
                refused += 1
            elif row.get("status") == "ERROR":
                other += 1
    return {"placeholder_verified": verified, "placeholder_refused": refused, "other_errors": other}


def measure(budget: int | None, keep: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="verifirst-demo-")) if keep is None else keep
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        workdir = tmp / ".verifirst"
        cmd = demo_command(workdir, budget)
        t0 = time.perf_counter()
        # cwd is the fresh dir too: nothing of this checkout's own .verifirst is reused
        proc = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.splitlines()[-15:])
            raise SystemExit(f"demo.py: `{' '.join(cmd)}` exited {proc.returncode}:\n{tail}")
        report = json.loads(proc.stdout)
        answers = answer_counts(tmp / report["run_dir"])  # relative to the demo's cwd unless absolute
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    usage = report.get("usage_this_run") or {}
    return {"benchmark": "demo", "command": "verifirst demo" + (f" --budget {budget}" if budget else ""),
            "wall_s": round(wall, 1), "run_wall_s": report.get("wall_s"),
            "lm_calls": usage.get("lm_calls"), "lm_errors": usage.get("errors"),
            "unusable_replies": usage.get("unusable"), "answers": answers, "splits": split_pass(report)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=None, help="GEPA metric calls (default: the demo's own)")
    ap.add_argument("--keep", type=Path, default=None, help="run in this (empty) dir and keep it")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    if a.keep is not None and a.keep.exists() and any(a.keep.iterdir()):
        print(f"demo.py: --keep {a.keep} is not empty (the demo must start cold)", file=sys.stderr)
        return 2
    from verifirst.benchmarks.perf.record import emit, machine

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    started = machine()
    emit(measure(a.budget, a.keep), started, a.out, as_json=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
