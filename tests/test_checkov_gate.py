"""The checkov scanner gate: SCANNER_FAIL with check ids, a clean config passes, off by default,
a crash is a verifier error, a missing checkov a preflight error. One checkov worker serves the module."""
from __future__ import annotations

import os
import stat

import pytest
from typer.testing import CliRunner

from verifirst import api
from verifirst.cli import app
from verifirst.core.errors import InputError, VerifirstError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.checkov import CheckovError, find_checkov, interpreter_of
from verifirst.verifiers.terraform.verifier import DEFAULT_GATES, TerraformVerifier

ALL_GATES = ["validate", "plan", "opa", "checkov"]
OPEN = """resource "aws_s3_bucket" "data" {
  bucket = "data"
}

resource "aws_security_group" "ssh" {
  name = "ssh"
  ingress {
    description = "ssh"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}
"""
CLEAN = """resource "aws_s3_bucket" "data" {
  bucket = "data"
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_security_group" "ssh" {
  name = "ssh"
  ingress {
    description = "ssh from the office"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/8"]
  }
}
"""
CHECKS = ["CKV_AWS_24", "CKV_AWS_21"]  # SSH open to the world; S3 versioning


@pytest.fixture(scope="module")
def gated():
    """The python backend (fast) with the scanner gate; the worker starts in preflight."""
    v = TerraformVerifier(backend="python", gates=ALL_GATES)
    v.preflight()
    return v


@pytest.fixture(scope="module")
def verdicts(gated):
    limited = TerraformVerifier(backend="python", gates=ALL_GATES, checkov_checks=CHECKS)
    skipping = TerraformVerifier(backend="python", gates=ALL_GATES, checkov_checks=",".join(CHECKS),
                                 checkov_skip_checks=["CKV_AWS_24"])
    return {"open": gated.verify_config(OPEN), "open_limited": limited.verify_config(OPEN),
            "clean_limited": limited.verify_config(CLEAN), "open_skipping": skipping.verify_config(OPEN)}


def test_checkov_is_installed_where_make_puts_it():
    binary = find_checkov()
    assert binary, "make install-test installs checkov in .tools/checkov"
    assert interpreter_of(binary), "a pip-installed checkov runs one long-lived worker"


def test_flagged_config_is_scanner_fail_with_ids_addresses_and_guidelines(verdicts):
    v = verdicts["open"]
    assert v.stage == T.SCANNER_FAIL and not v.passed and v.score == 0.0
    assert v.error_classes == [T.SCANNER]
    by_id = {e.message.split(":")[0]: e for e in v.errors}
    assert {"CKV_AWS_24", "CKV_AWS_21"} <= set(by_id)
    assert by_id["CKV_AWS_24"].address == "aws_security_group.ssh"
    assert by_id["CKV_AWS_21"].address == "aws_s3_bucket.data"
    assert "CKV_AWS_24" in v.feedback and "scanner (checkov)" in v.feedback
    assert "Ensure no security groups allow ingress from 0.0.0.0:0 to port 22" in v.feedback
    assert v.details["checkov"]["passed"] > 0 and v.timings["checkov_ms"] > 0


def test_check_list_limits_the_gate_and_a_clean_config_passes(verdicts):
    limited = verdicts["open_limited"]
    assert limited.stage == T.SCANNER_FAIL
    assert sorted(e.message.split(":")[0] for e in limited.errors) == sorted(CHECKS)
    clean = verdicts["clean_limited"]
    assert clean.stage == T.PASS and clean.passed, clean.feedback
    assert clean.details["checkov"]["failed"] == [] and clean.details["checkov"]["passed"] == 2
    skipping = verdicts["open_skipping"]
    assert [e.message.split(":")[0] for e in skipping.errors] == ["CKV_AWS_21"]


def test_gate_is_off_by_default():
    v = TerraformVerifier(backend="python")
    assert v.gates == DEFAULT_GATES and T.SCANNER_FAIL not in v.stages
    verdict = v.verify_config(OPEN)
    assert verdict.stage == T.PASS and "checkov_ms" not in verdict.timings and "checkov" not in verdict.details
    assert T.SCANNER_FAIL in TerraformVerifier(backend="python", gates=ALL_GATES).stages


def test_scanner_stage_sits_after_the_policy_in_the_funnel():
    assert T.STAGES.index(T.OPA_FAIL) < T.STAGES.index(T.SCANNER_FAIL) < T.STAGES.index(T.PASS)


