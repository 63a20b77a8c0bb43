"""An MLflow judge as the program the run loop calibrates (`MLflowJudgeProgram`): called as MLflow calls
it (its model, its output format), each reply admitted against the run's budget and kept in a reply
cache so a resumed alignment pays for no judge call twice; and the helpers that read a judge's
template variables and rebuild it with new instructions (every make_judge option kept)."""
from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any, Sequence

import dspy
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from verifirst.core.errors import InputError
from verifirst.judge.labels import LabelRule, rating_value
from verifirst.judge.programs import JudgeError
from verifirst.core.verdicts import normalize_label

VIEW_VARIABLES = ("inputs", "outputs", "expectations", "trace")  # template variables filled from a trace
TRACE_SLOT = re.compile(r"\{\{\s*trace\s*\}\}")
JUDGE_TOKENS = ("mlflow.assessment.judgeInputTokens", "mlflow.assessment.judgeOutputTokens")  # Feedback metadata


class AlignmentInputError(InputError, MlflowException):
    """Bad input to `judge.align`: an MlflowException (as MLflow's own aligners raise) that keeps
    verifirst's field and expected-value message."""

    def __init__(self, message: str, **where):
        InputError.__init__(self, message, **where)
        MlflowException.__init__(self, str(self), error_code=INVALID_PARAMETER_VALUE)


def _variables(judge) -> list[str]:
    names = [f.name for f in judge.get_input_fields()]
    unsupported = [n for n in names if n not in VIEW_VARIABLES]
    if unsupported or not names:
        raise AlignmentInputError(f"judge {judge.name!r} reads {names}; AutoRefineAligner calibrates judges on "
                                  f"{{{{ inputs }}}}, {{{{ outputs }}}}, {{{{ expectations }}}} or {{{{ trace }}}}",
                                  field="judge.instructions",
                                  expected="template variables inputs/outputs/expectations, or trace")
    return names


def _is_rating(judge) -> bool:
    """True when the judge's feedback is a number (a rating), not PASS/FAIL text or a bool."""
    return getattr(judge, "feedback_value_type", None) in (int, float)


def render_trace(trace) -> str:
    """A trace as the text the teacher and proposer read: each span's name, inputs and outputs.

    Args:
        trace: an mlflow Trace.
    """
    spans = getattr(getattr(trace, "data", None), "spans", None) or []
    lines = []
    for sp in spans:
        lines.append(json.dumps({"span": sp.name, "inputs": sp.inputs, "outputs": sp.outputs},
                                default=str, ensure_ascii=False))
    return "\n".join(lines) or str(getattr(trace.info, "request_preview", "") or "")


def keep_template_variables(prompt: str, variables: Sequence[str]) -> str:
    """The prompt with every template variable of the original still in it (a rewrite may drop one).

    Args:
        prompt: the calibrated prompt.
        variables: the original judge's template variable names, e.g. ["inputs", "outputs"].
    """
    missing = [v for v in variables if f"{{{{ {v} }}}}" not in prompt and f"{{{{{v}}}}}" not in prompt]
    if not missing:
        return prompt
    return f"{prompt.rstrip()}\n\nInputs for assessment: " + ", ".join(f"{{{{ {v} }}}}" for v in missing)


def rebuild_judge(judge, instructions: str):
    """`make_judge` with every option the judge was made with (name, model, feedback type, description,
    endpoint settings, generate_rationale_first, include_timing_in_conversation, model_api, and any
    option a later MLflow adds): only the instructions change.

    Args:
        judge: an MLflow make_judge judge.
        instructions: the new instructions (template variables already in place).
    """
    import inspect

    from mlflow.genai.judges import make_judge

    kwargs: dict[str, Any] = {}
    for key in inspect.signature(make_judge).parameters:
        if key in ("name", "instructions"):
            continue
        value = getattr(judge, f"_{key}", getattr(judge, key, None))  # make_judge keeps most as _KEY
        if value is not None:
            kwargs[key] = value
    return make_judge(name=judge.name, instructions=instructions, **kwargs)


