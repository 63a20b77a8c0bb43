"""Install time and venv size of verifirst: the base install (no compiler needed), base + the
`iac` extra, and the full install `make demo` uses (`local`, `iac`, `retrieval`).

Each install goes into a fresh venv from a copy of this checkout, with pip's cache as it is on
this machine (the registries reachable). The base install runs with no C/C++ compiler on PATH.

    python benchmarks/perf/install.py [--out F] [--skip-full]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# C/C++ compilers and linkers under their usual names (with target prefixes and version suffixes).
COMPILER = re.compile(r"^(?:[\w.-]+-)?(?:cc|gcc|g\+\+|c\+\+|cpp|clang|clang\+\+|clang-cl|tcc|icc|icx|nvcc|ld"
                      r"|ld\.\w+)(?:-[\d.]+)?$")
FULL_EXTRAS = "local,iac,retrieval"  # what `make install` (and so `make demo`) installs


def copy_checkout(dest: Path, src: Path = ROOT) -> Path:
    """Copy the checkout's tracked and untracked-but-not-ignored files (what a clone plus local
    edits holds, without .venv or build output), so pip builds nothing inside the checkout.

    Args:
        dest: the directory to create.
        src: the checkout.
    """
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=src, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        s = src / rel
        if s.is_file():  # a deleted-but-tracked file is listed too
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, dest / rel)
    return dest


def no_compiler_bin(dest: Path, path: str | None = None) -> Path:
    """A directory of symlinks to every program on PATH except C/C++ compilers and linkers: a
    machine without a toolchain, for the rest as this one.

    Args:
        dest: the directory to create.
        path: the PATH to copy (default: this process's).
    """
    dest.mkdir(parents=True, exist_ok=True)
    for d in (path or os.environ.get("PATH", "")).split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            target = dest / entry.name
            if COMPILER.match(entry.name) or target.exists() or target.is_symlink():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                target.symlink_to(os.path.realpath(entry.path))
    return dest


@dataclass
class Install:
    """One `pip install` into a venv: how long it took, what pip built from source, which wheels
    came from wheels built on this machine before (plain `linux_*` tags: never on PyPI), its output."""

    seconds: float
    built: list[str]
    returncode: int
    output: str
    locally_built_cached: list[str] = field(default_factory=list)


def fresh_venv(venv: Path, base_python: str | None = None) -> Path:
    """Create a venv (no system site-packages) and return its python.

    Args:
        venv: the directory to create.
        base_python: the interpreter to build it from (default: this one's base interpreter).
    """
    base = base_python or getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
    return venv / "bin" / "python"


def env_with_path(path: str) -> dict:
    """This environment with PATH replaced and compiler overrides (CC, CXX, ...) removed."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CC", "CXX", "CPP", "LD", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
           and not k.startswith("PYTEST_")}
    env["PATH"] = path
    return env


def pip_install(python: Path, target: str, env: dict, timeout: float = 1800) -> Install:
    """`python -m pip install TARGET` (not editable), timed.

    Args:
        python: the venv's interpreter.
        target: a path or a path with extras, e.g. "/tmp/src[iac]".
        env: the environment (its PATH decides which tools pip's builds find).
        timeout: seconds before the install counts as failed.
    """
    t0 = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-input", "--progress-bar", "off", target],
                          env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    built = sorted(set(re.findall(r"Building wheel for (\S+)", out)))
    cached = sorted(set(re.findall(r"Using cached (\S+?)-\d\S*-linux_\w+\.whl", out)))
    return Install(round(seconds, 1), built, proc.returncode, out, cached)


def tree_bytes(path: Path) -> int:
    """Disk use of a directory tree (allocated blocks, like `du`), symlinks not followed."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            total += st.st_blocks * 512
    return total


def installed(python: Path, env: dict) -> set[str]:
    """Normalized names of the distributions installed in a venv."""
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return {line.split("==")[0].lower().replace("_", "-") for line in out.splitlines() if "==" in line}


def _step(name: str, python: Path, venv: Path, target: str, env: dict) -> dict:
    r = pip_install(python, target, env)
    if r.returncode != 0:
        raise SystemExit(f"install.py: {name}: pip install {target} exited {r.returncode}:\n{r.output[-3000:]}")
    return {"install_s": r.seconds, "built_from_source": r.built,
            "locally_built_wheels_reused": r.locally_built_cached, "venv_mb": round(tree_bytes(venv) / 2**20),
            "distributions": len(installed(python, env))}


def measure(skip_full: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="verifirst-install-"))
    try:
        src = copy_checkout(tmp / "src")
        bindir = no_compiler_bin(tmp / "nocc")
        venv = tmp / "base"
        py = fresh_venv(venv)
        env = env_with_path(f"{venv / 'bin'}{os.pathsep}{bindir}")
        assert shutil.which("cc", path=env["PATH"]) is None
        runs = {"base": _step("base", py, venv, str(src), env)}
        runs["base"]["has_llama_cpp"] = "llama-cpp-python" in installed(py, env)
        runs["base+iac"] = _step("base+iac", py, venv, f"{src}[iac]", env)
        if not skip_full:
            venv_full = tmp / "full"
            py_full = fresh_venv(venv_full)
            # With the compiler on PATH: on a machine without pip's cached wheel llama-cpp-python builds.
            env_full = env_with_path(f"{venv_full / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
            runs[f"full [{FULL_EXTRAS}]"] = _step("full", py_full, venv_full, f"{src}[{FULL_EXTRAS}]", env_full)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"benchmark": "install", "command": "python benchmarks/perf/install.py",
            "pip_cache": "warm (this machine's pip cache; registries reachable); base runs with no compiler "
                         "on PATH",
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    ap.add_argument("--skip-full", action="store_true", help="only the base and base+iac installs")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    emit(measure(a.skip_full), started, a.out, as_json=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
