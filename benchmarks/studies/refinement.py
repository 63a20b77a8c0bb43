"""S0 Task 2: execution accuracy of the generator alone, self-reflection, and reflection driven
by each judge; paired McNemar (exact) of every condition against the generator alone.

All conditions start from the same first draft of each task (the generator's, extracted), so
they differ only in what happens after it and the test is paired item by item. Extraction
failures, LM errors and verifier errors are counted per condition; errors are never scored.

    python benchmarks/studies/refinement.py --suite bash-pack --limit 10 --json
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from verifirst.core.errors import InputError
from verifirst.core.stats import mcnemar_paired, wilson
from verifirst.core.task import Item, Suite

from verifirst.benchmarks.studies.judge_validation import (InContext, build_judges, common_args, default_verifier, emit,
                                                           generate_candidate, group_by_suite, limited, load_suite_arg,
                                                           verify_truth)

BASE = "generator"


def default_conditions(judges: Mapping[str, Callable], *, self_reflection: bool = True, max_attempts: int = 3,
                       self_max_attempts: int = 2, lm: Any = None) -> dict[str, Callable]:
    """{condition: agent(task=, initial=) -> Prediction(command, ...)} for S0's agents."""
    from verifirst.programs.reflection import EvaluatorReflectionAgent, SelfReflectionAgent

    def wrap(m):
        return InContext(m, lm) if lm is not None else m
    out: dict[str, Callable] = {}
    if self_reflection:
        out["self_reflection"] = wrap(SelfReflectionAgent(max_attempts=self_max_attempts))
    for name, judge in judges.items():
        out[f"reflection+{name}"] = wrap(EvaluatorReflectionAgent(judge, max_attempts=max_attempts))
    return out


def refine_rows(items: Sequence[Item], generator: Callable, conditions: Mapping[str, Callable],
                verifier: Any) -> list[dict]:
    rows = []
    for it in items:
        task = it.inputs["task"]
        draft = generate_candidate(generator, task)
        row = {"id": it.id, "draft": draft["command"], "conditions": {}}
        base = {"command": draft["command"], "extraction_failures": 0 if draft["extracted"] else 1,
                "attempts": 1, "lm_error": draft["lm_error"], "stop_reason": None}
        runs = {BASE: base}
        for name, agent in conditions.items():
            if draft["lm_error"]:
                runs[name] = {"command": None, "extraction_failures": 0, "attempts": 0,
                              "lm_error": "no first draft (generator error)", "stop_reason": None}
                continue
            try:
                p = agent(task=task, initial=draft["command"])
                runs[name] = {"command": p.command, "attempts": int(getattr(p, "n_attempts", 1)),
                              "extraction_failures": int(getattr(p, "extraction_failures", 0)),
                              "lm_error": None, "stop_reason": getattr(p, "stop_reason", None),
                              "accepted": getattr(p, "accepted", None)}
                if runs[name]["stop_reason"] == "judge_error":
                    runs[name]["judge_error"] = True
            except Exception as e:  # an LM error inside the agent: the condition has no output
                runs[name] = {"command": None, "extraction_failures": 0, "attempts": 0,
                              "lm_error": f"{type(e).__name__}: {e}", "stop_reason": None}
        cache: dict[str, tuple] = {}  # same command, same item: one execution
        for name, r in runs.items():
            r["passed"], r["verifier_error"] = None, None
            if r["command"] is not None and not r["lm_error"]:
                if r["command"] not in cache:
                    cache[r["command"]] = verify_truth(verifier, it, r["command"])
                r["passed"], r["verifier_error"] = cache[r["command"]]
            row["conditions"][name] = r
        rows.append(row)
    return rows


