"""What every `verifirst` verb shares, whichever package defines the verb: the error exit, the
--tracking-uri option, the spend limits and the question asked before a run over --max-usd.

verifirst/cli.py (the composition root) and the domain packages' command modules (the judge
domain's calibrate, monitor and judge) both import it; it imports no domain.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from verifirst.core.errors import InputError, VerifirstError

DEMO_DIR = Path(".verifirst")


def fail(e: Exception) -> None:
    """Print the error (credentials masked) and exit with its code (2: bad input).

    Args:
        e: the error.
    """
    from verifirst.core.redaction import redact_text

    typer.secho(f"error: {redact_text(str(e))}", fg=typer.colors.RED, err=True)  # a provider may quote the key
    raise typer.Exit(getattr(e, "exit_code", 2))


def checked_tracking_uri(value: Optional[str]) -> Optional[str]:
    """--tracking-uri, checked as it is parsed: a scheme MLflow has no store for exits 2 naming the
    flag, before the command reads or writes anything.

    Args:
        value: the flag's value (None when not given).
    """
    if value is not None:
        from verifirst.tracking import check_uri

        try:
            check_uri(value, "--tracking-uri")
        except VerifirstError as e:
            fail(e)
    return value


def tracking_uri_option(help_text: str = "MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite in "
                                         "--workdir)"):
    """The --tracking-uri option of every verb that logs to MLflow or reads from it.

    Args:
        help_text: the option's help text.
    """
    return typer.Option(None, "--tracking-uri", help=help_text, callback=checked_tracking_uri)


def ci_mode() -> bool:
    """CI mode: the environment variable CI is set (to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def confirm_spend(yes: bool):
    """The question a run asks before it starts when its spend estimate exceeds a max_usd limit: --yes
    answers it; a terminal asks; CI mode or no terminal refuses the run (exit 2), naming --yes.

    Args:
        yes: --yes was given.
    """
    def confirm(estimate) -> bool:
        over = estimate.over_limits()
        typer.echo(estimate.render(), err=True, nl=False)  # the table, its notes and the limits it exceeds
        typer.secho("the run may stop at the limit before it finishes", fg=typer.colors.YELLOW, err=True)
        if yes:
            typer.echo("starting anyway (--yes)", err=True)
            return True
        if ci_mode() or not sys.stdin.isatty():
            raise InputError(f"the run was not started: {over[0]}", field="--yes",
                             expected="--yes to start it anyway (no terminal or CI mode: nothing is asked), "
                                      "or a larger --max-usd")
        return typer.confirm("Start the run anyway?", default=False, err=True)

    return confirm


def spend_budget(max_usd, max_tokens, max_lm_calls, max_wall_s):
    """A vf.Budget from the --max-* flags (None when none is given); 0 or less is refused, naming the flag.

    Args:
        max_usd: --max-usd.
        max_tokens: --max-tokens.
        max_lm_calls: --max-lm-calls.
        max_wall_s: --max-wall-s.
    """
    from verifirst.core.engine import Budget, check_limit

    limits = {"max_usd": max_usd, "max_tokens": max_tokens, "max_lm_calls": max_lm_calls, "max_wall_s": max_wall_s}
    for key, value in limits.items():
        if value is not None:
            check_limit(value, "--" + key.replace("_", "-"), integer=key in ("max_tokens", "max_lm_calls"))
    given = {k: v for k, v in limits.items() if v is not None}
    return Budget(**given) if given else None
