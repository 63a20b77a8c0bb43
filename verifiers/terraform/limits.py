"""Ceilings of the Terraform verifier: what one candidate configuration may ask of it.

A candidate is an adversary that may try to starve its own verdict (`count = 50000000` kept the
python backend busy past a minute and grew terraform to 6 GB). Both backends stop at the same
documented ceilings and FAIL the candidate with a LIMIT finding that names the ceiling, so an
optimizer learns from it; never a hang, never memory pressure on the host:

| ceiling | value | where |
|---|---|---|
| MAX_CONFIG_BYTES | 2,000,000 bytes of configuration text, the modules it calls included | before parsing |
| MAX_NESTING | 100 nested brackets, braces, parentheses or interpolations | before parsing |
| MAX_BLOCKS | 2,000 top-level blocks (resource, data, module, variable, ...), in every module together | after parsing |
| MAX_INSTANCES | 1,000 resource, data and module-call instances after `count` / `for_each`, in every module together | plan |
| MAX_ELEMENTS | 100,000 elements in one list, set or map a function builds (`range`, ...) | plan |
| MAX_STRING | 1,000,000 characters in one string value | plan |
| MAX_STEPS | 1,000,000 evaluation steps (for-expression items, elements built, dynamic block arguments), all together | plan |
| REGEX_S | 1 s for one `regex`, `regexall` or `replace` match | plan |
| MAX_EVAL_S | 10 s of python evaluation (a backstop behind MAX_STEPS) | plan |
| MAX_MODULE_DEPTH | 8 nested module calls, local or vendored (a loop is past it); the python backend expands no deeper | validate |

The terraform backend checks the same ceilings with the python evaluator before terraform runs,
then runs terraform under TERRAFORM_MEMORY_MB (RLIMIT_DATA: Go's heap is private writable
memory), TERRAFORM_CPU_S (RLIMIT_CPU) and TERRAFORM_WALL_S (a timeout); past one: a LIMIT
finding naming it.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import threading
import time

from verifirst.verifiers.terraform._hcl_errors import EvalError

MAX_CONFIG_BYTES = 2_000_000
MAX_NESTING = 100
MAX_BLOCKS = 2_000
MAX_INSTANCES = 1_000
MAX_ELEMENTS = 100_000
MAX_STRING = 1_000_000
MAX_STEPS = 1_000_000
MAX_MODULE_DEPTH = 8
MAX_EVAL_S = 10  # the python evaluation's wall clock, a backstop behind MAX_STEPS
REGEX_S = 1  # one regex / regexall / replace match (RE2, terraform's engine, never backtracks)
TERRAFORM_MEMORY_MB = 1024
TERRAFORM_CPU_S = 120
TERRAFORM_WALL_S = 180

LIMIT = "LIMIT"  # the error class of a passed ceiling (iac_taxonomy.LIMIT)
SUMMARY = "Verifier ceiling exceeded"
FIX = "Stay within the verifier's ceilings (verifirst.verifiers.terraform.limits): fewer instances, " \
      "smaller collections, shallower nesting."

_budget = threading.local()  # evaluation steps left in this thread's analysis


def message(what: str, value, ceiling: int, unit: str = "") -> str:
    """The detail of a LIMIT finding (after SUMMARY): what passed which ceiling.

    Args:
        what: the thing measured ("count of aws_s3_bucket.b").
        value: its size (a number, or a phrase such as "more").
        ceiling: the ceiling's value.
        unit: what the numbers count.
    """
    v = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{what} is {v}{' ' + unit if unit else ''}; the verifier's ceiling is {ceiling:,}. {FIX}"


class LimitExceeded(Exception):
    """A configuration past a ceiling before it could be evaluated (size, nesting, blocks)."""

    def __init__(self, text: str, stage: str = "VALIDATE_FAIL", file: str | None = None,
                 line: int | None = None):
        text = f"{SUMMARY}: {text}"
        super().__init__(text)
        self.text, self.stage, self.file, self.line = text, stage, file, line


@contextlib.contextmanager
def budget(steps: int = MAX_STEPS):
    """Within it, this thread's evaluation has `steps` steps and MAX_EVAL_S of wall clock (a
    backstop should steps be dearer than counted); outside any, evaluation is not counted (the
    element and string ceilings still hold). The state before it is restored after it.

    Args:
        steps: the evaluation steps allowed.
    """
    before = (getattr(_budget, "left", None), getattr(_budget, "deadline", None))
    _budget.left, _budget.deadline = steps, time.monotonic() + MAX_EVAL_S
    try:
        yield
    finally:
        _budget.left, _budget.deadline = before


def spend(n: int, what: str = "evaluation") -> None:
    """Count n evaluation steps; past the budget: the evaluator's LIMIT error.

    Args:
        n: steps taken (items iterated, elements built).
        what: named in the message.
    """
    left = getattr(_budget, "left", None)
    if left is None:
        return
    left -= n
    _budget.left = left
    if time.monotonic() > _budget.deadline:
        _budget.left = -1
        raise EvalError(SUMMARY, message("the evaluation's wall-clock time", f"more than {MAX_EVAL_S} s",
                                         MAX_EVAL_S, "s"), 0, LIMIT)
    if left < 0:
        raise EvalError(SUMMARY, f"the evaluation took more steps than allowed (items iterated and elements built, "
                        f"all together; passed at {what}); the verifier's ceiling is {MAX_STEPS:,}. {FIX}", 0, LIMIT)


def check_size(value, what: str) -> None:
    """A built value past MAX_ELEMENTS (collection) or MAX_STRING (string): the LIMIT error.

    Args:
        value: the value just built.
        what: named in the message (`function "range"`).
    """
    if isinstance(value, (list, dict)) and len(value) > MAX_ELEMENTS:
        raise EvalError(SUMMARY, message(f"the result of {what}", len(value),
                                                             MAX_ELEMENTS, "elements"), 0, LIMIT)
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise EvalError(SUMMARY, message(f"the string built by {what}", len(value),
                                                             MAX_STRING, "characters"), 0, LIMIT)
    if isinstance(value, (list, dict)):
        spend(len(value), what)


def weigh(args, what: str) -> None:
    """Refuse a function's arguments that hold more than MAX_STRING characters and elements in
    all (counted through shared references too, the walk stopping at the ceiling).

    Args:
        args: the evaluated arguments.
        what: named in the message.
    """
    total, stack = 0, list(args)
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, list):
            total += len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            total += len(v)
            stack.extend(v.values())
        if total > MAX_STRING:
            raise EvalError(SUMMARY, message(f"the arguments of {what}", "more",
                                                                 MAX_STRING, "characters and elements"), 0, LIMIT)


def guard_call(name: str, args: list) -> None:
    """Refuse a function call whose result would pass a ceiling, before it is built: arguments
    past MAX_STRING in all, `range` / `setproduct` past MAX_ELEMENTS, a string function
    (`replace`, `indent`, `format`) whose estimated result passes MAX_STRING.

    Args:
        name: the function's name.
        args: its evaluated arguments (known values).
    """
    what = f'function "{name}"'
    weigh(args, what)  # a call may copy its arguments many times over
    n, unit, ceiling = 0, "elements", MAX_ELEMENTS
    try:
        if name == "range" and args:
            a = [float(x) for x in args]
            start, stop, step = (0, a[0], 1) if len(a) == 1 else (a[0], a[1], 1) if len(a) == 2 else a[:3]
            if step == 0:  # terraform refuses it; python would loop for ever
                raise EvalError("Invalid function argument", 'Call to function "range" failed: step '
                                "must not be zero.", 0, "TYPE")
            n = math.ceil((stop - start) / step)
        elif name == "setproduct":
            n = math.prod(len(x) for x in args if isinstance(x, (list, dict)))
        elif name in ("replace", "indent", "format", "formatlist"):
            unit, ceiling = "characters", MAX_STRING
            n = _string_estimate(name, args)
    except (TypeError, ValueError, OverflowError, IndexError):
        return  # the function reports its own argument error
    if n > ceiling:
        raise EvalError(SUMMARY, message(f"the result of {what}", n, ceiling, unit), 0, LIMIT)
    left = getattr(_budget, "left", None)
    if unit == "elements" and left is not None and n > left:  # the steps it would take are spent already
        spend(n, what)


def _string_estimate(name: str, args: list) -> int:
    """An upper bound on the length of a string function's result."""
    text = [str(a) for a in args]
    if name == "replace" and len(args) >= 3:
        hits = text[0].count(text[1]) if text[1] else len(text[0]) + 1
        return len(text[0]) + hits * len(text[2])
    if name == "indent" and len(args) >= 2:
        return len(text[1]) + abs(int(float(text[0]))) * (text[1].count("\n") + 1)
    if name in ("format", "formatlist") and args:
        widths = [int(w) for w in re.findall(r"%[-+ #0]*(\d+)", text[0])] + [0]
        return max(widths) * max(1, text[0].count("%")) + len(text[0])
    return 0


