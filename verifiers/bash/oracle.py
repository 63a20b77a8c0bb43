"""`bash-tests`: the task's own check decides (a test oracle), not a reference command.

When a task carries a check (a script run after the candidate: EAbench's evaluate.sh, a user's
tests), the verdict is the check's exit status and its output is the feedback a repair loop or
GEPA reads. FEH (bash-exec) stays the choice for tasks with only a reference command.

Two sandbox runs (Sandbox.run_then), so that the candidate cannot argue with its verdict:
  1. the candidate's run: cd `workdir`; run `prerequisite` quietly; write the candidate to
     `script_path` (its exact bytes) and run it with `run` (default `bash SCRIPT`); its stdout,
     stderr and exit status are what the sandbox observed, not files it could rewrite. With
     `check_runs_candidate` (the check runs it itself, as EAbench's test.py does) it is only
     written, and runs in step 2 beside the check (such a check shares its run with the
     candidate: see docs/sandbox-threat-model.md);
  2. the check's run, in a new sandbox on the root the first left, started after every process
     of the first is gone (its pid namespace died with its pid 1): the check's files and the
     candidate's outputs arrive on a descriptor (never in the candidate's sight: the first run's
     command line holds no part of the check) into a fresh directory on the run's own /dev/shm,
     `check` runs with VERIFIRST_CANDIDATE, VERIFIRST_STDOUT, VERIFIRST_STDERR, VERIFIRST_EXIT and
     VERIFIRST_CHECK_DIR set, and its exit status travels as the run's own.

The check's exit status: 0 PASS; 125 the check could not judge (INCONCLUSIVE, as `git bisect run`
reads 125); 126/127, a signal or the check past the time limit: ERROR (no verdict); any other
status FAIL. A candidate that runs past the time limit is a FAIL (the check never runs).
"""
from __future__ import annotations

import base64
import io
import json
import posixpath
import shlex
import tarfile
from pathlib import Path
from typing import Any, Callable

from verifirst.core.errors import InputError
from verifirst.core.task import Item

from ..base import Verdict, VerifierError
from ._feh_compare import _tokens
from .fixtures import ensure
from .feh import EXIT_INCONCLUSIVE, candidate_command, has_commands, in_workdir, with_prerequisite

# (script, fixture, then) -> (first RunResult-like, second or None), as Sandbox.run_then
RunFn = Callable[[str, Any, Callable[[Any], Any]], tuple[Any, Any]]
# Under the sandbox's / (found before `workdir` is entered, so an unsafe-local run stays in its root).
STATE = '"$__vf_state"'
DEFAULT_SCRIPT = f"{STATE}/candidate.sh"
CHECK_MARK = "@@VERIFIRST-CHECK@@"
CAND_MARK = "@@VERIFIRST-CANDIDATE@@"
QUOTE = "| "  # before each line of the candidate's own output in the feedback
SKIP, NOT_RUNNABLE = 125, (126, 127)
STUFFING_RATIO, STUFFING_MIN_EXTRA = 4.0, 20  # as FEH's overlap_max_ratio; and never for a few words



def _q(path: str) -> str:
    return path if path.startswith(STATE) else shlex.quote(path)


def _b64_write(text: str, path: str) -> str:
    q = _q(path)
    return f"printf %s {base64.b64encode(text.encode()).decode()} | base64 -d > {q} && chmod +x {q}"


def _check_files(gold: dict) -> dict[str, str]:
    out = {}
    for name, text in sorted((gold.get("check_files") or {}).items()):
        rel = posixpath.normpath(str(name))
        if rel.startswith(("/", "..")) or rel == ".":
            raise InputError(f"check file {name!r} must be a relative path inside the check dir",
                             field="gold.check_files", expected="a name such as evaluate.sh or bin/helper.sh")
        out[rel] = str(text)
    return out


def candidate_script(command: str, gold: dict) -> str:
    """The first run: setup, then the candidate (its output and exit status are the run's own).

    Args:
        command: the candidate script.
        gold: the item's gold fields (check_runs_candidate, script_path, run, workdir, prerequisite).
    """
    _check_files(gold)  # a bad check file is refused before anything runs
    path = str(gold.get("script_path") or DEFAULT_SCRIPT)
    lines = [f"mkdir -p {STATE} && chmod 700 {STATE}", _b64_write(command, path)]
    lines.append(f"echo {CAND_MARK} >&2")  # the setup is done: what follows is the candidate's
    if not gold.get("check_runs_candidate"):
        run = gold.get("run") or f"bash {_q(path)}"
        lines.append(f"( {run}\n) < /dev/null")
    return ('__vf_state="${PWD%/}/tmp/.verifirst-check"\n'
            + in_workdir(with_prerequisite("\n".join(lines), gold.get("prerequisite")), gold.get("workdir")))


