"""vf-sandbox's fork server (_forkserver.c): the launcher's start-up (and, as root, the uid drop)
paid once per process, not once per run. Where there is none (bubblewrap,
VERIFIRST_SANDBOX_FORKSERVER=0, a server that did not start), a run execs the launcher.

    sp = spawner(ids, binary=vf_sandbox)  # None: Popen
    proc = sp.popen(argv, env, pass_fds)  # .pid, .stdout, .stderr, .wait(timeout), .returncode
"""
from __future__ import annotations

import array
import atexit
import contextlib
import errno
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import threading

START_TIMEOUT_S = 10.0
_SNDBUF = 8 << 20


class SpawnedProcess:
    """A run sent to the server, with the parts of Popen the sandbox uses; `pid` waits for the
    server's reply, and raises the OSError Popen would have raised when the run could not start."""

    def __init__(self, owner: "ForkServer", rid: int, stdout, stderr):
        self._owner, self._rid, self.stdout, self.stderr = owner, rid, stdout, stderr
        self._pid: int | None = None
        self._leader = True
        self._error: OSError | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None and self._error is None:
            reply = self._owner.reply(self._rid)
            if reply is None:
                self._error = OSError("the sandbox spawner has gone")
            elif "pid" not in reply:
                self._error = OSError(reply["errno"], reply["error"])
            else:
                self._pid, self._leader = reply["pid"], bool(reply.get("leader", True))
        if self._error is not None:
            raise self._error
        return self._pid  # type: ignore[return-value]

    @property
    def leader(self) -> bool:
        """Whether the run leads a process group of its own (killpg reaches it); a pid 1 the server
        cloned does not (killing it ends its namespaces)."""
        self.pid  # noqa: B018 - the reply says
        return self._leader

    @property
    def reaped(self) -> bool:
        """Whether the server reaped it (its pid may be another process's by now)."""
        with self._owner._cond:
            return self.returncode is not None or self._pid in self._owner._statuses

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: killed by that signal), as Popen.wait.

        Args:
            timeout: seconds; past it subprocess.TimeoutExpired.
        """
        if self.returncode is None:
            status = self._owner.status(self.pid, timeout)
            if status is None:
                raise subprocess.TimeoutExpired("sandbox run", timeout)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class ForkServer:
    """vf-sandbox as a fork server, and the thread that reads its replies. It starts only `binary`."""

    def __init__(self, ids: tuple[int, int] | None, binary: str):
        """Start `binary` as `ids`; RuntimeError when it does not come up.

        Args:
            ids: (uid, gid) it, and every run it starts, runs as (we are root); None: as we are.
            binary: the vf-sandbox every run's argv names.
        """
        self.binary = binary
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(OSError):
            ours.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_SNDBUFFORCE", 32), _SNDBUF)
        self.cpu_s = self.self_cpu_s = 0.0  # CPU seconds of the runs it reaped, and its own
        self._sock = ours
        self._cond = threading.Condition()
        self._replies: dict[int, dict] = {}
        self._statuses: dict[int, int] = {}
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._dead = False
        env = {"VERIFIRST_FORKSERVER_FD": str(theirs.fileno()), "VERIFIRST_FORKSERVER_EXE": os.path.realpath(binary)}
        drop = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
        try:
            self._proc = subprocess.Popen([binary], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, pass_fds=[theirs.fileno()], cwd="/", **drop)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            hello = json.loads(ours.recv(4096) or b"{}")
        except (OSError, ValueError):
            hello = {}
        if "ready" not in hello:
            self._proc.kill()
            err = self._proc.communicate()[1].decode(errors="replace").strip()
            ours.close()
            raise RuntimeError(f"the sandbox's fork server did not start: {err[-400:] or 'no reply'}")
        self._proc.stderr.close()
        ours.settimeout(None)
        self._reader = threading.Thread(target=self._read, name="sandbox-forkserver", daemon=True)
        self._reader.start()

    def _message(self, rid: int, argv: list[str], env: dict[str, str], targets: list[int]) -> bytes:
        if argv[0] != self.binary:
            raise ValueError(f"the fork server runs {self.binary} only, not {argv[0]}")
        words = [os.fsencode(w) + b"\0" for w in (*argv, *(f"{k}={v}" for k, v in env.items()))]
        # what an exec would refuse (Popen raises it): a string over MAX_ARG_STRLEN, all past ARG_MAX
        if max(map(len, words)) > 32 * os.sysconf("SC_PAGE_SIZE") or \
                sum(len(w) + 8 for w in words) > os.sysconf("SC_ARG_MAX"):
            raise OSError(errno.E2BIG, os.strerror(errno.E2BIG), argv[0])
        head = struct.pack(f"=II{len(targets)}iII", rid, len(targets), *targets, len(argv), len(env))
        return head + b"".join(words)

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(1 << 16)
            except OSError:
                msg = b""
            with self._cond:
                if not msg:
                    self._dead = True
                    self._cond.notify_all()
                    return
                m = json.loads(msg)
                if "exit" in m:
                    self._statuses[m["exit"]] = m["status"]
                    self.cpu_s += m["cpu"]
                    self.self_cpu_s = m["self_cpu"]
                else:
                    self._replies[m["id"]] = m
                self._cond.notify_all()

    def popen(self, argv: list[str], env: dict[str, str], pass_fds: list[int]) -> SpawnedProcess:
        """Start `argv` as the server's uid (stdin /dev/null, stdout and stderr pipes to us, cwd /),
        not waiting for the reply: a run that cannot start raises Popen's OSError from `pid`, `wait`.

        Args:
            argv: the command (argv[0] a path).
            env: its whole environment.
            pass_fds: our descriptors it inherits, at the same numbers.
        """
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            rid = next(self._ids)
            msg = self._message(rid, argv, env, [1, 2, *pass_fds])
            with self._send_lock:
                self._sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                            array.array("i", [out_w, err_w, *pass_fds]))])
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        return SpawnedProcess(self, rid, open(out_r, "rb", buffering=0), open(err_r, "rb", buffering=0))

    def reply(self, rid: int) -> dict | None:
        """The server's answer to request `rid` ({"pid"} or {"errno", "error"}); None if it died."""
        with self._cond:
            self._cond.wait_for(lambda: rid in self._replies or self._dead)
            return self._replies.pop(rid, None)

    def status(self, pid: int, timeout: float | None) -> int | None:
        """The wait status of run `pid` once the server reaped it; None past `timeout` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._statuses or self._dead, timeout)
            if pid in self._statuses:
                return self._statuses.pop(pid)
            return signal.SIGKILL if self._dead else None  # a dead server's runs died with it (--die-with-parent)

    def close(self) -> None:
        """End the server (runs still going die with it) and wait for it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)
        self._sock.close()