class JudgeReplyCache:
    """The MLflow judge's parsed replies on disk (one JSON line each), so that a resumed alignment
    (a budget stop, then a larger budget) pays for no judge call twice. Only a reply that read as
    a verdict is kept: an error or an unreadable value never is, and is asked again."""

    def __init__(self, path: Path):
        """Args:
            path: the JSONL file (created on the first reply kept).
        """
        self.path = Path(path)
        self._lock = threading.Lock()
        self._replies: dict[str, dict] | None = None

    @staticmethod
    def key(judge, args: dict) -> str | None:
        """What identifies a call: model, instructions, inference settings, feedback type and
        arguments; None when an argument has no stable text form (such a call is not kept)."""
        try:
            text = json.dumps({"model": str(judge.model), "instructions": judge.instructions,
                               "params": getattr(judge, "_inference_params", None),
                               "type": repr(getattr(judge, "feedback_value_type", None)), "args": args},
                              sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str | None) -> dict | None:
        """The kept reply ({"value", "rationale"}) for `key`, or None."""
        if key is None:
            return None
        with self._lock:
            return self._kept().get(key)

    def put(self, key: str | None, value: Any, rationale: Any) -> None:
        """Keep a reply that read as a verdict (a value without a JSON form is not kept)."""
        if key is None:
            return
        try:
            line = json.dumps({"key": key, "value": value, "rationale": None if rationale is None else str(rationale)},
                              ensure_ascii=False)
        except (TypeError, ValueError):
            return
        with self._lock:
            self._kept()[key] = json.loads(line)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def _kept(self) -> dict[str, dict]:
        """The replies kept, read from the file on first use (the caller holds the lock)."""
        if self._replies is None:
            self._replies = self._load()
        return self._replies

    def _load(self) -> dict[str, dict]:
        replies: dict[str, dict] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return replies
        for line in lines:
            try:
                row = json.loads(line)
                replies[row["key"]] = row
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash: that call is asked again
        return replies


