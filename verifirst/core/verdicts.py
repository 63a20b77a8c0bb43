"""The verdict and the verifier protocol, the outcomes of an evaluated item, and the one reading of
a PASS/FAIL label.

The verifier protocol (the kernel's contract with every verifier, built-in or plugin):

- A verifier is any object with a `name: str` and `verify(item, candidate) -> Verdict`
  (`Verifier`, a runtime-checkable Protocol; no base class to inherit). `item` is the `Item`
  (its `inputs` and its `gold`, which reaches only the verifier); `candidate` is the value of the
  program's output field that the verifier checks (a command, a config, a verdict label).
- `verify` returns a `Verdict`, one per call, in one of three states:
  PASS (`passed` True, `stage` PASS), FAIL (`passed` False, `stage` names the failing check, e.g.
  "syntax" or "policy", with `errors` from the verifier's taxonomy), or undecided (`passed`
  None): stage INCONCLUSIVE when nothing observable could decide (`Verdict.undecided(reason)`),
  stage ERROR when the verifier's own check crashed or timed out (`Verdict.error(message)`). An
  undecided verdict is never a FAIL: evaluations count it apart and leave it out of pass rates,
  and an optimizer scores it 0.0 with feedback saying why.
- `score` is in [0, 1] (partial credit an optimizer may climb; only `passed` decides PASS);
  `feedback` is text for a reflective optimizer or a repair loop.
- `verify` may raise: evaluation records an ERROR row (error kind "verifier"), an optimizer's
  metric a VERIFIER_ERROR verdict; neither is a FAIL. It must be safe to call from several threads.
- Optional methods the kernel uses when present: `preflight()` (raise before the run when the
  verifier cannot work, naming cause and fix), `explain(item, candidate, verdict) -> str`
  (costlier feedback, called only when an optimizer asks for one predictor's feedback).

A plain DSPy metric's answer becomes the same `Verdict` (see `verifirst.core.metric.Metric`): one
verdict type for evaluation, optimizers, reports and MLflow scorers.

Recorded outcomes (outcome files, MLflow feedback), judge answers and label verifiers all read
labels through `normalize_label`, so "merged", "Pass." and True mean the same everywhere.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from verifirst.core.task import ERROR, FAIL, INCONCLUSIVE, PASS, VERDICTS, Item

__all__ = ["PASS", "FAIL", "ERROR", "INCONCLUSIVE", "VERIFIER_ERROR", "UNDECIDED", "VERDICTS", "Verdict",
           "VerifierError", "Verifier", "LABELS", "PASS_WORDS", "FAIL_WORDS", "normalize_label"]

# The stage of a verdict an optimizer's metric gives when the verifier raised (or returned an ERROR
# verdict) on one item: the optimization goes on, the item scores 0.0 and is counted apart.
VERIFIER_ERROR = "VERIFIER_ERROR"
UNDECIDED = (INCONCLUSIVE, ERROR, VERIFIER_ERROR)  # stages that are no verdict: passed is None


@dataclass
class VerifierError:
    """One finding of a verifier.

    Args:
        cls: the finding's class in the verifier's taxonomy (e.g. "syntax", "policy:s3_public").
        message: the original message of the tool or check.
        address: where it applies (a resource address, a line), when known.
    """

    cls: str
    message: str
    address: str | None = None

    def as_dict(self) -> dict:
        """{"class", "message", "address"}: the finding as a report or a row stores it."""
        return {"class": self.cls, "message": self.message, "address": self.address}


@dataclass
class Verdict:
    """A verifier's (or a plain metric's) judgement of one candidate for one item.

    `passed` has three states: True (PASS), False (a failing stage) and None (no verdict: stage
    INCONCLUSIVE, ERROR or VERIFIER_ERROR; any such stage sets it to None). `inconclusive` is the
    reason when nothing observable could decide (e.g. the gold command has no observable effect):
    such an item is neither PASS nor FAIL; evaluations count it apart and leave it out of pass
    rates. Build one with Verdict.undecided(reason) or Verdict.error(reason); read the state with
    `decided`.

    Args:
        score: in [0, 1]; partial credit for an optimizer (PASS is decided by `passed`).
        passed: True, False, or None for no verdict.
        stage: PASS, or the failing stage, or INCONCLUSIVE / ERROR / VERIFIER_ERROR.
        errors: the verifier's findings (their classes are `error_classes`).
        feedback: text for a reflective optimizer or a repair loop.
        backend: what checked it (the verifier or tool name).
        details: anything else the verifier wants in the run's records.
        timings: seconds per step of the check.
        inconclusive: why nothing observable decided, for an INCONCLUSIVE verdict.
    """

    score: float
    passed: bool | None
    stage: str = PASS
    errors: list[VerifierError] = field(default_factory=list)
    feedback: str = ""
    backend: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    inconclusive: str | None = None

    def __post_init__(self) -> None:
        if self.stage in UNDECIDED:
            self.passed = None  # no verdict is never a rejection

    @classmethod
    def undecided(cls, reason: str, **kw) -> "Verdict":
        """A verdict without an observation to decide on: not PASS, not FAIL (passed is None).

        Args:
            reason: why nothing observable decided (kept in `inconclusive`).
            **kw: other fields (feedback, backend, details, timings); an empty or absent
                feedback becomes "inconclusive: <reason>".
        """
        kw["feedback"] = kw.get("feedback") or f"inconclusive: {reason}"
        return cls(score=0.0, passed=None, stage=INCONCLUSIVE, inconclusive=reason, **kw)

    @classmethod
    def error(cls, message: str, **kw) -> "Verdict":
        """The verifier itself could not judge (its check crashed, timed out): passed is None.

        Args:
            message: what went wrong.
            **kw: other fields (feedback, backend, details, timings).
        """
        kw.setdefault("feedback", f"verifier error: {message}")
        return cls(score=0.0, passed=None, stage=ERROR, errors=[VerifierError(ERROR, message)], **kw)

    @property
    def decided(self) -> bool:
        """PASS or FAIL; False for INCONCLUSIVE and ERROR."""
        return self.passed is not None

    @property
    def error_classes(self) -> list[str]:
        """The sorted, distinct classes of `errors`."""
        return sorted({e.cls for e in self.errors})

    def as_dict(self) -> dict:
        """All fields as plain data, errors as dicts, plus `error_classes`."""
        d = asdict(self)
        d["errors"] = [e.as_dict() for e in self.errors]
        d["error_classes"] = self.error_classes
        return d


@runtime_checkable
class Verifier(Protocol):
    """Anything with a name and verify(item, candidate) -> Verdict (the contract: module docstring).

    `candidate` is the program's output field (a command, a config, a verdict label).
    """

    name: str

    def verify(self, item: Item, candidate: Any) -> Verdict:
        """Judge one candidate for one item.

        Args:
            item: the item (inputs and gold).
            candidate: the program's output the verifier checks.

        Returns:
            A Verdict: PASS, FAIL at a stage, or undecided (passed None).
        """
        ...


LABELS = VERDICTS  # the two labels an outcome or a judge can give: PASS, FAIL
# Words a workflow records for an accepted / a rejected change (compared upper-cased).
PASS_WORDS = frozenset({"PASS", "PASSED", "TRUE", "YES", "Y", "OK", "1", "LANDED", "MERGED"})
FAIL_WORDS = frozenset({"FAIL", "FAILED", "FALSE", "NO", "N", "0", "ABANDONED", "REJECTED"})
_DECOR = ".'\"`*: \t\n"  # what an LM wraps a one-word answer in: quotes, markdown, a full stop


def normalize_label(value: Any, *, threshold: float | None = None, prefix: bool = False) -> str | None:
    """PASS, FAIL, or None when the value says neither (the caller decides if that is an error).

    Args:
        value: a bool, a number, or text such as "pass", "Merged", " `FAIL`.".
        threshold: numbers (not bools) at or above it read PASS, below it FAIL; None reads a
            number as its text ("1" PASS, "0" FAIL, anything else neither).
        prefix: also read text that starts with PASS or FAIL ("PASS - the code is fine"), as a
            judge LM may answer.
    """
    if isinstance(value, bool):
        return PASS if value else FAIL
    if value is None:
        return None
    if threshold is not None and isinstance(value, (int, float)):
        return PASS if value >= threshold else FAIL
    text = str(value).strip().strip(_DECOR).upper()
    if text in PASS_WORDS:
        return PASS
    if text in FAIL_WORDS:
        return FAIL
    if prefix:
        for label in (PASS, FAIL):
            if text.startswith(label):
                return label
    return None
