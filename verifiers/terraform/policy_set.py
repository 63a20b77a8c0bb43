"""An organisation's policy set: a conftest-style directory of Rego files, applied to every task.

Each `*.rego` under the directory (recursively; `*_test.rego` skipped) is one module, Rego v0 or
v1, evaluated on the `terraform show -json` plan. A module with conftest rules fails when a
`deny`, `violation`, `deny_<name>` or `violation_<name>` rule yields a message (`warn*` rules are
warnings); a module without them is decided like a task policy (its false rules fail). Every
failing rule is named, with its file and messages, in the verdict's errors.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.verifiers.base import VerifierError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.opa import FAIL_RULE as _FAIL_RULE
from verifirst.verifiers.terraform.opa import WARN_RULE as _WARN_RULE
from verifirst.verifiers.terraform.opa import Policy
from verifirst.verifiers.terraform.opa import messages as _messages



def rego_files(directory: str | os.PathLike) -> list[Path]:
    """The policy modules of a directory: every *.rego below it except *_test.rego, sorted."""
    d = Path(directory)
    return sorted(p for p in d.rglob("*.rego") if p.is_file() and not p.name.endswith("_test.rego"))


@dataclass
class SetResult:
    passed: bool
    errors: list[VerifierError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed_rules: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)


class PolicySet:
    """The compiled modules of a policy directory; bad Rego raises InputError naming file and line."""

    def __init__(self, directory: str | os.PathLike):
        d = Path(directory)
        if not d.is_dir():
            raise InputError("policy directory not found", path=str(d), field="policy_dir",
                             expected="a directory of .rego files (conftest layout)")
        files = rego_files(d)
        if not files:
            raise InputError("policy directory holds no .rego files", path=str(d), field="policy_dir",
                             expected="a directory of .rego files (conftest layout)")
        self.directory = d
        self.policies = [Policy.from_file(f, mode="iac-eval") for f in files]

    def evaluate(self, plan: dict) -> SetResult:
        """Every module on one plan.

        Args:
            plan: the `terraform show -json` document (or the synthesized one).
        """
        t0 = time.perf_counter()
        res = SetResult(passed=True)
        for pol in self.policies:
            name = os.path.relpath(pol.path, self.directory)
            doc = pol.query(plan, "data." + pol.package)
            doc = doc if isinstance(doc, dict) else {}
            conftest = [k for k in doc if _FAIL_RULE.match(k) or _WARN_RULE.match(k)]
            if not conftest:  # a module in verifirst's own style: its false rules fail
                for err in pol.evaluate(plan).errors:
                    res.errors.append(VerifierError(err.cls, f"org policy {name}: {err.message}", err.address))
                    res.failed_rules.append(f"{name}:{err.address}")
                continue
            for rule in sorted(conftest):
                msgs = _messages(doc[rule])
                if not msgs:
                    continue
                if _WARN_RULE.match(rule):
                    res.warnings += [f"org policy {name} {rule}: {m}" for m in msgs]
                    continue
                res.failed_rules.append(f"{name}:{pol.package}.{rule}")
                for m in msgs:
                    res.errors.append(VerifierError(T.POLICY, f"org policy {name} rule {rule}: {m}",
                                                    f"data.{pol.package}.{rule}"))
        res.passed = not res.errors
        res.timings["org_opa_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return res
