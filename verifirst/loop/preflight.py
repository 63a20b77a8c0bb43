"""Check every verifier before the first LM call: a toolchain that cannot run is an input
error (exit 2, the cause and the fix), not a column of ERROR rows after minutes of LM work."""
from __future__ import annotations

import inspect
from typing import Any, Iterable, Sequence

from verifirst.core.errors import VerifirstError


class VerifierUnavailable(VerifirstError):
    """A verifier's toolchain (sandbox, terraform binary, schema file, policy) cannot run here."""


def _takes_items(check) -> bool:
    try:
        params = inspect.signature(check).parameters
    except (TypeError, ValueError):
        return False
    return "items" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def check_verifiers(verifiers: Iterable[Any], items: Sequence[Any] | None = None) -> None:
    """Call each verifier's optional `preflight()`; it raises a VerifirstError naming cause and fix.

    Args:
        verifiers: verifier objects; those without a `preflight` method are taken as ready.
        items: the suite's items, for preflights that also check what items carry (e.g. each
            item's Rego policy compiles); passed only to a `preflight(items=...)` that names it.

    Raises:
        VerifirstError: the first verifier that cannot run, with its own message; any other
            exception from a preflight is wrapped in VerifierUnavailable naming the verifier.
    """
    for v in verifiers:
        check = getattr(v, "preflight", None)
        if check is None:
            continue
        try:
            if items is not None and _takes_items(check):
                check(items=items)
            else:
                check()
        except VerifirstError:
            raise
        except Exception as e:  # a preflight that crashed still means the verifier cannot run
            name = getattr(v, "name", type(v).__name__)
            raise VerifierUnavailable(f"verifier {name!r} cannot run here: {type(e).__name__}: {e}") from e
