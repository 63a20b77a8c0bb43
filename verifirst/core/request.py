"""Typed requests: one validated object per journey, and one error format for a refused one.

A journey (optimize/run, calibrate, monitor, judge, verify, report, bench) builds its request
ONCE, from CLI flags, API keywords or an experiment file, checks it completely before anything
is written or any model is called, and passes it whole. A request is a pydantic model:

    class VerifyBashRequest(Request):
        pred: NonEmptyStr
        timeout_s: PositiveFloat = 10.0

    req = VerifyBashRequest.build({"pred": p, "timeout_s": t},
                                  names={"pred": "--pred", "timeout_s": "--timeout"})

`build` raises `RequestRefused` (an InputError: the CLI prints it and exits 2). Every problem is
reported, each as

    <where>: got <given> (expected: <what>)

where <where> is what the user typed: the CLI flag (`--timeout`), the API keyword
(`timeout_s`), or the experiment file's `file:line [section.key]`. `refusal(err, ...)` turns a
pydantic ValidationError into that error, for code that validates by itself.

Numbers: nan and inf are refused for every float field (the base sets allow_inf_nan=False).
Paths: `UserPath` expands `~` and resolves a relative path against the `base` folder given to
`build` (an experiment file's folder), else the working directory; `RunDir` also refuses the
filesystem root, the home folder itself and system folders.
"""
from __future__ import annotations

import math
from pathlib import Path, PurePath
from typing import Annotated, Any, Mapping

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, ValidationError,
                      ValidationInfo)

from verifirst.core.errors import InputError

__all__ = ["Request", "RequestRefused", "refusal", "refused", "where_text", "expected_text", "interval", "expand_user",
           "UserPath", "RunDir", "NonEmptyStr", "PositiveFloat", "PositiveInt", "NonNegativeInt", "Fraction",
           "given_text"]

_GIVEN_MAX = 80  # characters of a refused value shown back; a 10 MB string stays one line


class RequestRefused(InputError):
    """A request that did not validate. `problems` holds every (where, given, expected); the first
    one sets path/line/field, so code that reads InputError's attributes keeps working. Exit 2."""

    def __init__(self, problems: list[tuple[str, str, str]], *, path: str | None = None,
                 line: int | None = None, field: str | None = None):
        self.problems = problems
        where, given, expected = problems[0]
        super().__init__(f"got {given}", path=path, line=line, field=field, expected=expected)
        if len(problems) > 1:  # every problem at once: a user fixes the file in one pass
            rest = "\n".join(f"{w}: got {g} (expected: {e})" for w, g, e in problems[1:])
            self.args = (f"{self.args[0]}\n{rest}",)


def given_text(value: Any) -> str:
    """The value a user gave, as shown in a refusal: repr, one line, at most 80 characters.

    Args:
        value: the refused value (pydantic's `input`).
    """
    if isinstance(value, PurePath):  # a path as typed, not PosixPath('...')
        value = str(value)
    text = "nothing" if value is _MISSING else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _GIVEN_MAX else text[:_GIVEN_MAX - 3] + "..."


_MISSING = object()


