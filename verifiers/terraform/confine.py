"""Verifier inputs stay inside their configuration directory.

A configuration file that is a symlink (or sits under one) resolving outside its directory is
refused, naming the file, and never read: its content would reach the feedback, the LM and
MLflow. A configuration that names a file or a module source outside its directory in a
literal (`file("/etc/shadow")`, `templatefile("../../x")`, `source = "/opt/mod"`) is refused
the same way before either backend runs: terraform would read it from the host. Expressions
the pre-check cannot see through (a variable holding a path) are refused by the pure-Python
evaluator when it reads them (verifiers/terraform/_hcl_eval.py); confine_eval.py runs that
evaluation before either backend. This module imports none of the analysis (the evaluator
imports it).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from verifirst.core.errors import InputError

PATH_FUNCS = ("file", "filebase64", "filemd5", "filesha1", "filesha256", "filesha512", "filebase64sha256",
              "filebase64sha512", "fileexists", "templatefile", "fileset")
# a call of one of them whose first argument starts with a quoted string: that string (to its
# first interpolation, which may be a directory prefix such as ${path.module})
_CALL = re.compile(r'\b(' + "|".join(PATH_FUNCS) + r')\s*\(\s*"((?:[^"\\\n]|\\.)*)"')
_SOURCE = re.compile(r'^\s*source\s*=\s*"([^"\n]*)"', re.M)
_DIR_PREFIX = re.compile(r"^\$\{\s*path\.(?:module|root|cwd)\s*\}")


class OutsideConfiguration(InputError):
    """A file or path that resolves outside the configuration directory: refused, never read."""


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether `path`, every symlink on the way resolved, lies inside `root` (resolved too).

    Args:
        path: the file.
        root: the configuration directory.
    """
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def check_inside(path: str | os.PathLike, root: str | os.PathLike) -> None:
    """Refuse a file that resolves outside `root` (a symlink out of it), naming the file only.

    Args:
        path: the file about to be read.
        root: the configuration directory.

    Raises:
        OutsideConfiguration: naming the file; its content is never read.
    """
    if not is_inside(path, root):
        raise OutsideConfiguration(
            f"{Path(path).name} is a symlink that resolves outside the configuration directory: refused, not read",
            path=str(path), expected="configuration files inside the directory (copy the file in, not a link)")


def read_inside(path: str | os.PathLike, root: str | os.PathLike) -> str:
    """The text of a file that lies inside `root` (else OutsideConfiguration, nothing read).

    Args:
        path: the file.
        root: the configuration directory.
    """
    check_inside(path, root)
    return Path(path).read_text()


def _escapes(literal: str) -> bool:
    """Whether a literal path (as written, `${path.module}/` prefix allowed) leaves its directory."""
    rest = _DIR_PREFIX.sub(".", literal, count=1)
    rest = rest.split("${", 1)[0]  # up to the first interpolation: what the literal fixes
    if rest.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", rest):
        return True
    depth = 0
    for part in re.split(r"[\\/]+", rest):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def outside_references(files: dict[str, str]) -> list[tuple[str, int, str]]:
    """(file, line, what) for every literal file path or local module source that leaves the
    configuration directory (absolute, `~`, or `..` above it).

    Args:
        files: {file name: HCL text}.
    """
    out = []
    for name, text in files.items():
        if not isinstance(text, str):
            continue
        for m in _CALL.finditer(text):
            if _escapes(m.group(2)):
                out.append((name, _line(text, m.start()), f'{m.group(1)}("{m.group(2)}")'))
        for m in _SOURCE.finditer(text):
            src = m.group(1)
            local = src.startswith(("/", "~", "./", "../", ".\\", "..\\")) or re.match(r"^[A-Za-z]:[\\/]", src)
            if local and _escapes(src):
                out.append((name, _line(text, m.start()), f'module source "{src}"'))
    return out


# the message _hcl_eval gives a path function's read outside the directory (confine_eval reads it)
OUTSIDE_MARK = "is outside the configuration directory"


def check_references(files: dict[str, str]) -> None:
    """Refuse a configuration that reads a file or a module from outside its directory.

    Args:
        files: {file name: HCL text}.

    Raises:
        OutsideConfiguration: naming the file, the line and the path as written.
    """
    found = outside_references(files)
    if found:
        name, line, what = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise OutsideConfiguration(f"{what} reads outside the configuration directory{more}: refused",
                                   path=name, line=line,
                                   expected="paths relative to the configuration, inside it (e.g. "
                                            '"${path.module}/files/x.txt")')
