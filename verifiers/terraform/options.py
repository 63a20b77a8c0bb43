"""The terraform verifier's options checked: each bad value refused naming the option."""
from __future__ import annotations

import os
from pathlib import Path

from verifirst.core.errors import InputError

GATES = ("validate", "plan", "opa", "checkov")  # funnel order; validate and plan always run
DEFAULT_GATES = ("validate", "plan", "opa")


def _is_policy_path(policy) -> bool:
    """A policy option that names a .rego file (not Rego text)."""
    return isinstance(policy, os.PathLike) or (isinstance(policy, str) and "\n" not in policy
                                               and policy.endswith(".rego"))


def _check_choice(value, choices: tuple[str, ...], field: str) -> None:
    """Refuse a value not among the choices (`policy_mode = "bogus"`)."""
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"unknown {field} {value!r}", field=field, expected=" | ".join(choices))


def _check_bool(value, field: str) -> None:
    """Refuse a flag that is not true or false: the string "false" would read as on."""
    if not isinstance(value, bool):
        raise InputError(f"{field} must be true or false, got {value!r}", field=field, expected="true | false")


def _check_path_option(value, field: str) -> None:
    """Refuse a file or directory option that is not a path string."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{field} must be a path, got {type(value).__name__} {value!r}", field=field,
                         expected="a path string")


def _check_policy_option(policy) -> None:
    """The policy option: Rego text, a .rego path that exists, or a compiled Policy."""
    from verifirst.verifiers.terraform.opa import Policy

    if policy is None or isinstance(policy, Policy):
        return
    if not isinstance(policy, (str, os.PathLike)):
        raise InputError(f"policy must be a .rego path or Rego text, got {type(policy).__name__}", field="policy",
                         expected="a .rego file path or Rego text")
    if policy and _is_policy_path(policy) and not Path(policy).is_file():
        raise InputError("policy file not found", path=str(policy), field="policy", expected="a .rego file")


def _check_timeout(value, field: str) -> None:
    """Refuse a timeout that is not a positive number of seconds (NaN and infinity included)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{field} must be a number of seconds, got {value!r}", field=field,
                         expected="a number > 0")
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{field} {value!r} is out of range", field=field, expected="a number > 0")


def _gates(gates) -> tuple[str, ...]:
    """The gates option checked: names from GATES, validate and plan among them, funnel order."""
    if gates is None:
        return DEFAULT_GATES
    if isinstance(gates, str) or not all(isinstance(g, str) for g in gates):
        raise InputError(f"gates must be a list of gate names, got {gates!r}", field="gates",
                         expected='a list such as ["validate", "plan", "opa", "checkov"]')
    unknown = [g for g in gates if g not in GATES]
    if unknown:
        raise InputError(f"unknown gate(s) {', '.join(map(repr, unknown))}", field="gates",
                         expected=" | ".join(GATES))
    if not {"validate", "plan"} <= set(gates):
        raise InputError("gates must include validate and plan: the policy and the scanner read what they "
                         "produce", field="gates", expected='["validate", "plan", ...]')
    return tuple(g for g in GATES if g in gates)


def _check_ids(ids, field: str) -> list[str] | None:
    """A checkov check-id list option: a list of strings or a comma-separated string."""
    if ids is None:
        return None
    if isinstance(ids, str):
        ids = [i for i in ids.split(",")]
    if not all(isinstance(i, str) for i in ids):
        raise InputError(f"{field} must be check ids, got {ids!r}", field=field,
                         expected='a list such as ["CKV_AWS_24", "CKV_AWS_18"]')
    out = [i.strip() for i in ids if i.strip()]
    return out or None
