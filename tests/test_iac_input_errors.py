"""Bad input on the IaC journey (suite "iac-tasks", verifier "terraform") through `verifirst run
--dry-run`: exit 2, the experiment file's line and the full field (or the data file's own line and
the field that led there), nothing written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.benchmarks.iac_tasks import load_tasks
from verifirst.cli import app
from verifirst.verifiers.terraform.verifier import TerraformVerifier

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "iac_tasks" / "tasks"
ORG = ROOT / "examples" / "iac_tasks" / "policies"

EXPERIMENT = """\
[experiment]
name = "iac-tasks"
workdir = "{workdir}"

[suite]
name = "iac-tasks"
path = "{tasks}"

[program]
name = "iac-generator"
options = {{ strategy = "cot" }}

[verifier]
name = "terraform"
options = {{ {verifier_options} }}

[splits]
ratios = [0.5, 0.0, 0.5]
no_val = true

[optimizer]
name = "gepa"
max_metric_calls = 8

[models]
task = "local"
reflection = "local"
"""
SUITE_PATH_LINE, VERIFIER_OPTIONS_LINE = 7, 15


def _dry_run(tmp_path: Path, tasks, verifier_options: str = 'backend = "python"'):
    """Write the experiment, run it dry; (result, experiment path)."""
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT.format(workdir=tmp_path / "wd", tasks=tasks, verifier_options=verifier_options))
    assert exp.read_text().splitlines()[SUITE_PATH_LINE - 1].startswith("path =")
    assert exp.read_text().splitlines()[VERIFIER_OPTIONS_LINE - 1].startswith("options =")
    res = CliRunner().invoke(app, ["run", str(exp), "--dry-run", "--offline"])
    return res, exp


def _refused(res, tmp_path: Path) -> str:
    """The one-line error of a refused run; exit 2, no traceback, nothing written."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "wd").exists()
    return " ".join(res.output.split())  # the console wraps long lines


def _copy_tasks(tmp_path: Path) -> Path:
    dst = tmp_path / "tasks"
    shutil.copytree(TASKS, dst)
    return dst


# -- 1. an error from inside the verifier or the loader names the experiment file, line and field --

def test_unknown_backend_names_the_experiment_line_and_full_field(tmp_path):
    res, exp = _dry_run(tmp_path, TASKS, 'backend = "autox"')
    out = _refused(res, tmp_path)
    assert f"{exp}:{VERIFIER_OPTIONS_LINE} [verifier.options.backend]: unknown backend 'autox'" in out


def test_missing_verifier_policy_file_names_the_option(tmp_path):
    res, exp = _dry_run(tmp_path, TASKS, f'backend = "python", policy = "{tmp_path / "nope.rego"}"')
    out = _refused(res, tmp_path)
    assert f"{exp}:{VERIFIER_OPTIONS_LINE} [verifier.options.policy]: policy file not found" in out
    assert str(tmp_path / "nope.rego") in out


def test_verifier_policy_file_not_utf8_is_named_at_its_line(tmp_path):
    bad = tmp_path / "org.rego"
    bad.write_bytes(b"package x\n# caf\xe9\ndeny[msg] { msg := \"a\" }\n")
    res, exp = _dry_run(tmp_path, TASKS, f'backend = "python", policy = "{bad}"')
    out = _refused(res, tmp_path)
    assert f"{bad}:2: policy file is not UTF-8" in out and "UnicodeDecodeError" not in out
    assert f"read through verifier.options.policy at {exp}:{VERIFIER_OPTIONS_LINE}" in out


def test_task_rego_error_keeps_its_file_and_line_and_names_suite_path(tmp_path):
    tasks = _copy_tasks(tmp_path)
    bad = tasks / "job-queue" / "policy.rego"
    bad.write_text("package terraform.validation\n\nhas_queue {\n  q := \n}\n")
    out = _refused(_dry_run(tmp_path, tasks)[0], tmp_path)
    assert f"{bad}:4: Rego does not compile" in out
    assert f"read through suite.path at {tmp_path / 'exp.toml'}:{SUITE_PATH_LINE}" in out


