"""S0 Task 1: reference-less judges against execution ground truth, per suite.

For every item a candidate command (given, or made by a generator and extracted) is run by an
execution verifier (any Verifier: FEH in the sandbox, the pack verifier...): `passed` is the
ground truth. Each judge then says correct / incorrect from the task and command alone.
Per suite and judge: confusion counts (positive = correct), accuracy with a Wilson interval,
precision, recall, F1, LM errors (counted apart, never scored as FAIL), and McNemar's exact test
of each judge against the baseline (ICE-Score) on the items both judged.

    python benchmarks/studies/judge_validation.py --suite bash-pack --limit 10 --json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from verifirst.core.errors import InputError
from verifirst.core.stats import confusion, mcnemar_paired, wilson
from verifirst.core.task import Item, Suite

JUDGE_NAMES = ("bfm", "logic", "combined", "ice")


# ---- shared with the refinement experiment -----------------------------------------------

def group_by_suite(suite: Suite | Sequence[Item] | Mapping[str, Sequence[Item]], name: str | None = None
                   ) -> dict[str, list[Item]]:
    """{suite name: items}; a Suite whose items carry meta['suite'] (EAbench) splits by it."""
    if isinstance(suite, Mapping):
        return {k: list(v) for k, v in suite.items()}
    items = list(suite.items if isinstance(suite, Suite) else suite)
    base = name or (suite.name if isinstance(suite, Suite) else "suite")
    if items and all(it.meta.get("suite") for it in items):
        out: dict[str, list[Item]] = {}
        for it in items:
            out.setdefault(str(it.meta["suite"]), []).append(it)
        return out
    return {base: items}


def verify_truth(verifier: Any, item: Item, command: str) -> tuple[bool | None, str | None]:
    """(passed, None), or (None, reason) when the verifier failed or could not decide."""
    try:
        v = verifier.verify(item, command)
    except Exception as e:  # a broken verifier run is not a FAIL of the candidate
        return None, f"{type(e).__name__}: {e}"
    if getattr(v, "inconclusive", None) or v.passed is None:  # nothing observed: no ground truth either way
        return None, f"inconclusive: {v.inconclusive}" if v.inconclusive else f"no verdict: {v.stage}"
    return bool(v.passed), None


def generate_candidate(generator: Callable, task: str) -> dict:
    """Generator output, extracted; LM errors are reported, not turned into commands."""
    from verifirst.programs._extract import extract_command

    try:
        raw = generator(task=task).command
    except Exception as e:
        return {"command": None, "raw": None, "extracted": False, "lm_error": f"{type(e).__name__}: {e}"}
    ex = extract_command(raw)
    return {"command": ex.command if ex.ok else str(raw or "").strip(), "raw": raw, "extracted": ex.ok,
            "method": ex.method, "lm_error": None}


def binary_metrics(truth: Sequence[bool], pred: Sequence[bool]) -> dict:
    """Confusion counts with `correct` as the positive class, accuracy (Wilson CI), P/R/F1."""
    n = len(truth)
    if n == 0:
        return {"n": 0, "tp": 0, "fp": 0, "tn": 0, "fn": 0, "accuracy": None, "accuracy_ci": None,
                "precision": None, "recall": None, "f1": None}
    c = confusion(list(truth), list(pred), labels=[True, False])
    tp, fn, fp, tn = c.count(True, True), c.count(True, False), c.count(False, True), c.count(False, False)
    pos = c.per_class[True]
    lo, hi = wilson(tp + tn, n)
    prec = pos["precision"] if tp + fp else None  # undefined, not 0, when nothing was accepted
    rec = pos["recall"] if tp + fn else None
    f1 = pos["f1"] if prec is not None and rec is not None else None
    return {"n": n, "tp": tp, "fp": fp, "tn": tn, "fn": fn, "accuracy": c.accuracy, "accuracy_ci": [lo, hi],
            "precision": prec, "recall": rec, "f1": f1}


# ---- the experiment -----------------------------------------------------------------------

def _judge(judge: Callable, task: str, command: str) -> tuple[bool | None, str | None, str]:
    try:
        p = judge(task=task, command=command)
        return bool(p.verdict), None, str(getattr(p, "feedback", "") or "")
    except Exception as e:  # BashJudgeError and provider errors: an LM error, not a verdict
        return None, f"{type(e).__name__}: {e}", ""


def judge_rows(items: Sequence[Item], judges: Mapping[str, Callable], verifier: Any, *,
               generator: Callable | None = None, candidates: Mapping[str, str] | None = None) -> list[dict]:
    rows = []
    for it in items:
        task = it.inputs["task"]
        if candidates is not None and it.id in candidates:
            cand = {"command": candidates[it.id], "extracted": True, "lm_error": None}
        elif generator is not None:
            cand = generate_candidate(generator, task)
        else:
            raise InputError(f"no candidate for item {it.id}", field="candidates",
                             expected="a candidate per item or a generator")
        row = {"id": it.id, "command": cand["command"], "extracted": cand["extracted"],
               "generator_error": cand["lm_error"], "truth": None, "verifier_error": None, "judges": {}}
        if cand["command"] is not None:
            row["truth"], row["verifier_error"] = verify_truth(verifier, it, cand["command"])
            if row["truth"] is not None:
                for name, judge in judges.items():
                    v, err, fb = _judge(judge, task, cand["command"])
                    row["judges"][name] = {"verdict": v, "error": err, "feedback": fb}
        rows.append(row)
    return rows


def summarize(rows: Sequence[dict], judge_names: Sequence[str], baseline: str | None) -> dict:
    scored = [r for r in rows if r["truth"] is not None]
    out = {"items": len(rows), "scored": len(scored),
           "positives": sum(1 for r in scored if r["truth"]),
           "generator_errors": sum(1 for r in rows if r["generator_error"]),
           "verifier_errors": sum(1 for r in rows if r["verifier_error"]),
           "extraction_failures": sum(1 for r in rows if not r["extracted"] and not r["generator_error"]),
           "judges": {}, "mcnemar_vs_baseline": {}}
    for name in judge_names:
        ok = [r for r in scored if r["judges"][name]["verdict"] is not None]
        m = binary_metrics([r["truth"] for r in ok], [r["judges"][name]["verdict"] for r in ok])
        m["lm_errors"] = len(scored) - len(ok)
        out["judges"][name] = m
    if baseline in judge_names:
        for name in judge_names:
            if name == baseline:
                continue
            both = [r for r in scored if r["judges"][name]["verdict"] is not None
                    and r["judges"][baseline]["verdict"] is not None]
            a = [r["judges"][name]["verdict"] == r["truth"] for r in both]
            b = [r["judges"][baseline]["verdict"] == r["truth"] for r in both]
            res = mcnemar_paired(a, b, exact=True).as_dict() if both else None
            out["mcnemar_vs_baseline"][name] = {
                "n_pairs": len(both), "accuracy": sum(a) / len(both) if both else None,
                "baseline_accuracy": sum(b) / len(both) if both else None, "test": res}
    return out


def validate_judges(suites: Suite | Sequence[Item] | Mapping[str, Sequence[Item]], judges: Mapping[str, Callable],
                    verifier: Any, *, generator: Callable | None = None,
                    candidates: Mapping[str, str] | None = None, baseline: str | None = "ice",
                    keep_rows: bool = True) -> dict:
    """Run S0 Task 1 and return a JSON-able report (per suite, plus `all` when several)."""
    if baseline is not None and baseline not in judges:
        raise InputError(f"baseline judge {baseline!r} is not among the judges", field="baseline",
                         expected=", ".join(judges))
    groups = group_by_suite(suites)
    t0 = time.perf_counter()
    report: dict = {"experiment": "judge_validation", "baseline": baseline, "judges": list(judges),
                    "verifier": getattr(verifier, "name", type(verifier).__name__), "suites": {}}
    all_rows: list[dict] = []
    for sname, items in groups.items():
        rows = judge_rows(items, judges, verifier, generator=generator, candidates=candidates)
        all_rows += [dict(r, suite=sname) for r in rows]
        report["suites"][sname] = summarize(rows, list(judges), baseline)
    if len(groups) > 1:
        report["suites"]["all"] = summarize(all_rows, list(judges), baseline)
    report["wall_s"] = round(time.perf_counter() - t0, 3)
    if keep_rows:
        report["rows"] = all_rows
    return report


# ---- command line -------------------------------------------------------------------------

def load_suite_arg(spec: str) -> Suite:
    """bash-pack | nl2sh | eabench:PATH | intercode:PATH | a bash pack JSON path."""
    kind, _, path = spec.partition(":")
    if kind == "bash-pack" and not path:
        from verifirst.benchmarks.bash_pack import load_bash_pack
        return load_bash_pack()
    if kind == "nl2sh":
        from verifirst.benchmarks.nl2sh import load_nl2sh
        return load_nl2sh(path or None)
    if kind == "eabench" and path:
        from verifirst.benchmarks.eabench import load_eabench
        return load_eabench(path)
    if kind == "intercode" and path:
        from verifirst.benchmarks.intercode import load_intercode
        return load_intercode(path)
    if spec.endswith(".json"):
        from verifirst.benchmarks.bash_pack import load_bash_pack
        return load_bash_pack(spec)
    raise InputError(f"unknown suite {spec!r}", field="--suite",
                     expected="bash-pack, nl2sh[:SRC], eabench:PATH, intercode:PATH or a pack .json")


def default_verifier(params: str = "strict", llm: str = "off", lm=None):
    """Pack-aware FEH in the sandbox: `syntax` tasks by bash -n, the rest by execution.

    params "strict": outputs must match (exactly or as the same set of lines) and file-system
    effects must agree; no similarity rule (`seq 0 10` is not `seq 1 10`). "s1": FEH defaults
    (MiniLM cosine 0.75). Anything else: a FEH params JSON path.
    """
    from verifirst.benchmarks.bash_pack import PackVerifier
    from verifirst.verifiers.bash._feh_compare import FehParams
    from verifirst.verifiers.bash.feh import FehVerifier
    if params == "strict":
        fp = FehParams(out_threshold=1.01, cmd_threshold=1.01)
    elif params == "s1":
        fp = FehParams()
    else:
        from verifirst.verifiers.bash._feh_params import load_params
        fp = load_params(params)
    return PackVerifier(FehVerifier(fp, llm=llm, lm=lm))


def limited(suite: Suite, limit: int | None) -> Suite:
    return suite if not limit else Suite(suite.name, suite.items[:limit], suite.description, suite.meta)


def common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", action="append", default=None,
                   help="bash-pack (default), nl2sh[:SRC], eabench:PATH, intercode:PATH; repeatable")
    p.add_argument("--limit", type=int, default=None, help="first N items of each suite")
    p.add_argument("--gen-lm", default="local", help="generator LM spec (default: embedded SmolLM2)")
    p.add_argument("--judge-lm", default=None, help="judge LM spec (default: the generator's)")
    p.add_argument("--variant", default="predict", choices=("predict", "cot"), help="generator variant")
    p.add_argument("--judges", default=",".join(JUDGE_NAMES), help="comma list of " + ", ".join(JUDGE_NAMES))
    p.add_argument("--ice-threshold", type=float, default=3.0)
    p.add_argument("--feh", default="strict", help="ground truth: strict (default), s1, or a FEH params JSON")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", default=None, help="also write the report here (atomically)")
    p.add_argument("--no-rows", action="store_true", help="leave per-item rows out of the report")


def build_judges(names: str, ice_threshold: float) -> dict:
    from verifirst.programs.bash_judges import make_bash_judge
    out = {}
    for n in [x.strip() for x in names.split(",") if x.strip()]:
        if n not in JUDGE_NAMES:
            raise InputError(f"unknown judge {n!r}", field="--judges", expected=", ".join(JUDGE_NAMES))
        out[n] = make_bash_judge(n, threshold=ice_threshold) if n == "ice" else make_bash_judge(n)
    return out


class InContext:
    """Call a module under a given LM (generator and judges may use different models)."""

    def __init__(self, module: Callable, lm: Any):
        self.module, self.lm = module, lm

    def __call__(self, **kw):
        import dspy
        with dspy.context(lm=self.lm):
            return self.module(**kw)


def emit(report: dict, args) -> None:
    if args.out:
        from verifirst.core.atomic import write_json
        write_json(args.out, report)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        for sname, s in report["suites"].items():
            print(f"[{sname}] items={s['items']} scored={s['scored']}")
            for k, v in s.get("judges", s.get("conditions", {})).items():
                print(f"  {k}: " + ", ".join(f"{m}={v[m]:.3f}" if isinstance(v.get(m), float) else f"{m}={v.get(m)}"
                                            for m in ("accuracy", "precision", "recall", "f1", "n") if m in v))


def main(argv: Sequence[str] | None = None) -> int:
    from verifirst.lm import make_lm
    from verifirst.programs.bash import BashGenerator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p)
    args = p.parse_args(argv)
    try:
        suites = {}
        for spec in args.suite or ["bash-pack"]:
            s = limited(load_suite_arg(spec), args.limit)
            suites.update(group_by_suite(s))
        gen_lm = make_lm(args.gen_lm, role="task")
        judge_lm = make_lm(args.judge_lm, role="judge") if args.judge_lm else gen_lm
        judges = {k: InContext(v, judge_lm) for k, v in build_judges(args.judges, args.ice_threshold).items()}
        report = validate_judges(suites, judges, default_verifier(args.feh),
                                 generator=InContext(BashGenerator(args.variant), gen_lm),
                                 baseline="ice" if "ice" in judges else None, keep_rows=not args.no_rows)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["models"] = {"generator": args.gen_lm, "judge": args.judge_lm or args.gen_lm}
    emit(report, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