_LOCK = threading.Lock()
_SPAWNERS: dict[tuple, ForkServer | None] = {}


def spawner(ids: tuple[int, int] | None, binary: str) -> ForkServer | None:
    """This process's fork server for vf-sandbox `binary`, started on first use; None (the run then
    execs the launcher) with VERIFIRST_SANDBOX_FORKSERVER=0, or when a server did not start.

    Args:
        ids: (uid, gid) the sandbox runs as; None when it runs as we are (not root).
        binary: the vf-sandbox every run names.
    """
    if os.environ.get("VERIFIRST_SANDBOX_FORKSERVER", "1") == "0":
        return None
    key = (ids, binary)
    with _LOCK:
        sp = _SPAWNERS.get(key)
        if sp is not None and sp._dead:
            sp.close()  # it died (killed, say): reap it, then start another
            del _SPAWNERS[key]
        if key not in _SPAWNERS:
            try:
                _SPAWNERS[key] = ForkServer(ids, binary)
            except (OSError, RuntimeError):
                _SPAWNERS[key] = None  # and kept None
        return _SPAWNERS[key]


def task_ids() -> list[int]:
    """The servers' process ids and their reader threads' ids (a benchmark sets their scheduling)."""
    live = [sp for sp in list(_SPAWNERS.values()) if sp is not None and not sp._dead]
    return [sp._proc.pid for sp in live] + [sp._reader.native_id for sp in live if sp._reader.native_id]


def cpu_s() -> float:
    """CPU seconds of this process's spawners and the runs they reaped (RUSAGE_CHILDREN misses them)."""
    return sum(sp.cpu_s + sp.self_cpu_s for sp in list(_SPAWNERS.values()) if sp is not None)


def _forget_in_child() -> None:
    """In a forked child: drop the parent's servers (closing, not shutting down, each socket)."""
    global _LOCK
    _LOCK = threading.Lock()
    for sp in _SPAWNERS.values():
        if sp is not None:
            with contextlib.suppress(OSError):
                os.close(sp._sock.detach())
    _SPAWNERS.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def close_all() -> None:
    """End every spawner of this process (at exit: no server outlives us)."""
    with _LOCK:
        for sp in _SPAWNERS.values():
            if sp is not None:
                sp.close()
        _SPAWNERS.clear()
