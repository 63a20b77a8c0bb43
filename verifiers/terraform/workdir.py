"""A configuration's files: read from text, a file, a directory or a dict; written to a fresh
work directory for terraform, with the local modules it calls staged beside them."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform.confine import read_inside

_BACKEND_RE = re.compile(r'\b(backend\s+"[^"]*"|cloud)\s*\{')


def _strip_blocks(text: str, rx: re.Pattern) -> str:
    """Remove `backend "x" {...}` / `cloud {...}` (they need init and a network)."""
    while True:
        m = rx.search(text)
        if not m:
            return text
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        text = text[:m.start()] + text[i + 1:]


def read_config(source: str | os.PathLike | dict) -> dict[str, str]:
    """{filename: text} from HCL text, a .tf file, a directory of .tf files, or a dict."""
    if isinstance(source, dict):
        files = {str(k): str(v) for k, v in source.items()}
    elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                      and len(source) < 4096 and os.path.exists(source)):
        p = Path(source)
        if p.is_dir():  # a file that is a symlink out of the directory is refused, never read
            files = {f.name: read_inside(f, p) for f in sorted(p.iterdir())
                     if f.suffix in (".tf", ".tfvars") or f.name.endswith(".tf.json")}
            if not files:
                raise InputError("no .tf files in directory", path=str(p), expected="*.tf files")
        else:
            files = {p.name if p.suffix == ".tf" else "main.tf": read_inside(p, p.absolute().parent)}
    elif isinstance(source, str):
        files = {"main.tf": source}
    else:
        raise InputError(f"config of type {type(source).__name__}", field="candidate",
                         expected="HCL text, a .tf path, a directory or {name: text}")
    for name in list(files):
        if _BACKEND_RE.search(files[name]):
            files[name] = _strip_blocks(files[name], _BACKEND_RE)
    return files


def write_workdir(files: dict[str, str], extra: dict[str, str] | None = None,
                  parent: str | None = None) -> str:
    d = tempfile.mkdtemp(prefix="vf-tf-", dir=parent)
    for name, text in {**files, **(extra or {})}.items():
        safe = os.path.basename(name)
        if not safe or safe.startswith("."):
            raise InputError("bad config file name", field=name, expected="a plain file name like main.tf")
        Path(d, safe).write_text(text)
    return d


def config_dir(source) -> str | None:
    """The directory a configuration source was read from (None for text or a dict): where its
    local modules and the files it reads live."""
    if isinstance(source, (str, os.PathLike)) and (isinstance(source, os.PathLike) or (
            "\n" not in source and len(source) < 4096)) and os.path.exists(source):
        p = Path(source)
        return str(p if p.is_dir() else p.absolute().parent)
    return None


_LOCAL_SOURCE_RE = re.compile(r'^\s*"?source"?\s*[=:]\s*"(\.\.?/[^"\n]*)"', re.M)
MAX_STAGED_FILES = 2000  # files and bytes past which staging stops (terraform then reports what is missing)
MAX_STAGED_BYTES = 64 << 20


def local_module_sources(files: dict[str, str]) -> list[str]:
    """The local module sources ("./x", "../x") a configuration's files call."""
    return sorted({m for t in files.values() if isinstance(t, str) for m in _LOCAL_SOURCE_RE.findall(t)})


VENDORED = (".terraform", "modules")  # where terraform init leaves the modules it installed


def _vendored_path(rel: str) -> bool:
    """Whether a directory (relative to the configuration's) is .terraform or lies in
    .terraform/modules: the vendored modules are staged, the rest of .terraform (providers) is not."""
    parts = os.path.normpath(rel).split(os.sep)
    return parts[:1] == [VENDORED[0]] and (len(parts) == 1 or parts[1] == VENDORED[1])


_NOT_STAGED = (".tf", ".tf.json", ".tfvars", ".tfvars.json")


def _stage_root_files(workdir: str, root: str) -> tuple[int, int]:
    """Copy the configuration directory's own other files (what its file() and templatefile() read,
    policy.json beside main.tf) into the work directory: regular files only, the configuration's
    files already written there kept. (count, bytes) staged."""
    staged = size = 0
    for f in sorted(os.listdir(root)):
        src, dst = os.path.join(root, f), os.path.join(workdir, f)
        if f.startswith(".") or f.endswith(_NOT_STAGED) or ".tfstate" in f or os.path.islink(src) \
                or not os.path.isfile(src) or os.path.exists(dst):
            continue  # configuration and variable files are the verifier's to write; a state file would be read
        staged, size = staged + 1, size + os.path.getsize(src)
        if staged > MAX_STAGED_FILES or size > MAX_STAGED_BYTES:
            break
        shutil.copyfile(src, dst)
    return staged, size


def stage_modules(workdir: str, files: dict[str, str], base_dir: str | None) -> bool:
    """Copy the configuration directory's files and subdirectories (its local modules, what they
    read, and the modules `terraform init` vendored in .terraform/modules) into the work directory,
    regular files only and none outside base_dir; True when there was something to stage (the
    caller then runs `terraform get`, which needs no network for local or vendored modules; the
    configuration's own other files are copied whatever it calls).

    Args:
        workdir: terraform's work directory, the configuration's own files already in it.
        files: the configuration's files (their local module sources decide whether to stage).
        base_dir: the configuration's directory (None: text, nothing to stage).
    """
    if not base_dir:
        return False
    root = os.path.realpath(base_dir)
    staged, size = _stage_root_files(workdir, root)
    vendored = os.path.isfile(os.path.join(base_dir, *VENDORED, "modules.json"))
    if not (local_module_sources(files) or vendored):
        return False
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        in_dot_terraform = os.path.normpath(rel) == VENDORED[0]
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)) and (
            vendored and _vendored_path(os.path.join(rel, d)) if d.startswith(".") or in_dot_terraform
            else True))
        if in_dot_terraform:
            continue  # .terraform's own files (its lock, its state) stay out
        if rel == ".":
            continue
        os.makedirs(os.path.join(workdir, rel), exist_ok=True)
        for f in filenames:
            src = os.path.join(dirpath, f)
            if os.path.islink(src) or not os.path.isfile(src):
                continue  # a link could lead out of the configuration's directory
            staged, size = staged + 1, size + os.path.getsize(src)
            if staged > MAX_STAGED_FILES or size > MAX_STAGED_BYTES:
                return True
            shutil.copyfile(src, os.path.join(workdir, rel, f))
    return True
