"""Stage-decomposed comparison of IaC generation strategies (S3's Table 3 shape, on our runs).

stage_report([StrategyResult, ...]) -> counts per stage and per error class, pass@1 with a
Wilson CI, convergence by attempt for repair runs, and pairwise exact McNemar tests.
rego_transition(before, after) -> the full stage transition matrix of the policy-injection
diagnostic, with an exact McNemar on OPA failures resolved vs introduced.

    python -m verifirst.benchmarks.studies.iac_experiment --model local --strategies cot,repair \
        [--rego-injection] [--gates validate,plan,opa,checkov] [--limit N] [--out report.json]
runs them on the built-in pack with the terraform verifier.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from verifirst.core.stats import mcnemar, mcnemar_paired, wilson
from verifirst.core.task import Item
from verifirst.verifiers.terraform.iac_taxonomy import DECEPTIVE_FIX, ERROR_CLASSES, OPA_FAIL, PASS, REPAIR_STAGES

ERROR = "ERROR"
# the verifier's funnel (SCANNER_FAIL included) plus a repair loop's DECEPTIVE_FIX, then ERROR
ROW_STAGES = (*REPAIR_STAGES, ERROR)


@dataclass
class ItemResult:
    id: str
    status: str  # PASS | FAIL | ERROR (an LM or verifier error, never scored)
    stage: str | None
    error_classes: list[str] = field(default_factory=list)
    attempt_stages: list[str] | None = None  # repair runs: stage per attempt
    error: str | None = None
    output: str | None = None
    wall_s: float = 0.0

    @property
    def scored(self) -> bool:
        return self.status != ERROR

    @property
    def passed(self) -> bool:
        return self.status == PASS


@dataclass
class StrategyResult:
    name: str
    rows: list[ItemResult]

    def by_id(self) -> dict[str, ItemResult]:
        return {r.id: r for r in self.rows}

    def as_dict(self) -> dict:
        return {"name": self.name, "rows": [asdict(r) for r in self.rows]}


def _row_stage(r: ItemResult) -> str:
    return ERROR if not r.scored else (r.stage or "VALIDATE_FAIL")


def strategy_summary(res: StrategyResult) -> dict:
    scored = [r for r in res.rows if r.scored]
    k = sum(r.passed for r in scored)
    lo, hi = wilson(k, len(scored))
    stages = {s: 0 for s in ROW_STAGES}
    classes: Counter = Counter()
    for r in res.rows:
        stages[_row_stage(r)] = stages.get(_row_stage(r), 0) + 1
        if r.scored and not r.passed:
            classes.update(set(r.error_classes))  # items with the class, not error count
    out = {"n": len(res.rows), "scored": len(scored), "errors": len(res.rows) - len(scored),
           "pass": k, "pass_at_1": k / len(scored) if scored else 0.0, "ci_lo": lo, "ci_hi": hi,
           "stages": stages,
           "error_classes": {c: classes.get(c, 0) for c in ERROR_CLASSES if classes.get(c)}
           | {c: n for c, n in classes.items() if c not in ERROR_CLASSES}}
    runs = [r.attempt_stages for r in scored if r.attempt_stages]
    if runs:
        depth = max(len(a) for a in runs)
        # passes reached by attempt j (a run that passed earlier counts as passed later)
        out["convergence"] = [sum(1 for a in runs if PASS in a[:j + 1]) for j in range(depth)]
        # what the curve would say if a deceptive repair counted as a pass (it does not)
        out["convergence_counting_deceptive"] = [sum(1 for a in runs if {PASS, DECEPTIVE_FIX} & set(a[:j + 1]))
                                                 for j in range(depth)]
        out["deceptive_fixes"] = sum(DECEPTIVE_FIX in a for a in runs)  # items with one at any attempt
        out["deceptive_final"] = sum(a[-1] == DECEPTIVE_FIX for a in runs)
        out["attempts_histogram"] = dict(Counter(len(a) for a in runs))
    return out


def _check_same_items(results: Sequence[StrategyResult]) -> None:
    ids = [sorted(r.by_id()) for r in results]
    for res, other in zip(results[1:], ids[1:]):
        if other != ids[0]:
            missing = sorted(set(ids[0]) ^ set(other))[:5]
            raise ValueError(f"strategy {res.name!r} ran on other items than {results[0].name!r} "
                             f"(differing ids, first few: {missing}); paired tests need the same items")


def pairwise(a: StrategyResult, b: StrategyResult) -> dict:
    """Exact McNemar over the items both strategies scored. b_count: a passes, b fails."""
    ra, rb = a.by_id(), b.by_id()
    common = [i for i in ra if i in rb and ra[i].scored and rb[i].scored]
    m = mcnemar_paired([ra[i].passed for i in common], [rb[i].passed for i in common], exact=True)
    return {"a": a.name, "b": b.name, "n": len(common), "b_count": m.b, "c_count": m.c,
            "p_value": m.p_value, "delta_pp": 100.0 * (m.c - m.b) / len(common) if common else 0.0}


def stage_report(results: Sequence[StrategyResult]) -> dict:
    if not results:
        raise ValueError("stage_report needs at least one strategy result")
    _check_same_items(results)
    return {"strategies": {r.name: strategy_summary(r) for r in results},
            "pairs": [pairwise(a, b) for a, b in itertools.combinations(results, 2)]}


def rego_transition(before: StrategyResult, after: StrategyResult) -> dict:
    """Stage before -> stage after for every item (nothing excluded), plus two exact tests:
    `opa` over items at OPA_FAIL or PASS on both sides (c: OPA_FAIL -> PASS, b: PASS -> OPA_FAIL)
    and `overall` on pass/fail of all items both runs scored."""
    _check_same_items([before, after])
    rb, ra = before.by_id(), after.by_id()
    matrix = {s: {t: 0 for t in ROW_STAGES} for s in ROW_STAGES}
    for i, r in rb.items():
        matrix[_row_stage(r)][_row_stage(ra[i])] += 1
    c = matrix[OPA_FAIL][PASS]
    b = matrix[PASS][OPA_FAIL]
    opa = mcnemar(b, c, exact=True)
    common = [i for i in rb if rb[i].scored and ra[i].scored]
    overall = mcnemar_paired([rb[i].passed for i in common], [ra[i].passed for i in common])
    return {"before": before.name, "after": after.name, "matrix": matrix,
            "opa_fail_before": sum(matrix[OPA_FAIL].values()), "opa_resolved": c,
            "opa_fail_after": sum(row[OPA_FAIL] for row in matrix.values()),
            "opa": opa.as_dict(), "overall": overall.as_dict() | {"n": len(common)}}


# -- running strategies ----------------------------------------------------------------------------

def run_strategy(name: str, program: Any, items: Sequence[Item], verifier: Any,
                 on_row=None) -> StrategyResult:
    """Run `program(prompt=..., item=...)` on each item and verify. Repair runs (predictions
    with `attempts`) take the last attempt's verdict instead of verifying again."""
    rows: list[ItemResult] = []
    for it in items:
        t0 = time.perf_counter()
        try:
            pred = program(prompt=it.inputs["prompt"], item=it)
        except Exception as e:  # an LM (or, inside a repair loop, verifier) failure, counted apart from FAIL
            kind = "verifier" if _is_verifier_failure(e) else "lm"
            row = ItemResult(it.id, ERROR, None, error=f"{kind}: {type(e).__name__}: {str(e)[:300]}")
        else:
            attempts = getattr(pred, "attempts", None)
            config = getattr(pred, "config", "") or ""
            if attempts:
                last = attempts[-1]
                row = ItemResult(it.id, PASS if last["passed"] else "FAIL", last["stage"],
                                 list(last["error_classes"]), [a["stage"] for a in attempts],
                                 output=config)
            else:
                try:
                    v = verifier.verify(it, config)
                    row = ItemResult(it.id, PASS if v.passed else "FAIL", v.stage,
                                     list(v.error_classes), output=config)
                except Exception as e:
                    row = ItemResult(it.id, ERROR, None, output=config,
                                     error=f"verifier: {type(e).__name__}: {str(e)[:300]}")
        row.wall_s = time.perf_counter() - t0
        rows.append(row)
        if on_row:
            on_row(name, row)
    return StrategyResult(name, rows)


