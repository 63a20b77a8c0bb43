"""The one Verifier protocol: item + candidate -> Verdict."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from verifirst.task import Item

PASS = "PASS"
INCONCLUSIVE = "INCONCLUSIVE"


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

    `inconclusive` is the reason when nothing observable could decide (e.g. the gold command has
    no observable effect): such an item is neither PASS nor FAIL; evaluations count it apart and
    leave it out of pass rates. Build one with Verdict.undecided(reason).
    """

    score: float
    passed: bool
    stage: str = PASS
    errors: list[VerifierError] = field(default_factory=list)
    feedback: str = ""
    backend: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    inconclusive: str | None = None

    @classmethod
    def undecided(cls, reason: str, **kw) -> "Verdict":
        """A verdict without an observation to decide on: not PASS, not FAIL."""
        kw.setdefault("feedback", f"inconclusive: {reason}")
        return cls(score=0.0, passed=False, stage=INCONCLUSIVE, inconclusive=reason, **kw)

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
