"""Journey 1: calibrate a judge prompt on workflow outcomes (AutoRefine) and apply it.

Everything around the loop lives here: loading and splitting the outcomes, the models, MLflow
(parent run, per-iteration metrics, artifacts, prompt registry with a `champion` alias that moves
only when the new prompt's validation π beats the current champion's, both scored by this run's
judge LM on this run's validation items; test numbers are reported and decide nothing).
Every test-split evaluation goes into the workdir's test-reuse ledger.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import dspy

from . import atomic, registry
from .errors import InputError
from .ledger import LEDGER_FILE, TestLedger, program_hash
from .lm import USAGE, FastJSONAdapter, configure_cache, make_lm
from .preflight import check_verifiers
from .rundir import new_run_dir
from .splits import make_splits
from .stats import paired_bootstrap, scotts_pi
from .task import Suite
from .tracking import Tracker

CHAMPION = "champion"


def _part(name: str) -> Callable:
    """A calibration part by its registered name (the kernel imports no domain module)."""
    return registry.component("calibration", name)


def load_outcome_suite(path: Path, limit: int | None = None, snippets: int | None = None) -> Suite:
    """Outcome records (JSONL/CSV), or ICE-Score execution grades, as a suite.

    Args:
        path: the outcomes file.
        limit: keep the first `limit` records (problems for ICE-Score).
        snippets: ICE-Score snippets per problem.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("outcomes file not found", path=str(path), expected="a .jsonl or .csv file")
    if path.suffix == ".json" and "grade" in path.name:  # ICE-Score HumanEval grades (an execution oracle)
        return registry.component("suite", "ice-score")(path, problems=limit, snippets=snippets)
    suite = registry.component("suite", "outcomes")(path)
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


def _val_pi(y: list, pred: list) -> float:
    return scotts_pi(list(y), list(pred))


def promote(tracker: Tracker, name: str, version: int, report: dict,
            rescore: Callable[[str, float | None], dict[str, str | None]] | None = None) -> dict:
    """Move `champion` to this version only if its validation π beats the current champion's on
    the same validation items, paired; test π is reported and never decides.

    Args:
        tracker: the run's Tracker (its MLflow client holds the registry).
        name: the registered prompt name.
        version: the version this run registered.
        report: the calibration report (split_digest, validation labels and verdicts, test).
        rescore: (prompt text, threshold) -> verdict per validation item id, running a prompt with
            this run's judge LM on this run's validation items; it scores the current champion.

    Returns:
        {"moved", "decided_on": "validation", "reason", "val_pi", "champion_val_pi", "pi" (test π,
        reported only), ...}.
    """
    client = tracker.client
    val = report.get("validation") or {}
    labels = val.get("labels") or {}
    mine = (val.get("verdicts") or {}).get("calibrated") or {}
    out: dict[str, Any] = {"moved": False, "decided_on": "validation", "pi": _test_pi(report),
                           "val_pi": val.get("pi")}
    try:
        cur = client.get_prompt_version_by_alias(name, CHAMPION)
    except Exception:
        cur = None
    if not labels or not any(v is not None for v in mine.values()):
        return {**out, "reason": "no validation verdicts to decide on (test π never decides)"}
    if cur is None:
        client.set_prompt_alias(name, CHAMPION, version)
        return {**out, "moved": True, "reason": f"first champion (validation π {_fmt(val.get('pi'))}; "
                                                 f"decided on validation)"}
    if int(cur.version) == int(version):
        return {**out, "reason": f"v{version} is already the champion (decided on validation)"}
    tags = dict(getattr(cur, "tags", {}) or {})
    if tags.get("split_digest") != report["split_digest"]:
        return {**out, "reason": f"champion v{cur.version} was calibrated on another split "
                                 f"({tags.get('split_digest')}): its validation items are not this run's; "
                                 f"not comparable (decided on validation)"}
    if rescore is None:
        return {**out, "reason": "the champion cannot be re-scored on this run's validation items"}
    th = tags.get("threshold")
    theirs = rescore(cur.template, None if th in (None, "", "None") else float(th))
    ids = [i for i in labels if mine.get(i) is not None and theirs.get(i) is not None]
    if not ids:
        return {**out, "reason": f"champion v{cur.version} got no validation verdict (LM errors)"}
    y = [labels[i] for i in ids]
    a, b = [theirs[i] for i in ids], [mine[i] for i in ids]
    boot = paired_bootstrap(_val_pi, a, b, y, n=2000, seed=0)
    pm, pt = _val_pi(y, b), _val_pi(y, a)
    out.update({"val_pi": pm, "champion_val_pi": pt, "paired_n": len(ids), "excluded": len(labels) - len(ids),
                "val_pi_delta_ci95": [boot.lo, boot.hi], "champion_version": int(cur.version)})
    cmp = (f"validation π {pm:.3f} vs champion v{cur.version} {pt:.3f} on the same {len(ids)} validation "
           f"items (Δ {boot.delta:+.3f}, 95% paired bootstrap [{boot.lo:+.3f}, {boot.hi:+.3f}]); "
           f"decided on validation, test π reported only")
    if pm > pt:
        client.set_prompt_alias(name, CHAMPION, version)
        return {**out, "moved": True, "reason": f"beats: {cmp}"}
    return {**out, "reason": f"does not beat: {cmp}"}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{float(x):.3f}"


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
    run_calibration = _part("run-calibration")
    workdir = Path(workdir)
    suite = load_outcome_suite(outcomes, limit, snippets)
    manifest = make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                           ratios=parse_ratios(splits), seed=seed, stratify=lambda it: it.gold["label"],
                           source=str(outcomes))
    check_verifiers([registry.component("verifier", "label")()])  # before any model loads or any LM call
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
        rep["test_reuse"] = _record_test_use(workdir / LEDGER_FILE, rep, run_dir)
        if rep["test_reuse"]["message"]:
            rep.setdefault("warnings", []).append(rep["test_reuse"]["message"])
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
                "val_pi": f"{_val_pi_of(rep):.6f}",
                "run_id": run_id or "", "judge": judge, "threshold": str(rep.get("calibrated_threshold"))},
                message=f"AutoRefine, {max_iters} max iterations, run {run_id}")
            rep["prompt_uri"] = uri
            val_items = manifest.select(suite.items, "val")

            def rescore(text: str, threshold: float | None) -> dict:
                return _score_prompt(judge, rep["view_fields"], text, threshold, val_items, judge_lm, threads)

            rep["champion"] = promote(tracker, pname, int(uri.rsplit("/", 1)[1]), rep, rescore)
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


