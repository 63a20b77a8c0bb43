"""The judge journeys' typed requests (issue 38's one validated request per journey): `CalibrateRequest`
(`verifirst calibrate`, `vf.calibrate`), `MonitorRequest` (`verifirst monitor`) and `JudgeRequest`
(`verifirst judge`). Each is built once from the CLI's flags or the API's keywords, checked completely
before anything is read, written or any model called (a refusal names the flag or keyword: exit 2),
and passed whole. One name per concept: `threads` (every thread pool of the run), `judge` (the kind),
`prompt` (the prompt's source: a file or a registry URI), `tracking_uri` / `tracking` (where MLflow is).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import model_validator

from verifirst.core.errors import InputError
from verifirst.core.request import (NonEmptyStr, NonNegativeInt, PositiveFloat, PositiveInt, Request, RunDir, UserPath,
                                    interval)

MAX_THREADS = 256  # verifirst.config.MAX_THREADS: the ceiling every journey shares
Threads = interval(1, MAX_THREADS, integer=True)

# field -> the flag `verifirst calibrate` spells it with (the API's keyword is the field's own name)
CALIBRATE_FLAGS = {
    "outcomes": "--outcomes", "judge": "--judge", "prompt": "--prompt", "view": "--view", "name": "--name",
    "promote_alias": "--promote", "from_mlflow": "--from-mlflow", "label": "--label", "pass_at": "--pass-at",
    "label_map": "--label-map", "promote_rule": "--promote-rule", "repeats": "--repeats", "model": "--model",
    "teacher": "--teacher", "proposer": "--proposer", "max_iters": "--max-iters", "timeout_s": "--timeout-s",
    "splits": "--splits", "no_test": "--no-test", "split_by": "--split-by", "time_field": "--time-field",
    "windows": "--windows", "workdir": "--workdir", "run_dir": "--run-dir", "limit": "--limit",
    "snippets": "--snippets", "seed": "--seed", "threads": "--threads", "tracking_uri": "--tracking-uri",
    "offline": "--offline", "trace": "--trace", "anchor": "--anchor", "baseline": "--baseline",
    "as_json": "--json", "budget": "--max-usd", "dry_run": "--dry-run", "robustness": "--robustness",
    "labels": "--labels",
}
# the API's in-memory calibration (AutoRefineAligner.align, run_calibration): fields no flag spells
IN_MEMORY_FIELDS = {"records", "manifest", "program", "autorefine", "eval_splits", "run_name", "config", "n_boot",
                    "cache"}
# field -> the keyword `vf.calibrate` spells it with, where the two differ
API_NAMES = {"promote_alias": "promote", "prompt_text": "judge", "judge": "kind"}
JUDGE_FLAGS = {"prompt": "--prompt", "input": "--input", "kind": "--kind", "model": "--model", "workdir": "--workdir",
               "threshold": "--threshold", "view": "--view", "tracking_uri": "--tracking-uri", "limit": "--limit"}


class CalibrateRequest(Request):
    """What `verifirst calibrate` and `vf.calibrate` are asked to do, checked before any record is read.

    What each field means: `vf.calibrate`'s Args (verifirst.judge.calibrate.calibrate); `budget` is a
    vf.Budget (the CLI builds it from --max-*), `models` LMs given by the API instead of model strings.
    The request is passed whole to calibrate_run: `threads` becomes the run's judge Pool there, once.
    The last fields are the API's in-memory calibration (the aligner, run_calibration), never a flag.
    """

    outcomes: Optional[UserPath] = None
    judge: Literal["passfail", "rubric"] = "passfail"
    prompt: Optional[NonEmptyStr] = None  # the prompt's source: a file, prompts:/NAME/VERSION or prompts:/NAME@ALIAS
    prompt_text: Optional[str] = None  # the API's starting prompt given as text (vf.calibrate(judge=TEXT))
    view: Optional[NonEmptyStr] = None
    name: Optional[NonEmptyStr] = None
    promote_alias: Optional[NonEmptyStr] = None
    from_mlflow: Optional[NonEmptyStr] = None
    label: NonEmptyStr = "label"
    pass_at: Optional[float] = None
    label_map: Optional[Union[str, dict]] = None
    promote_rule: NonEmptyStr = "significant"
    repeats: PositiveInt = 1
    model: NonEmptyStr = "local"
    teacher: Optional[NonEmptyStr] = None
    proposer: Optional[NonEmptyStr] = None
    models: Optional[dict] = None
    max_iters: NonNegativeInt = 5
    timeout_s: Optional[PositiveFloat] = None
    splits: Any = (0.5, 0.25, 0.25)
    no_test: bool = False
    split_by: Literal["random", "time"] = "random"
    time_field: Optional[NonEmptyStr] = None
    windows: Optional[NonEmptyStr] = None
    workdir: UserPath = Path(".verifirst")
    run_dir: Optional[RunDir] = None
    limit: Optional[PositiveInt] = None
    snippets: Optional[PositiveInt] = None
    seed: NonNegativeInt = 0
    threads: Threads = 1
    tracking: bool = True
    tracking_uri: Optional[NonEmptyStr] = None
    experiment: NonEmptyStr = "verifirst-calibrate"
    offline: bool = False
    trace: bool = False
    anchor: Any = False
    baseline: Optional[NonEmptyStr] = None
    budget: Any = None
    dry_run: bool = False
    robustness: Any = None
    labels: Optional[NonEmptyStr] = None  # several labellers: majority | unanimous | a labeller's name
    as_json: bool = False
    # the API's in-memory calibration (AutoRefineAligner.align, run_calibration): no flag spells these
    records: Any = None  # a vf.Suite of outcome records, instead of outcomes / from_mlflow
    manifest: Any = None  # a SplitManifest over them, instead of splits
    program: Any = None  # the judge program to calibrate (e.g. an MLflow judge wrapped), instead of the kind's
    autorefine: Optional[dict] = None  # AutoRefineEngine options: target_pi, length_cap, use_teacher, batch_size
    eval_splits: Optional[tuple] = None  # the splits scored before and after (default: every split)
    run_name: Optional[NonEmptyStr] = None  # the run's name (default calibrate-KIND)
    config: Optional[dict] = None  # the settings in the run's resume key (default: the calibration's own)
    n_boot: PositiveInt = 2000
    cache: bool = True  # the workdir's disk cache of LM replies

    @model_validator(mode="after")
    def _checked(self):
        """The checks that span fields, with the option each failure names (exit 2 before any read)."""
        from verifirst.judge.anchor import parse_anchor
        from verifirst.judge.labels import LabelRule
        from verifirst.judge.options import check_record_source, parse_ratios
        from verifirst.judge.promotion import parse_rule
        from verifirst.judging.robustness import perturbation_suite
        from verifirst.loop.splits import check_split_method

        # each raises an InputError (not a ValueError: pydantic lets it through) naming its option
        if self.records is not None and (self.outcomes is not None or self.from_mlflow):
            raise InputError("records given in memory and from a file or MLflow", field="records",
                             expected="one source: records, outcomes or from_mlflow")
        check_record_source(self.outcomes, self.from_mlflow, self.snippets)
        parse_ratios(self.ratios, self.no_test)  # a dict's keys and split method checked on the way
        check_split_method(self.split_by, self.time_field, self.windows, prefix="--")
        parse_anchor(self.anchor)
        parse_rule(self.promote_rule)
        LabelRule.of(self.pass_at, self.label_map)
        if self.robustness not in (None, False):
            try:
                perturbation_suite(self.robustness)
            except InputError as e:
                raise InputError(e.message, field="--robustness", expected=e.expected) from None
        return self

    @property
    def ratios(self) -> Any:
        """The --splits value (a "0.5,0.25,0.25" text or a 3-sequence), without a time split's table."""
        from verifirst.loop.splits import split_options

        return split_options(self.splits)[0] if isinstance(self.splits, dict) else self.splits

    def split_spec(self) -> Any:
        """The splits as calibrate_run reads them: the ratios, or the time split's table."""
        if isinstance(self.splits, dict) or self.split_by == "random":
            return self.splits
        return {"ratios": self.splits, "by": self.split_by, "time_field": self.time_field, "windows": self.windows}



