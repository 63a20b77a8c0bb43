"""A user's own Terraform tasks (folders or JSONL, suite "iac-tasks") and an organisation's policy
set (verifier option policy_dir): loading, bad input, every failing rule named, the example run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from verifirst import api
from verifirst import config, experiment
from verifirst.benchmarks.iac_tasks import load_tasks
from verifirst.core.data import to_suite
from verifirst.core.errors import InputError
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "iac_tasks"
TASKS, ORG = EXAMPLE / "tasks", EXAMPLE / "policies"
BACKENDS = ["python"] + (["terraform"] if find_terraform() else [])


@pytest.fixture(scope="module")
def suite():
    return load_tasks(TASKS)


def _copy_tasks(tmp_path) -> Path:
    dst = tmp_path / "tasks"
    shutil.copytree(TASKS, dst)
    return dst


# -- loading -------------------------------------------------------------------------------------

def test_task_folders_load_with_policies_reference_and_tfvars(suite):
    assert [it.id for it in suite.items] == ["job-queue", "log-bucket"]
    queue, bucket = suite.items
    assert "SQS queue" in queue.inputs["prompt"] and set(queue.inputs) == {"prompt"}
    assert queue.gold["files"] == {"terraform.tfvars": 'queue_name = "acme-jobs"\n'}
    assert [Path(p["path"]).name for p in bucket.gold["rego_policies"]] == ["policy.rego"]
    assert bucket.gold["rego_policy"].startswith("# The task's own check (Rego v1)")
    assert "aws_s3_bucket_versioning" in bucket.gold["reference"]


def test_jsonl_tasks_with_inline_and_file_policies(tmp_path):
    (tmp_path / "queue.rego").write_text((TASKS / "job-queue" / "policy.rego").read_text())
    inline = (TASKS / "log-bucket" / "policy.rego").read_text()
    lines = [{"id": "q", "prompt": "a queue", "policy": "queue.rego"},
             {"id": "b", "prompt": "a bucket", "policy": inline,
              "reference": (TASKS / "log-bucket" / "reference.tf").read_text()}]
    f = tmp_path / "tasks.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    s = load_tasks(f)
    assert [it.id for it in s.items] == ["q", "b"]
    assert s.items[0].gold["rego_policies"][0]["path"] == str(tmp_path / "queue.rego")
    assert s.items[1].gold["rego_policy"] == inline and "reference" in s.items[1].gold
    f.write_text(json.dumps(lines[0]) + "\n" + json.dumps({"id": "x", "prompt": "p"}) + "\n")
    with pytest.raises(InputError) as e:
        load_tasks(f)
    assert f"{f}:2" in str(e.value) and "'policy'" in str(e.value)


def test_python_api_data_accepts_a_task_directory():
    s = to_suite(str(TASKS) + "/")
    assert [it.id for it in s.items] == ["job-queue", "log-bucket"]
    assert s.items[0].gold["files"]


def test_suite_is_registered_for_experiment_files():
    exp = config.load(ROOT / "examples" / "iac_tasks.toml")
    exp.sections["suite"]["path"] = str(TASKS)
    assert [it.id for it in experiment.load_suite(exp).items] == ["job-queue", "log-bucket"]


# -- bad input: exit 2 naming file and line, nothing run ------------------------------------------

def test_task_folder_without_prompt(tmp_path):
    tasks = _copy_tasks(tmp_path)
    (tasks / "log-bucket" / "prompt.md").unlink()
    with pytest.raises(InputError) as e:
        load_tasks(tasks)
    assert str(tasks / "log-bucket" / "prompt.md") in str(e.value)


def test_task_policy_that_does_not_compile(tmp_path):
    tasks = _copy_tasks(tmp_path)
    bad = tasks / "job-queue" / "policy.rego"
    bad.write_text("package terraform.validation\n\nhas_queue {\n  q := \n}\n")
    with pytest.raises(InputError) as e:
        load_tasks(tasks)
    assert f"{bad}:4" in str(e.value) and "does not compile" in str(e.value)


def test_tfvars_that_does_not_parse(tmp_path):
    tasks = _copy_tasks(tmp_path)
    bad = tasks / "job-queue" / "variables.tfvars"
    bad.write_text('queue_name = "acme-jobs"\nretention = = 4\n')
    with pytest.raises(InputError) as e:
        load_tasks(tasks)
    assert f"{bad}:2" in str(e.value) and "does not parse" in str(e.value)


def test_org_policy_that_does_not_compile_or_is_missing(tmp_path):
    org = tmp_path / "org"
    shutil.copytree(ORG, org)
    (org / "extra.rego").write_text("package org.extra\n\ndeny[msg] {\n  msg := \n}\n")
    with pytest.raises(InputError) as e:
        TerraformVerifier(backend="python", policy_dir=str(org))
    assert f"{org / 'extra.rego'}:4" in str(e.value)
    with pytest.raises(InputError, match="policy directory not found"):
        TerraformVerifier(backend="python", policy_dir=str(tmp_path / "none"))


def test_cli_run_with_bad_tasks_exits_2_and_writes_nothing(tmp_path):
    from typer.testing import CliRunner

    from verifirst.cli import app

    tasks = _copy_tasks(tmp_path)
    (tasks / "job-queue" / "prompt.md").unlink()
    text = (ROOT / "examples" / "iac_tasks.toml").read_text()
    text = text.replace('path = "iac_tasks/tasks"', f'path = "{tasks}"').replace(
        'policy_dir = "iac_tasks/policies"', f'policy_dir = "{ORG}"').replace(
        'workdir = ".verifirst"', f'workdir = "{tmp_path / "wd"}"')
    exp = tmp_path / "exp.toml"
    exp.write_text(text)
    res = CliRunner().invoke(app, ["run", str(exp), "--run-dir", str(tmp_path / "run"), "--offline"])
    assert res.exit_code == 2, res.output
    assert "prompt.md" in res.output
    assert not (tmp_path / "run").exists()


# -- the organisation's policy set on every task ---------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_references_pass_task_and_org_policies(suite, backend):
    v = TerraformVerifier(backend=backend, policy_dir=str(ORG))
    v.preflight(suite.items)
    for it in suite.items:
        got = v.verify(it, it.gold["reference"])
        assert got.stage == T.PASS, (it.id, got.feedback)
        assert got.details["org_policy"]["failed_rules"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_failing_org_rule_is_named_v0_and_v1(suite, backend):
    v = TerraformVerifier(backend=backend, policy_dir=str(ORG))
    bucket = suite.items[1]
    bad = bucket.gold["reference"].replace('"acme-app-logs"', '"app-logs"').replace("owner", "team")
    got = v.verify(bucket, bad)
    assert got.stage == T.OPA_FAIL
    assert got.details["org_policy"]["failed_rules"] == ["naming.rego:org.naming.deny", "tags.rego:org.tags.deny"]
    assert "naming.rego rule deny: aws_s3_bucket.logs: bucket name app-logs does not start with acme-" in got.feedback
    assert "tags.rego rule deny: aws_s3_bucket.logs has no owner tag" in got.feedback


@pytest.mark.parametrize("backend", BACKENDS)
def test_task_policy_and_org_policy_fail_together(suite, backend):
    v = TerraformVerifier(backend=backend, policy_dir=str(ORG))
    queue = suite.items[0]
    bad = queue.gold["reference"].replace("345600", "60").replace("owner", "team")
    got = v.verify(queue, bad)
    assert got.stage == T.OPA_FAIL
    assert "has_queue" in got.feedback and "aws_sqs_queue.jobs has no owner tag" in got.feedback
    without_org = TerraformVerifier(backend=backend).verify(queue, bad)
    assert without_org.stage == T.OPA_FAIL and "owner tag" not in without_org.feedback


@pytest.mark.parametrize("backend", BACKENDS)
def test_task_tfvars_reach_the_plan(suite, backend):
    queue = suite.items[0]
    got = TerraformVerifier(backend=backend).verify(queue, queue.gold["reference"])
    assert got.stage == T.PASS, got.feedback
    after = next(r for r in got.details["plan"]["resource_changes"] if r["type"] == "aws_sqs_queue")["change"]["after"]
    assert after["name"] == "acme-jobs"


# -- the example through `verifirst run`, scripted models ------------------------------------------

def _answer(messages):
    text = json.dumps(messages)
    ref = "job-queue" if "SQS queue" in text else "log-bucket"
    cfg = (TASKS / ref / "reference.tf").read_text()
    if ref == "log-bucket":  # meets the task's policy, breaks the org's tag rule
        cfg = cfg.replace("owner", "team")
    return json_answer(reasoning="short", config=cfg)


def test_example_runs_through_verifirst_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example's paths are relative to the repository root
    exp = config.load(ROOT / "examples" / "iac_tasks.toml")
    exp.sections["experiment"]["workdir"] = str(tmp_path / "wd")
    exp.sections["verifier"]["options"]["backend"] = "python"
    exp.sections["tracking"]["enabled"] = False
    models = Models(task=scripted_lm(_answer, name="tasks-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Tag every resource with its owner."),
                                           role="reflection", name="tasks-refl"))
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
    rep = out.report
    assert sum(rep["splits"][s]["before"]["n"] for s in rep["splits"]) == 2
    rows = [json.loads(ln) for f in (tmp_path / "run").rglob("*.jsonl") for ln in f.read_text().splitlines()
            if ln.strip()]
    assert (tmp_path / "run" / "report.md").exists()
    assert any("tags.rego rule deny" in json.dumps(r) for r in rows), "the org rule reaches the feedback"
