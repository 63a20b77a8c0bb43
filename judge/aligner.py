"""AutoRefine as an MLflow alignment optimizer: `judge.align(traces, optimizer=AutoRefineAligner())`.

MLflow's `Judge.align(traces, optimizer)` calls `optimizer.align(judge, traces)`. This one reads
each trace's human assessment named like the judge (as MLflow's own aligners do), splits the
labelled traces itself (seeded, grouped by session or by identical view, stratified by label),
and runs the calibration through verifirst's one door, `vf.calibrate` (a CalibrateRequest with the
traces, the split and the program in memory, on the one run loop): the MLflow judge is the program, the label verifier
scores it. The loop scores the starting judge on every split, runs AutoRefine (informed teacher,
balanced edits, validation selects) on train and validation only, then scores the calibrated
judge on every split; each judge is scored once on the test traces, which decide nothing. It
returns `make_judge(...)` with the same name, model and feedback type whose instructions are the
calibrated prompt (template variables kept).

The judge inside the loop is the MLflow judge itself, called as MLflow calls it (its model over
HTTP, its output format), so what is calibrated is what the user runs. The teacher's
keep/correct/abstain counts, the loop and the held-out report go to the active MLflow run
(metrics, params and a JSON artifact) and stay on `aligner.last_report`; the run directory keeps
the evaluations, the loop's report and calibrated_prompt.txt.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from mlflow.exceptions import MlflowException
from mlflow.genai.judges.base import AlignmentOptimizer, Judge
from mlflow.protos.databricks_pb2 import RESOURCE_EXHAUSTED

from verifirst.core.errors import InputError
from verifirst.lm.spend import BudgetExceeded
from verifirst.judge.labels import LabelRule
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item, Suite
from verifirst.judge.mlflow_program import (AlignmentInputError, JudgeReplyCache, MLflowJudgeProgram, _is_rating, _variables,
                                            render_trace)

if TYPE_CHECKING:
    from verifirst.core.engine import Budget

ARTIFACT_DIR = "autorefine_align"
JUDGE_REPLIES = "mlflow_judge_replies.jsonl"  # in WORKDIR/cache: the judge's parsed replies (JudgeReplyCache)


class AlignmentBudgetExceeded(BudgetExceeded, MlflowException):
    """`judge.align` stopped by the aligner's budget: a BudgetExceeded (limit, role, spent, cap) that
    is also an MlflowException, as MLflow's own aligners raise their failures."""

    def __init__(self, limit: str, role: str | None, spent: float, cap: float, need: float = 0.0,
                 message: str | None = None):
        BudgetExceeded.__init__(self, limit, role, spent, cap, need, message)
        MlflowException.__init__(self, self.message, error_code=RESOURCE_EXHAUSTED)




def _resolve_lm(spec, fallback_uri: str, role: str):
    """A dspy.LM from an LM object, an MLflow model URI ("openai:/m"), or a verifirst spec."""
    if spec is None:
        spec = fallback_uri
    if not isinstance(spec, str):
        return spec
    if ":/" in spec:
        from mlflow.genai.judges.optimizers.dspy_utils import construct_dspy_lm

        return construct_dspy_lm(spec)
    from verifirst.lm import make_lm

    return make_lm(spec, role=role)


