"""The MLflow anchors (`--anchor`): make_judge + Judge.align() on the same train split, compared with
AutoRefine on the same test items."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any



from verifirst.core.errors import InputError
from verifirst.loop.ledger import TestLedger, program_hash
from verifirst.core.task import Suite
from verifirst.judge.options import judge_section
from verifirst.judge.mlflow_align import align_anchor


ALIGNERS = ("simba", "gepa", "memalign")  # MLflow's Judge.align() optimizers the anchor can run


def parse_anchor(anchor: Any) -> list[str]:
    """`--anchor` as a list of MLflow aligners: "simba", "gepa", "memalign", a comma list, or "all".

    Args:
        anchor: False/None (no anchor), True (SIMBA), a string or a sequence of names.
    """
    if anchor in (None, False, "", "none"):
        return []
    if anchor is True:
        return ["simba"]
    names = [a.strip().lower() for a in (anchor.split(",") if isinstance(anchor, str) else anchor) if a.strip()]
    if "all" in names:
        return list(ALIGNERS)
    bad = [a for a in names if a not in ALIGNERS]
    if bad:
        raise InputError(f"unknown aligner(s) {bad}", field="--anchor", expected="simba, gepa, memalign, a comma list or all")
    return list(dict.fromkeys(names))


def record_anchor(ledger: TestLedger, rep: dict, run_dir: Path) -> dict:
    """The anchor judge was scored on the test split too: into the ledger, and the reuse count again."""
    text = json.dumps(rep["anchor"].get("instructions"), sort_keys=True, default=str)
    ledger.record(rep["split_digest"], program_hash(text), run_dir, "anchor")
    mine = ledger.programs_of(run_dir)  # this run's programs
    return ledger.reuse(rep["split_digest"], sorted(mine))


def mlflow_model_uri(spec: str) -> str | None:
    """LiteLLM `provider/model` -> MLflow `provider:/model`; the embedded model is served locally."""
    from verifirst.lm import is_local

    if is_local(spec):
        return None
    provider, _, name = spec.partition("/")
    return f"{provider}:/{name}"


def run_anchor(suite: Suite, manifest, rep: dict, model: str, workdir: Path, engine=None,
               aligners: list[str] | None = None) -> dict:
    """The baselines a user would otherwise pick, on the same train split and test items: one table
    with the uncalibrated judge, AutoRefine (calibrated) and MLflow's align() per aligner, each
    compared with AutoRefine (paired Δπ interval, exact McNemar).

    Args:
        suite: the records.
        manifest: the split manifest (train to align on, test to score).
        rep: the calibration report (its judge section's test verdicts).
        model: the judge model spec.
        workdir: the workdir (the anchor's MLflow store goes under it).
        engine: the anchor's engine (tests pass a scripted one).
        aligners: MLflow aligners to run ("simba", "gepa", "memalign"; default SIMBA).
    """
    import inspect

    from verifirst.core.stats import compare_judges

    train, test = manifest.select(suite.items, "train"), manifest.select(suite.items, "test")
    judged = judge_section(rep)
    aligners = list(aligners or ["simba"])
    kw: dict[str, Any] = {}
    if aligners != ["simba"]:
        if "aligners" not in inspect.signature(align_anchor).parameters:
            raise InputError(f"the installed anchor runs SIMBA only; asked for {aligners}", field="--anchor",
                             expected="simba")
        kw["aligners"] = aligners
    res = align_anchor(train, test, judged.get("view_fields"), model_uri=mlflow_model_uri(model),
                       manifest=manifest, workdir=Path(workdir) / "anchor", engine=engine, **kw)
    labels = {it.id: it.gold["label"] for it in test}
    mine = judged["test_verdicts"]
    base = "uncalibrated" if "uncalibrated" in mine else "uncalibrated_train_threshold"
    verdicts = {"calibrated": mine["calibrated"], **({"uncalibrated": mine[base]} if base in mine else {}),
                **res.verdicts}
    cmp = compare_judges(labels, verdicts, "calibrated", sorted(set(verdicts) - {"calibrated"}))
    return {"comparison": cmp, "metadata": res.metadata, "instructions": res.instructions, "aligners": aligners,
            "errors": {k: len(v) for k, v in res.errors.items()}}
