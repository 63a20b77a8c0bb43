"""Journey 1: calibrate a judge prompt on workflow outcomes (AutoRefine) and apply it.

Everything around the loop lives here: loading and splitting the outcomes, the models, MLflow
(parent run, per-iteration metrics, artifacts, prompt registry with a `champion` alias that moves
only when the held-out π beats the current champion's on the same test split).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy

from . import atomic
from .errors import InputError
from .lm import USAGE, FastJSONAdapter, configure_cache, make_lm
from .rundir import new_run_dir
from .splits import make_splits
from .task import Suite
from .tracking import Tracker

CHAMPION = "champion"


def load_outcome_suite(path: Path, limit: int | None = None, snippets: int | None = None) -> Suite:
    from verifirst.benchmarks import outcomes

    path = Path(path)
    if not path.exists():
        raise InputError("outcomes file not found", path=str(path), expected="a .jsonl or .csv file")
    if path.suffix == ".json" and "grade" in path.name:  # ICE-Score HumanEval grades (an execution oracle)
        return outcomes.load_ice_score(path, problems=limit, snippets=snippets)
    suite = outcomes.load_outcomes(path)
    if limit:
        suite = Suite(suite.name, suite.items[:limit], suite.description, suite.meta)
    return suite


def parse_ratios(text: str) -> tuple[float, float, float]:
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise InputError(f"--splits {text!r} is not three numbers", field="--splits", expected="e.g. 0.5,0.25,0.25")
    return parts  # type: ignore[return-value]


def _test_pi(report: dict) -> float | None:
    j = report.get("test", {}).get("judges", {}).get("calibrated")
    return None if j is None else float(j["pi"])


def promote(tracker: Tracker, name: str, version: int, report: dict) -> dict:
    """Move `champion` to this version only if its held-out π beats the current champion's
    on the same test split (same split digest); otherwise say why not."""
    client = tracker.client
    mine = _test_pi(report)
    try:
        cur = client.get_prompt_version_by_alias(name, CHAMPION)
    except Exception:
        cur = None
    if mine is None:
        return {"moved": False, "reason": "no held-out π"}
    if cur is None:
        client.set_prompt_alias(name, CHAMPION, version)
        return {"moved": True, "reason": "first champion", "pi": mine}
    tags = dict(getattr(cur, "tags", {}) or {})
    if tags.get("split_digest") != report["split_digest"]:
        return {"moved": False, "reason": f"champion v{cur.version} was scored on another test split "
                                          f"({tags.get('split_digest')}); not comparable", "pi": mine}
    theirs = float(tags.get("test_pi", "nan"))
    if mine > theirs:
        client.set_prompt_alias(name, CHAMPION, version)
        return {"moved": True, "reason": f"π {mine:.3f} > champion v{cur.version} π {theirs:.3f}", "pi": mine}
    return {"moved": False, "reason": f"π {mine:.3f} does not beat champion v{cur.version} π {theirs:.3f}",
            "pi": mine}


def _progress(echo, metrics: dict, step: int) -> None:
    shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    echo(f"  step {step}: {shown}")


def calibrate_outcomes(outcomes: Path, judge: str = "passfail", model: str = "local", teacher: str | None = None,
                       proposer: str | None = None, max_iters: int = 5, splits: str = "0.5,0.25,0.25",
                       workdir: Path = Path(".verifirst"), limit: int | None = None,
                       snippets: int | None = None, seed: int = 0,
                       tracking_uri: str | None = None, offline: bool = False, threads: int = 1,
                       run_dir: Path | None = None, models: dict | None = None, trace: bool = False,
                       anchor: bool = False, anchor_engine=None, echo=print) -> dict:
    """trace: also trace every judge/teacher call in MLflow (slow on a sqlite store: ~8 spans a call)."""
    from verifirst.optimizers.autorefine import run_calibration

    workdir = Path(workdir)
    suite = load_outcome_suite(outcomes, limit, snippets)
    manifest = make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                           ratios=parse_ratios(splits), seed=seed, stratify=lambda it: it.gold["label"],
                           source=str(outcomes))
    if models is None:
        judge_lm = make_lm(model, role="judge")
        teacher_lm = make_lm(teacher or model, role="teacher")
        proposer_lm = make_lm(proposer or teacher or model, role="reflection")
    else:
        judge_lm, teacher_lm, proposer_lm = models["judge"], models["teacher"], models["reflection"]
    configure_cache(workdir / "cache")
    run_dir = Path(run_dir) if run_dir else new_run_dir(workdir, f"calibrate-{judge}")
    tracker = Tracker(workdir, uri=tracking_uri, experiment="verifirst-calibrate", offline=offline, autolog=trace)
    echo(f"{suite.name}: {len(suite)} outcome records; splits train {len(manifest.train)} / val "
         f"{len(manifest.val)} / test {len(manifest.test)} (digest {manifest.digest}); run dir {run_dir}")
    run_id = tracker.start(f"calibrate-{judge}", params={
        "judge": judge, "models": {"judge": model, "teacher": teacher or model, "proposer": proposer or teacher or model},
        "max_iters": max_iters, "splits": splits, "split_digest": manifest.digest, "outcomes": str(outcomes)},
        tags={"verifirst.split_digest": manifest.digest, "verifirst.optimizer": "autorefine"})
    status = "FAILED"
    try:
        with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()):
            rep = run_calibration(suite, manifest, judge, teacher_lm=teacher_lm, proposer_lm=proposer_lm,
                                  judge_lm=judge_lm, max_iters=max_iters, run_dir=run_dir, num_threads=threads,
                                  log_metrics=lambda m, step: (tracker.log_metrics(m, step), _progress(echo, m, step)))
        manifest.save(run_dir / "split_manifest.json")
        if anchor:
            echo("anchor: MLflow make_judge + Judge.align(SIMBA) on the same train split ...")
            rep["anchor"] = run_anchor(suite, manifest, rep, model, workdir, engine=anchor_engine)
        rep["run_id"], rep["tracking_uri"], rep["run_dir"] = run_id, tracker.uri, str(run_dir)
        rep["usage"] = USAGE.as_dict()
        test = rep.get("test", {})
        for name, j in test.get("judges", {}).items():
            tracker.log_metrics({f"test_{name}_pi": j["pi"], f"test_{name}_fail_recall": j["fail_recall"],
                                 f"test_{name}_fail_precision": j["fail_precision"],
                                 f"test_{name}_pass_recall": j["pass_recall"]})
        t = rep.get("teacher", {})
        tracker.log_metrics({f"teacher_{k}": v for k, v in t.items() if isinstance(v, (int, float))})
        if tracker.enabled:
            pname = f"verifirst-{judge}-judge"
            uri = tracker.register_prompt(pname, rep["calibrated_prompt"], tags={
                "split_digest": manifest.digest, "test_pi": f"{_test_pi(rep) or float('nan'):.6f}",
                "run_id": run_id or "", "judge": judge, "threshold": str(rep.get("calibrated_threshold"))},
                message=f"AutoRefine, {max_iters} max iterations, run {run_id}")
            rep["prompt_uri"] = uri
            rep["champion"] = promote(tracker, pname, int(uri.rsplit("/", 1)[1]), rep)
        atomic.write_json(run_dir / "report.json", rep)
        from .html_report import log_plots

        log_plots(tracker, rep, run_dir)
        for f in ("report.json", "calibrated_prompt.txt", "split_manifest.json"):
            if (run_dir / f).exists():
                tracker.log_artifact(run_dir / f, "report")
        status = "FINISHED"
        return rep
    finally:
        tracker.finish(status)


def mlflow_model_uri(spec: str) -> str | None:
    """LiteLLM `provider/model` -> MLflow `provider:/model`; the embedded model is served locally."""
    from .lm import is_local

    if is_local(spec):
        return None
    provider, _, name = spec.partition("/")
    return f"{provider}:/{name}"


def run_anchor(suite: Suite, manifest, rep: dict, model: str, workdir: Path, engine=None) -> dict:
    """The baseline a user would otherwise pick, on the same train split and test items."""
    from verifirst.benchmarks.judge_anchor import compare_judges
    from verifirst.optimizers.mlflow_align import align_anchor

    train, test = manifest.select(suite.items, "train"), manifest.select(suite.items, "test")
    res = align_anchor(train, test, rep.get("view_fields"), model_uri=mlflow_model_uri(model),
                       manifest=manifest, workdir=Path(workdir) / "anchor", engine=engine)
    labels = {it.id: it.gold["label"] for it in test}
    verdicts = {"calibrated": rep["test_verdicts"]["calibrated"], **res.verdicts}
    cmp = compare_judges(labels, verdicts, "calibrated", sorted(res.verdicts))
    return {"comparison": cmp, "metadata": res.metadata, "instructions": res.instructions,
            "errors": {k: len(v) for k, v in res.errors.items()}}


def print_calibration(rep: dict, echo=print) -> None:
    from rich.console import Console
    from rich.table import Table

    test = rep.get("test", {})
    t = Table(title=f"held-out test ({test.get('n_scored')} of {test.get('n_items')} scored; labels "
                    f"{test.get('label_counts')})")
    for h in ("judge", "π (Scott)", "FAIL recall", "FAIL precision", "PASS recall", "accuracy"):
        t.add_column(h)
    for name, j in test.get("judges", {}).items():
        t.add_row(name, f"{j['pi']:.3f}", f"{j['fail_recall']:.3f}", f"{j['fail_precision']:.3f}",
                  f"{j['pass_recall']:.3f}", f"{j['accuracy']:.3f}")
    import sys

    con = Console(width=None if sys.stdout.isatty() else 140)
    con.print(t)
    for name, c in test.get("comparisons", {}).items():
        lo, hi = c["pi_ci95"]
        con.print(f"{name}: Δπ {c['pi_delta']:+.3f} [95% paired bootstrap {lo:+.3f}, {hi:+.3f}], "
                  f"McNemar exact p {c['mcnemar_exact']['p_value']:.3g}")
    for name, c in (rep.get("anchor") or {}).get("comparison", {}).get("comparisons", {}).items():
        con.print(f"anchor {name}: {json.dumps(c, default=str)[:300]}")
    tc = rep.get("teacher", {})
    con.print(f"teacher: keep {tc.get('keep')}, correct {tc.get('correct')}, abstain {tc.get('abstain')}, "
              f"errors {tc.get('error')}")
    for w in rep.get("warnings", []):
        con.print(f"[yellow]warning:[/] {w}")
    if rep.get("prompt_uri"):
        ch = rep.get("champion", {})
        con.print(f"calibrated prompt: {rep['run_dir']}/calibrated_prompt.txt, registered as {rep['prompt_uri']} "
                  f"(champion {'moved' if ch.get('moved') else 'kept'}: {ch.get('reason')})")
    con.print(f"MLflow run {rep.get('run_id')} in {rep.get('tracking_uri')}")


def load_prompt_text(spec: str, workdir: Path) -> tuple[str, dict]:
    """A prompt from a file path or the registry (prompts:/name/version or prompts:/name@alias)."""
    p = Path(spec)
    if p.exists():
        return p.read_text().strip(), {}
    if not spec.startswith("prompts:/"):
        raise InputError("not a file nor a registry URI", field="--prompt",
                         expected="a path, prompts:/NAME/VERSION or prompts:/NAME@champion")
    tr = Tracker(workdir)
    import mlflow

    mlflow.set_tracking_uri(tr.uri)
    mlflow.set_registry_uri(tr.uri)
    pv = mlflow.genai.load_prompt(spec)
    return pv.template, dict(getattr(pv, "tags", {}) or {})


def apply_judge(prompt: str, input_path: Path, judge: str = "passfail", model: str = "local",
                workdir: Path = Path(".verifirst"), threshold: float | None = None) -> list[dict[str, Any]]:
    from verifirst.benchmarks import outcomes
    from verifirst.optimizers.autorefine import run_judge, verdicts_at
    from verifirst.programs.judges import make_judge

    text, tags = load_prompt_text(prompt, workdir)
    suite = outcomes.load_outcomes(input_path, require_label=False) if _accepts_unlabelled(outcomes) \
        else outcomes.load_outcomes(input_path)
    fields = sorted(suite.items[0].inputs)
    j = make_judge(judge, fields, text)
    lm = make_lm(model, role="judge")
    configure_cache(Path(workdir) / "cache")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        run = run_judge(j, suite.items, lm)
    th = threshold if threshold is not None else (float(tags["threshold"]) if tags.get("threshold") not in (None, "None") else None)
    verdicts = verdicts_at(run, th)
    return [{"id": it.id, "verdict": verdicts.get(it.id), "label": it.gold.get("label"),
             "reasoning": (run.get(it.id) or {}).get("reasoning")} for it in suite.items]


def _accepts_unlabelled(mod) -> bool:
    import inspect

    return "require_label" in inspect.signature(mod.load_outcomes).parameters


def cli_calibrate(**kw) -> int:
    as_json = kw.pop("as_json", False)
    rep = calibrate_outcomes(echo=(lambda m: None) if as_json else print, **kw)
    if as_json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        print_calibration(rep)
    return 0
