"""Fixture file systems the sandbox copies fresh for every command.

Written from the published descriptions of the NL2SH-ALFA (icalfa) and InterCode-Bash Docker
images: same paths, contents, modes and old timestamps, built deterministically in Python.
Where a peer setup script fails on GNU tools (BSD `date -v`, `mkdir -d`, 31 February) we build
what the script meant: the file exists with the intended age.

A fixture is a list of entries; `build(name)` returns it (cached per process) and
`materialize(name)` writes it once under ~/.cache/verifirst/fixtures/<name>-<hash>/.

The entries and their tree live in _fixtures_tree, the built-in file systems in
_fixtures_builtin, the reading of a task directory in _fixtures_task_dir; this module holds
the registry (build, custom, from_dir, from_spec, ensure) and writes fixtures, and re-exports
the names callers use.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from verifirst.core.atomic import publish_dir
from verifirst.core.errors import InputError
# the entries, built-in file systems and task-directory reader; re-exported (callers and tests use them here)
from verifirst.verifiers.bash._fixtures_builtin import (_BUILDERS, _fs1, _fs2, _fs3, _fs5,  # noqa: F401
                                                        _icalfa_docker_dir, _make, _peer_image_files, _skeleton)
from verifirst.verifiers.bash._fixtures_task_dir import (TASK_DIR_LIMIT, _add, _escapes, _leaves_tree,  # noqa: F401
                                                         read_task_dir)
from verifirst.verifiers.bash._fixtures_tree import (ARCHIVE_EPOCH, DAY, MOUNT_POINTS, Ago, Entry,  # noqa: F401
                                                     Fixture, _gzip, _Tree, build_time, echo, echo_e,
                                                     resolve_mtime, utc)

SYSADMIN = ("sysadmin",)  # built-in fixtures that run in the sandbox's sysadmin mode
NAMES = tuple(_BUILDERS)
_CACHE: dict[str, Fixture] = {}


def names() -> list[str]:
    return list(NAMES) + sorted(k for k in _CACHE if k not in _BUILDERS)


def build(name: str) -> Fixture:
    """The fixture called `name` (built once per process)."""
    if name in _CACHE:
        return _CACHE[name]
    if name not in _BUILDERS:
        raise InputError(f"unknown fixture {name!r}", field="fixture", expected=", ".join(names()))
    body, env, desc = _BUILDERS[name]
    fx = Fixture(name, body(), dict(env), desc, sysadmin=name in SYSADMIN)
    _CACHE[name] = fx
    return fx


def custom(name: str, files: dict[str, str | bytes | dict], env: dict[str, str] | None = None,
           base: str = "empty", users: list[dict] | None = None, image: dict | None = None) -> Fixture:
    """Register a fixture: `base` plus `files`.

    Args:
        name: a new fixture name.
        files: {"/path": content}; a path ending in / is a directory. A content may also be a
            dict: {"content": ..., "mode": 0o755} (a file with its mode), {"symlink": target}
            or {"dir": True, "mode": 0o700}. A symlink may not point above the fixture root,
            and no path may lie under a symlink (writing it would follow the link).
        env: environment variables added to the base fixture's.
        base: the fixture to start from.
        users: accounts the image carries ([{"name", "uid", "home", "shell", "sudo", "groups"}],
            _accounts.parse_users): their /etc lines, sudo rights and home directories; a fixture
            with users runs in sysadmin mode.
        image: the task image its commands see under /usr and /etc (images.check_image), else
            the base's (the host's).
    """
    from verifirst.verifiers.bash._accounts import parse_users
    from verifirst.verifiers.bash.images import check_image

    declared = parse_users(users)
    image = check_image(image) if image is not None else build(base).image
    if not name or name in _BUILDERS:
        raise InputError(f"fixture name {name!r} is empty or built in", field="fixture", expected="a new name")
    t = _Tree()
    for e in build(base).entries:
        t.items[e.path] = e
    for path, content in sorted(files.items()):
        if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/"):
            raise InputError(f"fixture path {path!r} must be absolute without '..'", field="files")
        _add(t, path, content, where=f"files[{path!r}]")
    for u in declared:  # a home of its own, unless the files give one
        home = u.home.lstrip("/")
        parts = home.split("/")
        for i in range(1, len(parts)):
            t.items.setdefault("/".join(parts[:i]), Entry("/".join(parts[:i]), "dir", 0o755))
        t.items.setdefault(home, Entry(home, "dir", 0o755))
        for path, e in list(t.items.items()):
            if path == home or path.startswith(home + "/"):
                t.items[path] = dataclasses.replace(e, uid=u.uid)
    fx = Fixture(name, t.entries(), dict(build(base).env, **(env or {})), f"{base} + {len(files)} files",
                 sysadmin=build(base).sysadmin or bool(declared), users=declared, image=image)
    _CACHE[name] = fx
    return fx


def resolve(fixture: str | Fixture) -> Fixture:
    return fixture if isinstance(fixture, Fixture) else build(fixture)


def cache_root() -> Path:
    from verifirst.verifiers.bash.images import cache_base

    return cache_base() / "fixtures"


def write_tree(fx: Fixture, root: str | os.PathLike, owner: tuple[int, int] | None = None) -> None:
    """Write the fixture under `root` (which must exist): content, modes, mtimes; chown if asked."""
    root = os.fspath(root)
    dirs: list[tuple[str, Entry]] = []
    for e in fx.entries:
        p = os.path.join(root, e.path)
        if e.kind == "dir":
            os.mkdir(p)
            dirs.append((p, e))
        elif e.kind == "file":
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                if e.data:
                    os.write(fd, e.data)
                if owner:
                    os.fchown(fd, owner[0] + e.uid, owner[1] + e.uid)
                os.fchmod(fd, e.mode)
            finally:
                os.close(fd)
            t = resolve_mtime(e.mtime)
            os.utime(p, (t, t))
            continue
        else:
            os.symlink(e.data.decode(), p)
        if owner:  # a declared user's uid is its own inside the sysadmin namespace (owner + uid here)
            os.lchown(p, owner[0] + e.uid, owner[1] + e.uid)
    for p, e in reversed(dirs):  # children first, so creating them does not bump parents
        os.chmod(p, e.mode)
        t = resolve_mtime(e.mtime)
        os.utime(p, (t, t))


def materialize(name: str | Fixture) -> Path:
    """The fixture written once under the cache, keyed by its content hash; returns its root."""
    fx = resolve(name)
    dest = cache_root() / f"{fx.name}-{fx.content_hash[:16]}"
    return publish_dir(dest, lambda tmp: write_tree(fx, tmp), prefix=f".{fx.name}.")


# ---- fixtures from a task directory (read by _fixtures_task_dir) ---------------------------

def from_dir(name: str, src: str | os.PathLike, dest: str = "/", *, base: str = "empty",
             env: dict[str, str] | None = None, exclude: tuple[str, ...] = (),
             extra: dict[str, str | bytes | dict] | None = None, users: list[dict] | None = None,
             image: dict | None = None) -> Fixture:
    """Register a fixture: `base` plus the task directory `src` placed at `dest` (modes,
    executables and symlinks kept; see read_task_dir) plus `extra` entries as in custom().

    Args:
        name: a new fixture name.
        src: the task directory.
        dest: where its contents go in the fixture ("/app", "/home").
        base: the fixture to start from.
        env: environment variables added to the base's.
        exclude: relative paths of `src` left out (the task's prompt, its gold script).
        extra: more entries, {"/abs/path": content} as custom() takes them.
        users, image: as custom() takes them.
    """
    prefix = "/" + dest.strip("/")
    files: dict[str, str | bytes | dict] = {}
    if prefix != "/":
        files[prefix + "/"] = {"dir": True, "mode": 0o755}
    for rel, spec in read_task_dir(src, exclude, mount=prefix).items():
        files[(prefix.rstrip("/") + "/" + rel)] = spec
    files.update(extra or {})
    return custom(name, files, env=env, base=base, users=users, image=image)


def from_spec(name: str, spec: dict) -> Fixture:
    """Register a fixture from a JSON-able spec: {"src", "dest", "base", "exclude", "extra", "users",
    "image"} (from_dir) or {"files", "base", "users", "image"} (custom).

    Args:
        name: the fixture name.
        spec: the arguments, as a task loader records them in gold["fixture_spec"].
    """
    if "src" in spec:
        return from_dir(name, spec["src"], spec.get("dest", "/"), base=spec.get("base", "empty"),
                        exclude=tuple(spec.get("exclude", ())), extra=spec.get("extra"), users=spec.get("users"),
                        image=spec.get("image"))
    return custom(name, spec.get("files", {}), base=spec.get("base", "empty"), users=spec.get("users"),
                  image=spec.get("image"))


def ensure(fixture: str | Fixture, spec: dict | None = None) -> str | Fixture:
    """The fixture, registered first from `spec` when this process has not built it (a worker
    process receives items whose fixtures were registered in the parent).

    Args:
        fixture: the fixture name (or a Fixture, returned as is).
        spec: see from_spec(), or None.
    """
    if isinstance(fixture, Fixture) or not spec or fixture in _CACHE or fixture in _BUILDERS:
        return fixture
    from_spec(fixture, spec)
    return fixture
