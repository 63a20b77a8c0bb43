"""Predicts per minute of the embedded default (SmolLM2-135M in llama.cpp, JSON-schema grammar).
Goal >= 100. Also counts outputs that failed to parse (goal 0).

    python benchmarks/perf/embedded_lm.py --json [--n 40] [--out F]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--variant", default="predict", choices=["predict", "cot"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    import dspy

    from verifirst.benchmarks.perf.record import emit, machine
    from verifirst.lm import USAGE, FastJSONAdapter, local_engine, make_lm
    from verifirst.programs.bash import BashGenerator

    started = machine()
    lm = make_lm("local", cache=False)
    prog = BashGenerator(a.variant)
    tasks = [f"list the files in directory number {i} sorted by size" for i in range(a.n)]
    failures = 0
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        prog(task="warm up")
        t0 = time.perf_counter()
        for t in tasks:
            try:
                prog(task=t)
            except Exception:
                failures += 1
        wall = time.perf_counter() - t0
    u = USAGE.total()
    out = {"benchmark": "embedded_lm", "model": "SmolLM2-135M-Instruct Q4_1", "variant": a.variant, "n": a.n,
           "wall_s": round(wall, 2), "predicts_per_min": round(a.n / wall * 60, 1), "goal_per_min": 100,
           "parse_failures": failures, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
           # this process and the model's own process (verifirst.lm._local_worker): the sum of their peaks
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                                + local_engine().worker_peak_rss_mb(), 1)}
    emit(out, started, a.out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
