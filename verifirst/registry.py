"""Names in experiment files -> suites, programs, verifiers. Imports are lazy: a suite's
dependencies load only when that suite is used."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ConfigError


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attr"
    help: str
    path_arg: str = "path"  # the factory's parameter that [suite] path goes to

    def load(self) -> Callable[..., Any]:
        mod, attr = self.target.split(":")
        return getattr(importlib.import_module(mod), attr)


SUITES = {
    "bash-builtin": Entry("verifirst.benchmarks.bash_pack:load_bash_pack", "built-in NL->Bash pack (40+ tasks)"),
    "nl2sh-alfa": Entry("verifirst.benchmarks.nl2sh:load_nl2sh", "NL2SH-ALFA test, 300 tasks (PyPI icalfa)", "source"),
    "intercode-bash": Entry("verifirst.benchmarks.intercode:load_intercode", "InterCode-Bash from a path"),
    "eabench": Entry("verifirst.benchmarks.eabench:load_eabench", "NL2Bash-EAbench from a path"),
    "iac-builtin": Entry("verifirst.benchmarks.iac_pack:load_pack", "built-in NL->Terraform pack (20+ tasks)",
                         "directory"),
    "iac-eval-v1": Entry("verifirst.benchmarks.iac_eval:load_iac_eval_v1", "IaC-Eval v1 CSV"),
    "iac-eval-v2": Entry("verifirst.benchmarks.iac_eval:load_iac_eval_v2", "IaC-Eval v2 CSV"),
    "outcomes": Entry("verifirst.benchmarks.outcomes:load_outcomes", "outcome records (JSONL/CSV)"),
    "ice-score": Entry("verifirst.benchmarks.outcomes:load_ice_score", "HumanEval snippets with execution grades"),
}

PROGRAMS = {
    "bash-generator": Entry("verifirst.programs.bash:BashGenerator", "NL->Bash (options: variant=predict|cot)"),
    "iac-generator": Entry("verifirst.builders:iac_program",
                           "NL->Terraform (options: strategy=cot|react-rag|react-mcp|repair|repair-rag, k)"),
    "passfail-judge": Entry("verifirst.programs.judges:PassFailJudge", "PASS/FAIL judge over an outcome view"),
    "rubric-judge": Entry("verifirst.programs.judges:RubricJudge", "weighted-rubric judge with a threshold"),
}

VERIFIERS = {
    "bash-exec": Entry("verifirst.verifiers.feh:FehVerifier", "sandboxed execution equivalence (NL2SH FEH)"),
    "bash-syntax": Entry("verifirst.verifiers.shell_gates:BashSyntaxGate", "bash -n syntax gate"),
    "bash-pack": Entry("verifirst.benchmarks.bash_pack:PackVerifier", "the built-in pack's own checks"),
    "shellcheck": Entry("verifirst.verifiers.shell_gates:ShellcheckGate", "shellcheck gate"),
    "terraform": Entry("verifirst.verifiers.terraform:TerraformVerifier", "validate -> plan -> OPA"),
    "label": Entry("verifirst.verifiers.label:LabelVerifier", "judge verdict vs recorded outcome"),
    "exact": Entry("verifirst.verifiers.exact:ExactMatch", "exact match with the reference (baseline)"),
}


def resolve(kind: str, table: dict[str, Entry], name: str, field: str, path: str | None) -> Callable:
    """A registered name, or `package.module:attr` for your own component."""
    if name not in table and ":" in name:
        try:
            return Entry(name, "").load()
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot import {kind} {name!r}: {e}", path=path, field=field,
                              expected="an importable module:attribute") from None
    if name not in table:
        raise ConfigError(f"unknown {kind} {name!r}", path=path, field=field,
                          expected="one of " + ", ".join(sorted(table)))
    try:
        return table[name].load()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{kind} {name!r} is not available: {e}", path=path, field=field,
                          expected="an installed component (`make install`)") from None
