"""AutoRefine as a `dspy.teleprompt.Teleprompter`: `AutoRefine(...).compile(judge, trainset=, valset=)`.

The student is a DSPy judge module: a verifirst judge (PassFailJudge, RubricJudge) or any module
with one predictor whose prediction carries a verdict field (PASS/FAIL, or words and booleans
that read as such). The loop edits that predictor's instructions; the validation set selects
the prompt (iteration 0, the starting prompt, is a candidate too). The returned copy carries
the calibrated instructions; the original is left as it was. What happened (iterations, the
teacher's keep/correct/abstain, validation π) is on `compiled.autorefine` and `self.details`.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

import dspy
from dspy.teleprompt import Teleprompter

from verifirst.core.errors import InputError
from verifirst.judge.programs import JudgeError
from verifirst.loop.splits import make_splits
from verifirst.core.task import ITEM_ID, Item
from verifirst.core.verdicts import normalize_label


class ModuleJudge:
    """Any DSPy module with one instructed predictor, as the AutoRefine loop's judge.

    Args:
        module: the student module.
        predictor_name: which predictor's instructions to calibrate (needed when there are several).
        verdict_field: the prediction field holding the verdict.
        view_fields: the module's input fields (default: the predictor's signature inputs).
    """

    kind = "passfail"

    def __init__(self, module, predictor_name: str | None = None, verdict_field: str = "verdict",
                 view_fields: Sequence[str] | None = None):
        preds = dict(module.named_predictors())
        if not preds:
            raise InputError("the student has no predictor whose instructions could be calibrated",
                             field="student", expected="a DSPy module with a dspy.Predict inside")
        if predictor_name is None:
            if len(preds) > 1:
                raise InputError(f"the student has {len(preds)} predictors {sorted(preds)}; name the judge's",
                                 field="predictor_name", expected="one of " + ", ".join(sorted(preds)))
            predictor_name = next(iter(preds))
        if predictor_name not in preds:
            raise InputError(f"no predictor {predictor_name!r} in the student", field="predictor_name",
                             expected="one of " + ", ".join(sorted(preds)))
        outputs = {f for p in preds.values() for f in p.signature.output_fields}
        if verdict_field not in outputs:  # refused now: the loop would learn it only after its first LM calls
            raise InputError(f"the student has no output {verdict_field!r} to read a verdict from; its outputs are "
                             f"{sorted(outputs)}", field="verdict_field",
                             expected="a student with a PASS/FAIL output, or verdict_field= naming it")
        self.module, self.predictor_name, self.verdict_field = module, predictor_name, verdict_field
        self.view_fields = list(view_fields or preds[predictor_name].signature.input_fields)

    @property
    def _predictor(self):
        return dict(self.module.named_predictors())[self.predictor_name]

    @property
    def prompt(self) -> str:
        return self._predictor.signature.instructions

    def copy_with_prompt(self, prompt: str) -> "ModuleJudge":
        new = self.module.deepcopy()
        pred = dict(new.named_predictors())[self.predictor_name]
        pred.signature = pred.signature.with_instructions(str(prompt))
        return ModuleJudge(new, self.predictor_name, self.verdict_field, self.view_fields)

    def __call__(self, **view) -> dspy.Prediction:
        try:
            out = self.module(**{f: view[f] for f in self.view_fields})
        except Exception as e:  # adapter parse failures, provider errors: never a FAIL
            raise JudgeError(f"{type(e).__name__}: {str(e)[:300]}") from e
        raw = getattr(out, self.verdict_field, None)
        verdict = normalize_label(raw, prefix=True)
        if verdict is None:
            raise JudgeError(f"judge answered {self.verdict_field}={raw!r}, not PASS or FAIL")
        reasoning = getattr(out, "reasoning", None) or getattr(out, "rationale", None) or ""
        return dspy.Prediction(verdict=verdict, reasoning=str(reasoning), score=None)


def examples_to_items(examples: Sequence, view_fields: Sequence[str], label_key: str, where: str) -> list[Item]:
    """Items from dspy.Examples: the view fields as inputs, `label_key` read as PASS/FAIL.

    Args:
        examples: dspy.Examples (inputs marked with with_inputs, or named by view_fields).
        view_fields: the judge's input fields.
        label_key: the example field holding the outcome label.
        where: "trainset" or "valset", named in errors.
    """
    out = []
    for k, ex in enumerate(examples):
        missing = [f for f in [*view_fields, label_key] if f not in ex]
        if missing:
            raise InputError(f"{where}[{k}] lacks field(s) {missing}", field=f"{where}[{k}]",
                             expected=f"the judge's inputs {list(view_fields)} and {label_key!r}")
        label = normalize_label(ex[label_key])
        if label is None:
            raise InputError(f"{where}[{k}].{label_key} is {ex[label_key]!r}", field=f"{where}[{k}].{label_key}",
                             expected="PASS or FAIL (or a word/boolean that reads as one)")
        view = {f: ex[f] for f in view_fields}
        iid = str(ex[ITEM_ID]) if ITEM_ID in ex else hashlib.sha256(
            json.dumps(view, sort_keys=True, default=str).encode()).hexdigest()[:12]
        out.append(Item(iid, view, {"label": label}))
    return out


class AutoRefine(Teleprompter):
    """Calibrate a DSPy judge's instructions on labelled examples (AutoRefine, S2).

    Args:
        teacher: the informed teacher's LM (default: dspy.settings.lm).
        proposer: the LM proposing and applying edits (default: dspy.settings.lm).
        max_iters: loop iterations at most.
        label_key: the example field holding the PASS/FAIL label.
        judge_lm: the LM the student runs on while calibrated (default: its own / dspy.settings.lm).
        use_teacher: run the informed teacher (else labels are trusted as given).
        target_pi: stop when train π reaches it.
        predictor_name: the predictor to calibrate in a multi-predictor student.
        verdict_field: the prediction field with the verdict.
        val_fraction: share of trainset held out for validation when compile gets no valset.
        seed: seed of that hold-out.
        num_threads: judge calls in parallel.
        batch_size: disagreements per proposer call.
        length_cap: the calibrated prompt's length limit in characters.
    """

    def __init__(self, teacher=None, proposer=None, max_iters: int = 3, *, label_key: str = "label",
                 judge_lm=None, use_teacher: bool = True, target_pi: float = 0.9, predictor_name: str | None = None,
                 verdict_field: str = "verdict", val_fraction: float = 0.3, seed: int = 0, num_threads: int = 1,
                 batch_size: int = 6, length_cap: int = 4000):
        super().__init__()
        self.teacher_lm, self.proposer_lm, self.judge_lm = teacher, proposer, judge_lm
        self.max_iters, self.label_key, self.use_teacher = int(max_iters), label_key, use_teacher
        self.target_pi, self.predictor_name, self.verdict_field = float(target_pi), predictor_name, verdict_field
        self.val_fraction, self.seed, self.num_threads = float(val_fraction), int(seed), int(num_threads)
        self.batch_size, self.length_cap = int(batch_size), int(length_cap)
        self.details: dict[str, Any] | None = None

    def _judge_of(self, student):
        if hasattr(student, "prompt") and hasattr(student, "copy_with_prompt") and hasattr(student, "view_fields"):
            return student, False  # a verifirst judge already speaks the loop's protocol
        return ModuleJudge(student, self.predictor_name, self.verdict_field), True

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs):
        """The student's copy with calibrated instructions; details on `.autorefine`.

        Args:
            student: the DSPy judge module (left unchanged).
            trainset: labelled dspy.Examples the loop learns from.
            teacher: refused: AutoRefine's teacher is an LM, given to the constructor
                (AutoRefine(teacher=lm)), not a teacher program.
            valset: labelled dspy.Examples that select the prompt; default a seeded share of trainset.
            kwargs: refused: AutoRefine's options go to the constructor.
        """
        from verifirst.judge.autorefine import refine_judge

        if teacher is not None:  # DSPy's teacher program has no role here: say so rather than ignore it
            raise InputError(f"AutoRefine.compile got a teacher program ({type(teacher).__name__}); AutoRefine's "
                             f"informed teacher is an LM", field="teacher",
                             expected="AutoRefine(teacher=lm).compile(student, trainset=...) without teacher=")
        if kwargs:
            raise InputError(f"AutoRefine.compile takes no argument {sorted(kwargs)[0]!r}", field="compile",
                             expected="student, trainset, valset; options go to AutoRefine(...)")
        judge, wrapped = self._judge_of(student)
        train = examples_to_items(list(trainset or []), judge.view_fields, self.label_key, "trainset")
        if valset:
            val = examples_to_items(list(valset), judge.view_fields, self.label_key, "valset")
            held_out = None
        else:
            m = make_splits(train, key=lambda it: it.id, ratios=(1 - self.val_fraction, self.val_fraction, 0.0),
                            seed=self.seed, stratify=lambda it: it.gold["label"], source="trainset")
            train, val = m.select(train, "train"), m.select(train, "val")
            held_out = {"from": "trainset", "fraction": self.val_fraction, "seed": self.seed, "n": len(val)}
        lm = dspy.settings.lm
        res = refine_judge(judge, train, val, self.teacher_lm or lm, self.proposer_lm or lm,
                        max_iters=self.max_iters, target_pi=self.target_pi, length_cap=self.length_cap,
                        judge_lm=self.judge_lm, use_teacher=self.use_teacher, batch_size=self.batch_size,
                        threads=self.num_threads)  # DSPy's keyword outside, ours inside
        compiled = res.judge.module if wrapped else res.judge
        its = res.iterations
        counts = res.teacher_stats.get("overall", {})
        self.details = {
            "selected_iteration": res.selected_iteration, "stop_reason": res.stop_reason,
            "validation_pi": its[res.selected_iteration]["val_pi"] if its else None,
            "initial_validation_pi": its[0]["val_pi"] if its else None,
            "iterations": [{k: it.get(k) for k in ("iteration", "train_pi", "val_pi", "n_disagreements",
                                                   "prompt_chars")} for it in its],
            "teacher": {"used": self.use_teacher, "keep": counts.get("keep"), "correct": counts.get("correct"),
                        "abstain": counts.get("skip"), "error": counts.get("error")},
            "n_train": len(train), "n_val": len(val), "validation_held_out": held_out,
            "initial_prompt": res.initial_prompt, "calibrated_prompt": res.prompt, "threshold": res.threshold,
        }
        compiled.autorefine = self.details
        return compiled
