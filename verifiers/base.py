"""The one Verifier protocol: item + candidate -> Verdict."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from verifirst.core.task import Item

PASS = "PASS"
INCONCLUSIVE = "INCONCLUSIVE"
ERROR = "ERROR"
UNDECIDED = (INCONCLUSIVE, ERROR)  # stages that are no verdict: passed is None


@dataclass
class VerifierError:
    """One finding: a class from the verifier's taxonomy, the original message, where."""

    cls: str
    message: str
    address: str | None = None

    def as_dict(self) -> dict:
        return {"class": self.cls, "message": self.message, "address": self.address}


@dataclass
class Verdict:
    """score in [0, 1]; passed; stage = PASS or the failing stage; feedback for a repair loop.

    `passed` has three states: True (PASS), False (a failing stage) and None (no verdict: stage
    INCONCLUSIVE or ERROR). `inconclusive` is the reason when nothing observable could decide
    (e.g. the gold command has no observable effect): such an item is neither PASS nor FAIL;
    evaluations count it apart and leave it out of pass rates. Build one with
    Verdict.undecided(reason) or Verdict.error(reason); read the state with `decided`.
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
            **kw: other fields (feedback, backend, details, timings).
        """
        kw.setdefault("feedback", f"inconclusive: {reason}")
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
        return sorted({e.cls for e in self.errors})

    def as_dict(self) -> dict:
        d = asdict(self)
        d["errors"] = [e.as_dict() for e in self.errors]
        d["error_classes"] = self.error_classes
        return d


@runtime_checkable
class Verifier(Protocol):
    """Anything with a name and verify(item, candidate) -> Verdict.

    `candidate` is the program's output field (a command, a config, a verdict label).
    """

    name: str

    def verify(self, item: Item, candidate: Any) -> Verdict: ...
