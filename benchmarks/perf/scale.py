"""Scale-out: items per second of the bash and terraform verifiers under the thread executor and
under Ray with 1, 2 and 4 workers, no LM (each candidate is the item's gold), on this machine.

    python benchmarks/perf/scale.py --json [--workers 1,2,4] [--bash-n 51] [--tf-repeat 4] [--out F]

bash: the bash-pack verifier (sandboxed FEH) on the built-in bash pack's golds; terraform: the
pure-Python backend on the built-in IaC pack's references. Each configuration runs the one
evaluation loop (`verifirst.loop.evaluation.evaluate`) with `threads` = workers. A Ray pool is built and
warmed (one call per worker: imports, sandbox, embedder) before it is timed; the build time is
reported apart. Efficiency of n workers = (items/s at n) / (n x items/s at 1). The per-task
overhead of Ray is measured with the exact-match verifier (microseconds of work per item): the
wall time per item through one Ray worker minus that through one thread.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _gold_program(items, field: str):
    """A 'program' answering each item with its gold (no LM): what the verifier gets is the gold."""
    by_input = {repr(sorted(it.inputs.items())): it for it in items}

    def program(**inputs):
        return {field: by_input[repr(sorted(inputs.items()))].gold[_GOLD[field]]}

    return program


_GOLD = {"command": "command", "config": "reference"}


def bash_items(n: int):
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return load_bash_pack().items[:n], "command", "bash-pack", {}


def tf_items(repeat: int):
    from dataclasses import replace

    from verifirst.benchmarks.iac_pack import load_pack

    base = load_pack().items
    items = [replace(it, id=f"{it.id}#{k}", inputs={**it.inputs, "copy": k}) for k in range(repeat) for it in base]
    return items, "config", "terraform", {"backend": "python"}


def exact_items(n: int):
    from verifirst.core.task import Item

    items = [Item(id=f"e{i}", inputs={"task": f"print {i}"}, gold={"command": f"echo {i}"}) for i in range(n)]
    return items, "command", "exact", {}


def run_config(items, field: str, verifier_name: str, options: dict, executor, threads: int) -> dict:
    """One timed evaluation; a Ray pool is built and warmed first (its build time reported apart)."""
    from verifirst.loop.evaluation import evaluate
    from verifirst.loop.executor import VerifierSpec
    from verifirst.core.metric import Metric

    spec = VerifierSpec(verifier_name, options)
    local = spec()
    scorer = Metric(local, field)
    build_s = None
    if executor is not None:
        scorer = executor.metric(scorer)
        t0 = time.perf_counter()
        pool = scorer.metric._pool()
        pool.pids()  # every worker built its verifier
        warm = _gold_program(items, field)
        import concurrent.futures as cf

        with cf.ThreadPoolExecutor(len(pool.actors)) as tp:  # one item per worker: lazy imports, embedder
            list(tp.map(lambda it: scorer(it, warm(**it.inputs)), items[: len(pool.actors)]))
        build_s = time.perf_counter() - t0
    else:
        for it in items[:1]:  # the same warm-up in this process
            scorer(it, _gold_program(items, field)(**it.inputs))
    t0 = time.perf_counter()
    res = evaluate(_gold_program(items, field), items, scorer, split="train", threads=threads, progress=False,
                   retries=0)
    wall = time.perf_counter() - t0
    if executor is not None:
        executor.close()
    s = res.summary()
    return {"items": len(items), "wall_s": round(wall, 3), "items_per_s": round(len(items) / wall, 2),
            "pass": s["pass"], "errors": s["errors"], "inconclusive": s["inconclusive"],
            "pool_build_and_warm_s": None if build_s is None else round(build_s, 2),
            "median_item_ms": round(1000 * statistics.median(r.wall_s for r in res.rows), 2)}


def measure(name: str, loaded, workers: list[int]) -> dict:
    from verifirst.loop.executor import Ray

    items, field, vname, options = loaded
    out = {"verifier": vname, "options": options, "items": len(items), "threads": [], "ray": []}
    for n in workers:
        r = run_config(items, field, vname, options, None, n)
        out["threads"].append({"threads": n, **r})
        print(f"{name} threads={n}: {r['items_per_s']} items/s", file=sys.stderr)
    for n in workers:
        r = run_config(items, field, vname, options, Ray(num_workers=n), n)
        out["ray"].append({"workers": n, **r})
        print(f"{name} ray workers={n}: {r['items_per_s']} items/s (pool {r['pool_build_and_warm_s']} s)",
              file=sys.stderr)
    base = out["ray"][0]["items_per_s"]
    for r in out["ray"]:
        r["speedup"] = round(r["items_per_s"] / base, 3)
        r["efficiency"] = round(r["items_per_s"] / (r["workers"] * base), 3)
    t1 = out["threads"][0]["items_per_s"]
    for r in out["threads"]:
        r["speedup"] = round(r["items_per_s"] / t1, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4", help="Ray workers (and threads) to measure")
    ap.add_argument("--bash-n", type=int, default=51, help="bash pack golds to verify (51: all)")
    ap.add_argument("--tf-repeat", type=int, default=4, help="copies of the IaC pack's references")
    ap.add_argument("--overhead-n", type=int, default=400, help="items for the per-task overhead")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record import emit, machine

    from verifirst.loop.executor import QUIET_ENV

    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    started = machine()
    workers = sorted({int(x) for x in a.workers.split(",")})
    import tempfile

    import ray

    tmp = tempfile.mkdtemp(prefix="vfray-", dir="/tmp")
    t0 = time.perf_counter()
    # one local cluster for every configuration (each Ray(num_workers=n) joins it: no restart between them)
    ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             _temp_dir=tmp)
    start_s = time.perf_counter() - t0
    try:
        over = {"threads": run_config(*exact_items(a.overhead_n), None, 1)}
        from verifirst.loop.executor import Ray

        over["ray"] = run_config(*exact_items(a.overhead_n), Ray(num_workers=1), 1)
        per_task_ms = 1000 * (1 / over["ray"]["items_per_s"] - 1 / over["threads"]["items_per_s"])
        result = {
            "benchmark": "scale", "workers": workers, "ray_version": ray.__version__,
            "local_cluster_start_s": round(start_s, 2),
            "overhead": {"verifier": "exact", "items": a.overhead_n,
                         "thread_ms_per_item": round(1000 / over["threads"]["items_per_s"], 3),
                         "ray_ms_per_item": round(1000 / over["ray"]["items_per_s"], 3),
                         "ray_per_task_overhead_ms": round(per_task_ms, 3)},
            "terraform": measure("terraform", tf_items(a.tf_repeat), workers),
            "bash": measure("bash", bash_items(a.bash_n), workers),
        }
    finally:
        ray.shutdown()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    emit(result, started, a.out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