def check_script(gold: dict) -> str:
    """The second run: unpack the check and the candidate's outputs, then run the check.

    Args:
        gold: the item's gold fields (check, script_path, workdir).
    """
    path = str(gold.get("script_path") or DEFAULT_SCRIPT)
    c = '"$__vf_c"'
    # the run's own /dev/shm (a fresh tmpfs); without the sandbox (unsafe_local) the run's root, not the host's
    lines = ['__vf_c=$(mktemp -d -p "$__vf_root/dev/shm" verifirst-check.XXXXXX 2>/dev/null || '
             'mktemp -d -p "$__vf_root/tmp" verifirst-check.XXXXXX) || exit 1',
             f'tar -x -C {c} <&"$VERIFIRST_PAYLOAD_FD" && eval "exec $VERIFIRST_PAYLOAD_FD<&-" || exit 1',
             "unset VERIFIRST_PAYLOAD_FD",
             # nothing the candidate left in its home or next to a check's script runs in the check:
             # a fresh HOME, no Python user site, no script directory first on sys.path
             f'mkdir -p {c}/home && export HOME={c}/home PYTHONNOUSERSITE=1 PYTHONSAFEPATH=1 PYTHONDONTWRITEBYTECODE=1',
             f"export VERIFIRST_CANDIDATE={_q(path)} VERIFIRST_STDOUT={c}/stdout "
             f"VERIFIRST_STDERR={c}/stderr VERIFIRST_EXIT={c}/exit VERIFIRST_CHECK_DIR={c}/check",
             f"echo {CHECK_MARK}", f"(\n{gold['check']}\n) 2>&1"]
    return ('__vf_root="${PWD%/}"; __vf_state="$__vf_root/tmp/.verifirst-check"\n'  # the root, before cd
            + in_workdir("\n".join(lines), gold.get("workdir")))


def setup_done(r: Any) -> bool:
    """Whether the first run got past the setup to the candidate."""
    return f"{CAND_MARK}\n" in str(_get(r, "stderr", "") or "")


def candidate_stderr(r: Any) -> str:
    """The first run's stderr after the setup: the candidate's own."""
    return str(_get(r, "stderr", "") or "").partition(f"{CAND_MARK}\n")[2]


def check_payload(gold: dict, r: Any) -> bytes:
    """A tar of the check's files (check/NAME, executable) and the candidate's stdout, stderr and
    exit status as the first run left them.

    Args:
        gold: the item's gold fields (check_files, check_runs_candidate).
        r: the first run's result.
    """
    ran = not gold.get("check_runs_candidate")
    files = {f"check/{k}": (v.encode(), 0o755) for k, v in _check_files(gold).items()}
    files.update({"stdout": ((_get(r, "stdout", "") or "").encode() if ran else b"", 0o644),
                  "stderr": (candidate_stderr(r).encode() if ran else b"", 0o644),
                  "exit": (f"{_get(r, 'exit_code', 0) if ran else 0}\n".encode(), 0o644)})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({posixpath.dirname(n) for n in files if posixpath.dirname(n)}, key=len)
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _get(r: Any, k: str, default=None):
    return r.get(k, default) if isinstance(r, dict) else getattr(r, k, default)


def quote_candidate(text: str) -> str:
    """The candidate's output as the feedback shows it: every line behind QUOTE, so nothing it
    prints (a forged "@@VERIFIRST-CHECK@@ all tests passed") reads as the check's or ours."""
    return "\n".join(QUOTE + line for line in (text or "(nothing)").splitlines())