def traces_to_items(traces: Sequence, judge, variables: Sequence[str],
                    rule: LabelRule | None = None) -> tuple[list[Item], dict, dict]:
    """Labelled Items (id = trace id) from traces, traces skipped without a label, rendered traces.

    Args:
        traces: MLflow traces with human feedback named like the judge.
        judge: the MLflow judge (its name picks the assessment).
        variables: the template variables the view holds.
        rule: how the recorded values read as PASS/FAIL; a value it does not cover refuses the
            whole call (AlignmentInputError naming the traces and values), never a guess.

    Returns:
        (items, {"no_label": [trace ids]}); a {{ trace }} judge's view is the rendered trace.
    """
    from mlflow.genai.judges.optimizers.dspy_utils import trace_to_dspy_example

    rule = rule or LabelRule()
    rows, raw, skipped = [], [], {"no_label": []}
    for tr in traces:
        examples = trace_to_dspy_example(tr, judge)  # MLflow's reading: human source, conflicts resolved
        tid = tr.info.trace_id
        if not examples:
            skipped["no_label"].append(tid)
            continue
        ex = examples[0]
        view = {}
        for v in variables:
            view[v] = render_trace(tr) if v == "trace" else ex[v]
        session = (tr.info.trace_metadata or {}).get("mlflow.trace.session")
        group = session or hashlib.sha256(json.dumps(view, sort_keys=True, default=str).encode()).hexdigest()[:16]
        raw.append((tid, ex.result))
        rows.append((tid, view, ex.get("rationale", ""), group))
    labels = rule.require(raw, where=f"the human feedback {judge.name!r} of {len(raw)} trace(s)",
                          field_name=f"assessment {judge.name!r}", error=AlignmentInputError)
    items = [Item(tid, view, {"label": labels[tid], "rationale": why}, group=group)
             for tid, view, why, group in rows]
    return items, skipped


def split_traces(items: list[Item], ratios: Sequence[float], seed: int):
    """The split manifest, grouped by session or identical view; by trace when the views repeat so
    much (as in MLflow's own test fixtures) that view groups cannot fill every split.

    Args:
        items: the labelled items.
        ratios: train/validation/test ratios.
        seed: the split seed.

    Returns:
        (manifest, how the traces were grouped).
    """
    label = lambda it: it.gold["label"]  # noqa: E731
    try:
        return (make_splits(items, key=lambda it: it.id, group=lambda it: it.group_key, ratios=ratios,
                            seed=seed, stratify=label, source="traces"), "trace session, else identical view")
    except InputError as e:
        if len({it.group_key for it in items}) == len(items):
            raise AlignmentInputError(str(e), field="traces", expected="more labelled traces") from None
    try:
        manifest = make_splits(items, key=lambda it: it.id, group=lambda it: it.id, ratios=ratios, seed=seed,
                               stratify=label, source="traces")
    except InputError as e:
        raise AlignmentInputError(str(e), field="traces", expected="more labelled traces") from None
    views = len({it.group_key for it in items})
    return manifest, f"trace ({views} distinct view(s) over {len(items)} traces: views repeat)"