def expected_text(error: Mapping[str, Any], known: list[str] = ()) -> str:  # type: ignore[assignment]
    """What a field accepts, in words, from one pydantic error entry (`err.errors()[i]`).

    Args:
        error: the entry.
        known: the names a user may give, listed for an unknown one.
    """
    kind, msg = error.get("type", ""), str(error.get("msg", ""))
    if kind == "missing":
        return "a value (it is required)"
    if kind == "extra_forbidden":
        return "one of " + ", ".join(known) if known else "no such option"
    if kind == "finite_number" or "finite" in msg:
        return "a finite number (not nan or inf)"
    for prefix in ("Value error, ", "Assertion failed, ", "Input should be ", "Input should have "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if msg.startswith(("greater than", "less than")):
        msg = "a number " + msg
    return msg


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def where_text(shown: str, path: str | Path | None = None, line: int | None = None) -> str:
    """Where a refused value is, as every refusal says it: `[--flag]`, `file:line [section.key]`.

    Args:
        shown: what the user typed (a flag, a keyword, a file's key).
        path: the file, if the value came from one.
        line: its line there, if known.
    """
    where = f"[{shown}]"
    if path:
        where = f"{path}:{line} {where}" if line else f"{path} {where}"
    return where


def refused(problems: list[tuple[str, Any, str]], *, names: Mapping[str, str] | None = None,
            path: str | Path | None = None, lines: Mapping[str, int] | None = None) -> RequestRefused:
    """The refusal for problems a check found by itself (not through pydantic).

    Args:
        problems: (field, given value, expected) for each.
        names: field -> what the user typed.
        path: the file the values came from, if any.
        lines: field -> line in `path`.
    """
    names, lines = names or {}, lines or {}
    rows = [(where_text(names.get(f, f), path, lines.get(f)), given_text(v), e) for f, v, e in problems]
    first = problems[0][0]
    return RequestRefused(rows, path=str(path) if path else None, line=lines.get(first), field=names.get(first, first))


def refusal(err: ValidationError, *, names: Mapping[str, str] | None = None, path: str | Path | None = None,
            lines: Mapping[str, int] | None = None, known: list[str] | None = None) -> RequestRefused:
    """The one error for a refused request, from pydantic's ValidationError.

    Args:
        err: what pydantic raised.
        names: field path ("budget.max_usd") -> what the user typed ("--max-usd", "[budget] max_usd");
            a field not named here is shown by its path; "" names a check of the whole request.
        path: the experiment file the values came from (shown as file:line with `lines`).
        lines: field path -> line in `path`.
        known: the names a user may give, listed when an unknown one was given.
    """
    names, lines = names or {}, lines or {}
    problems, first = [], None
    for e in err.errors():
        fpath = _field_path(e.get("loc", ()))
        shown = names.get(fpath) or names.get(fpath.split(".")[0]) or fpath or "request"
        line = lines.get(fpath) or lines.get(fpath.split(".")[0])
        where = where_text(shown, path, line)
        value = e.get("input", _MISSING) if e.get("type") != "missing" else _MISSING
        if not fpath and isinstance(value, dict):  # a check of the whole request: the value of the field it names
            field = next((f for f, n in names.items() if f and n == shown and f in value), None)
            value = value[field] if field else _MISSING
        given = given_text(value)
        problems.append((where, given, expected_text(e, known or [])))
        if first is None:
            first = (shown, line)
    assert first is not None, "a ValidationError has at least one error"
    return RequestRefused(problems, path=str(path) if path else None, line=first[1], field=first[0])


class Request(BaseModel):
    """Base of every journey's request: frozen (passed whole, never patched on the way), unknown
    keys refused, nan/inf refused in every float, arbitrary objects (a dspy.Module, an LM) allowed."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True,
                              validate_default=False, str_strip_whitespace=False)

    @classmethod
    def build(cls, values: Mapping[str, Any], *, names: Mapping[str, str] | None = None,
              path: str | Path | None = None, lines: Mapping[str, int] | None = None,
              base: str | Path | None = None, drop_none: bool = True):
        """Validate `values` into this request, or raise RequestRefused naming what the user typed.

        Args:
            values: field -> value, as gathered from flags, keywords or a file (None-valued keys are
                dropped so a field's default applies).
            names: field path -> user-facing name (flag, keyword, file key).
            path: the file the values came from, if any.
            lines: field path -> line in `path`.
            base: folder relative paths resolve against (an experiment file's folder).
            drop_none: drop None values (a flag not given); False where None means something (an API
                keyword such as max_error_rate=None, "never stop").
        """
        data = {k: v for k, v in values.items() if v is not None or not drop_none}
        try:
            return cls.model_validate(data, context={"base": str(base) if base is not None else None})
        except ValidationError as e:
            known = sorted((names or {}).get(f, f) for f in cls.model_fields)
            raise refusal(e, names=names, path=path, lines=lines, known=known) from None


# ---- reusable field types ------------------------------------------------------------------

def _finite(v: float) -> float:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("a finite number (not nan or inf)")
    return v


def expand_user(path: str | Path) -> Path:
    """`~` and `~user` expanded as a shell does: a user this machine does not know leaves the path as
    written (pathlib raises RuntimeError there).

    Args:
        path: the path as given.
    """
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def _user_path(v: Any, info: ValidationInfo) -> Path:
    if isinstance(v, str) and (v == "" or "\x00" in v):
        raise ValueError("a path (not empty, no NUL byte)")
    if not isinstance(v, (str, Path)):
        raise ValueError("a path")
    p = expand_user(v)
    base = (info.context or {}).get("base") if info.context else None
    if not p.is_absolute() and base:
        p = Path(base) / p
    return p


_SYSTEM_DIRS = {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin",
                "/sys", "/usr", "/var", "/home", "/tmp"}


def _run_dir(p: Path) -> Path:
    # a file, or a folder that cannot be written, is config.check_workdir's: it probes the place
    resolved = p.resolve()
    if str(resolved) in _SYSTEM_DIRS or resolved == Path.home().resolve():
        raise ValueError(f"a folder of its own for verifirst's files, not {resolved}")
    return p


def _non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("a non-empty text")
    if "\x00" in v:
        raise ValueError("text without a NUL byte")
    return v


def _number_text(v: Any) -> Any:
    # "nan"/"inf" typed as text: pydantic's own parser would accept "inf" before allow_inf_nan sees it
    if isinstance(v, str) and v.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise ValueError("a finite number (not nan or inf)")
    return v


def interval(low: float | None, high: float | None, *, low_open: bool = False, high_open: bool = False,
             integer: bool = False) -> Any:
    """A number type refused outside its interval with the interval in words: "a number in (0, 1]".

    Args:
        low: the lowest value, or None.
        high: the highest value, or None.
        low_open: low itself is refused.
        high_open: high itself is refused.
        integer: a whole number (a bool or 2.0 is not).
    """
    kind = "a whole number" if integer else "a number"
    text = f"{kind} in {'(' if low_open else '['}{'-inf' if low is None else low}, " \
           f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}"

    def check(v):
        ok = (low is None or (v > low if low_open else v >= low)) and \
             (high is None or (v < high if high_open else v <= high))
        if not ok:
            raise ValueError(text)
        return v

    base = StrictInt if integer else Annotated[float, BeforeValidator(_number_text)]
    return Annotated[base, AfterValidator(check)]


UserPath = Annotated[Path, BeforeValidator(_user_path)]
RunDir = Annotated[Path, BeforeValidator(_user_path), AfterValidator(_run_dir)]
NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]
PositiveFloat = Annotated[float, BeforeValidator(_number_text), Field(gt=0), AfterValidator(_finite)]


def _a_limit(v: float) -> float:
    if v <= 0:
        raise ValueError("a number greater than 0 (0 is not unlimited: leave the limit out for none)")
    return v


# a spend limit (--max-usd, --max-lm-calls, ...): positive and finite, and a refusal of 0 says why
SpendLimit = Annotated[float, BeforeValidator(_number_text), AfterValidator(_finite), AfterValidator(_a_limit)]
SpendCount = Annotated[int, AfterValidator(_a_limit)]
Fraction = interval(0, 1)
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
