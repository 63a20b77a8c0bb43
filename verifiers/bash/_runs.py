"""One sandbox run (_Job: started through the launcher, read by _drive, diffed and released by
finish()) and the state runs share: the scratch base, the curated /etc, the sysadmin trees.
sandbox.Sandbox is the public way in.
"""
from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import os
import selectors
import signal as _signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import (_accounts, _bwrap, _cgroup, _launcher, _sandbox_fs, _seccomp, _spawner, _usr_layer,
                                     fixtures, images)
from verifirst.verifiers.bash._sandbox_etc import HOSTNAME, build_etc, dpkg_entries, sysadmin_entries

if TYPE_CHECKING:
    from verifirst.verifiers.bash.sandbox import Sandbox

OUTPUT_LIMIT = 1 << 20
# Past this many bytes of output (kept + discarded) the run is killed: a flood only burns CPU.
OUTPUT_KILL_FACTOR = 8
NPROC_SLACK = 16  # RLIMIT_NPROC above the pids cgroup's limit, so the cgroup is the one that refuses
SCRATCH_QUOTA_MB = int(os.environ.get("VERIFIRST_SCRATCH_MB", "1024"))
MEMORY_POLL_S = 0.02  # without a memory cgroup, how often the run's processes' memory is summed
SCRATCH_SLACK = 16 << 20  # a run that leaves less of its own scratch free has filled it


@dataclass
class FsDiff:
    """What a run changed under its /: each entry {path, type, mode, sha256} (+ changed, before)."""

    added: list[dict] = field(default_factory=list)
    deleted: list[dict] = field(default_factory=list)
    modified: list[dict] = field(default_factory=list)
    truncated: bool = False

    @property
    def empty(self) -> bool:
        return not (self.added or self.deleted or self.modified)

    def key(self) -> tuple:
        """Comparable form: two runs with equal keys had the same effect."""
        def sig(es, extra=False):
            return tuple((e["path"], e["type"], e["mode"], e["sha256"]) + ((tuple(e["changed"]),) if extra else ())
                         for e in es)
        return sig(self.added), sig(self.deleted), sig(self.modified, True)

    def summary(self, limit: int = 8) -> str:
        parts = []
        for label, es in (("added", self.added), ("deleted", self.deleted), ("modified", self.modified)):
            if es:
                shown = ", ".join(e["path"] + (f" ({'/'.join(e['changed'])})" if "changed" in e else "")
                                  for e in es[:limit])
                more = f" and {len(es) - limit} more" if len(es) > limit else ""
                parts.append(f"{label}: {shown}{more}")
        return "; ".join(parts) or "no file-system changes"


@dataclass
class RunResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    signal: int | None
    truncated: bool
    fs_diff: FsDiff
    timings: dict[str, float]
    backend: str = "bwrap"  # what built the sandbox: "vf-sandbox", "bwrap" or "unsafe-local"
    fixture: str = ""
    stdout_sha256: str = ""  # of the whole stream: equal prefixes past the cap can still differ
    stderr_sha256: str = ""
    # "memory" (killed at memory_mb), "processes" (a fork refused at nproc), "scratch" (filled)
    limits_hit: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def as_dict(self) -> dict:
        return asdict(self)


# ---- process-wide state: scratch area, curated /etc, sysadmin trees ----------------------

_LOCK = threading.Lock()
_TURNS = threading.Lock()  # held by the one run in flight where runs are not isolated (_Job)
_STATE: dict[str, object] = {}


