"""The built-in IaC packs beyond AWS (issue 36): Google Cloud, Azure and Kubernetes, ten tasks each.

Every reference passes validate -> plan -> its Rego intent on both backends (python, and terraform
with the schema provider, offline); every counterexample (the reference with one plausible mistake)
validates and plans but fails its intent; the stored plans agree; each pack runs through
`verifirst run` with scripted models.
"""
from __future__ import annotations

import difflib
import json
import re

import pytest

from verifirst import api, config, experiment
from verifirst.benchmarks import iac_pack
from verifirst.core.errors import InputError
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier

PROVIDERS = ("google", "azurerm", "kubernetes")
BACKENDS = ["python"] + (["terraform"] if find_terraform() else [])
ROOT = iac_pack.DATA_DIR.parents[1]
_TYPE_RE = re.compile(r'^\s*(?:resource|data)\s+"([a-z0-9_]+)"', re.M)


@pytest.fixture(scope="module", params=PROVIDERS)
def pack(request):
    return request.param, iac_pack.load_pack(provider=request.param)


def _policy_valid(policy: str, plan: dict):
    regopy = pytest.importorskip("regopy")
    interp = regopy.Interpreter()
    interp.add_module("policy", policy)
    interp.set_input_term(json.dumps(plan))
    return json.loads(str(interp.query("data." + iac_pack.POLICY_PACKAGE)))["expressions"][0].get("valid")


# -- loading ---------------------------------------------------------------------------------------

def test_each_pack_has_ten_tasks_of_its_own_provider(pack):
    provider, suite = pack
    assert suite.name == f"iac-pack-{provider}" and len(suite.items) == 10
    assert suite.meta["schema"] == str(iac_pack.schema_path(provider))
    assert f"/{provider}/" in suite.meta["schema"], "the provider's shipped schema, not the AWS one"
    for it in suite.items:
        assert it.inputs["prompt"].strip() and it.gold["intent"].strip()
        assert it.meta["schema"] == suite.meta["schema"] and it.meta["source"] == "builtin-pack"
        types = set(_TYPE_RE.findall(it.gold["reference"]))
        assert types and all(t.startswith(provider + "_") for t in types), (it.id, types)
        assert "default valid := false" in it.gold["rego_policy"]


def test_the_aws_pack_is_unchanged_by_the_provider_option():
    aws = iac_pack.load_pack()
    assert aws.name == "iac-pack" and len(aws.items) == 25
    assert aws.meta["schema"] == str(iac_pack.SCHEMA_PATH)
    assert [it.id for it in iac_pack.load_pack(provider="aws").items] == [it.id for it in aws.items]


def test_unknown_provider_is_refused_naming_the_packs():
    with pytest.raises(InputError) as e:
        iac_pack.load_pack(provider="datadog")
    assert "'datadog'" in str(e.value) and "google | azurerm | kubernetes" in str(e.value)


def test_unknown_provider_in_an_experiment_file_is_exit_2_naming_its_line(tmp_path):
    from typer.testing import CliRunner

    from verifirst.cli import app

    text = (ROOT / "examples" / "iac_google.toml").read_text()
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if "provider =" in ln)
    bad = tmp_path / "exp.toml"
    bad.write_text(text.replace('provider = "google"', 'provider = "datadog"'))
    res = CliRunner().invoke(app, ["run", str(bad), "--run-dir", str(tmp_path / "run"), "--dry-run"])
    assert res.exit_code == 2, res.output
    assert f"exp.toml:{line}" in res.output and "'datadog'" in res.output and "kubernetes" in res.output
    assert not (tmp_path / "run").exists()