def _val_pi_of(rep: dict) -> float:
    pi = (rep.get("validation") or {}).get("pi")
    return float("nan") if pi is None else float(pi)


def _score_prompt(judge: str, fields: list[str], text: str, threshold: float | None, items, judge_lm,
                  threads: int) -> dict[str, str | None]:
    """Verdicts of one judge prompt on these items with this LM (None where the LM failed)."""
    run_judge, verdicts_at, make_judge = _part("run-judge"), _part("verdicts-at"), _part("make-judge")
    with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()):
        return verdicts_at(run_judge(make_judge(judge, fields, text), items, judge_lm, threads), threshold)


def _record_test_use(path: Path, rep: dict, run_dir: Path) -> dict:
    """Every prompt this run scored on the test split goes into the ledger; returns the reuse count."""
    ledger = TestLedger(path)
    scored = {"uncalibrated": rep.get("initial_prompt") or "", "calibrated": rep.get("calibrated_prompt") or ""}
    if rep.get("anchor"):
        scored["anchor"] = json.dumps(rep["anchor"].get("instructions"), sort_keys=True, default=str)
    hashes = []
    for what, text in scored.items():
        h = program_hash(text)
        hashes.append(h)
        ledger.record(rep["split_digest"], h, run_dir, what)
    return ledger.reuse(rep["split_digest"], hashes)


def mlflow_model_uri(spec: str) -> str | None:
    """LiteLLM `provider/model` -> MLflow `provider:/model`; the embedded model is served locally."""
    from .lm import is_local

    if is_local(spec):
        return None
    provider, _, name = spec.partition("/")
    return f"{provider}:/{name}"


def run_anchor(suite: Suite, manifest, rep: dict, model: str, workdir: Path, engine=None) -> dict:
    """The baseline a user would otherwise pick, on the same train split and test items."""
    compare_judges, align_anchor = _part("compare-judges"), _part("align-anchor")
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
        con.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if rep.get("prompt_uri"):
        ch = rep.get("champion", {})
        con.print(f"calibrated prompt: {rep['run_dir']}/calibrated_prompt.txt, registered as {rep['prompt_uri']}",
                  soft_wrap=True)
        con.print(f"champion {'moved' if ch.get('moved') else 'kept'} (decided on {ch.get('decided_on')}): "
                  f"{ch.get('reason')}", soft_wrap=True)
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
    run_judge, verdicts_at, make_judge = _part("run-judge"), _part("verdicts-at"), _part("make-judge")
    load_outcomes = registry.component("suite", "outcomes")
    text, tags = load_prompt_text(prompt, workdir)
    suite = load_outcomes(input_path, require_label=False) if _accepts_unlabelled(load_outcomes) \
        else load_outcomes(input_path)
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


def _accepts_unlabelled(load_outcomes: Callable) -> bool:
    import inspect

    return "require_label" in inspect.signature(load_outcomes).parameters


def cli_calibrate(**kw) -> int:
    as_json = kw.pop("as_json", False)
    rep = calibrate_outcomes(echo=(lambda m: None) if as_json else print, **kw)
    if as_json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        print_calibration(rep)
    return 0