def check_text(files: dict) -> None:
    """Size and nesting ceilings on configuration text, before any parser recurses on it.

    Args:
        files: {file name: text}.

    Raises:
        LimitExceeded: the whole text past MAX_CONFIG_BYTES, or one file nested past MAX_NESTING.
    """
    total = sum(len(t) for t in files.values() if isinstance(t, str))
    if total > MAX_CONFIG_BYTES:
        raise LimitExceeded(message("the configuration's size", total, MAX_CONFIG_BYTES, "characters"))
    for name, text in files.items():
        if isinstance(text, str):
            depth, line = nesting(text)
            if depth > MAX_NESTING:
                raise LimitExceeded(message(f"the nesting depth of {name}", depth, MAX_NESTING,
                                            "levels") + f" (on {name} line {line})", file=name, line=line)


_OPEN = {"(": ")", "[": "]", "{": "}"}


def nesting(text: str) -> tuple[int, int]:
    """(deepest nesting of brackets and template interpolations, its line) in HCL text;
    comments, quoted text and heredocs do not count (their interpolations do)."""
    stack: list[str] = []  # open brackets; "$" an interpolation inside a quoted string
    deepest, where, line, i, n = 0, 1, 1, 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
            elif c in "$%" and text.startswith("{", i + 1):
                stack.append("$")
                in_string = False
                i += 1
                if len(stack) > deepest:
                    deepest, where = len(stack), line
            elif c == "\n":
                in_string = False  # an unclosed string: the parser reports it
        elif c == '"':
            in_string = True
        elif c == "#" or text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            line += text.count("\n", i, end if end >= 0 else n)
            i = n if end < 0 else end + 2
            continue
        elif text.startswith("<<", i):
            i = _skip_heredoc(text, i)
            line = text.count("\n", 0, i) + 1
            continue
        elif c in _OPEN:
            stack.append(c)
            if len(stack) > deepest:
                deepest, where = len(stack), line
        elif c in ")]}" and stack:
            if stack.pop() == "$":
                in_string = True
        i += 1
    return deepest, where


