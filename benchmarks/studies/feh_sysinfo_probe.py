"""FEH on system administration and system information tasks (issue 37): the kind of task
NL2SH-ALFA and InterCode lack (users, groups, permissions, dates and time zones, host and kernel
facts, disk usage, processes), where short outputs of different facts look alike.

The tasks live in verifirst/benchmarks/data/feh_sysinfo_tasks.json: each has a gold script, an
equivalent rewrite written for this probe, a fixture (`sysadmin` where users and groups are
needed) and an optional setup. Pairs, each judged by FehVerifier.verify in the task's fixture
(parameters fitted on NL2SH-ALFA, the loaders' default; LLM off):

- gold vs its rewrite: equivalent;
- gold vs the gold of the task 1 and 10 places on (rotated): not equivalent.

Before any verdict counts, every gold must succeed in its own task (a broken task is reported,
never scored). `--baseline-rev REV` also judges the same runs with the comparison rules of an
older commit (verifiers/bash/_feh_compare.py at REV), for a before/after on one set of runs.
Runs and embeddings are cached as in feh_quality.py.

    python benchmarks/studies/feh_sysinfo_probe.py [--baseline-rev REV] [--out PATH] [--cache DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from verifirst.core.errors import InputError  # noqa: E402
from verifirst.core.task import Item  # noqa: E402

REPO = Path(__file__).resolve().parents[2]  # the checkout, for --baseline-rev
DATA = Path(__file__).resolve().parents[1] / "data" / "feh_sysinfo_tasks.json"
OUT = Path(__file__).resolve().parents[1] / "perf" / "results" / "feh_sysinfo_probe.json"
ROTATIONS = (1, 10)
_REQUIRED = ("id", "kind", "task", "gold", "rewrite", "fixture")


def load_tasks(path: Path = DATA) -> list[dict]:
    """The probe's tasks, checked.

    Args:
        path: the JSON file ({"tasks": [...]}).

    Raises:
        InputError: naming the file, the task and the field.
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("task file not found", path=str(path)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", path=str(path), line=e.lineno) from None
    tasks = raw.get("tasks") if isinstance(raw, dict) else None
    if not isinstance(tasks, list) or len(tasks) <= max(ROTATIONS):
        raise InputError(f"expected more than {max(ROTATIONS)} tasks", path=str(path), field="tasks")
    seen = set()
    for i, t in enumerate(tasks):
        for k in _REQUIRED:
            if not isinstance(t.get(k), str) or not t[k].strip():
                raise InputError(f"task {i} has no {k}", path=str(path), field=f"tasks[{i}].{k}",
                                 expected="a non-empty string")
        if t["id"] in seen:
            raise InputError(f"duplicate task id {t['id']!r}", path=str(path), field=f"tasks[{i}].id")
        seen.add(t["id"])
    return tasks


def probe_pairs(tasks: list[dict]) -> list[dict]:
    """(task index, candidate, label) rows: each gold's rewrite, then the rotated golds."""
    rows = []
    n = len(tasks)
    for i, t in enumerate(tasks):
        rows.append({"id": f"{t['id']}~rewrite", "task": i, "candidate": t["rewrite"], "label": True})
        for r in ROTATIONS:
            o = tasks[(i + r) % n]
            rows.append({"id": f"{t['id']}~{o['id']}", "task": i, "candidate": o["gold"], "label": False})
    return rows


def driver(gold: str) -> str:
    """An EAbench-style driver: it prints the value the evaluator expects (the gold's output,
    as bash_2's pre_test.sh writes `#++VAR=...`), then runs the command under test."""
    return f"__vf_expected=$(\n{gold}\n)\nprintf '#++EXPECTED=%s\\n' \"$__vf_expected\"\n{{command}}"


def item_of(t: dict) -> Item:
    gold = {"command": t["gold"], "fixture": t["fixture"]}
    if t.get("prerequisite"):
        gold["prerequisite"] = t["prerequisite"]
    if t.get("driver"):
        gold["harness"] = driver(t["gold"])
    return Item(id=t["id"], inputs={"task": t["task"]}, gold=gold)


def cached_run_pair(cache, run_pair=None):
    """A run_pair that reads and fills the run cache (the setup runs of verify() included)."""
    from verifirst.benchmarks.studies._feh_runs import _fixture_hash
    from verifirst.verifiers.bash._feh_compare import RunView

    if run_pair is None:
        from verifirst.verifiers.bash.sandbox import run_pair

    def rp(gold: str, cand: str, fixture):
        k = cache.key(gold, cand, str(fixture), _fixture_hash(fixture))
        if k not in cache.rows:
            g, c = run_pair(gold, cand, fixture)
            cache.put(k, RunView.of(g), RunView.of(c))
        return cache.rows[k]

    return rp


def baseline_rules(rev: str):
    """verifiers/bash/_feh_compare.py as of commit `rev`, loaded as its own module."""
    text = subprocess.run(["git", "show", f"{rev}:verifiers/bash/_feh_compare.py"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="feh-baseline-")) / "_feh_compare_baseline.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_feh_compare_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def judge_with(mod, params: dict, task: str, gold: str, cand: str, g: dict, c: dict, embed) -> dict:
    """FehVerifier.compare's offline verdict, with another version's rules (`mod`)."""
    p = mod.FehParams.from_dict(params)
    gv, cv = (mod.RunView.of({**r, "fs": [(e["change"], e["path"], e["type"], e["mode"], e["sha256"])
                                           for e in r["fs_diff"]]}) for r in (g, c))
    f = mod.features(gv, cv)
    f.same_command = gold.strip() == cand.strip()
    d = mod.decide(f, p)
    if d.rule in ("no_output_cmd", "output_cosine", "output_overlap"):
        mod.add_cosines(f, gv, cv, gold, cand, embed)
        d = mod.decide(f, p)
    return {"passed": None if d.inconclusive else d.equivalent, "rule": d.rule}


def summarise(rows: list[dict], key: str) -> dict:
    """Counts of one mode's verdicts (`key`: the row field holding {passed, rule})."""
    out = {}
    for label, name in ((False, "not_equivalent"), (True, "equivalent")):
        rs = [r for r in rows if r["label"] is label]
        passed = [r for r in rs if r[key]["passed"] is True]
        failed = [r for r in rs if r[key]["passed"] is False]
        und = [r for r in rs if r[key]["passed"] is None]
        rules: dict[str, int] = {}
        for r in (passed if not label else failed):  # the wrong verdicts, by the rule that gave them
            rules[r[key]["rule"]] = rules.get(r[key]["rule"], 0) + 1
        out[name] = {"pairs": len(rs), "passed": len(passed), "failed": len(failed), "inconclusive": len(und),
                     "wrong_by_rule": rules}
    ne = out["not_equivalent"]
    ne["false_equivalence_rate"] = round(ne["passed"] / ne["pairs"], 3) if ne["pairs"] else 0.0
    eq = out["equivalent"]
    eq["false_rejection_rate"] = round(eq["failed"] / eq["pairs"], 3) if eq["pairs"] else 0.0
    decided = [r for r in rows if r[key]["passed"] is not None]
    out["accuracy_conclusive"] = round(sum(r[key]["passed"] is r["label"] for r in decided) / len(decided), 3) \
        if decided else 0.0
    out["false_equivalences"] = [r["id"] for r in rows if r["label"] is False and r[key]["passed"] is True]
    out["false_rejections"] = [r["id"] for r in rows if r["label"] is True and r[key]["passed"] is False]
    return out


def run_probe(tasks: list[dict], cache, embed, baseline=None, workers: int = 2, run_pair=None,
              fact_chars: int | None = None) -> dict:
    """Every pair through FehVerifier.verify (and the baseline rules on the same runs).

    Args:
        tasks: from load_tasks().
        cache: a RunCache.
        embed: the embedder (an EmbedCache).
        baseline: an older _feh_compare module, or None.
        workers: pairs run at once.
        run_pair: the sandbox's run_pair (default: the default sandbox).
        fact_chars: FehParams.fact_chars for this run (default: the fitted parameters' own).
    """
    from dataclasses import replace

    from verifirst.verifiers.bash.feh import FehVerifier

    v = FehVerifier("nl2sh", run_pair=cached_run_pair(cache, run_pair), embed=embed)
    if fact_chars is not None:
        v.params = replace(v.params, fact_chars=fact_chars)
    t0 = time.perf_counter()
    golds = [v.verify(item_of(t), t["gold"]) for t in tasks]  # the gold against itself, in its task
    broken = [{"id": t["id"], "exit": g.details["gold"]["exit_code"], "stderr": g.details["gold"]["stderr"][:300]}
              for t, g in zip(tasks, golds) if g.details["gold"]["exit_code"] != 0]
    ok = {t["id"] for t in tasks} - {b["id"] for b in broken}
    pairs = [p for p in probe_pairs(tasks) if tasks[p["task"]]["id"] in ok]

    def one(p):
        t = tasks[p["task"]]
        verdict = v.verify(item_of(t), p["candidate"])
        row = {**p, "gold": t["gold"], "after": {"passed": verdict.passed, "rule": verdict.details["rule"]},
               "gold_stdout": verdict.details["gold"]["stdout"][:300],
               "cand_stdout": verdict.details["candidate"]["stdout"][:300]}
        if baseline is not None:
            row["before"] = judge_with(baseline, v.params.as_dict(), t["task"], t["gold"], p["candidate"],
                                       verdict.details["gold"], verdict.details["candidate"], embed)
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        rows = list(ex.map(one, pairs))
    # a rotated pair whose two scripts print the same here is no test of FEH: listed, to fix the task
    same_output = [r["id"] for r in rows if r["label"] is False and r["gold_stdout"] == r["cand_stdout"]
                   and r["gold_stdout"].strip()]
    report = {"tasks": len(tasks), "broken_golds": broken, "pairs": len(rows),
              "rotations": list(ROTATIONS), "params": "nl2sh (fitted on NL2SH-ALFA), llm off",
              "not_equivalent_with_same_stdout": same_output,
              "after": summarise(rows, "after"), "wall_s": round(time.perf_counter() - t0, 1)}
    if baseline is not None:
        report["before"] = summarise(rows, "before")
    report["rows"] = rows
    return report


def main(argv: list[str] | None = None) -> int:
    from verifirst.benchmarks.studies._feh_runs import EmbedCache, RunCache, default_cache_dir
    from verifirst.core.atomic import write_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=Path, default=DATA)
    ap.add_argument("--baseline-rev", default=None, help="judge the same runs with _feh_compare.py at this commit")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cache", type=Path, default=None, help="dir for cached sandbox runs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fact-chars", type=int, default=None, help="FehParams.fact_chars (default: the fitted one)")
    a = ap.parse_args(argv)
    try:
        tasks = load_tasks(a.tasks)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cache_dir = a.cache or default_cache_dir()
    from verifirst.benchmarks.perf.record import machine

    started = machine()  # the machine block the performance table reads (record.py's)
    report = run_probe(tasks, RunCache(cache_dir / "sysinfo_probe.jsonl"), EmbedCache(cache_dir / "minilm_vectors.npz"),
                       baseline_rules(a.baseline_rev) if a.baseline_rev else None, a.workers,
                       fact_chars=a.fact_chars)
    if a.baseline_rev:
        report["baseline_rev"] = a.baseline_rev
    report["fact_chars"] = a.fact_chars
    report["machine"] = {**started, "loadavg_end": machine()["loadavg_start"]}
    write_json(a.out, report)
    for mode in ("before", "after"):
        if mode in report:
            s = report[mode]
            ne, eq = s["not_equivalent"], s["equivalent"]
            print(f"{mode:6s} not-equivalent: {ne['passed']}/{ne['pairs']} false equivalences "
                  f"({ne['false_equivalence_rate']:.3f}), {ne['inconclusive']} inconclusive; equivalent: "
                  f"{eq['passed']}/{eq['pairs']} pass, {eq['failed']} rejected, {eq['inconclusive']} inconclusive; "
                  f"accuracy on conclusive {s['accuracy_conclusive']:.3f}")
            print(f"       wrong by rule: ne {ne['wrong_by_rule']} eq {eq['wrong_by_rule']}")
    print(f"broken golds: {[b['id'] for b in report['broken_golds']]}; rotated pairs with the same stdout: "
          f"{report['not_equivalent_with_same_stdout']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
