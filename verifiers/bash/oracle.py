"""`bash-tests`: the task's own check decides (a test oracle), not a reference command.

When a task carries a check (a script run after the candidate in the same sandbox: EAbench's
test.py or evaluate.sh, a user's tests), the verdict is the check's exit status and its output
is the feedback a repair loop or GEPA reads. FEH (bash-exec) stays the choice for tasks with only
a reference command.

In one sandbox run, from the item's gold fields:
  1. cd `workdir`; run `prerequisite` quietly;
  2. write the candidate to `script_path` (its exact bytes) and run it with `run` (default
     `bash SCRIPT`), its stdout, stderr and exit status kept in files; skipped when
     `check_runs_candidate` (the check runs it itself, as EAbench's test.py does);
  3. write `check_files` ({relative name: text}, executable) into $VERIFIRST_CHECK_DIR and run
     `check` with VERIFIRST_CANDIDATE, VERIFIRST_STDOUT, VERIFIRST_STDERR, VERIFIRST_EXIT and
     VERIFIRST_CHECK_DIR set.

The check's exit status: 0 PASS; 125 the check could not judge (INCONCLUSIVE, as `git bisect run`
reads 125); 126/127, a signal or the check past the time limit: ERROR (no verdict); any other
status FAIL. A candidate that runs past the time limit before the check starts is a FAIL.
"""
from __future__ import annotations

import base64
import json
import posixpath
import shlex
from pathlib import Path
from typing import Any, Callable

from verifirst.core.errors import InputError
from verifirst.core.task import Item

from ..base import Verdict, VerifierError
from .fixtures import ensure
from .feh import EXIT_INCONCLUSIVE, candidate_command, has_commands, in_workdir, with_prerequisite

RunFn = Callable[[str, Any], Any]  # (script, fixture) -> RunResult-like
# Under the sandbox's / (found before `workdir` is entered, so an unsafe-local run stays in its root).
STATE = '"$__vf_state"'
DEFAULT_SCRIPT = f"{STATE}/candidate.sh"
CHECK_MARK = "@@VERIFIRST-CHECK@@"
CAND_MARK = "@@VERIFIRST-CANDIDATE@@"
SKIP, NOT_RUNNABLE = 125, (126, 127)


def _q(path: str) -> str:
    return path if path.startswith(STATE) else shlex.quote(path)


def _b64_write(text: str, path: str) -> str:
    q = _q(path)
    return f"printf %s {base64.b64encode(text.encode()).decode()} | base64 -d > {q} && chmod +x {q}"


def check_script(command: str, gold: dict) -> str:
    """The one script the sandbox runs: setup, the candidate, then the task's check.

    Args:
        command: the candidate script.
        gold: the item's gold fields (check, check_files, check_runs_candidate, script_path,
            run, workdir, prerequisite).
    """
    path = str(gold.get("script_path") or DEFAULT_SCRIPT)
    st, chk = STATE, f"{STATE}/check"
    lines = [f"mkdir -p {chk} && chmod 700 {st}", _b64_write(command, path)]
    if gold.get("check_runs_candidate"):
        lines.append(f": > {st}/stdout; : > {st}/stderr; echo 0 > {st}/exit")
    else:
        run = gold.get("run") or f"bash {_q(path)}"
        lines.append(f"( {run}\n) > {st}/stdout 2> {st}/stderr < /dev/null; echo $? > {st}/exit")
    for name, text in sorted((gold.get("check_files") or {}).items()):
        rel = posixpath.normpath(str(name))
        if rel.startswith(("/", "..")):
            raise InputError(f"check file {name!r} must be a relative path inside the check dir",
                             field="gold.check_files", expected="a name such as evaluate.sh or bin/helper.sh")
        lines.append(f"mkdir -p {_q(posixpath.dirname(f'{chk}/{rel}'))} && "
                     + _b64_write(str(text), f"{chk}/{rel}"))
    lines += [f"export VERIFIRST_CANDIDATE={_q(path)} VERIFIRST_STDOUT={st}/stdout "
              f"VERIFIRST_STDERR={st}/stderr VERIFIRST_EXIT={st}/exit VERIFIRST_CHECK_DIR={chk}",
              f"echo {CHECK_MARK}", f"(\n{gold['check']}\n) 2>&1", "__vf_rc=$?",
              f"echo; echo {CAND_MARK}; echo \"exit $(cat {st}/exit)\"; head -c 4000 {st}/stdout; "
              f"echo; echo '--- stderr'; head -c 2000 {st}/stderr", "exit $__vf_rc"]
    return ('__vf_state="${PWD%/}/tmp/.verifirst-check"\n'
            + in_workdir(with_prerequisite("\n".join(lines), gold.get("prerequisite")), gold.get("workdir")))


def _get(r: Any, k: str, default=None):
    return r.get(k, default) if isinstance(r, dict) else getattr(r, k, default)