def _scratch_base() -> tuple[Path, bool]:
    """(base directory, whether it is our own size-capped tmpfs)."""
    with _LOCK:
        if "base" in _STATE:
            return _STATE["base"], _STATE["quota"]  # type: ignore[return-value]
        euid = os.geteuid()
        root = os.environ.get("VERIFIRST_SCRATCH") or ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
        base = Path(root) / f"verifirst-{euid}"
        base.mkdir(mode=0o711 if euid == 0 else 0o700, exist_ok=True)
        quota = os.path.ismount(base)
        if euid == 0 and not quota:  # our own tmpfs: a disk fill stops at the quota; nosuid: setuid bits inert
            opts = f"size={SCRATCH_QUOTA_MB}m,nr_inodes=400000,mode=0711".encode()
            quota = _cgroup.libc().mount(b"verifirst-scratch", os.fsencode(base), b"tmpfs",
                                         _cgroup.MS_NOSUID | _cgroup.MS_NODEV, opts) == 0 or os.path.ismount(base)
        os.chmod(base, 0o711 if euid == 0 else 0o700)
        (base / "sys/devices/system/cpu").mkdir(parents=True, exist_ok=True)  # the runs' /sys (_bwrap.argv)
        _STATE["base"], _STATE["quota"] = base, quota
        return base, quota


def _etc_dir(src: Path = Path("/etc")) -> Path:
    """The curated read-only /etc made from `src` (the host's, or a task image's), once per process."""
    key = ("etc", str(src))
    if _STATE.get(key) is None:
        base, _ = _scratch_base()
        _STATE[key] = build_etc(base, src)
    return _STATE[key]  # type: ignore[return-value]


def image_root(fx: fixtures.Fixture) -> Path | None:
    """The root directory of the fixture's task image (built on first use), or None: the host's."""
    return images.rootfs(fx.image) if getattr(fx, "image", None) else None


def _ids() -> tuple[int, int] | None:
    """Host uid/gid the sandbox runs as: a dedicated unprivileged id when we are root."""
    return (_bwrap.SANDBOX_UID, _bwrap.SANDBOX_UID) if os.geteuid() == 0 else None


_ADMIN_TREES: dict[str, fixtures.Fixture] = {}


def run_tree(fx: fixtures.Fixture) -> fixtures.Fixture:
    """What a run's root holds: the fixture, plus the sysadmin /etc when the fixture asks for it."""
    if not getattr(fx, "sysadmin", False):
        return fx
    with _LOCK:
        tree = _ADMIN_TREES.get(fx.content_hash)
        if tree is None:
            img = image_root(fx) or Path("/")
            added = _with_accounts(sysadmin_entries(img / "etc"), fx.users) + dpkg_entries(img / "var/lib/dpkg")
            paths = {e.path for e in added}
            keep = [e for e in fx.entries if not e.path.startswith("etc/") and e.path not in paths]
            tree = fixtures.Fixture(fx.name, sorted(keep + added, key=lambda e: e.path), dict(fx.env),
                                    fx.description)
            _ADMIN_TREES[fx.content_hash] = tree
        return tree


def _with_accounts(etc: list[fixtures.Entry], users: tuple) -> list[fixtures.Entry]:
    """The sysadmin /etc entries with the fixture's declared users added (_accounts)."""
    if not users:
        return etc
    files = {e.path[4:]: e for e in etc if e.path in ("etc/passwd", "etc/group", "etc/shadow", "etc/gshadow")}
    new = _accounts.with_users({k: e.data for k, e in files.items()}, users)
    out = [e for e in etc if e.path[4:] not in new]
    for name, data in new.items():
        mode = files[name].mode if name in files else 0o440
        out.append(fixtures.Entry(f"etc/{name}", "file", mode, data))
    return out


atexit.register(_sandbox_fs.remove_lowers)


def _copy_parents() -> list[Path]:
    """Where vf-sandbox or a private bwrap copy may go: the scratch base, else (a noexec /dev/shm,
    in Docker) a directory of ours in the temp dir."""
    return [_scratch_base()[0], Path(tempfile.gettempdir()) / f"verifirst-bin-{os.geteuid()}"]