def _is_verifier_failure(e: Exception) -> bool:
    from verifirst.programs.iac import VerifierFailure

    return isinstance(e, VerifierFailure)


def format_table(report: dict) -> str:
    """Plain-text table: one row per strategy, then the pairwise tests."""
    head = f"{'strategy':<18}{'pass@1':>8}  {'95% CI':<15}" + "".join(f"{s:>15}" for s in ROW_STAGES)
    lines = [head]
    for name, s in report["strategies"].items():
        lines.append(f"{name:<18}{s['pass_at_1']:>8.3f}  [{s['ci_lo']:.3f}, {s['ci_hi']:.3f}]"
                     + "".join(f"{s['stages'].get(st, 0):>15}" for st in ROW_STAGES))
    for name, s in report["strategies"].items():
        if "convergence" in s:
            lines.append(f"{name}: passes by attempt {s['convergence']} (counting deceptive fixes as passes: "
                         f"{s['convergence_counting_deceptive']}); deceptive fixes on {s['deceptive_fixes']} "
                         f"item(s), {s['deceptive_final']} still deceptive at the end")
    for p in report["pairs"]:
        lines.append(f"{p['a']} vs {p['b']}: n={p['n']} only-{p['a']}={p['b_count']} "
                     f"only-{p['b']}={p['c_count']} McNemar exact p={p['p_value']:.4g}")
    return "\n".join(lines)