class JudgeRequest(Request):
    """What `verifirst judge` is asked to do (apply_judge's arguments), checked before any record is read."""

    prompt: NonEmptyStr
    input: UserPath
    kind: Optional[Literal["passfail", "rubric"]] = None
    model: NonEmptyStr = "local"
    workdir: UserPath = Path(".verifirst")
    threshold: Optional[interval(0, 1)] = None  # type: ignore[valid-type]
    view: Optional[NonEmptyStr] = None
    tracking_uri: Optional[NonEmptyStr] = None
    limit: Optional[PositiveInt] = None

    def apply_kwargs(self) -> dict[str, Any]:
        """apply_judge's keyword arguments."""
        return {"prompt": self.prompt, "input_path": self.input, "judge": self.kind, "model": self.model,
                "workdir": self.workdir, "threshold": self.threshold, "view": self.view,
                "tracking_uri": self.tracking_uri, "limit": self.limit}


MONITOR_FLAGS = {"prompt": "--prompt", "outcomes": "--outcomes", "from_mlflow": "--from-mlflow", "label": "--label",
                 "windows": "--windows", "time_field": "--time-field", "baseline_pi": "--baseline-pi",
                 "max_abstention": "--max-abstention", "min_n": "--min-n", "kind": "--kind", "view": "--view",
                 "pass_at": "--pass-at", "label_map": "--label-map", "model": "--model", "teacher": "--teacher",
                 "threads": "--threads", "workdir": "--workdir", "run_dir": "--run-dir",
                 "tracking_uri": "--tracking-uri", "offline": "--offline", "no_tracking": "--no-tracking",
                 "limit": "--limit", "as_json": "--json", "recorded": "--recorded", "state": "--state",
                 "join_key": "--join-key", "teacher_abstention": "--teacher-abstention", "max_wait": "--max-wait",
                 "dry_run": "--dry-run"}