def test_org_policy_error_keeps_its_file_and_line_and_names_policy_dir(tmp_path):
    org = tmp_path / "org"
    shutil.copytree(ORG, org)
    (org / "extra.rego").write_text("package org.extra\n\ndeny[msg] {\n  msg := \n}\n")
    res, exp = _dry_run(tmp_path, TASKS, f'backend = "python", policy_dir = "{org}"')
    out = _refused(res, tmp_path)
    assert f"{org / 'extra.rego'}:4:" in out
    assert f"read through verifier.options.policy_dir at {exp}:{VERIFIER_OPTIONS_LINE}" in out


# -- 2. a relative path is read against the experiment file's folder, and named as tried -------------------------------

def test_relative_suite_path_not_found_names_the_path_tried_in_the_files_folder(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative path is the experiment file's, wherever verifirst runs
    res, exp = _dry_run(tmp_path, "tasks_ex/tasks")
    out = _refused(res, tmp_path)
    assert f"{exp}:{SUITE_PATH_LINE} [suite.path]: tasks path not found: '{tmp_path / 'tasks_ex' / 'tasks'}'" in out


def test_relative_policy_dir_not_found_names_the_path_tried_in_the_files_folder(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res, exp = _dry_run(tmp_path, TASKS, 'backend = "python", policy_dir = "nope"')
    out = _refused(res, tmp_path)
    assert f"{exp}:{VERIFIER_OPTIONS_LINE} [verifier.options.policy_dir]: policy directory not found" in out
    assert str(tmp_path / "nope") in out and str(elsewhere / "nope") not in out


def test_relative_paths_resolve_against_the_experiment_files_folder(tmp_path, monkeypatch):
    shutil.copytree(TASKS, tmp_path / "t" / "tasks")
    shutil.copytree(ORG, tmp_path / "t" / "org")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res, _ = _dry_run(tmp_path, "t/tasks", 'backend = "python", policy_dir = "t/org"')
    assert res.exit_code == 0, res.output


def test_the_shipped_example_runs_from_any_directory(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from verifirst.cli import app

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "iac_tasks.toml"), "--dry-run", "--offline"])
    assert res.exit_code == 0, res.output


# -- 3. a task file that is not UTF-8 is named, at its line -----------------------------------------

@pytest.mark.parametrize("name,what", [("job-queue/prompt.md", "task prompt"),
                                       ("log-bucket/reference.tf", "reference configuration"),
                                       ("log-bucket/policy.rego", "policy file")])
def test_task_file_not_utf8_is_named_with_its_line(tmp_path, name, what):
    tasks = _copy_tasks(tmp_path)
    (tasks / name).write_bytes(b"first line\n\xff second\n")
    out = _refused(_dry_run(tmp_path, tasks)[0], tmp_path)
    assert f"{tasks / name}:2: {what} is not UTF-8 (byte 0xff)" in out
    assert "suite.options" not in out and "codec" not in out


# -- 4. JSONL tasks: unknown keys and wrong types named -------------------------------------------