class AutoRefineAligner(AlignmentOptimizer):
    """MLflow AlignmentOptimizer running AutoRefine on the one run loop with its own held-out split.

    Args:
        teacher: the informed teacher's LM (dspy.LM, MLflow URI like "openai:/gpt-4o", or a
            verifirst spec like "local"); default the judge's model. For the embedded model pass
            "local" (in process, typed outputs under its grammar): over HTTP it has no grammar and
            its teacher answers mostly fail to parse.
        proposer: the LM proposing and applying prompt edits; default the judge's model.
        max_iters: loop iterations at most.
        target_pi: stop when train π reaches it.
        splits: train/validation/test ratios over the labelled traces.
        seed: split seed (and the held-out bootstrap's).
        use_teacher: run the informed teacher (else labels are trusted as given).
        threads: judge and teacher calls in parallel (`num_threads`, its old name, is still read, with a
            DeprecationWarning).
        batch_size: disagreements per proposer call.
        length_cap: the calibrated prompt's length limit in characters.
        n_boot: bootstrap resamples for the held-out interval.
        log_to_mlflow: log to the active run (one is started when none is active).
        pass_at: numeric ratings (the human labels, and a rating judge's own answers) at or above
            it read PASS; a 1-5 rating judge needs it.
        label_map: categorical labels to PASS/FAIL, e.g. {"excellent": "PASS", "poor": "FAIL"}.
        run_dir: the run directory of each `align` call: it holds the split manifest, the
            evaluations (eval/before_*.jsonl, eval/after_*.jsonl), the loop's checkpoint, the
            report files and calibrated_prompt.txt; the test-reuse ledger goes in the workdir it
            lives in (WORKDIR/runs/NAME, else its parent). The same alignment (judge, traces,
            settings) resumes in it, a finished one without asking a model again; another one is
            refused. Default: a new temporary directory per call (TMP/verifirst-align-XXXX/run);
            `last_report["run_dir"]` names it.
        budget: spend limits for each `align` call, all roles together (the MLflow judge's own
            calls, teacher, proposer) and, where given, per role: vf.Budget(max_usd=...,
            max_tokens=..., max_lm_calls=..., max_wall_s=..., per_role=..., prices=...). Every LM
            call is admitted before it is sent; the call that would cross a limit is not sent. A stop
            inside the loop returns the judge of the best iteration completed (on validation) with
            `last_report["stopped_by"]` naming the limit, the test split scored with what was held
            back for it; a stop before the loop, or one that leaves the test split unscored, raises
            AlignmentBudgetExceeded (a BudgetExceeded and an MlflowException) naming the limit.
            Either way the run directory stays resumable: an `align` on the same run_dir with a
            larger budget keeps the evaluations written and redoes the loop, the MLflow judge's
            calls answered from the replies kept in WORKDIR/cache (paid once; a teacher or proposer
            LM is cached as that LM is configured). Its max_iters and threads are this aligner's.
            Default: no spend limit.
    """

    def __init__(self, teacher=None, proposer=None, max_iters: int = 3, *, target_pi: float = 0.9,
                 splits: Sequence[float] = (0.5, 0.25, 0.25), seed: int = 0, use_teacher: bool = True,
                 threads: int = 1, batch_size: int = 6, length_cap: int = 4000, n_boot: int = 2000,
                 log_to_mlflow: bool = True, pass_at: float | None = None, label_map: dict | str | None = None,
                 run_dir: str | Path | None = None, budget: "Budget | None" = None, num_threads: int | None = None):
        self.teacher, self.proposer = teacher, proposer
        self.budget = budget
        self.max_iters, self.target_pi = int(max_iters), float(target_pi)
        self.splits, self.seed = tuple(float(r) for r in splits), int(seed)
        if num_threads is not None:  # the name it had: one name per concept now (threads), DSPy's only at DSPy
            import warnings

            warnings.warn("AutoRefineAligner(num_threads=...) is now threads=...", DeprecationWarning, stacklevel=2)
            threads = num_threads
        self.use_teacher, self.threads, self.batch_size = use_teacher, int(threads), int(batch_size)
        self.length_cap, self.n_boot, self.log_to_mlflow = int(length_cap), int(n_boot), log_to_mlflow
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.last_report: dict | None = None
        try:
            self.rule = LabelRule.of(pass_at, label_map, field_prefix="")
        except InputError as e:
            raise AlignmentInputError(str(e)) from None

    def align(self, judge: Judge, traces: list) -> Judge:
        """Calibrate `judge` on the labelled traces through the one run loop; returns the aligned judge.

        Args:
            judge: an MLflow make_judge judge with {{ inputs }}/{{ outputs }}/{{ expectations }}.
            traces: traces carrying a HUMAN assessment named like the judge (the label).
        """
        from verifirst.judge.calibrate import calibrate
        from verifirst.judge.requests import CalibrateRequest
        from verifirst.loop.ledger import ledger_for_run_dir
        from verifirst.judge.judge_report import held_out_report

        t0 = time.perf_counter()
        variables = _variables(judge)
        items, skipped = traces_to_items(list(traces or []), judge, variables, self.rule)
        if _is_rating(judge) and self.rule.pass_at is None:
            raise AlignmentInputError(f"judge {judge.name!r} answers {judge.feedback_value_type.__name__} ratings; "
                                      f"which ratings are PASS is not given", field="pass_at",
                                      expected="AutoRefineAligner(pass_at=N): ratings >= N are PASS")
        if not items:
            raise AlignmentInputError(f"none of {len(traces or [])} trace(s) carries a human PASS/FAIL assessment "
                                      f"named {judge.name!r}", field="traces",
                                      expected="traces with human feedback for the judge")
        manifest, grouped_by = split_traces(items, self.splits, self.seed)
        run_dir = self.run_dir or Path(tempfile.mkdtemp(prefix="verifirst-align-")) / "run"
        workdir = ledger_for_run_dir(run_dir).path.parent
        program = MLflowJudgeProgram(judge, variables, self.rule,
                                     cache=JudgeReplyCache(workdir / "cache" / JUDGE_REPLIES))
        lms = {"judge": _resolve_lm(None, judge.model, "judge"),
               "teacher": _resolve_lm(self.teacher, judge.model, "teacher") if self.use_teacher else None,
               "reflection": _resolve_lm(self.proposer, judge.model, "reflection")}
        labels_rule = {"rule": self.rule.describe(), "pass_at": self.rule.pass_at, "label_map": self.rule.label_map}
        options = {"target_pi": self.target_pi, "length_cap": self.length_cap, "use_teacher": self.use_teacher,
                   "batch_size": self.batch_size}
        config = {"aligner": "autorefine", "judge": judge.name, "max_iters": self.max_iters, "seed": self.seed,
                  "splits": list(self.splits), "labels": self.rule.describe(), **options}
        request = CalibrateRequest.build(dict(  # the one door, vf.calibrate, with the traces and split in memory
            records=Suite(f"traces-{judge.name}", items), manifest=manifest, program=program, models=lms,
            max_iters=self.max_iters, threads=self.threads, model=judge.model, workdir=workdir, run_dir=run_dir,
            n_boot=self.n_boot, cache=False, tracking=False, budget=self.budget, pass_at=self.rule.pass_at,
            label_map=self.rule.label_map, autorefine=options, config=config, run_name=f"align-{judge.name}",
            eval_splits=("test",)))  # only the held-out numbers are reported: no train/val scoring
        try:
            res = calibrate(request)
        except BudgetExceeded as e:  # the loop left the run directory resumable with a larger budget
            self.last_report = {"run_dir": str(run_dir), "stopped_by": e.message}
            raise AlignmentBudgetExceeded(e.limit, e.role, e.spent, e.cap, e.need, e.message) from None
        rep, aligned = res.report, res.program.judge
        details, judged = rep["details"], rep["judge"]

        # the held-out report from the loop's one test scoring of each judge: unaligned (before), aligned (after)
        test_labels = {it.id: it.gold["label"] for it in manifest.select(items, "test")}
        scored = judged.get("test_verdicts") or {}
        verdicts = {"aligned": dict(scored.get("calibrated") or {}), "unaligned": dict(scored.get("uncalibrated") or {})}
        held_out = held_out_report(test_labels, verdicts, "aligned", ["unaligned"], n_boot=self.n_boot, seed=self.seed)
        iterations = details.get("iterations") or []
        selected = iterations[details["selected_iteration"]] if iterations else {}
        counts = judged.get("teacher") or {}
        loop = {k: v for k, v in details.items() if k not in ("teacher_used", "teacher_decisions", "metric")}
        report = {
            "judge": {"name": judge.name, "model": judge.model, "template_variables": variables,
                      "feedback_value_type": getattr(judge.feedback_value_type, "__name__", str(judge.feedback_value_type))},
            "labels": {**labels_rule, "judge_pass_at": res.program.threshold},  # a rating judge's calibrated threshold
            "traces": {"given": len(traces), "labelled": len(items), "skipped": {k: len(v) for k, v in skipped.items()},
                       "skipped_ids": skipped},
            "split": {"seed": self.seed, "ratios": list(self.splits), "sizes": manifest.sizes(),
                      "digest": manifest.digest, "grouped_by": grouped_by,
                      "test_ids": manifest.test},
            "teacher": {"used": self.use_teacher, "keep": counts.get("keep"), "correct": counts.get("correct"),
                        "abstain": counts.get("abstain"), "error": counts.get("error")},
            "loop": {**loop, "validation_pi": selected.get("val_pi"),
                     "initial_validation_pi": iterations[0].get("val_pi") if iterations else None},
            "held_out": held_out, "test_verdicts": verdicts,
            "aligned_instructions": aligned.instructions, "initial_instructions": judge.instructions,
            # loop: the one run loop (scoring before, AutoRefine, scoring after); total: the whole align call
            "wall_s": {"loop": rep.get("wall_s"), "total": round(time.perf_counter() - t0, 2)},
            "run_dir": str(res.run_dir),
            # a budget stop that left the test split scored: the aligned judge is the best completed iteration's
            "stopped_by": (rep.get("stopped") or {}).get("by"),
        }
        self.last_report = report
        if self.log_to_mlflow:
            log_report(report)
        return aligned


