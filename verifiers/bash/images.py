"""Task images: the root file system a task's commands see under /usr and /etc, instead of the
host's, as a benchmark's container image gives its scripts (the tools it carries, its
/etc/os-release, its package database).

A fixture names one with `image`:

    {"debian": {"packages": ["rename"], "suite": "bookworm"}}   # built once per machine, cached
    {"rootfs": "/srv/images/alpine-tools"}                       # a directory of the user's own

A Debian image is built by mmdebstrap (variant minbase plus the packages, from the host's apt
sources) into the cache (`$VERIFIRST_CACHE/images`, else `~/.cache/verifirst/images`), named by the
digest of its recipe, so a second use is free; `verifirst doctor` lists the images built. A rootfs
directory must hold a merged /usr (bin, sbin and lib as links into usr, or absent) and an /etc.
The run's /usr is the image's (copy-on-write as for the host's, read-only where that cannot be
made), its curated /etc is made from the image's /etc, and a sysadmin run gets the image's
accounts and package database. The fixture's own files stay the run's root.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from verifirst.core.errors import InputError

__all__ = ["check_image", "rootfs", "built_images", "images_dir"]

_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_SUITE = re.compile(r"[a-z][a-z0-9-]{1,30}")
BUILD_TIMEOUT_S = 900


def cache_base() -> Path:
    """verifirst's cache directory: $VERIFIRST_CACHE, else $XDG_CACHE_HOME/verifirst, else
    ~/.cache/verifirst (fixtures and images keep their own folders in it)."""
    return Path(os.environ.get("VERIFIRST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "verifirst"))


def images_dir() -> Path:
    """Where built images are cached."""
    return cache_base() / "images"


def check_image(spec: object, where: str = "image") -> dict | None:
    """The image spec, checked: {"debian": {"packages": [...], "suite": "..."}} or {"rootfs": DIR}.

    Args:
        spec: as a fixture spec gives it (None: the host's).
        where: the field name errors carry.
    """
    if spec is None:
        return None
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in ("debian", "rootfs"):
        raise InputError(f"{where} must be {{\"debian\": {{...}}}} or {{\"rootfs\": DIR}}", field=where,
                         expected='{"debian": {"packages": ["rename"]}} or {"rootfs": "/path/to/rootfs"}')
    if "rootfs" in spec:
        d = spec["rootfs"]
        if not isinstance(d, str) or not os.path.isabs(d):
            raise InputError(f"{where}.rootfs must be an absolute directory path, not {d!r}", field=f"{where}.rootfs")
        root = Path(d)
        if not (root / "usr").is_dir() or not (root / "etc").is_dir():
            raise InputError(f"{where}.rootfs {d} holds no usr/ and etc/ directories", field=f"{where}.rootfs",
                             expected="a root file system with a merged /usr and an /etc")
        for name in ("bin", "sbin", "lib", "lib64"):
            p = root / name
            if p.exists() and not p.is_symlink():
                raise InputError(f"{where}.rootfs {d}: /{name} is a directory, not a link into /usr",
                                 field=f"{where}.rootfs", expected="a merged /usr (usrmerge)")
        return {"rootfs": str(root.resolve())}
    deb = spec["debian"]
    if not isinstance(deb, dict) or set(deb) - {"packages", "suite"}:
        raise InputError(f"{where}.debian takes packages and suite", field=f"{where}.debian",
                         expected='{"packages": ["rename"], "suite": "bookworm"}')
    pkgs, suite = deb.get("packages", []), deb.get("suite", "bookworm")
    if not isinstance(pkgs, list) or not all(isinstance(p, str) and _PACKAGE.fullmatch(p) for p in pkgs):
        raise InputError(f"{where}.debian.packages must be Debian package names, not {pkgs!r}",
                         field=f"{where}.debian.packages", expected='["rename", "tree"]')
    if not isinstance(suite, str) or not _SUITE.fullmatch(suite):
        raise InputError(f"{where}.debian.suite {suite!r} is not a suite name", field=f"{where}.debian.suite",
                         expected="bookworm")
    return {"debian": {"packages": sorted(set(pkgs)), "suite": suite}}


def _digest(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def rootfs(spec: dict) -> Path:
    """The image's root directory, built first when it is a Debian image not built yet.

    Args:
        spec: a check_image() result.

    Raises InputError when mmdebstrap is missing or the build fails (naming its last lines).
    """
    if "rootfs" in spec:
        return Path(spec["rootfs"])
    deb = spec["debian"]
    home = images_dir() / f"debian-{deb['suite']}-{_digest(spec)}"
    if (home / "ready").exists():
        return home / "root"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same image
        if not (home / "ready").exists():
            _build(home, deb)
    return home / "root"


def _build(home: Path, deb: dict) -> None:
    tool = shutil.which("mmdebstrap")
    if tool is None:
        raise InputError("building a Debian image needs mmdebstrap (apt-get install mmdebstrap)",
                         field="image.debian", expected="mmdebstrap on PATH, or an image rootfs directory")
    root = home / "root"
    shutil.rmtree(root, ignore_errors=True)
    args = [tool, "--variant=minbase", "--quiet", "--mode=" + ("root" if os.geteuid() == 0 else "unshare")]
    if deb["packages"]:
        args.append("--include=" + ",".join(deb["packages"]))
    try:
        p = subprocess.run(args + [deb["suite"], str(root)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InputError(f"building the Debian image took over {BUILD_TIMEOUT_S} s", field="image.debian") from None
    if p.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise InputError(f"mmdebstrap could not build the image (exit {p.returncode}): "
                         f"{(p.stderr or p.stdout).strip()[-600:]}", field="image.debian")
    (home / "recipe.json").write_text(json.dumps(deb, sort_keys=True))
    (home / "ready").write_text("")


def built_images() -> list[dict]:
    """The Debian images in the cache: their recipe, size in MiB and path."""
    out = []
    for home in sorted(images_dir().glob("debian-*")):
        if (home / "ready").exists():
            try:
                recipe = json.loads((home / "recipe.json").read_text())
            except (OSError, ValueError):
                recipe = {}
            size = sum(f.stat().st_size for f in (home / "root").rglob("*") if f.is_file() and not f.is_symlink())
            out.append({"path": str(home / "root"), "recipe": recipe, "mib": round(size / (1 << 20), 1)})
    return out