class MLflowJudgeProgram:
    """An MLflow judge as the AutoRefine loop's judge: `prompt` is its instructions, and a call
    with the view (the template variables) calls the judge and reads PASS/FAIL from its feedback.
    An LM error or an unreadable value raises JudgeError: never a FAIL."""

    kind = "passfail"

    def __init__(self, judge, view_fields: Sequence[str], rule: LabelRule | None = None,
                 cache: JudgeReplyCache | None = None):
        self.judge = judge
        self.view_fields = list(view_fields)
        self.rule = rule or LabelRule()
        self.cache = cache
        # a {{ trace }} judge runs in the loop on the rendered trace: the same instructions and model
        # with the trace's text in the slot (MLflow's own trace judges need a tool-calling endpoint)
        self.runner = rebuild_judge(judge, TRACE_SLOT.sub("{{ inputs }}", judge.instructions)) \
            if self.view_fields == ["trace"] else judge
        # a rating judge's PASS threshold is calibrated on train as a rubric judge's is (from pass_at)
        self.calibrates_threshold = _is_rating(judge)
        self.threshold = self.rule.pass_at if self.calibrates_threshold else None

    @property
    def prompt(self) -> str:
        return self.judge.instructions

    def copy_with_prompt(self, prompt: str) -> "MLflowJudgeProgram":
        text = keep_template_variables(prompt, self.view_fields)
        try:
            judge = rebuild_judge(self.judge, text)
        except Exception as e:  # e.g. a rewrite that names a variable MLflow refuses
            raise JudgeError(f"rewritten prompt is not a valid judge: {e}") from e
        out = MLflowJudgeProgram(judge, self.view_fields, self.rule, self.cache)
        out.threshold = self.threshold
        return out

    def deepcopy(self) -> "MLflowJudgeProgram":
        """A copy with the same judge and threshold (the loop optimizes a copy)."""
        out = MLflowJudgeProgram(self.judge, self.view_fields, self.rule, self.cache)
        out.threshold = self.threshold
        return out

    def save(self, path: str | Path) -> None:
        """The instructions and threshold as JSON (the loop keeps the optimized program in the run directory).

        Args:
            path: the file to write.
        """
        Path(path).write_text(json.dumps({"instructions": self.judge.instructions, "threshold": self.threshold},
                                         ensure_ascii=False), encoding="utf-8")

    def load(self, path: str | Path) -> None:
        """Take the instructions and threshold `save` wrote (a finished run resumed).

        Args:
            path: a file written by `save`.
        """
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        loaded = self.copy_with_prompt(state["instructions"])
        self.judge, self.runner, self.threshold = loaded.judge, loaded.runner, state.get("threshold")

    def __repr__(self) -> str:  # the program's identity in the run's resume key and the test-reuse ledger
        return "MLflowJudgeProgram(" + json.dumps(
            {"name": self.judge.name, "model": self.judge.model, "view_fields": self.view_fields,
             "instructions": self.judge.instructions, "threshold": self.threshold, "labels": self.rule.describe()},
            sort_keys=True, default=str) + ")"

    def __call__(self, **view) -> dspy.Prediction:
        args = {"inputs": view["trace"]} if self.runner is not self.judge else {f: view[f] for f in self.view_fields}
        key = self.cache.key(self.runner, args) if self.cache is not None else None
        kept = self.cache.get(key) if self.cache is not None else None
        if kept is not None:  # asked before (a resumed run): no call, nothing spent
            value, rationale = kept["value"], kept["rationale"]
        else:
            value, rationale = self._ask(args)
        score = None
        if self.calibrates_threshold:  # a rating: PASS at or above the (calibrated) threshold
            score = rating_value(value)
            verdict = None if score is None else ("PASS" if score >= self.threshold else "FAIL")
        else:  # the user's categories first, then PASS/FAIL text as an LM writes it
            verdict = self.rule.read(value) if self.rule.given else None
            verdict = verdict or normalize_label(value, prefix=True)
        if verdict is None:
            raise JudgeError(f"judge answered {value!r}, not PASS or FAIL under {self.rule.describe()}")
        if kept is None and self.cache is not None:
            self.cache.put(key, value, rationale)  # read as a verdict: worth keeping
        return dspy.Prediction(verdict=verdict, reasoning=str(rationale or ""), score=score)

    def _ask(self, args: dict) -> tuple[Any, Any]:
        """One call of the MLflow judge, admitted against the spend meter: (value, rationale)."""
        meter, ticket = _admit_judge_call(self.runner, args)  # before it is sent; a refusal is no JudgeError
        try:
            fb = self.runner(**args)
        except Exception as e:  # provider, HTTP or parse failure
            if ticket is not None:
                meter.settle(ticket, None, None, cache_hit=False)
            raise JudgeError(f"{type(e).__name__}: {str(e)[:300]}") from e
        if ticket is not None:
            _settle_judge_call(meter, ticket, fb)
        if getattr(fb, "error", None):
            raise JudgeError(str(fb.error)[:300])
        return fb.value, fb.rationale


def _admit_judge_call(judge, args: dict):
    """Admit one call of the MLflow judge's model against the run's spend meter (role "judge"): MLflow
    sends it through its own LiteLLM path, not through an AccountedLM. (meter, ticket), or (None, None)
    without a budget.

    Args:
        judge: the MLflow judge about to be called.
        args: what it is called with (the template variables).

    Raises:
        BudgetExceeded: the call would cross a limit; it is not sent.
    """
    from verifirst.lm import spend

    meter = spend.active_meter()
    if meter is None:
        return None, None
    chars = len(judge.instructions) + sum(len(str(v)) for v in args.values())
    max_tokens = (getattr(judge, "_inference_params", None) or {}).get("max_tokens")
    model = str(judge.model).replace(":/", "/", 1)  # "openai:/gpt-4o" is priced as "openai/gpt-4o"
    return meter, meter.admit("judge", model, chars, max_tokens)


def _settle_judge_call(meter, ticket, feedback) -> None:
    """Settle a judge call with the tokens MLflow put on its Feedback, else with its reservation."""
    meta = getattr(feedback, "metadata", None) or {}
    tokens = [meta.get(k) for k in JUDGE_TOKENS]
    if all(t is None for t in tokens):
        return meter.settle(ticket, ticket.prompt_tokens, ticket.completion_tokens, cache_hit=False)
    meter.settle(ticket, int(tokens[0] or 0), int(tokens[1] or 0), cache_hit=False)