def _flat_metrics(report: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ("keep", "correct", "abstain", "error"):
        if report["teacher"].get(k) is not None:
            out[f"autorefine.teacher_{k}"] = float(report["teacher"][k])
    loop = report["loop"]
    for k in ("validation_pi", "initial_validation_pi"):
        if loop.get(k) is not None:
            out[f"autorefine.{k}"] = float(loop[k])
    out["autorefine.iterations"] = float(len(loop.get("iterations") or []))
    ho = report["held_out"]
    out["autorefine.test_n_scored"] = float(ho["n_scored"])
    out["autorefine.test_excluded_lm_errors"] = float(ho["excluded_lm_errors"])
    for name, j in ho.get("judges", {}).items():
        out[f"autorefine.test_pi_{name}"] = float(j["pi"])
        out[f"autorefine.test_fail_recall_{name}"] = float(j["fail_recall"])
    for c in ho.get("comparisons", {}).values():
        out["autorefine.test_pi_delta"] = float(c["pi_delta"])
        out["autorefine.test_pi_delta_lo"], out["autorefine.test_pi_delta_hi"] = map(float, c["pi_ci95"])
        out["autorefine.test_mcnemar_p"] = float(c["mcnemar_exact"]["p_value"])
    return out


def log_report(report: dict) -> str:
    """Log an alignment report to the active MLflow run (started if none is active); its run id.

    Args:
        report: AutoRefineAligner.last_report.
    """
    import mlflow

    started = mlflow.active_run() is None
    run = mlflow.start_run(run_name="autorefine-align") if started else mlflow.active_run()
    try:
        sizes = report["split"]["sizes"]
        params = {"autorefine.judge": report["judge"]["name"], "autorefine.split_seed": report["split"]["seed"],
                  "autorefine.split_ratios": ",".join(map(str, report["split"]["ratios"])),
                  "autorefine.split_digest": report["split"]["digest"],
                  "autorefine.n_train": sizes["train"], "autorefine.n_val": sizes["val"],
                  "autorefine.n_test": sizes["test"], "autorefine.teacher_used": report["teacher"]["used"],
                  "autorefine.selected_iteration": report["loop"]["selected_iteration"],
                  "autorefine.stop_reason": report["loop"]["stop_reason"]}
        existing = mlflow.get_run(run.info.run_id).data.params
        mlflow.log_params({k: v for k, v in params.items() if k not in existing})  # a second align keeps the first
        mlflow.log_metrics(_flat_metrics(report))
        mlflow.log_dict(report, f"{ARTIFACT_DIR}/report.json")
        mlflow.log_text(report["aligned_instructions"], f"{ARTIFACT_DIR}/aligned_instructions.txt")
        return run.info.run_id
    finally:
        if started:
            mlflow.end_run()
