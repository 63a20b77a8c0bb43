"""Policies mean what their authors mean (issue 36): a user's `--policy` follows conftest's
conventions (deny / violation / warn sets of messages, `package main` or a named package, Rego v0
and v1); IaC-Eval's reading only for IaC-Eval intents; a policy with no rule the verifier reads
is refused, naming what was looked for."""
from __future__ import annotations

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.opa import Policy
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier, cli_verify_terraform

BUCKET = 'resource "aws_s3_bucket" "b" {\n  bucket = "logs"\n}\n'
QUEUE = 'resource "aws_sqs_queue" "q" {\n  name = "q"\n}\n'
V0 = '''package {pkg}

deny[msg] {{
  r := input.resource_changes[_]
  r.type == "aws_s3_bucket"
  msg := sprintf("S3 bucket %s is not allowed", [r.address])
}}

warn[msg] {{
  r := input.resource_changes[_]
  r.type == "aws_sqs_queue"
  msg := "queues are discouraged"
}}
'''
V1 = '''package {pkg}

import rego.v1

deny contains msg if {{
  some r in input.resource_changes
  r.type == "aws_s3_bucket"
  msg := sprintf("S3 bucket %s is not allowed", [r.address])
}}

violation contains {{"msg": "no buckets, please"}} if {{
  some r in input.resource_changes
  r.type == "aws_s3_bucket"
}}
'''
POLICIES = [(V0, "main"), (V0, "terraform"), (V1, "main"), (V1, "org.storage")]
IDS = ["v0-main", "v0-named", "v1-main", "v1-named"]


@pytest.mark.parametrize("text,pkg", POLICIES, ids=IDS)
def test_deny_fails_what_it_denies_with_its_messages(text, pkg, tmp_path):
    pol = tmp_path / "p.rego"
    pol.write_text(text.format(pkg=pkg))
    v = TerraformVerifier(backend="python", policy=str(pol)).verify_config(BUCKET)
    assert v.passed is False and v.stage == T.OPA_FAIL
    assert "S3 bucket aws_s3_bucket.b is not allowed" in v.feedback
    assert all(e.cls == T.POLICY for e in v.errors)
    if text is V1:
        assert "no buckets, please" in v.feedback
    ok = TerraformVerifier(backend="python", policy=str(pol)).verify_config(QUEUE)
    assert ok.passed is True
    if text is V0:
        assert any("queues are discouraged" in w for w in ok.details["warnings"])


def test_cli_policy_flag_denies(tmp_path, capsys):
    (tmp_path / "main.tf").write_text(BUCKET)
    pol = tmp_path / "p.rego"
    pol.write_text(V1.format(pkg="main"))
    assert cli_verify_terraform(str(tmp_path), policy=str(pol), backend="python") == 1
    assert "is not allowed" in capsys.readouterr().out


def test_a_policy_with_no_rule_the_verifier_reads_is_refused(tmp_path):
    pol = tmp_path / "p.rego"
    pol.write_text('package main\n\nallow_all := true\n\nnames[n] {\n  n := input.resource_changes[_].name\n}\n')
    with pytest.raises(InputError) as e:
        TerraformVerifier(backend="python", policy=str(pol))
    assert "no rule the verifier reads" in str(e.value) and "deny" in str(e.value)
    assert "iac-eval" in str(e.value)


def test_iac_eval_intents_keep_their_reading():
    """An item's IaC-Eval intent (no conftest rules) is still read the IaC-Eval way."""
    intent = 'package terraform.validation\n\nhas_bucket {\n  input.resource_changes[_].type == "aws_s3_bucket"\n}\n'
    p = Policy(intent)
    assert p.mode == "iac-eval"
    assert Policy(intent, mode="iac-eval", strict=True).mode == "iac-eval"  # asked for by name


def test_defaults_policies_stay_as_documented():
    p = Policy("package x\n\nimport rego.v1\n\ndefault ok := false\n\nok if {\n  true\n}\n", strict=True)
    assert p.mode == "defaults"


def test_conftest_mode_named_without_conftest_rules_is_refused():
    with pytest.raises(InputError):
        Policy("package x\n\nimport rego.v1\n\ndefault ok := false\n", mode="conftest")


GOOGLE_POLICY = '''package main

import rego.v1

deny contains msg if {
  some r in input.resource_changes
  r.type == "google_storage_bucket"
  not r.change.after.uniform_bucket_level_access
  msg := sprintf("%s must use uniform bucket-level access", [r.address])
}
'''
GCS = 'resource "google_storage_bucket" "b" {\n  name     = "b"\n  location = "US"\n}\n'


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=pytest.mark.skipif(
    find_terraform() is None, reason="no terraform binary"))])
def test_a_policy_on_a_google_plan(backend, tmp_path):
    pol = tmp_path / "p.rego"
    pol.write_text(GOOGLE_POLICY)
    v = TerraformVerifier(backend=backend, policy=str(pol))
    r = v.verify_config(GCS)
    assert r.stage == T.OPA_FAIL and "google_storage_bucket.b must use uniform bucket-level access" in r.feedback
    ok = v.verify_config(GCS.replace("}\n", "  uniform_bucket_level_access = true\n}\n"))
    assert ok.passed is True
    assert {c["provider_name"] for c in ok.details["plan"]["resource_changes"]} == {
        "registry.terraform.io/hashicorp/google"}
