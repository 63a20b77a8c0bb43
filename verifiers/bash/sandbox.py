"""Run untrusted bash in a fresh copy of a fixture file system, in a sandbox of user namespaces.

    sb = Sandbox(timeout_s=5.0)
    r = sb.run('find /testbed -name "*.java" | wc -l', fixture="nl2sh-fs1")
    gold, cand = sb.run_pair(gold_cmd, cand_cmd, "nl2sh-fs2")   # identical fresh copies, at once if isolated

Built by vf-sandbox (_launcher, through its fork server: _spawner), else bubblewrap, from the
options _bwrap.argv writes; the command reaches `bash -c` as one argv element. The root is an
overlay on the fixture written once per process (or, without overlays, a fresh copy), and the
run's file-system effect is its diff against the fixture (type, mode, sha256). What a run can and
cannot reach: docs/sandbox-threat-model.md. Sysadmin mode (a fixture with `sysadmin=True`): the
run's root carries its own writable /etc (accounts with locked passwords, sudoers, PAM) and
/var/lib/dpkg, so useradd, passwd, sudo and su work and /etc changes are part of the diff.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import _bwrap, _launcher, fixtures
from verifirst.verifiers.bash._bwrap import SandboxUnavailable
# the run machinery (_runs); the private names are re-exported for the tests and benchmarks
from verifirst.verifiers.bash._runs import (OUTPUT_LIMIT, FsDiff, RunResult, _copy_parents, _drive, _ids,  # noqa: F401
                                           _Job, _scratch_base)  # noqa: F401

__all__ = ["Sandbox", "RunResult", "FsDiff", "SandboxUnavailable", "run_pair", "default_sandbox",
           "cli_run_bash"]

if TYPE_CHECKING:
    from typing import Callable

_LOG = logging.getLogger(__name__)
_STATE: dict[str, object] = {}  # the launcher probe's outcome, per binary, ids and overlay


class Sandbox:
    """Runs commands in vf-sandbox (or bubblewrap) with fixture copies; see the module docstring."""

    def __init__(self, timeout_s: float = 5.0, *, output_limit: int = OUTPUT_LIMIT, memory_mb: int = 1024,
                 cpu_s: int | None = None, file_size_mb: int = 64, nofile: int = 256, nproc: int = 256,
                 env: dict[str, str] | None = None, unsafe_local: bool = False, bwrap: str | None = None,
                 overlay: bool | None = None):
        """Args: limits as named; env adds to every command's environment; unsafe_local runs
        without isolation (hosts without user namespaces); bwrap names the binary; overlay=False
        gives each run a fresh copy of the fixture (see the module docstring)."""
        if timeout_s <= 0:
            raise InputError(f"timeout_s must be positive, got {timeout_s}", field="timeout_s")
        self.timeout_s = float(timeout_s)
        self.output_limit = int(output_limit)
        self.limits = {"nproc": int(nproc), "as_bytes": int(memory_mb) << 20,
                       "cpu_s": int(cpu_s or int(self.timeout_s) + 1), "fsize_bytes": int(file_size_mb) << 20,
                       "nofile": int(nofile)}
        self.env = dict(env or {})
        self.unsafe_local = bool(unsafe_local)
        # Found and probed as the uid that will run commands, which may not reach this venv.
        self._bwrap = None if unsafe_local else _bwrap.find_bwrap(bwrap, run_as=_ids(), copy_parents=_copy_parents)
        self._wants_overlay = (overlay is None or bool(overlay)) and not unsafe_local
        self.overlay = self._wants_overlay and self._bwrap.has_overlay
        if not unsafe_local:
            self.probe()

    @property
    def backend(self) -> str:
        return "unsafe-local" if self.unsafe_local else self._bwrap.name + (" overlay" if self.overlay else "")

    def probe(self) -> None:
        """Once per process and binary: can the launcher build our sandbox here? Raises with the
        fix. Without overlays, fresh copies (said in `backend`); where vf-sandbox cannot, bubblewrap."""
        try:
            self._probe()
        except SandboxUnavailable as exc:
            if self._bwrap.kind != _launcher.KIND:
                raise
            own, overlay = self._bwrap, self.overlay
            _launcher.refuse()
            try:
                self._bwrap = _bwrap.find_bwrap(run_as=_ids(), copy_parents=_copy_parents)
                self.overlay = self._wants_overlay and self._bwrap.has_overlay
                self._probe()
            except SandboxUnavailable:  # bubblewrap cannot either: the cause is not the launcher
                _launcher.refuse(False)
                self._bwrap, self.overlay = own, overlay
                raise exc from None
            _LOG.info("vf-sandbox cannot build the sandbox here, bubblewrap will: %s", exc)

    def _probe(self) -> None:
        key = ("probe", self._bwrap.path, _ids(), self.overlay)
        if key in _STATE:  # "ok", or "no-overlay": the launcher builds it with fresh copies only
            self.overlay = self.overlay and _STATE[key] == "ok"
            return
        r = _done(_Job(self, "ulimit -Hn", fixtures.build("empty")))
        if r.exit_code != 0 and self.overlay:
            self.overlay = False
            self._probe()
            _STATE[key] = "no-overlay"
            return
        if r.exit_code != 0:
            raise SandboxUnavailable(_bwrap.probe_failure(self._bwrap, _ids(), r.exit_code, r.stderr))
        if r.stdout.strip() != str(self.limits["nofile"]):  # pid 1 did not get the limits
            raise SandboxUnavailable(f"{self._bwrap.kind} ({self._bwrap.path}) ran, but the sandbox's resource limits "
                                     f"were not applied (open files: {r.stdout.strip()!r}): {r.stderr[:300]}")
        _STATE[key] = "ok"

    def run(self, command: str, fixture: str | fixtures.Fixture = "empty") -> RunResult:
        check_command(command)
        return _done(_Job(self, command, fixtures.resolve(fixture)))

    def run_then(self, command: str, fixture: str | fixtures.Fixture,
                 then: "Callable[[RunResult], tuple[str, bytes] | None]") -> tuple[RunResult, RunResult | None]:
        """`command`, then (unless `then` says None) a second command on the root it left, in a
        new sandbox started once the first run's processes are all gone (a task's check).

        Args:
            command: the first command (a candidate).
            fixture: what its root starts from.
            then: given the first run's result, (second command, payload) or None; the second
                command reads the payload on descriptor $VERIFIRST_PAYLOAD_FD.

        Returns:
            (first result, second result or None).
        """
        check_command(command)
        first = _Job(self, command, fixtures.resolve(fixture), keep=True)
        try:
            r1 = _done(first)
            nxt = then(r1)
            if nxt is None:
                return r1, None
            check_command(nxt[0])
            return r1, _done(_Job(self, nxt[0], first.fx, after=first, keep=True, payload=nxt[1]))
        finally:
            first.release()

    def run_pair(self, gold: str, candidate: str,
                 fixture: str | fixtures.Fixture = "empty") -> tuple[RunResult, RunResult]:
        """Both commands in identical fresh copies of `fixture`, run at once where runs are isolated
        (cgroups and a tmpfs of their own, per-uid counts capped per run: vf-sandbox); else runs take
        turns (any thread's: _runs._TURNS), the gold's before the candidate's, so a candidate cannot
        starve or measure any gold (unsafe_local: at once, it isolates nothing)."""
        check_command(gold)
        check_command(candidate)
        fx = fixtures.resolve(fixture)
        jobs = [_Job(self, gold, fx)]
        if jobs[0].queued:  # not isolated: it holds the turn until it ends
            return _done(jobs[0]), self.run(candidate, fx)
        try:
            jobs.append(_Job(self, candidate, fx))
        except BaseException:
            jobs[0].kill()
            _drive(jobs)
            jobs[0].finish()
            raise
        _drive(jobs)
        return jobs[0].finish(), jobs[1].finish()


def _done(job: _Job) -> RunResult:
    _drive([job])
    return job.finish()


def check_command(command: str, field: str = "command") -> None:
    """What no sandbox can run: raises InputError naming `field` (a CLI passes its flag)."""
    if not isinstance(command, str):
        raise InputError(f"command must be a string, got {type(command).__name__}", field=field)
    if "\0" in command:
        raise InputError("command contains a NUL byte, which no argv element can hold",
                         field=field, expected="text without NUL bytes")


_DEFAULT: dict[tuple, Sandbox] = {}


def default_sandbox(**kw) -> Sandbox:
    key = tuple(sorted(kw.items()))
    if key not in _DEFAULT:
        _DEFAULT[key] = Sandbox(**kw)
    return _DEFAULT[key]


def run_pair(gold: str, candidate: str, fixture: str | fixtures.Fixture = "empty",
             **kw) -> tuple[RunResult, RunResult]:
    return default_sandbox(**kw).run_pair(gold, candidate, fixture)


def cli_run_bash(command: str, fixture: str = "empty", as_json: bool = False, timeout_s: float = 5.0,
                 unsafe_local: bool = False) -> int:
    """`verifirst sandbox run CMD [--fixture F] [--json]`: prints the RunResult; exit code 0."""
    r = Sandbox(timeout_s, unsafe_local=unsafe_local).run(command, fixture)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
    else:
        print(r.stdout + r.stderr, end="")
        print(f"[exit {r.exit_code}{' timed out' if r.timed_out else ''}"
              f"{' truncated' if r.truncated else ''}] {r.fs_diff.summary()}")
    return 0