def test_counterexample_is_one_small_edit_of_the_reference(pack):
    _, suite = pack
    for it in suite.items:
        diff = [ln for ln in difflib.unified_diff(it.gold["reference"].splitlines(),
                                                   it.gold["counterexample"].splitlines(), lineterm="", n=0)
                if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        assert 0 < len(diff) <= 8, (it.id, diff)


# -- the intents on the stored plans (real terraform + schema provider) ------------------------------

def test_stored_plans_reference_valid_counterexample_not(pack):
    provider, suite = pack
    for it in suite.items:
        ref = iac_pack.stored_plan(it.id, "reference", provider=provider)
        bad = iac_pack.stored_plan(it.id, "counterexample", provider=provider)
        assert _policy_valid(it.gold["rego_policy"], ref) is True, it.id
        assert _policy_valid(it.gold["rego_policy"], bad) is False, it.id
        changed = {r["type"] for r in ref["resource_changes"]}
        assert all(t.startswith(provider + "_") for t in changed) and changed, it.id


# -- both backends -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_references_pass_and_counterexamples_fail_their_intent(pack, backend):
    provider, suite = pack
    v = TerraformVerifier(backend=backend)
    for it in suite.items:
        ok = v.verify(it, it.gold["reference"])
        assert ok.stage == T.PASS and ok.passed is True and ok.backend == backend, (it.id, ok.feedback)
        assert f"/{provider}/" in ok.details["schema"], (it.id, ok.details["schema"])
        bad = v.verify(it, it.gold["counterexample"])
        assert bad.stage == T.OPA_FAIL and bad.passed is False, (it.id, bad.stage, bad.feedback)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kubernetes_intents_accept_the_unversioned_resource_names(backend):
    # kubernetes_deployment and kubernetes_deployment_v1 are the same object: either answer is right
    suite = iac_pack.load_pack(provider="kubernetes")
    v = TerraformVerifier(backend=backend)
    renamed = 0
    for it in suite.items:
        if "_v1\"" not in it.gold["reference"] or "autoscaler" in it.id:
            continue
        cfg = re.sub(r'(kubernetes_[a-z_]+)_v1\b', r"\1", it.gold["reference"])
        cfg = cfg.replace("kubernetes_daemon_set", "kubernetes_daemonset")
        got = v.verify(it, cfg)
        assert got.stage == T.PASS, (it.id, got.feedback)
        renamed += 1
    assert renamed >= 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_misspelt_resource_type_fails_validate_not_the_intent(backend):
    it = iac_pack.load_pack(provider="google").by_id()["compute-shielded-vm"]
    got = TerraformVerifier(backend=backend).verify(
        it, it.gold["reference"].replace("google_compute_instance", "google_compute_instnce"))
    assert got.stage == T.VALIDATE_FAIL and got.passed is False, got.feedback


# -- through `verifirst run`, scripted models --------------------------------------------------------

def _scripted_models(suite):
    """The task model answers each prompt with the task's reference (even tasks) or its
    counterexample (odd ones), so the run has both verdicts to report."""
    by_prompt = [(json.dumps(it.inputs["prompt"])[1:-1], it, n) for n, it in enumerate(suite.items)]

    def answer(messages):
        text = json.dumps(messages)
        for needle, it, n in by_prompt:
            if needle in text:
                return json_answer(reasoning="short",
                                   config=it.gold["reference" if n % 2 == 0 else "counterexample"])
        return json_answer(reasoning="short", config=suite.items[0].gold["reference"])

    return Models(task=scripted_lm(answer, name="pack-task"),
                  reflection=scripted_lm(lambda m: json_answer(new_instruction="Meet every stated requirement."),
                                         role="reflection", name="pack-refl"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_example_experiment_runs_the_pack(provider, tmp_path):
    exp = config.load(ROOT / "examples" / f"iac_{provider}.toml")
    assert exp.suite["name"] == "iac-builtin" and exp.suite["options"] == {"provider": provider}
    suite = experiment.load_suite(exp)
    assert suite.name == f"iac-pack-{provider}" and len(suite.items) == 10
    exp.sections["experiment"]["workdir"] = str(tmp_path / "wd")
    exp.sections["verifier"]["options"]["backend"] = "python"
    exp.sections["optimizer"]["max_metric_calls"] = 4
    exp.sections["tracking"]["enabled"] = False
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=_scripted_models(suite),
                  echo=lambda m: None)
    rep = out.report
    assert sum(rep["splits"][s]["before"]["n"] for s in rep["splits"]) == 10
    before = [rep["splits"][s]["before"] for s in rep["splits"]]
    assert sum(b["pass"] for b in before) == 5, before  # the five references; the counterexamples fail
    assert sum(b["inconclusive"] for b in before) == 0, before
    assert (tmp_path / "run" / "report.md").exists()
    rows = [json.loads(ln) for f in (tmp_path / "run").rglob("*.jsonl") for ln in f.read_text().splitlines()
            if ln.strip()]
    text = json.dumps(rows)
    assert "OPA_FAIL" in text and "PASS" in text


# -- shipped with the package --------------------------------------------------------------------------

def test_wheel_ships_every_pack_file(tmp_path):
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    names = set(zipfile.ZipFile(next(tmp_path.glob("verifirst-*.whl"))).namelist())
    for provider in PROVIDERS:
        folder = iac_pack.pack_dir(provider)
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        assert len(files) == 60, (provider, len(files))  # ten tasks: task.json, reference.tf, counterexample.tf, policy.rego, two plans
        for f in files:
            assert "verifirst/benchmarks/" + f.relative_to(ROOT / "benchmarks").as_posix() in names, f
