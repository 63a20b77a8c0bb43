"""Fixture entries from a task directory (files with their modes, directories, symlinks kept as
links and refused when they leave the tree), and the check of one `custom()` entry."""
from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.verifiers.bash._fixtures_tree import _Tree

TASK_DIR_LIMIT = 64 << 20  # bytes of file content a task directory may bring into a fixture


def _escapes(rel: str, target: str) -> bool:
    """Whether a relative link at `rel` (relative to a root) resolves above that root."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def _add(t: _Tree, path: str, content: str | bytes | dict, where: str) -> None:
    """One `custom()` entry into the tree; `where` names it in errors."""
    rel = path.strip("/")
    parts = rel.split("/")
    for k in range(1, len(parts)):
        above = t.items.get("/".join(parts[:k]))
        if above is not None and above.kind == "symlink":
            raise InputError(f"{path} lies under the symlink /{above.path}: writing it would follow the link",
                             field=where, expected="paths under directories, not under symlinks")
    if not isinstance(content, dict):
        if path.endswith("/"):
            t.dir(rel)
        else:
            t.file(rel, content)
        return
    mode = content.get("mode", 0o755 if content.get("dir") else 0o644)
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
        raise InputError(f"bad mode {mode!r}", field=f"{where}.mode", expected="an integer 0..0o7777, e.g. 0o755")
    if "symlink" in content:
        target = str(content["symlink"])
        if not target or _escapes(rel, target):
            raise InputError(f"symlink {path} -> {target!r} points above the fixture root",
                             field=f"{where}.symlink", expected="a target inside the fixture")
        if any(k.startswith(rel + "/") for k in t.items):
            raise InputError(f"symlink {path} would hide the entries under it", field=where,
                             expected="a path with nothing under it")
        t.symlink(rel, target)
    elif content.get("dir"):
        t.dir(rel, mode)
    elif "content" in content:
        data = content["content"]
        if not isinstance(data, (str, bytes)):
            raise InputError(f"content of {path} is {type(data).__name__}", field=f"{where}.content",
                             expected="text or bytes")
        t.file(rel, data, mode)
    else:
        raise InputError(f"entry {path} says neither content, symlink nor dir", field=where,
                         expected='{"content": ..., "mode": 0o755}, {"symlink": "target"} or {"dir": true}')


def _leaves_tree(rel: str, target: str, mount: str | None) -> bool:
    """Whether a link at `rel` in a tree mounted at `mount` points out of the tree. A relative
    target is resolved from the link's directory; an absolute one against the mount point
    (`downloads/l -> /home/test/f` in a tree mounted at /home stays inside). Without a mount
    point every absolute target leaves the tree."""
    if not os.path.isabs(target):
        return _escapes(rel, target)
    if mount is None:
        return True
    at = "/" + mount.strip("/")
    t = posixpath.normpath("/" + target.lstrip("/"))
    return at != "/" and t != at and not t.startswith(at + "/")


def read_task_dir(src: str | os.PathLike, exclude: tuple[str, ...] = (),
                  mount: str | None = None) -> dict[str, dict]:
    """A task directory as custom() entries: files with their modes, directories, and symlinks.

    Symlinks are kept as links (never followed, targets as written); one that leaves the tree
    is refused (see _leaves_tree), as is anything that is not a file, directory or symlink.

    Args:
        src: the directory to read.
        exclude: relative paths (as "a/b") left out, with everything under them.
        mount: where the tree is mounted in the fixture ("/home"); absolute link targets are
            resolved against it. None: absolute links are refused.

    Returns:
        {"rel/path": {"content": bytes, "mode": int} | {"symlink": target} | {"dir": True, "mode": int}}.

    Raises:
        InputError: naming the offending path.
    """
    root = Path(src)
    if not root.is_dir():
        raise InputError("task directory not found", path=str(root), expected="a directory")
    out: dict[str, dict] = {}
    total = 0
    stack = [(root, "")]
    while stack:
        d, rel = stack.pop()
        with os.scandir(d) as it:
            ents = sorted(it, key=lambda e: e.name)
        for ent in ents:
            r = f"{rel}/{ent.name}" if rel else ent.name
            if r in exclude:
                continue
            st = ent.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(ent.path)
                if _leaves_tree(r, target, mount):
                    where = f" mounted at {mount}" if mount and os.path.isabs(target) else ""
                    raise InputError(f"symlink points outside the task directory{where} ({target!r})",
                                     path=ent.path, expected="a link to something inside the task directory")
                out[r] = {"symlink": target}
            elif stat.S_ISDIR(st.st_mode):
                out[r] = {"dir": True, "mode": mode}
                stack.append((Path(ent.path), r))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > TASK_DIR_LIMIT:
                    raise InputError(f"task directory holds more than {TASK_DIR_LIMIT >> 20} MiB", path=ent.path)
                out[r] = {"content": Path(ent.path).read_bytes(), "mode": mode}
            else:
                raise InputError("not a file, directory or symlink", path=ent.path,
                                 expected="regular files, directories and symlinks")
    return out
