"""Framework overhead: evaluate N items through the real DSPy path with a fake LM of fixed
latency; ratio = wall / ideal, ideal = N * latency / threads. Goal: ratio <= 1.05 at 8 threads.

The same measurement with a budget set (issue 22): a SpendMeter active as a run activates it
(`metering(spend_meter(vf.Budget(...)))`, limits of every kind, for the run and the task role, far
above what the measurement uses), so every call is admitted and settled. Goal: wall/ideal with a
budget within 0.01 of the ratio without one. The two are measured alternately (without, with,
with, without, ... for --repeats rounds), so the machine's load drifts over both alike, and each
side's median is taken.

    python benchmarks/perf/lm_overhead.py --json [--calls 500] [--latency-ms 50] [--threads 1,4,8]
        [--repeats 2] [--out F]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


GOAL_RATIO = 1.05
GOAL_BUDGET_DELTA = 0.01  # wall/ideal with a budget set minus without, at most


def bench_budget():
    """A budget with every spend limit, for the run and the task role, far above what a measurement
    uses, and a price for the fake LM (so every admission prices its request)."""
    from verifirst.core.engine import Budget

    return Budget(max_usd=1e6, max_tokens=10**12, max_lm_calls=10**9, max_wall_s=1e6,
                  per_role={"task": {"max_usd": 1e6, "max_lm_calls": 10**9}},
                  prices={"local/scripted": {"input": 0.15, "output": 0.60}})


def measure(calls: int, latency_s: float, threads: int, budget: bool = False) -> dict:
    import contextlib

    import dspy

    from verifirst.loop.evaluation import Scorer, evaluate
    from verifirst.lm import FastJSONAdapter
    from verifirst.programs.bash import BashGenerator
    from verifirst.core.task import Item
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.verifiers.exact import ExactMatch
    from verifirst.lm.spend import metering

    items = [Item(id=f"o{i}", inputs={"task": f"print {i}"}, gold={"command": f"echo {i}"}) for i in range(calls)]
    lm = scripted_lm(lambda m: json_answer(command="echo 1"), latency_s=latency_s, cache=False)
    prog = BashGenerator()
    meter = None
    if budget:  # as the run loop does: verifirst.loop.driver.run activates spend_meter(req.budget)
        from verifirst.loop.driver import spend_meter

        meter = spend_meter(bench_budget())
    metered = metering(meter) if meter is not None else contextlib.nullcontext()
    with dspy.context(lm=lm, adapter=FastJSONAdapter()), metered:
        t0 = time.perf_counter()
        res = evaluate(prog, items, Scorer(ExactMatch(), "command"), split="bench", threads=threads, progress=False)
        wall = time.perf_counter() - t0
    assert res.n == calls and lm.engine.calls == calls, "every item must reach the LM once"
    if meter is not None:
        spent = meter.spent()
        assert spent["run"]["lm_calls"] == calls and spent["in_flight"] == 0, "every call admitted and settled"
    ideal = calls * latency_s / threads
    return {"threads": threads, "calls": calls, "latency_ms": latency_s * 1000, "ideal_s": round(ideal, 3),
            "wall_s": round(wall, 3), "ratio": round(wall / ideal, 4),
            "overhead_ms_per_call": round((wall - ideal) * threads / calls * 1000, 3)}


def admission_us(n: int = 20000) -> float:
    """Microseconds of one admit + settle on the bench budget's meter, in one thread (what a call
    adds with a budget set; the wall/ideal difference it implies is this / the LM's latency)."""
    from verifirst.loop.driver import spend_meter

    meter = spend_meter(bench_budget())
    t0 = time.perf_counter()
    for _ in range(n):
        meter.settle(meter.admit("task", "local/scripted", 800, None), 200, 10, cache_hit=False)
    return round((time.perf_counter() - t0) / n * 1e6, 2)