class MonitorRequest(Request):
    """What `verifirst monitor` is asked to do, checked before any record is read; `monitor_kwargs()` is
    vf.monitor's keywords (its models and tracking built from the model strings and MLflow flags)."""

    prompt: NonEmptyStr
    outcomes: Optional[UserPath] = None
    from_mlflow: Optional[NonEmptyStr] = None
    label: NonEmptyStr = "label"
    windows: NonEmptyStr = "7d"
    time_field: NonEmptyStr = "created_at"
    baseline_pi: Optional[interval(-1, 1)] = None  # type: ignore[valid-type]
    max_abstention: interval(0, 1) = 0.3  # type: ignore[valid-type]
    min_n: PositiveInt = 5
    kind: Optional[Literal["passfail", "rubric"]] = None
    view: Optional[NonEmptyStr] = None
    pass_at: Optional[float] = None
    label_map: Optional[Union[str, dict]] = None
    model: NonEmptyStr = "local"
    teacher: Optional[NonEmptyStr] = None
    threads: Threads = 1
    workdir: UserPath = Path(".verifirst")
    run_dir: Optional[RunDir] = None
    tracking_uri: Optional[NonEmptyStr] = None
    offline: bool = False
    no_tracking: bool = False
    limit: Optional[PositiveInt] = None
    as_json: bool = False
    # monitoring from the verdicts the deployed judge recorded (judge/recorded_verdicts.py)
    recorded: Optional[NonEmptyStr] = None
    state: Optional[UserPath] = None
    join_key: Optional[NonEmptyStr] = None
    teacher_abstention: bool = False
    max_wait: Optional[NonEmptyStr] = None
    dry_run: bool = False

    @property
    def from_recorded(self) -> bool:
        """Whether a recorded-verdicts flag was given (those runs make no judge call)."""
        return bool(self.recorded is not None or self.state or self.join_key or self.teacher_abstention
                    or self.max_wait or self.dry_run)

    def monitor_kwargs(self) -> dict[str, Any]:
        """vf.monitor's keyword arguments (and as_json for the CLI's printing)."""
        from verifirst.api import MLflow
        from verifirst.judge.monitoring import DriftRule

        tracking = None if self.no_tracking else MLflow(uri=self.tracking_uri, experiment="verifirst-monitor",
                                                        offline=self.offline)
        return {"as_json": self.as_json, "prompt": self.prompt, "outcomes": self.outcomes,
                "from_mlflow": self.from_mlflow, "label": self.label,
                "models": {"judge": self.model, "teacher": self.teacher or self.model}, "windows": self.windows,
                "time_field": self.time_field, "view": self.view, "pass_at": self.pass_at,
                "label_map": self.label_map, "workdir": self.workdir, "tracking": tracking,
                "drift": DriftRule(self.baseline_pi, self.max_abstention, self.min_n)._checked("--"),
                "kind": self.kind, "threads": self.threads, "run_dir": self.run_dir, "limit": self.limit}
