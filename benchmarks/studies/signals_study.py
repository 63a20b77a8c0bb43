"""Signals study: SIGINT, SIGTERM and kill -9 at random points of `verifirst run`, N times each.

Each trial (tests/_signals_trial.py) runs the CLI against a fake OpenAI-compatible endpoint on
127.0.0.1 that counts the requests it receives, sends the signal once the endpoint has seen a
random number of requests (plus a random few ms), then resumes the same run directory to its end,
and checks: the resumed run's usage (every invocation, from RUN_DIR/calls.jsonl) equals the
requests the endpoint received (after kill -9: within the requests that were in flight at the
kill), no MLflow run is left RUNNING, SIGINT/SIGTERM exit 130/143 with one line and no traceback,
and, in the capped trials (--max-lm-calls 8 of the 12 the run needs), the endpoint never receives
more than the cap across the kill and the resume.

    python benchmarks/studies/signals_study.py --trials 20 --out benchmarks/perf/results/signals.json
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from _signals_trial import run_trial  # noqa: E402

CAP = 8


def study(trials: int, seed: int, workers: int = 1, out: Path | None = None) -> dict:
    """Run `trials` trials per signal (half of them capped) and sum them up; with `out`, the results
    so far are written after every trial (a study cut short still leaves its numbers).

    Args:
        trials: trials per signal.
        seed: the first trial's seed (trial k uses seed + k).
        workers: trials run at once (each is two CLI processes and an endpoint).
        out: the results JSON, rewritten after each trial.
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    # interleaved: a study cut short still has every signal
    jobs = [(sig, seed + k, CAP if k % 2 else None) for k in range(trials) for sig in ("SIGINT", "SIGTERM", "SIGKILL")]
    t0 = time.time()
    results: list[dict] = []
    lock = threading.Lock()

    def one(job):
        sig, s, cap = job
        with tempfile.TemporaryDirectory(prefix="vf-signals-") as d:
            res = run_trial(Path(d), sig, s, cap=cap)
        print(f"{sig:7s} seed {s} cap {cap}: {'ok' if res['ok'] else 'FAILED ' + res.get('why', '')} "
              f"(endpoint {res.get('endpoint_requests')}, journal {res.get('journal_requests')}, "
              f"in flight at kill {res.get('in_flight_at_kill')})", flush=True)
        with lock:
            results.append(res)
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(summarize(results, trials, seed, t0), indent=1) + "\n")
        return res

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, jobs))
    return summarize(results, trials, seed, t0)


def summarize(results: list[dict], trials: int, seed: int, t0: float) -> dict:
    """The study's summary per signal and its trials (JSON-able)."""
    summary = {}
    for sig in ("SIGINT", "SIGTERM", "SIGKILL"):
        rows = [r for r in results if r["signal"] == sig]
        capped = [r for r in rows if r["cap"] is not None]
        summary[sig] = {
            "trials": len(rows), "ok": sum(r["ok"] for r in rows),
            "usage_equals_endpoint": sum(bool(r.get("exact")) for r in rows),
            "in_flight_at_kill": sum(r.get("in_flight_at_kill") or 0 for r in rows),
            "mlflow_running_after_resume": sum(r.get("running_after_resume") or 0 for r in rows),
            "mlflow_running_after_signal": sum(r.get("running_after_first") or 0 for r in rows),
            "capped_trials": len(capped), "cap": CAP,
            "max_requests_under_cap": max((r.get("endpoint_requests") or 0 for r in capped), default=None),
            "exit_codes": sorted({r.get("first_rc") for r in rows}, key=str),
            "failures": [r.get("why") for r in rows if not r["ok"]],
        }
    return {"study": "signals", "trials_per_signal_planned": trials, "seed": seed,
            "wall_s": round(time.time() - t0, 1),
            "machine": f"{platform.machine()} {platform.system()}", "summary": summary, "trials": results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per signal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="trials at once")
    ap.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    args = ap.parse_args(argv)
    res = study(args.trials, args.seed, args.workers, args.out)
    print(json.dumps(res["summary"], indent=1))
    return 0 if all(s["ok"] == s["trials"] for s in res["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