def judge(r: Any, backend: str = "bash-tests") -> Verdict:
    """The verdict from the sandbox run of check_script() (see the module docstring).

    Args:
        r: the RunResult (or a dict with stdout, stderr, exit_code, timed_out, signal).
        backend: the verifier name put on the verdict.
    """
    out = str(_get(r, "stdout", "") or "")
    started = CHECK_MARK in out
    check_out, _, cand = out.partition(CHECK_MARK)[2].partition(CAND_MARK) if started else ("", "", "")
    check_out, cand = check_out.strip(), cand.strip()
    rc, timed_out, sig = _get(r, "exit_code"), bool(_get(r, "timed_out")), _get(r, "signal")
    details = {"check_exit": rc, "check_output": check_out[:4000], "candidate": cand[:6000],
               "setup_stderr": str(_get(r, "stderr", "") or "")[:2000], "check_started": started}
    fb = f"the task's check said (exit {rc}):\n{check_out[:3000] or '(nothing)'}\ncandidate run: {cand[:3000]}"
    if timed_out and not started:
        return Verdict(0.0, False, "TIMEOUT", [VerifierError("TIMEOUT", "the candidate ran past the time limit")],
                       feedback="FAIL: the candidate ran past the time limit; the check never ran",
                       backend=backend, details=details)
    if not started:
        return Verdict.error(f"the setup failed before the check could run (exit {rc})", backend=backend,
                             details=details, feedback=f"no verdict: the setup failed (exit {rc}): "
                                                       f"{details['setup_stderr'][:500]}")
    if timed_out or sig or rc in NOT_RUNNABLE:
        why = "ran past the time limit" if timed_out else f"could not run (exit {rc}{f', signal {sig}' if sig else ''})"
        return Verdict.error(f"the check {why}", backend=backend, details=details,
                             feedback=f"no verdict: the check {why}\n{fb}")
    if rc == SKIP:
        return Verdict.undecided("the check could not judge this run (exit 125)", backend=backend,
                                 details=details, feedback=f"INCONCLUSIVE: {fb}")
    if rc == 0:
        return Verdict(1.0, True, "PASS", feedback=f"PASS: {fb}", backend=backend, details=details)
    return Verdict(0.0, False, "CHECK", [VerifierError("CHECK", f"the task's check failed (exit {rc})")],
                   feedback=f"FAIL: {fb}", backend=backend, details=details)


class BashTestsVerifier:
    """verify(item, candidate): item.gold has `check` (see the module docstring) and `fixture`."""

    name = "bash-tests"

    def __init__(self, *, timeout_s: float = 10.0, unsafe_local: bool = False, run: RunFn | None = None):
        """timeout_s covers setup, candidate and check; unsafe_local runs without isolation
        (hosts without user namespaces); `run` replaces the sandbox (tests)."""
        self._run = run
        self._sandbox_kw = {"timeout_s": float(timeout_s), "unsafe_local": bool(unsafe_local)}

    @property
    def sandbox(self):
        from verifirst.verifiers.bash.sandbox import default_sandbox

        kw = {"timeout_s": self._sandbox_kw["timeout_s"]}
        if self._sandbox_kw["unsafe_local"]:
            kw["unsafe_local"] = True
        return default_sandbox(**kw)

    def preflight(self) -> None:
        """Build the sandbox now, so a host that cannot run it fails before the first LM call."""
        if self._run is None:
            self.sandbox  # noqa: B018 - constructing it is the probe

    def verify(self, item: Item, candidate: Any) -> Verdict:
        """Run the candidate and then the task's check in one fresh copy of the fixture.

        Args:
            item: gold has `check` and optional `fixture`, `check_files`, `check_runs_candidate`,
                `script_path`, `run`, `workdir`, `prerequisite`.
            candidate: a command/script string, or an object/dict with a `command` field.

        Returns:
            PASS / FAIL (stage CHECK or TIMEOUT), INCONCLUSIVE or ERROR (passed None).
        """
        check = item.gold.get("check")
        if not isinstance(check, str) or not has_commands(check):
            return Verdict.undecided(f"item {item.id} carries no check to run", backend=self.name)
        cmd = candidate_command(candidate)
        if not cmd.strip():
            return Verdict(0.0, False, "EMPTY", [VerifierError("EMPTY", "the candidate is empty")],
                           feedback="FAIL: the candidate is empty; write the script.", backend=self.name)
        script = check_script(cmd, item.gold)
        fixture = ensure(item.gold.get("fixture", "empty"), item.gold.get("fixture_spec"))
        r = self._run(script, fixture) if self._run else self.sandbox.run(script, fixture)
        v = judge(r, self.name)
        v.details["fixture"] = getattr(fixture, "name", fixture)
        return v


def cli_verify_check(check_file: str, pred: str, fixture: str = "empty", as_json: bool = False,
                     timeout_s: float = 10.0, unsafe_local: bool = False, workdir: str | None = None) -> int:
    """`verifirst verify bash --check FILE --pred CMD`: the check script decides; exit 0 PASS,
    1 FAIL, 3 no verdict (INCONCLUSIVE or ERROR; the JSON's stage says which)."""
    p = Path(check_file)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("check script not found", path=str(p), expected="a bash script file") from None
    except UnicodeDecodeError as e:
        raise InputError(f"check script is not UTF-8 (byte {e.start})", path=str(p)) from None
    if not has_commands(text):
        raise InputError("check script has no commands", path=str(p), line=1, expected="a bash script")
    gold = {"command": "", "check": text, "fixture": fixture, **({"workdir": workdir} if workdir else {})}
    v = BashTestsVerifier(timeout_s=timeout_s, unsafe_local=unsafe_local).verify(Item("cli", {}, gold), pred)
    out = {"passed": v.passed, "stage": v.stage, "inconclusive": v.inconclusive, "feedback": v.feedback,
           "check_exit": v.details.get("check_exit"), "check_output": v.details.get("check_output")}
    print(json.dumps(out, indent=2) if as_json else v.feedback)
    if v.passed is None:
        return EXIT_INCONCLUSIVE
    return 0 if v.passed else 1