def _skip_heredoc(text: str, i: int) -> int:
    """The index after a heredoc starting at text[i] ("<<EOF" or "<<-EOF"), or i + 2 if none."""
    j = i + 2 + (text.startswith("-", i + 2))
    k = j
    while k < len(text) and (text[k].isalnum() or text[k] == "_"):
        k += 1
    tag = text[j:k]
    if not tag or not text.startswith("\n", k) and not text.startswith("\r\n", k):
        return i + 2
    pos = text.find("\n", k) + 1
    while 0 < pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if text[pos:end].strip() == tag:
            return end
        pos = end + 1
    return len(text)


# sh sets the ceilings on itself, then becomes terraform: no window in which terraform runs unbounded
_BOUNDED_SH = 'ulimit -d "$1" && ulimit -t "$2" && shift 2 && exec "$@"'


def run_bounded(argv: list[str], cwd, env: dict, wall_s: float, memory_mb: int = TERRAFORM_MEMORY_MB,
                cpu_s: int = TERRAFORM_CPU_S) -> subprocess.CompletedProcess:
    """Run a program (terraform) under memory (RLIMIT_DATA), CPU (RLIMIT_CPU) and wall ceilings.

    Past a ceiling the result has exit status 124 (wall) or the program's own, and stderr starts
    with "Error: Verifier ceiling exceeded: ..." naming the ceiling, so the caller's diagnostics
    read it as a LIMIT finding.

    Args:
        argv: the program and its arguments.
        cwd: its working directory.
        env: its environment (GOMEMLIMIT is added: Go collects harder before the hard ceiling).
        wall_s: seconds before it is killed.
        memory_mb: its data segment ceiling in MiB.
        cpu_s: its CPU-time ceiling in seconds.
    """
    env = {**env, "GOMEMLIMIT": f"{max(memory_mb * 3 // 4, 64)}MiB"}
    cmd = ["/bin/sh", "-c", _BOUNDED_SH, "sh", str(memory_mb * 1024), str(int(cpu_s)), *argv]
    try:
        p = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=wall_s,
                           start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(argv, 124, out, f"Error: {SUMMARY}: {_name(argv)} ran past the "
                                           f"wall-clock ceiling of {wall_s:g} s and was stopped. {FIX}")
    why = None
    if p.returncode in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU) or "SIGXCPU" in (p.stderr or ""):
        why = f"ran past the CPU ceiling of {cpu_s} s"
    elif p.returncode != 0 and any(s in (p.stderr or "") for s in _OOM):
        why = f"ran out of memory under the verifier's memory ceiling of {memory_mb:,} MiB"
    if why:
        return subprocess.CompletedProcess(argv, p.returncode, p.stdout, f"Error: {SUMMARY}: "
                                           f"{_name(argv)} {why} and was stopped. {FIX}")
    return p


_OOM = ("out of memory", "cannot allocate memory", "MemoryError")


def _name(argv: list[str]) -> str:
    return f"{os.path.basename(argv[0])} {argv[1] if len(argv) > 1 else ''}".strip()
