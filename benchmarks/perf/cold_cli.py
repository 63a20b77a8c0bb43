"""Cold `verifirst verify bash` for one pair whose outputs match exactly: a fresh interpreter each time.

    python benchmarks/perf/cold_cli.py [--runs 5] [--out F]

Such a pair is decided without any similarity rule, so the MiniLM embedder (torch) must never
load, nor DSPy or MLflow: the result lists the heavy modules the process imported (from
`python -X importtime`) and the slowest imports, beside the wall time per run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOLD = "ls /testbed | wc -l"
PRED = "find /testbed -mindepth 1 -maxdepth 1 -not -name '.*' | wc -l"
HEAVY = ("torch", "sentence_transformers", "transformers", "dspy", "mlflow", "litellm", "llama_cpp", "sklearn")


def _cli(extra: list[str]) -> list[str]:
    return [sys.executable, *extra, "-m", "verifirst.cli", "verify", "bash", "--gold", GOLD, "--pred", PRED,
            "--fixture", "nl2sh-fs1"]


def imports() -> tuple[list[str], list[dict]]:
    """(heavy top-level packages imported, the 8 slowest imports by cumulative ms)."""
    p = subprocess.run(_cli(["-X", "importtime"]), capture_output=True, text=True, timeout=300)
    rows = []
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum_us, name = line.split(":", 1)[1].split("|")  # self us | cumulative us | indented name
        rows.append({"module": name.strip(), "top_level": name[1:2] != " ",
                     "cumulative_ms": round(int(cum_us) / 1000, 1)})
    heavy = sorted({r["module"] for r in rows if r["module"] in HEAVY})
    top = sorted((r for r in rows if r["top_level"]), key=lambda r: -r["cumulative_ms"])[:8]
    return heavy, [{"module": r["module"], "cumulative_ms": r["cumulative_ms"]} for r in top]


def bench(runs: int) -> dict:
    walls, codes = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(_cli([]), capture_output=True, text=True, timeout=300)
        walls.append(time.perf_counter() - t0)
        codes.append(p.returncode)
        if p.returncode != 0:
            raise SystemExit(f"verify bash exited {p.returncode}: {p.stdout[-500:]} {p.stderr[-1500:]}")
    heavy, top = imports()
    return {"runs": runs, "gold": GOLD, "pred": PRED, "exit_codes": codes,
            "median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3), "heavy_modules_imported": heavy, "slowest_imports": top,
            "goal_s": 1.5, "meets_goal": statistics.median(walls) <= 1.5, "cpus": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="cold processes to time")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    ap.add_argument("--json", action="store_true", help="print JSON (the default)")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    emit({"benchmark": "cold_cli", **bench(a.runs)}, started, a.out, as_json=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
