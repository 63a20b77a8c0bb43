"""Cache: a second identical run (same workdir, fresh run dir) costs 0 LM calls and a small
fraction of the first run's wall time. Goals: second-run LM calls 0, wall ratio second/first <= 0.1.
Both runs end by writing the HTML report with plots; its time is shown apart (html_report_s).

A small experiment: the built-in NL->Bash pack cut to --items tasks, exact-match verifier, GEPA
with --budget metric calls, tracking off; models: the embedded default ("local"), or scripted
LMs with a fixed latency (--scripted-latency-ms) to stand in for a remote endpoint.

    python benchmarks/perf/cache.py --json [--items 16] [--budget 16] [--scripted-latency-ms 50] [--out F]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")


def experiment_dict(workdir: Path, items: int, budget: int, threads: int) -> dict:
    return {
        "experiment": {"name": "bench-cache", "workdir": str(workdir), "seed": 0, "threads": threads},
        "suite": {"name": "bash-builtin", "limit": items},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": budget},
        "models": {"task": "local", "reflection": "local"},
        "tracking": {"enabled": False},
    }


def scripted_models(latency_s: float):
    from verifirst.lm import Models
    from verifirst.lm.testing import json_answer, scripted_lm

    def task(messages):  # depends on the prompt, so each candidate instruction is its own cache entry
        return json_answer(command="printf hi" if "printf" in messages[0]["content"] else "echo hi")

    def reflect(messages):
        return json_answer(new_instruction="Answer with one command; prefer printf over echo.")

    return Models(task=scripted_lm(task, latency_s=latency_s, cache=True, name="bench-task"),
                  reflection=scripted_lm(reflect, role="reflection", latency_s=latency_s, cache=True,
                                         name="bench-refl"))


def _timed_html() -> list[float]:
    """Time the HTML report with plots (matplotlib), written at the end of every run."""
    from verifirst.report import html as html_report
    spent: list[float] = []
    real = html_report.write_html

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent.append(time.perf_counter() - t0)

    html_report.write_html = timed
    return spent


def one_run(exp, run_dir: Path, models, html_spent: list[float]) -> dict:
    from verifirst import api, experiment
    html_spent.clear()
    t0 = time.perf_counter()
    out = api.run(exp, run_dir=run_dir, progress=False, models=models, echo=lambda m: None)
    wall = time.perf_counter() - t0
    u = out.report["usage_this_run"]
    return {"wall_s": round(wall, 3), "html_report_s": round(sum(html_spent), 3), "lm_calls": u["lm_calls"],
            "cache_hits": u["cache_hits"], "errors": u["errors"],
            "pass": {s: [v["before"]["pass"], v["after"]["pass"]] for s, v in out.report["splits"].items()},
            "instructions": out.report["instructions"]}


def measure(items: int, budget: int, latency_ms: float | None, threads: int, workdir: Path) -> dict:
    from verifirst import config
    from verifirst.lm import make_models

    exp = config.from_dict(experiment_dict(workdir, items, budget, threads))
    if latency_ms is None:
        from verifirst.lm import local_engine

        local_engine()  # load the weights before timing: a one-off per process, not a cost of a run
        models = make_models({"task": "local", "reflection": "local"})
        label = "local (embedded SmolLM2-135M)"
    else:
        models = scripted_models(latency_ms / 1000)
        label = f"scripted, {latency_ms:g} ms per call"
    html_spent = _timed_html()
    first = one_run(exp, workdir / "runs" / "first", models, html_spent)
    second = one_run(exp, workdir / "runs" / "second", models, html_spent)
    same = first["pass"] == second["pass"] and first["instructions"] == second["instructions"]
    ratio = second["wall_s"] / first["wall_s"] if first["wall_s"] else None
    f_wo, s_wo = first["wall_s"] - first["html_report_s"], second["wall_s"] - second["html_report_s"]
    return {"benchmark": "cache", "model": label, "items": items, "gepa_budget": budget, "threads": threads,
            "first": {k: first[k] for k in ("wall_s", "html_report_s", "lm_calls", "cache_hits", "errors")},
            "second": {k: second[k] for k in ("wall_s", "html_report_s", "lm_calls", "cache_hits", "errors")},
            "second_lm_calls": second["lm_calls"], "wall_ratio": round(ratio, 4) if ratio is not None else None,
            "wall_ratio_without_html_report": round(s_wo / f_wo, 4) if f_wo > 0 else None,
            "same_report": same, "goal_second_lm_calls": 0, "goal_wall_ratio": 0.1,
            "goals_met": second["lm_calls"] == 0 and ratio is not None and ratio <= 0.1 and same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--budget", type=int, default=16, help="GEPA max_metric_calls")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scripted-latency-ms", type=float, default=None,
                    help="use scripted LMs with this latency instead of the embedded model")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    # progress bars of the optimizer's inner evaluations go to stderr: stdout is the JSON
    with contextlib.redirect_stdout(sys.stderr):
        if a.workdir is not None:
            out = measure(a.items, a.budget, a.scripted_latency_ms, a.threads, a.workdir)
        else:
            with tempfile.TemporaryDirectory(prefix="verifirst-cache-") as d:
                out = measure(a.items, a.budget, a.scripted_latency_ms, a.threads, Path(d))
    emit(out, started, a.out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