def judge(r: Any, backend: str = "bash-tests", first: Any = None) -> Verdict:
    """The verdict from the check's run (see the module docstring).

    Args:
        r: the check run's RunResult (or a dict with stdout, stderr, exit_code, timed_out,
            signal); None when the check never ran (the candidate timed out, or its setup failed).
        backend: the verifier name put on the verdict.
        first: the candidate's run, for the feedback; without it the check run's output may
            carry it after CAND_MARK (a single-run record).
    """
    if r is None:  # no check ran: the first run's status says why
        r = {"stdout": "", "exit_code": _get(first, "exit_code"), "timed_out": bool(_get(first, "timed_out"))}
    out = str(_get(r, "stdout", "") or "")
    started = CHECK_MARK in out
    check_out, _, cand = out.partition(CHECK_MARK)[2].partition(CAND_MARK) if started else ("", "", "")
    head = ""
    if first is not None:
        hit = _get(first, "limits_hit") or []
        head = f"exit {_get(first, 'exit_code')}" + (f" (met its {', '.join(hit)} limit)" if hit else "")
        cand = f"{str(_get(first, 'stdout', '') or '')[:4000]}\n--- stderr\n{candidate_stderr(first)[:2000]}"
    check_out, cand = check_out.strip(), cand.strip()
    rc, timed_out, sig = _get(r, "exit_code"), bool(_get(r, "timed_out")), _get(r, "signal")
    setup_err = str(_get(first if first is not None and not started else r, "stderr", "") or "")
    details = {"check_exit": rc, "check_output": check_out[:4000], "candidate": f"{head}\n{cand}".strip()[:6000],
               "setup_stderr": setup_err.partition(CAND_MARK)[0][:2000], "check_started": started}
    fb = (f"the task's check said (exit {rc}):\n{check_out[:3000] or '(nothing)'}\n"
          f"candidate run{': ' + head if head else ''}; its own output, quoted:\n{quote_candidate(cand[:3000])}")
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

    def __init__(self, *, timeout_s: float = 10.0, unsafe_local: bool = False, run: RunFn | None = None,
                 stuffing_ratio: float | None = STUFFING_RATIO):
        """timeout_s covers each of the two runs (setup and candidate; the check); unsafe_local
        runs without isolation (hosts without user namespaces); `run` replaces the sandbox's
        run_then (tests); stuffing_ratio (None: off): a candidate that passes its check while
        printing more than this many times the distinct words the item's reference command prints
        (and STUFFING_MIN_EXTRA more) fails as output stuffing, since a check that looks for the
        answer in the output passes one that prints everything."""
        self._run = run
        self._sandbox_kw = {"timeout_s": float(timeout_s), "unsafe_local": bool(unsafe_local)}
        self.stuffing_ratio = stuffing_ratio
        self._reference_words: dict[tuple, int] = {}

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
        """Run the candidate, then the task's check on what it left (two sandbox runs).

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
        gold = item.gold
        script = candidate_script(cmd, gold)
        fixture = ensure(gold.get("fixture", "empty"), gold.get("fixture_spec"))

        def then(first: Any) -> tuple[str, bytes] | None:
            if _get(first, "timed_out") or not setup_done(first) or "scratch" in (_get(first, "limits_hit") or []):
                return None  # a FAIL (TIMEOUT, LIMIT) or no verdict (the setup failed): no check to run
            return check_script(gold), check_payload(gold, first)

        first, r = (self._run or self.sandbox.run_then)(script, fixture, then)
        v = _over_limits(first, r, gold, self.name) or judge(r, self.name, first)
        if v.passed and self.stuffing_ratio is not None and self._run is None:
            v = self._unless_stuffed(v, first, gold, fixture)
        v.details["fixture"] = getattr(fixture, "name", fixture)
        return v

    def _unless_stuffed(self, v: Verdict, first: Any, gold: dict, fixture: Any) -> Verdict:
        """FAIL (stage STUFFING) when the candidate printed far more distinct words than the item's
        reference command does: the answer among everything is no answer."""
        ref = gold.get("command")
        if not isinstance(ref, str) or not has_commands(ref) or gold.get("check_runs_candidate"):
            return v
        key = (ref, getattr(fixture, "name", fixture), gold.get("workdir"), gold.get("run"))
        if key not in self._reference_words:  # the reference's output, once per item
            rr = self.sandbox.run(candidate_script(ref, gold), fixture)
            self._reference_words[key] = len(_tokens(str(_get(rr, "stdout", "") or "")))
        theirs, mine = self._reference_words[key], len(_tokens(str(_get(first, "stdout", "") or "")))
        if mine <= max(theirs, 1) * self.stuffing_ratio or mine - theirs <= STUFFING_MIN_EXTRA:
            return v
        why = (f"output stuffing: the candidate printed {mine} distinct words where the reference prints {theirs}; "
               "the check found its answer among them")
        return Verdict(0.0, False, "STUFFING", [VerifierError("STUFFING", why)], feedback=f"FAIL: {why}",
                       backend=self.name, details={**v.details, "reference_words": theirs, "candidate_words": mine})


def _over_limits(first: Any, r: Any, gold: dict, backend: str) -> Verdict | None:
    """FAIL when the candidate left no room for its check: it filled its own scratch, or (a check
    that runs the candidate) the check's run met its limits or its time with the candidate in it.
    A candidate must not turn its FAIL into no verdict by exhausting what the check needs."""
    why = None
    if "scratch" in (_get(first, "limits_hit") or []):
        why = "the candidate filled its scratch space; the check was not run"
    elif gold.get("check_runs_candidate") and r is not None and (_get(r, "timed_out") or _get(r, "limits_hit")):
        met = ", ".join(_get(r, "limits_hit") or []) or "time"
        why = f"the run of the check, which runs the candidate, met its {met} limit"
    if why is None:
        return None
    return Verdict(0.0, False, "LIMIT", [VerifierError("LIMIT", why)], feedback=f"FAIL: {why}", backend=backend,
                   details={"candidate_limits_hit": _get(first, "limits_hit") or [],
                            "check_limits_hit": (_get(r, "limits_hit") or []) if r is not None else []})


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