@pytest.mark.parametrize("record,expected", [
    ({"id": "a", "prompt": "p", "policy": "q.rego", "reference": {"a": 1}},
     "[reference]: field 'reference' is dict"),
    ({"id": 5, "prompt": "p", "policy": "q.rego"}, "[id]: field 'id' is int 5, not a string"),
    ({"id": "a", "prompt": "p", "polcy": "q.rego"}, "[polcy]: unknown field 'polcy' (did you mean 'policy'?)"),
    ({"id": "a", "prompt": "p"}, "[policy]: missing field 'policy'"),
])
def test_jsonl_task_with_wrong_type_or_unknown_key(tmp_path, record, expected):
    shutil.copy(TASKS / "job-queue" / "policy.rego", tmp_path / "q.rego")
    good = {"id": "ok", "prompt": "a queue", "policy": "q.rego"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    out = _refused(_dry_run(tmp_path, tmp_path / "tasks.jsonl")[0], tmp_path)
    assert f"{tmp_path / 'tasks.jsonl'}:2 {expected}" in out
    assert f"read through suite.path at {tmp_path / 'exp.toml'}:{SUITE_PATH_LINE}" in out


def test_jsonl_duplicate_id_names_both_lines(tmp_path):
    shutil.copy(TASKS / "job-queue" / "policy.rego", tmp_path / "q.rego")
    rec = json.dumps({"id": "a", "prompt": "p", "policy": "q.rego"})
    (tmp_path / "tasks.jsonl").write_text(f"{rec}\n\n{rec}\n")
    out = _refused(_dry_run(tmp_path, tmp_path / "tasks.jsonl")[0], tmp_path)
    assert f"{tmp_path / 'tasks.jsonl'}:3 [id]: duplicate task id 'a' (first on line 1)" in out


def test_jsonl_reference_path_is_refused_not_read(tmp_path):
    shutil.copy(TASKS / "job-queue" / "policy.rego", tmp_path / "q.rego")
    rec = {"id": "a", "prompt": "p", "policy": "q.rego", "reference": "../x/reference.tf"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(rec) + "\n")
    out = _refused(_dry_run(tmp_path, tmp_path / "tasks.jsonl")[0], tmp_path)
    assert f"{tmp_path / 'tasks.jsonl'}:1 [reference]: reference configuration does not parse" in out
    assert "not a path (a path is never read)" in out


def test_a_reference_that_does_not_parse_is_named_at_its_line(tmp_path):
    """It was kept as it was: the deceptive-repair check then read no resources from it, silently."""
    tasks = _copy_tasks(tmp_path)
    ref = tasks / "log-bucket" / "reference.tf"
    lines = ref.read_text().splitlines()
    lines.insert(2, "= oops")  # line 3: neither an argument nor a block
    ref.write_text("\n".join(lines) + "\n")
    out = _refused(_dry_run(tmp_path, tasks)[0], tmp_path)
    assert f"{ref}:3: reference configuration does not parse" in out
    assert f"read through suite.path at {tmp_path / 'exp.toml'}:{SUITE_PATH_LINE}" in out
    good = {"id": "ok", "prompt": "a queue", "policy": str(tasks / "job-queue" / "policy.rego"),
            "reference": (tasks / "job-queue" / "reference.tf").read_text()}
    bad = dict(good, id="bad", reference=ref.read_text())
    (tmp_path / "tasks.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    out = _refused(_dry_run(tmp_path, tmp_path / "tasks.jsonl")[0], tmp_path)
    assert f"{tmp_path / 'tasks.jsonl'}:2 [reference]: reference configuration does not parse" in out
    assert "(its line 3)" in out


# -- 5. verifier option values checked when the verifier is built ---------------------------------

@pytest.mark.parametrize("option,expected", [
    ('check_deception = "false"', "true | false"),
    ('check_deception = "yes"', "true | false"),
    ('policy_mode = "bogus"', "auto | conftest | iac-eval | defaults"),
    ("checkov_timeout_s = -1", "a number > 0"),
    ('checkov_timeout_s = "5"', "a number > 0"),
    ("validate_first = 1", "true | false"),
    ("schema = 5", "a path string"),
])
def test_verifier_option_value_refused_naming_the_option(tmp_path, option, expected):
    res, exp = _dry_run(tmp_path, TASKS, f'backend = "python", {option}')
    out = _refused(res, tmp_path)
    name = option.split(" =")[0]
    assert f"{exp}:{VERIFIER_OPTIONS_LINE} [verifier.options.{name}]:" in out
    assert f"(expected: {expected})" in out


def test_verifier_policy_mode_option_reaches_iac_tasks():
    items = load_tasks(TASKS).items
    assert all("policy_mode" not in it.gold for it in items)  # the loader leaves it to the verifier
    for mode in ("iac-eval", "defaults"):
        v = TerraformVerifier(backend="python", policy_mode=mode)
        assert {p.mode for it in items for p in v._item_policies(it)} == {mode}


def test_policy_mode_the_tasks_set_wins_over_the_verifier_option():
    items = load_tasks(TASKS, policy_mode="defaults").items
    v = TerraformVerifier(backend="python", policy_mode="iac-eval")
    assert {p.mode for it in items for p in v._item_policies(it)} == {"defaults"}


def test_a_schema_that_does_not_load_says_which_option_led_there(tmp_path):
    """The verifier's preflight loads the schema; its error keeps the schema file's own line and
    says which option of the experiment file named it (it named only the schema file)."""
    bad = tmp_path / "schema.json"
    bad.write_text("{not json\n")
    res, exp = _dry_run(tmp_path, TASKS, f'backend = "python", schema = "{bad}"')
    out = _refused(res, tmp_path)
    assert f"{bad}:1: not valid JSON" in out
    assert f"read through verifier.options.schema at {exp}:{VERIFIER_OPTIONS_LINE}" in out
