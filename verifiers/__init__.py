"""Verifiers: item + candidate -> Verdict (score, stage, error classes, feedback).

`register` adds them to the component registry (entry point `verifiers` of the group
`verifirst.components`, declared in verifirst's pyproject.toml as a plugin declares its own).
"""
from .base import PASS, Verdict, Verifier, VerifierError

__all__ = ["PASS", "Verdict", "Verifier", "VerifierError", "register"]


def register(registry) -> None:
    """The verifiers experiment files name, and the Terraform stage funnel report tables follow."""
    add = registry.add
    add("verifier", "bash-exec", "verifirst.verifiers.bash.feh:FehVerifier", "sandboxed execution equivalence (NL2SH FEH)")
    add("verifier", "bash-tests", "verifirst.verifiers.bash.oracle:BashTestsVerifier",
        "the task's own check, run after the candidate in the same sandbox")
    add("verifier", "bash-syntax", "verifirst.verifiers.bash.shell_gates:BashSyntaxGate", "bash -n syntax gate")
    add("verifier", "shellcheck", "verifirst.verifiers.bash.shell_gates:ShellcheckGate", "shellcheck gate")
    add("verifier", "terraform", "verifirst.verifiers.terraform.verifier:TerraformVerifier", "validate -> plan -> OPA")
    add("verifier", "exact", "verifirst.verifiers.exact:ExactMatch", "exact match with the reference (baseline)")
    add("stages", "terraform", "verifirst.verifiers.terraform.iac_taxonomy:STAGES", "validate -> plan -> OPA")