def _make_lm(spec: str):
    try:
        from verifirst.lm import make_lm
    except ImportError:
        import dspy

        return dspy.LM(spec)
    return make_lm(spec)


def main(argv: list[str] | None = None) -> int:
    import dspy

    from verifirst.core.atomic import write_json
    from verifirst.benchmarks.iac_pack import SCHEMA_PATH, load_pack
    from verifirst.programs.iac import STRATEGIES, build_strategy

    ap = argparse.ArgumentParser(description="Compare IaC generation strategies on the built-in pack")
    ap.add_argument("--model", default="local", help="LM spec: local or a LiteLLM model string")
    ap.add_argument("--strategies", default="cot,repair", help=f"comma list of {', '.join(STRATEGIES)}")
    ap.add_argument("--k", type=int, default=4, help="repair budget (attempts in all)")
    ap.add_argument("--backend", default="auto", help="terraform verifier backend")
    ap.add_argument("--gates", default=None, help="comma list of validate,plan,opa,checkov (default: no checkov)")
    ap.add_argument("--store", default=None, help="ChromaDB directory for react-* (default: a temp dir)")
    ap.add_argument("--rego-injection", action="store_true",
                    help="also run repair with the policy shown and report the OPA transition")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None, help="write the JSON report here")
    args = ap.parse_args(argv)

    from verifirst.verifiers.terraform.verifier import TerraformVerifier

    items = load_pack().items[: args.limit]
    gates = [g.strip() for g in args.gates.split(",") if g.strip()] if args.gates else None
    verifier = TerraformVerifier(backend=args.backend, schema=str(SCHEMA_PATH), gates=gates)
    verifier.preflight()  # a missing toolchain (terraform, checkov) stops here, before any LM call
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    store = toolbox = None
    if any(n.startswith("react") or n == "repair-rag" for n in names):
        import tempfile

        from verifirst.retrieval.mcp_server import MCPToolbox, make_server
        from verifirst.retrieval.store import open_store

        store = open_store(args.store or tempfile.mkdtemp(prefix="tfdocs-"), SCHEMA_PATH)
        toolbox = MCPToolbox(make_server(SCHEMA_PATH, store))
    progress = lambda name, r: print(f"{name} {r.id} {r.status} {r.stage or r.error}", file=sys.stderr)
    results = []
    with dspy.context(lm=_make_lm(args.model)):
        for n in names:
            prog = build_strategy(n, verifier=verifier, schema=SCHEMA_PATH, store=store,
                                  toolbox=toolbox, items=items, k=args.k)
            results.append(run_strategy(n, prog, items, verifier, on_row=progress))
        report = stage_report(results)
        if args.rego_injection:
            base = next((r for r in results if r.name == "repair"), None)
            if base is None:
                base = run_strategy("repair", build_strategy("repair", verifier=verifier, items=items,
                                                             k=args.k), items, verifier, on_row=progress)
            inj = run_strategy("repair+policy", build_strategy("repair", verifier=verifier, items=items,
                                                               k=args.k, show_policy=True),
                               items, verifier, on_row=progress)
            report["rego_injection"] = rego_transition(base, inj)
    if toolbox is not None:
        toolbox.close()
    report["model"], report["n_items"] = args.model, len(items)
    print(format_table(report))
    if args.out:
        write_json(args.out, report | {"runs": [r.as_dict() for r in results]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