def summarize(rows: Sequence[dict], names: Sequence[str]) -> dict:
    out: dict = {"items": len(rows), "conditions": {}, "mcnemar_vs_generator": {}}
    for name in names:
        rs = [r["conditions"][name] for r in rows]
        scored = [r for r in rs if r["passed"] is not None]
        k, n = sum(1 for r in scored if r["passed"]), len(scored)
        out["conditions"][name] = {
            "n": n, "passed": k, "accuracy": k / n if n else None, "accuracy_ci": list(wilson(k, n)) if n else None,
            "lm_errors": sum(1 for r in rs if r["lm_error"]),
            "judge_errors": sum(1 for r in rs if r.get("judge_error")),
            "verifier_errors": sum(1 for r in rs if r["verifier_error"]),
            "extraction_failures": sum(r["extraction_failures"] for r in rs),
            "mean_attempts": (sum(r["attempts"] for r in rs if not r["lm_error"]) /
                              max(1, sum(1 for r in rs if not r["lm_error"]))),
            "accepted": sum(1 for r in rs if r.get("accepted") is True),
        }
    for name in names:
        if name == BASE:
            continue
        both = [r["conditions"] for r in rows
                if r["conditions"][name]["passed"] is not None and r["conditions"][BASE]["passed"] is not None]
        a = [c[name]["passed"] for c in both]
        b = [c[BASE]["passed"] for c in both]
        out["mcnemar_vs_generator"][name] = {
            "n_pairs": len(both), "accuracy": sum(a) / len(both) if both else None,
            "generator_accuracy": sum(b) / len(both) if both else None,
            "fixed": sum(1 for x, y in zip(a, b) if x and not y), "broken": sum(1 for x, y in zip(a, b) if y and not x),
            "test": mcnemar_paired(a, b, exact=True).as_dict() if both else None}
    return out


def run_refinement(suites: Suite | Sequence[Item] | Mapping[str, Sequence[Item]], generator: Callable,
                   conditions: Mapping[str, Callable], verifier: Any, *, keep_rows: bool = True) -> dict:
    """Run S0 Task 2 and return a JSON-able report (per suite, plus `all` when several)."""
    if BASE in conditions:
        raise InputError(f"condition name {BASE!r} is reserved for the generator alone", field="conditions")
    groups = group_by_suite(suites)
    names = [BASE] + list(conditions)
    t0 = time.perf_counter()
    report: dict = {"experiment": "refinement", "conditions": names,
                    "verifier": getattr(verifier, "name", type(verifier).__name__), "suites": {}}
    all_rows: list[dict] = []
    for sname, items in groups.items():
        rows = refine_rows(items, generator, conditions, verifier)
        all_rows += [dict(r, suite=sname) for r in rows]
        report["suites"][sname] = summarize(rows, names)
    if len(groups) > 1:
        report["suites"]["all"] = summarize(all_rows, names)
    report["wall_s"] = round(time.perf_counter() - t0, 3)
    if keep_rows:
        report["rows"] = all_rows
    return report


def main(argv: Sequence[str] | None = None) -> int:
    from verifirst.lm import make_lm
    from verifirst.programs.bash import BashGenerator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p)
    p.add_argument("--max-attempts", type=int, default=3, help="commands per judge-driven agent, draft included")
    p.add_argument("--self-max-attempts", type=int, default=2, help="commands for self-reflection, draft included")
    p.add_argument("--no-self-reflection", action="store_true")
    args = p.parse_args(argv)
    try:
        suites = {}
        for spec in args.suite or ["bash-pack"]:
            suites.update(group_by_suite(limited(load_suite_arg(spec), args.limit)))
        gen_lm = make_lm(args.gen_lm, role="task")
        judge_lm = make_lm(args.judge_lm, role="judge") if args.judge_lm else gen_lm
        judges = {k: InContext(v, judge_lm) for k, v in build_judges(args.judges, args.ice_threshold).items()}
        conditions = default_conditions(judges, self_reflection=not args.no_self_reflection,
                                        max_attempts=args.max_attempts, self_max_attempts=args.self_max_attempts,
                                        lm=gen_lm)
        report = run_refinement(suites, InContext(BashGenerator(args.variant), gen_lm), conditions,
                                default_verifier(args.feh), keep_rows=not args.no_rows)
    except (InputError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["models"] = {"generator": args.gen_lm, "judge": args.judge_lm or args.gen_lm}
    report["settings"] = {"max_attempts": args.max_attempts, "self_max_attempts": args.self_max_attempts,
                          "feh": args.feh}
    emit(report, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
