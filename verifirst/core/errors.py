"""Errors users can act on. Each names where the problem is and what is expected.

Exit codes of the CLI: 2 for bad input (nothing was run), 1 for a run that failed because the
model gave no usable answers (RunFailed, ErrorRateExceeded): nothing is registered and the run
directory can be resumed once the endpoint works."""
from __future__ import annotations


class VerifirstError(Exception):
    """Base class; the CLI turns it into a message and exit code 2."""

    exit_code = 2


class InputError(VerifirstError):
    """Bad user input: names the file, the line or field, and what is expected."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None, expected: str | None = None):
        self.path, self.line, self.field, self.expected = path, line, field, expected
        self.message = message  # without the place: another layer may add the file and line
        where = ""
        if path:
            where = str(path)
            if line is not None:
                where += f":{line}"
        if field:
            where = f"{where} [{field}]" if where else f"[{field}]"
        text = f"{where}: {message}" if where else message
        if expected:
            text += f" (expected: {expected})"
        super().__init__(text)


class ConfigError(InputError):
    """An experiment TOML that does not validate."""


class LeakageError(VerifirstError):
    """A held-out test item reached an optimizer, or a seen item was scored as test."""


class RunFailed(VerifirstError):
    """The run produced no result to trust: a split with no scored item, or an optimizer that saw
    only errors. Nothing is registered; exit code 1."""

    exit_code = 1


class ErrorRateExceeded(RunFailed):
    """Too many LM errors (or the first requests all failed): the run stops, keeping what it has."""