class _Job:
    """One sandboxed command in flight.

    Args:
        sb, command, fx: the sandbox, the command (one `bash -c` argument), the fixture.
        after: a finished run kept with keep=True, whose root this run starts from.
        keep: keep the root after finish() for a run `after` this one (release() removes it).
        payload: bytes the command may read on descriptor $VERIFIRST_PAYLOAD_FD (a memfd).
    """

    def __init__(self, sb: "Sandbox", command: str, fx: fixtures.Fixture, *, after: "_Job | None" = None,
                 keep: bool = False, payload: bytes | None = None):
        self.sb, self.command, self.fx, self.keep = sb, command, fx, keep
        self.t0 = time.perf_counter()
        self.admin = bool(getattr(fx, "sysadmin", False))
        if self.admin and sb.unsafe_local:
            raise InputError(f"fixture {fx.name!r} runs in sysadmin mode, which needs the sandbox: without it "
                             "useradd, passwd and sudo would change this machine's /etc",
                             field="fixture", expected="a fixture without sysadmin mode, or no unsafe_local")
        self.tree = run_tree(fx)
        self.skip = _sandbox_fs.skipped(self.admin)
        self.overlay = sb.overlay
        base, _ = _scratch_base()
        ids = _ids() if not sb.unsafe_local else None
        fds: list[int] = []  # what the launcher inherits: a user namespace, seccomp, the payload
        userns = seccomp = None
        self.cgroup: _cgroup.RunCgroup | None = None
        self.run_dir, self.private = "", False
        # runs not isolated from each other take turns: the turn is held until the run's files are gone
        self.queued = after is None and not sb.unsafe_local and _TURNS.acquire()
        try:
            if after is not None:
                self.run_dir, self.root, self.private = after.run_dir, after.root, after.private
            else:  # as root, a tmpfs of its own: a run cannot fill a concurrent run's scratch
                self.run_dir, self.private = (tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=base), False) \
                    if sb.unsafe_local else _cgroup.private_scratch(str(base), sb.limits["as_bytes"])
                self.root = os.path.join(self.run_dir, "up" if self.overlay else "fs")
            if not sb.unsafe_local and _cgroup.available():
                self.cgroup = _cgroup.RunCgroup(sb.limits["as_bytes"], sb.limits["nproc"])
            if self.cgroup and self.private and sb._bwrap.kind != "bwrap":  # isolated (vf-sandbox): no turns
                self._end_turn()
            lower = self.overlay and _sandbox_fs.lower_dir(self.tree, str(base), ids)
            work = os.path.join(self.run_dir, "wk")
            img = image_root(fx)
            host = img or Path("/")  # the task image's tree, else the host's
            self.usr_src = str(host / "usr")
            usr_lower = _usr_layer.lower(str(base), ids, self.usr_src) if self.overlay else None
            # /usr copy-on-write where root can lend it; a run after another (a task's check) gets a fresh
            # one: it must not run what the one before wrote there (that run's changes are in its diff).
            tag = "-next" if after is not None else ""
            self.usr = (usr_lower, os.path.join(self.run_dir, f"usr-up{tag}"),
                        os.path.join(self.run_dir, f"usr-wk{tag}")) if usr_lower else None
            env = {"PATH": _bwrap.PATH, "HOME": "/root", "HOSTNAME": HOSTNAME, **fx.env, **sb.env}
            if after is not None:
                _sandbox_fs.restore_system_links(self.root, self.tree, self.overlay)
            else:
                os.mkdir(self.root, 0o755)
                if self.overlay:
                    os.mkdir(work, 0o700)
                else:
                    fixtures.write_tree(self.tree, self.root, owner=ids)
            for d in (self.usr or ())[1:]:
                os.mkdir(d, 0o755)
            for d in (self.root, self.run_dir, *((work,) if self.overlay else ()), *(self.usr or ())[1:]):
                if ids:
                    os.chown(d, *ids)
            if payload is not None:
                fds.append(_memfd(payload))
                env["VERIFIRST_PAYLOAD_FD"] = str(fds[-1])
            os.chmod(self.root, 0o755)
            os.chmod(self.run_dir, 0o700)
            if self.admin and ids:
                fds.append(userns := _bwrap.admin_userns(ids, sb.limits["nproc"]))
            if not sb.unsafe_local and (seccomp := _seccomp.program_fd(ids)) is not None:
                fds.append(seccomp)
        except BaseException:
            _close(fds)
            self.release()
            raise
        self.t_copied = time.perf_counter()
        # with a pids cgroup the cgroup refuses the fork first (and counts it: limits_hit), not RLIMIT_NPROC
        rl = dict(sb.limits, nproc=sb.limits["nproc"] + NPROC_SLACK) if self.cgroup else sb.limits
        if sb.unsafe_local:
            env["HOME"] = os.path.join(self.root, "root")
            limits = [f"--{name}={value}" for name, value in _bwrap._pid1_limits(sb.limits)]
            args = ["/usr/bin/prlimit", *limits, "--", "/bin/bash", "-c", command]
            cwd = self.root
        else:
            etc = None if self.admin else str(_etc_dir(host / "etc"))
            # the loader's and NSS's files of the host (or image), not what a run before wrote to its /etc
            pristine = _pristine_etc(host / "etc") if after is not None and self.admin else ()
            args = _bwrap.argv(sb._bwrap, self.root, etc, command, env=env, hostname=HOSTNAME, lower=lower or None,
                               work=work if self.overlay else None, userns_fd=userns, seccomp_fd=seccomp,
                               usr=self.usr, usr_ro=self.usr_src, host_binds=img is None, binds=pristine,
                               rlimits=rl, cgroup_fds=self.cgroup.joins() if self.cgroup else (), sys=str(base / "sys"))
            env, cwd = {"PATH": _bwrap.PATH}, "/"
        cg_fds = list(self.cgroup.fds) if self.cgroup else []
        try:
            own = not sb.unsafe_local and sb._bwrap.kind == _launcher.KIND
            spawner = _spawner.spawner(ids, binary=args[0]) if own else None
            if spawner is not None:  # vf-sandbox's fork server (at ids as root)
                self.proc = spawner.popen(args, env, fds + cg_fds)
            else:  # bubblewrap: its pid 1 gets the limits and the cgroups from the wrapper
                args, kw = _bwrap.as_user(args, ids) if own or sb.unsafe_local else \
                    _bwrap.bwrap_wrapper(args, ids, rl, self.cgroup.joins() if self.cgroup else (),
                                         scratch=str(base))
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, env=env, cwd=cwd, pass_fds=fds + cg_fds,
                                             start_new_session=True, **kw)
        except BaseException:
            self.release()
            raise
        finally:
            _close(fds)
        self.deadline = time.monotonic() + sb.timeout_s
        self.out, self.err = bytearray(), bytearray()
        self.hashes = {id(self.out): hashlib.sha256(), id(self.err): hashlib.sha256()}
        self.seen = 0
        self.truncated = self.timed_out = self.flooded = self.memory_out = False
        # without a memory cgroup RLIMIT_AS holds per process only: the harness sums the run's
        self.watch_memory = not sb.unsafe_local and self.cgroup is None
        self.open_streams = 2

    def _end_turn(self) -> None:
        if self.queued:  # the turn this run took, let go once
            self.queued = False
            _TURNS.release()

    def release(self, files: bool = True) -> None:
        """Remove the run's cgroups and, with `files`, its files (its processes are gone).

        Args:
            files: False for a run kept for the next (keep=True).
        """
        if files and self.run_dir:  # first: its tmpfs pages are charged to the cgroup, which is then used again
            if self.private:
                _cgroup.unmount(self.run_dir)
            else:
                _sandbox_fs.remove_tree(self.run_dir)
        if files:  # its processes and files are gone: the next run's turn
            self._end_turn()
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None

    def over_memory(self) -> bool:
        """Whether the private memory (resident, not file-backed) of every process under the
        launcher, summed, is past memory_mb. Reads /proc: racy by MEMORY_POLL_S, not exact."""
        total, todo, page = 0, [self.proc.pid], os.sysconf("SC_PAGE_SIZE")
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/statm", "rb") as fh:
                    _, resident, shared = fh.read().split()[:3]
                total += (int(resident) - int(shared)) * page
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                        todo += [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue  # gone meanwhile
        return total > self.sb.limits["as_bytes"]

    def _limits_hit(self) -> list[str]:
        hit = self.cgroup.limits_hit() if self.cgroup else []
        hit += ["memory"] if self.memory_out else []
        if self.private:
            st = os.statvfs(self.run_dir)
            if st.f_bavail * st.f_frsize < SCRATCH_SLACK or st.f_favail < 64:
                hit.append("scratch")
        return hit

    def kill(self) -> None:
        try:
            pid = self.proc.pid
            if getattr(self.proc, "reaped", False):
                return  # the spawner reaped it (and its namespace died with it): the pid is not ours
            if getattr(self.proc, "leader", True):
                try:
                    os.killpg(pid, _signal.SIGKILL)
                except ProcessLookupError:  # not yet its group's leader (killed just after the start)
                    os.kill(pid, _signal.SIGKILL)
            else:  # pid 1 of the run's namespaces, in the fork server's group: its death ends them
                os.kill(pid, _signal.SIGKILL)
        except OSError:  # gone already, or never started (the spawner's error comes from wait)
            pass

    def take(self, which: bytearray, data: bytes) -> None:
        self.seen += len(data)
        self.hashes[id(which)].update(data)
        room = self.sb.output_limit - len(which)
        if len(data) > room:
            self.truncated = True
            data = data[:max(room, 0)]
        which += data
        if self.seen > self.sb.output_limit * OUTPUT_KILL_FACTOR and not self.flooded:
            self.flooded = True
            self.kill()

    def finish(self) -> RunResult:
        try:
            rc = self.proc.wait()
        except OSError:  # the spawner could not start it (Popen raises this at the start)
            self.release()
            raise
        t_ran = time.perf_counter()
        try:
            before = _sandbox_fs.fixture_snapshot(self.tree, self.skip)
            after = _sandbox_fs.snapshot(self.root, self.skip, upper=self.overlay)
            if self.overlay and not after.records:  # nothing written: the view is the fixture's
                fs = FsDiff([], [], [], before.truncated or after.truncated)
            else:
                view = _sandbox_fs.merged(before, after) if self.overlay else after
                fs = FsDiff(*_sandbox_fs.diff(before, view))
            if self.usr:
                _add_usr_changes(fs, self.usr[1], self.usr_src)
        finally:
            t_diffed = time.perf_counter()
            hit = self._limits_hit()
            self.release(files=not self.keep)
        t_end = time.perf_counter()
        sig = None
        if self.timed_out or self.flooded or self.memory_out:
            sig, rc = _signal.SIGKILL, -_signal.SIGKILL
        elif rc < 0:
            sig = -rc
        elif 128 < rc <= 128 + 64:
            sig = rc - 128  # the command (or bwrap's init reporting it) died by this signal
        ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
        return RunResult(
            stdout=self.out.decode("utf-8", "replace"), stderr=self.err.decode("utf-8", "replace"),
            exit_code=rc, timed_out=self.timed_out, signal=sig, truncated=self.truncated or self.flooded,
            fs_diff=fs, backend="unsafe-local" if self.sb.unsafe_local else self.sb._bwrap.kind, fixture=self.fx.name,
            stdout_sha256=self.hashes[id(self.out)].hexdigest(), stderr_sha256=self.hashes[id(self.err)].hexdigest(),
            limits_hit=hit,
            timings={"prepare_ms": ms(self.t0, self.t_copied), "exec_ms": ms(self.t_copied, t_ran),
                     "diff_ms": ms(t_ran, t_diffed), "cleanup_ms": ms(t_diffed, t_end),
                     "total_ms": ms(self.t0, t_end)})


LOADER_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf")


def _pristine_etc(src: Path) -> tuple[tuple[str, str], ...]:
    """(host path, sandbox path) read-only binds over a writable /etc: the loader's and NSS's files
    from `src` and an empty ld.so.preload, so nothing a run before wrote there loads into this one."""
    base, _ = _scratch_base()
    empty = base / "empty-file"
    if not empty.exists():
        empty.touch(0o644)
    return ((str(empty), "/etc/ld.so.preload"),) + tuple(
        (str(src / n), f"/etc/{n}") for n in LOADER_FILES if (src / n).exists() and not (src / n).is_symlink())


def _add_usr_changes(fs: FsDiff, upper: str, src: str) -> None:
    """What the run changed in its copy-on-write /usr (whose lower is `src`), added to `fs`."""
    up = _sandbox_fs.snapshot(upper, skip=(), upper=True)
    if not up.records:
        return
    host = _sandbox_fs.host_records(up, src)
    added, deleted, modified, truncated = _sandbox_fs.diff(host, _sandbox_fs.merged(host, up))
    for mine, theirs in ((fs.added, added), (fs.deleted, deleted), (fs.modified, modified)):
        mine.extend({**e, "path": "/usr" + e["path"]} for e in theirs)
    fs.truncated = fs.truncated or truncated


def _memfd(data: bytes) -> int:
    """A descriptor (a memfd, no path) to read `data` from, at offset 0."""
    fd = os.memfd_create("verifirst-payload", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as fh:
            fh.write(data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _drive(jobs: list[_Job]) -> None:
    """Read every job's output until its streams close; kill those past their deadline."""
    sel = selectors.DefaultSelector()
    try:
        for j in jobs:
            sel.register(j.proc.stdout, selectors.EVENT_READ, (j, j.out))
            sel.register(j.proc.stderr, selectors.EVENT_READ, (j, j.err))
        live, grace = set(jobs), {}
        while live:
            now = time.monotonic()
            for j in list(live):
                if not j.timed_out and now >= j.deadline:
                    j.timed_out = True
                    j.kill()
                    grace[j] = now + 2.0
                elif j.watch_memory and j not in grace and j.over_memory():
                    j.memory_out = True
                    j.kill()
                    grace[j] = now + 2.0
                if j in grace and now >= grace[j]:  # something kept the pipe open past the kill
                    for s in (j.proc.stdout, j.proc.stderr):
                        if not s.closed:
                            sel.unregister(s)
                            s.close()
                    live.discard(j)
            if not live:
                break
            wait = max(0.0, min(grace.get(j) or j.deadline for j in live) - now)
            for key, _ in sel.select(timeout=min(wait, MEMORY_POLL_S) if any(j.watch_memory for j in live) else wait):
                j, buf = key.data
                try:
                    data = os.read(key.fd, 65536)
                except OSError as exc:
                    if exc.errno == errno.EAGAIN:
                        continue
                    data = b""
                if data:
                    j.take(buf, data)
                    if j.flooded and j not in grace:
                        grace[j] = time.monotonic() + 2.0
                else:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    j.open_streams -= 1
                    if j.open_streams == 0:
                        live.discard(j)
    finally:
        sel.close()
        for j in jobs:
            for s in (j.proc.stdout, j.proc.stderr):
                if s and not s.closed:
                    s.close()
    for j in jobs:
        try:
            j.proc.wait(timeout=max(0.0, j.deadline - time.monotonic()) + 0.5)
        except subprocess.TimeoutExpired:
            j.timed_out = True
            j.kill()
        except OSError:
            pass  # never started: finish() raises it