def budget_cpu_us(calls: int = 1000, repeats: int = 6) -> dict:
    """What a budget adds to one call's own work, in CPU microseconds: the same evaluation with an
    LM that answers at once (one thread), with and without a budget, alternately; the least of
    each (the machine's other load only ever adds). At N threads the calls' own work is serialized
    by the interpreter, so a budget can add at most calls x this to the wall time."""
    per = {False: [], True: []}
    for k in range(repeats):
        for with_budget in ((False, True) if k % 2 == 0 else (True, False)):
            t0 = time.process_time()  # CPU, not wall: the machine's other load does not count
            measure(calls, 1e-6, 1, with_budget)
            per[with_budget].append((time.process_time() - t0) / calls * 1e6)
    plain, budgeted = min(per[False]), min(per[True])
    return {"call_us": round(plain, 1), "call_us_with_budget": round(budgeted, 1),
            "budget_us_per_call": round(budgeted - plain, 1)}


def paired(calls: int, latency_s: float, threads: int, repeats: int) -> dict:
    """Without and with a budget, alternately (ABBA...), `repeats` of each; their median ratios (a
    burst of the machine's other load lengthens one measurement: the median leaves it out)."""
    plain, budgeted = [], []
    for k in range(repeats):
        order = (False, True) if k % 2 == 0 else (True, False)
        for with_budget in order:
            (budgeted if with_budget else plain).append(measure(calls, latency_s, threads, with_budget))
    import statistics

    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    ideal = plain[0]["ideal_s"]
    row = {"threads": threads, "calls": calls, "latency_ms": latency_s * 1000, "ideal_s": ideal,
           "wall_s": round(med(plain, "wall_s"), 3), "ratio": round(med(plain, "ratio"), 4),
           "overhead_ms_per_call": round(med(plain, "overhead_ms_per_call"), 3),
           "wall_s_with_budget": round(med(budgeted, "wall_s"), 3),
           "ratio_with_budget": round(med(budgeted, "ratio"), 4), "repeats": repeats,
           "ratios": [r["ratio"] for r in plain], "ratios_with_budget": [r["ratio"] for r in budgeted]}
    row["budget_delta"] = round(row["ratio_with_budget"] - row["ratio"], 4)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--threads", default="1,4,8")
    ap.add_argument("--repeats", type=int, default=2, help="measurements of each (without, with a budget)")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    for with_budget in (False, True):  # warm-up, not recorded: imports, the adapter's first parse, the meter
        measure(min(a.calls, 20), a.latency_ms / 1000, 4, with_budget)
    rows = [paired(a.calls, a.latency_ms / 1000, int(t), a.repeats) for t in a.threads.split(",")]
    at8 = next((r for r in rows if r["threads"] == 8), rows[-1])
    delta = max(rows, key=lambda r: abs(r["budget_delta"]))["budget_delta"]
    us = admission_us()
    cpu = budget_cpu_us()
    # the most a budget's own work can add to wall/ideal at 8 threads: every call's extra work in series
    implied8 = round(a.calls * cpu["budget_us_per_call"] / 1e6 / at8["ideal_s"], 4)
    out = {"benchmark": "lm_overhead", "ideal_s": at8["ideal_s"], "wall_s": at8["wall_s"], "ratio": at8["ratio"],
           "goal_ratio": GOAL_RATIO, "ratio_with_budget": at8["ratio_with_budget"], "budget_delta_max": delta,
           "goal_budget_delta": GOAL_BUDGET_DELTA, "budget_delta_within_goal": abs(delta) <= GOAL_BUDGET_DELTA,
           "admit_settle_us": us, "budget_delta_implied_at_1_thread": round(us / 1e6 / (a.latency_ms / 1000), 5),
           "budget_cpu": cpu, "budget_delta_bound_at_8_threads": implied8,
           "budget_delta_bound_within_goal": implied8 <= GOAL_BUDGET_DELTA,
           "budget": {"limits": "every spend limit for the run and the task role, far above what is used; "
                                "the fake LM priced", "activated": "metering(spend_meter(Budget(...))), as a run"},
           "runs": rows}
    emit(out, started, a.out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