def test_a_policy_failure_stops_before_the_scanner(gated):
    needs_table = ('package p\ndefault has_table = false\nhas_table {\n'
                   '    input.planned_values.root_module.resources[_].type == "aws_dynamodb_table"\n}\n')
    v = gated.verify_config(OPEN, policy=needs_table)
    assert v.stage == T.OPA_FAIL and "checkov_ms" not in v.timings


def test_bad_gate_options_are_input_errors():
    with pytest.raises(InputError, match="unknown gate"):
        TerraformVerifier(backend="python", gates=["validate", "plan", "tfsec"])
    with pytest.raises(InputError, match="include validate and plan"):
        TerraformVerifier(backend="python", gates=["checkov"])
    with pytest.raises(InputError, match="checkov_checks"):
        TerraformVerifier(backend="python", gates=ALL_GATES, checkov_checks=[24])


def test_missing_checkov_is_a_preflight_error_naming_the_fix(tmp_path):
    v = TerraformVerifier(backend="python", gates=ALL_GATES, checkov=str(tmp_path / "no-checkov"))
    with pytest.raises(VerifirstError, match="make install-test") as exc:
        v.preflight()
    assert exc.value.exit_code == 2 and "venv of its own" in str(exc.value)
    TerraformVerifier(backend="python", checkov=str(tmp_path / "no-checkov")).preflight()  # gate off: fine


def test_cli_gates_option(tmp_path):
    (tmp_path / "main.tf").write_text(OPEN)
    runner = CliRunner()
    res = runner.invoke(app, ["verify", "terraform", str(tmp_path), "--backend", "python"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["verify", "terraform", str(tmp_path), "--backend", "python",
                              "--gates", "validate,plan,opa,checkov"])
    assert res.exit_code == 1 and "SCANNER_FAIL" in res.output and "CKV_AWS_24" in res.output
    res = runner.invoke(app, ["verify", "terraform", str(tmp_path), "--backend", "python", "--gates", "plan,lint"])
    assert res.exit_code == 2 and "[--gates]: got 'lint'" in res.output and "'checkov'" in res.output


def test_checkov_timeout_is_a_verifier_error_not_a_verdict():
    v = TerraformVerifier(backend="python", gates=ALL_GATES, checkov_timeout_s=0.01)
    with pytest.raises(CheckovError, match="timed out"):
        v.verify_config(OPEN)


def test_checkov_that_is_not_a_python_script_runs_as_a_command(tmp_path):
    wrapper = tmp_path / "checkov"
    wrapper.write_text(f'#!/bin/sh\nexec "{find_checkov()}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    assert interpreter_of(str(wrapper)) is None
    v = TerraformVerifier(backend="python", gates=ALL_GATES, checkov=str(wrapper), checkov_checks=CHECKS)
    verdict = v.verify_config(OPEN)
    assert verdict.stage == T.SCANNER_FAIL
    assert sorted(e.message.split(":")[0] for e in verdict.errors) == sorted(CHECKS)
    assert os.path.basename(verdict.details["checkov"]["failed"][0]["file"]) == "main.tf"


def test_gate_runs_through_verifirst_run_and_its_stage_reaches_the_report(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    from verifirst import config, experiment
    from verifirst.lm import Models
    from verifirst.lm.testing import json_answer, scripted_lm

    root = Path(__file__).resolve().parents[1]
    tasks = root / "examples" / "iac_tasks" / "tasks"

    def answer(messages):  # each task's own reference: both meet the task and org policies
        ref = "job-queue" if "SQS queue" in json.dumps(messages) else "log-bucket"
        return json_answer(reasoning="short", config=(tasks / ref / "reference.tf").read_text())

    monkeypatch.chdir(root)  # the example's paths are relative to the repository root
    exp = config.load(root / "examples" / "iac_tasks.toml")
    exp.sections["experiment"]["workdir"] = str(tmp_path / "wd")
    exp.sections["verifier"]["options"].update(backend="python", gates=ALL_GATES, checkov_checks=["CKV_AWS_18"])
    exp.sections["tracking"]["enabled"] = False
    models = Models(task=scripted_lm(answer, name="ckv-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Log bucket access."),
                                           role="reflection", name="ckv-refl"))
    rep = api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None).report
    assert rep["stage_order"] == list(T.STAGES)
    stages = {k: n for s in rep["splits"].values() for k, n in s["before"]["stages"].items() if n}
    assert stages == {T.SCANNER_FAIL: 1, T.PASS: 1}  # the bucket lacks access logging (CKV_AWS_18)
    rows = [ln for f in (tmp_path / "run").rglob("*.jsonl") for ln in f.read_text().splitlines()]
    assert any("CKV_AWS_18" in ln for ln in rows), "the check id reaches the feedback"
