"""Framework overhead: evaluate N items through the real DSPy path with a fake LM of fixed
latency; ratio = wall / ideal, ideal = N * latency / threads. Goal: ratio <= 1.05 at 8 threads.

    python benchmarks/perf/lm_overhead.py --json [--calls 500] [--latency-ms 50] [--threads 1,4,8] [--out F]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def measure(calls: int, latency_s: float, threads: int) -> dict:
    import dspy

    from verifirst.loop.evaluation import Scorer, evaluate
    from verifirst.lm import FastJSONAdapter
    from verifirst.programs.bash import BashGenerator
    from verifirst.core.task import Item
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.verifiers.exact import ExactMatch

    items = [Item(id=f"o{i}", inputs={"task": f"print {i}"}, gold={"command": f"echo {i}"}) for i in range(calls)]
    lm = scripted_lm(lambda m: json_answer(command="echo 1"), latency_s=latency_s, cache=False)
    prog = BashGenerator()
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        t0 = time.perf_counter()
        res = evaluate(prog, items, Scorer(ExactMatch(), "command"), split="bench", threads=threads, progress=False)
        wall = time.perf_counter() - t0
    assert res.n == calls and lm.engine.calls == calls, "every item must reach the LM once"
    ideal = calls * latency_s / threads
    return {"threads": threads, "calls": calls, "latency_ms": latency_s * 1000, "ideal_s": round(ideal, 3),
            "wall_s": round(wall, 3), "ratio": round(wall / ideal, 4),
            "overhead_ms_per_call": round((wall - ideal) * threads / calls * 1000, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--threads", default="1,4,8")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    rows = [measure(a.calls, a.latency_ms / 1000, int(t)) for t in a.threads.split(",")]
    at8 = next((r for r in rows if r["threads"] == 8), rows[-1])
    out = {"benchmark": "lm_overhead", "ideal_s": at8["ideal_s"], "wall_s": at8["wall_s"], "ratio": at8["ratio"],
           "goal_ratio": 1.05, "runs": rows}
    emit(out, started, a.out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
