"""TerraformVerifier: the three gates in one Verdict, backend named, CLI function, dev40 sample."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from verifirst.core.errors import InputError
from verifirst.core.task import Item
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.base import Verdict, Verifier
from verifirst.verifiers.terraform.verifier import (TerraformVerifier, cli_verify_terraform, extract_config,
                                                    verify_config)
from verifirst.verifiers.terraform.terraform_cli import find_terraform

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
AWS_SCHEMA = SHARED / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"
DEV40 = SHARED / "iac-eval-v1" / "iac_eval_v1_dev40.csv"

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary")
needs_data = pytest.mark.skipif(not (AWS_SCHEMA.is_file() and DEV40.is_file()),
                                reason="../shared/data (AWS schema, dev40 CSV) missing")

BUCKET = 'resource "aws_s3_bucket" "logs" {\n  bucket = "logs"\n}\n'
POLICY = """package terraform.validation
default has_logs = false
has_logs {
    r := input.configuration.root_module.resources[_]
    r.type == "aws_s3_bucket"
    r.expressions.bucket.constant_value == "logs"
}
"""


@pytest.fixture(scope="module")
def tfv():
    # the runner cache in verifirst.verifiers.terraform.verifier shares one provider process per session
    return TerraformVerifier(backend="terraform", schema=str(AWS_SCHEMA))


def test_extract_config_from_fenced_answer():
    ans = "Here you go:\n```hcl\nresource \"a\" \"b\" {}\n```\nDone."
    assert extract_config(ans) == 'resource "a" "b" {}\n'
    assert extract_config("resource \"a\" \"b\" {}") == 'resource "a" "b" {}'


def test_bad_arguments_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="backend"):
        TerraformVerifier(backend="docker", schema=str(AWS_SCHEMA))
    with pytest.raises(InputError, match="schema file not found"):
        TerraformVerifier(backend="terraform", schema=str(tmp_path / "none.json"))
    with pytest.raises(InputError, match="config path not found"):
        cli_verify_terraform(str(tmp_path / "missing.tf"))


@needs_tf
@needs_data
def test_verify_item_runs_all_gates_and_names_backend(tfv):
    assert isinstance(tfv, Verifier)
    item = Item(id="t1", inputs={"prompt": "a logs bucket"}, gold={"rego_policy": POLICY})
    v = tfv.verify(item, "```hcl\n" + BUCKET + "```")
    assert isinstance(v, Verdict)
    assert (v.stage, v.passed, v.score, v.backend) == (T.PASS, True, 1.0, "terraform")
    assert v.details["policy"]["engine"] in ("regopy", "opa")
    assert "terraform" in v.details["backend_label"] and v.details["item_id"] == "t1"
    assert v.details["plan"]["resource_changes"][0]["type"] == "aws_s3_bucket"
    assert {"plan_ms", "show_ms", "opa_ms", "total_ms"} <= set(v.timings)
    wrong = tfv.verify(item, BUCKET.replace('"logs"\n', '"other"\n'))
    assert (wrong.stage, wrong.passed) == (T.OPA_FAIL, False)
    assert [e.cls for e in wrong.errors] == [T.POLICY] and "has_logs" in wrong.feedback


@needs_tf
@needs_data
def test_validate_fail_feedback_is_fit_for_repair(tfv):
    v = tfv.verify_config(BUCKET.replace("}\n", "  versioning_enabled = true\n}\n"), policy=POLICY)
    assert v.stage == T.VALIDATE_FAIL and v.error_classes == [T.SELF_DEFINED_PROPERTY]
    assert "opa_ms" not in v.timings and "policy" not in v.details  # later gates did not run
    fb = v.feedback
    assert fb.startswith("VALIDATE_FAIL") and "versioning_enabled" in fb and "aws_s3_bucket.logs" in fb
    assert "How to fix" in fb
    empty = tfv.verify_config("   \n")
    assert empty.stage == T.VALIDATE_FAIL and empty.error_classes == [T.SYNTAX]


@needs_tf
@needs_data
def test_cli_function_prints_contract_json(tmp_path, capsys):
    f = tmp_path / "main.tf"
    f.write_text(BUCKET)
    pol = tmp_path / "p.rego"
    pol.write_text(POLICY)
    rc = cli_verify_terraform(str(f), policy=str(pol), backend="terraform", schema=str(AWS_SCHEMA),
                              as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and {"stage", "backend", "errors", "feedback", "timings"} <= set(out)
    assert out["stage"] == T.PASS and out["backend"] == "terraform"
    f.write_text('resource "aws_nonsense_thing" "x" {}\n')
    rc = cli_verify_terraform(str(tmp_path), backend="terraform", schema=str(AWS_SCHEMA), as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["errors"][0]["class"] == T.INVALID_RESOURCE_TYPE
    assert out["errors"][0]["address"] == "aws_nonsense_thing.x"


@needs_tf
@needs_data
def test_three_dev40_references(tfv):
    """A pass, the one reading a missing local file, and one failing its own policy
    (the reference's fault); the full sweep is benchmarks/studies/iac_reference_check.py."""
    rows = list(csv.DictReader(DEV40.open(newline="", encoding="utf-8")))
    got = {i: tfv.verify_config(rows[i]["Reference output"], policy=rows[i]["Rego intent"])
           for i in (0, 7, 26)}
    assert got[0].stage == T.PASS
    assert got[7].stage == T.VALIDATE_FAIL and got[7].details["missing_files"]
    assert "sagemaker-human-task-ui-template.html" in got[7].errors[0].message
    assert got[26].stage == T.OPA_FAIL and got[26].details["policy"]["decided"]


def test_python_backend_delegates_to_hcl_check():
    pytest.importorskip("verifirst.verifiers.terraform.hcl_check", reason="pure-Python backend not landed yet")
    pytest.importorskip("verifirst.verifiers.terraform.plan_synth", reason="plan_synth not landed yet")
    if not AWS_SCHEMA.is_file():
        pytest.skip("AWS schema missing")
    v = verify_config(BUCKET.replace("}\n", "  versioning_enabled = true\n}\n"), backend="python",
                      schema=str(AWS_SCHEMA))
    assert v.backend == "python" and v.stage == T.VALIDATE_FAIL
    assert T.SELF_DEFINED_PROPERTY in v.error_classes
    ok = verify_config(BUCKET, policy=POLICY, backend="python", schema=str(AWS_SCHEMA))
    assert ok.stage == T.PASS and ok.backend == "python"


@pytest.mark.skipif(not AWS_SCHEMA.is_file(), reason="AWS schema missing")
def test_schema_hints_for_invented_arguments():
    from verifirst.verifiers.base import VerifierError
    from verifirst.verifiers.terraform.verifier import schema_hints
    errs = [VerifierError(T.SELF_DEFINED_PROPERTY, 'Unsupported argument: An argument named '
                          '"versioning_enabled" is not expected here.', "aws_s3_bucket.b"),
            VerifierError(T.SELF_DEFINED_PROPERTY, 'Unsupported argument: An argument named '
                          '"server_side_encryption" is not expected here.', "aws_s3_bucket.b"),
            VerifierError(T.MISSING_REQUIRED, "Missing required argument", "aws_s3_bucket.b")]
    hints = schema_hints(errs, str(AWS_SCHEMA))
    assert len(hints) == 2
    assert "versioning (block)" in hints[0] and "aws_s3_bucket_versioning" in hints[0]
    assert "aws_s3_bucket_server_side_encryption_configuration" in hints[1]


# -- the shipped AWS schemas are the default --------------------------------------------------------

BEYOND_OLD_TOY = """resource "aws_ecr_repository" "app" {
  name                 = "app"
  image_tag_mutability = "IMMUTABLE"
}

resource "aws_ssm_parameter" "image" {
  name   = "/app/image"
  type   = "String"
  value  = aws_ecr_repository.app.repository_url
  region = "eu-west-1"
}
"""  # neither type is in the 21-type built-in schema
PIN_5 = 'terraform {\n  required_providers {\n    aws = {\n      source  = "hashicorp/aws"\n' \
        '      version = "~> 5.0"\n    }\n  }\n}\n'


def _default_backends():
    return ["python"] + (["terraform"] if find_terraform() else [])


@pytest.mark.parametrize("backend", _default_backends())
def test_default_schema_knows_types_beyond_the_old_builtin_one(backend):
    v = TerraformVerifier(backend=backend)
    ok = v.verify_config(BEYOND_OLD_TOY)
    assert ok.stage == T.PASS, ok.feedback
    assert ok.details["schema"].endswith("aws_provider_schema_6.47.0.slim.json.gz")
    assert {r["type"] for r in ok.details["plan"]["resource_changes"]} == {"aws_ecr_repository",
                                                                          "aws_ssm_parameter"}


@pytest.mark.parametrize("backend", _default_backends())
def test_required_providers_constraint_picks_the_5x_schema(backend):
    # `region` on a resource is new in provider 6.x: with ~> 5.0 it is an unsupported argument
    v = TerraformVerifier(backend=backend)
    pinned = v.verify_config({"versions.tf": PIN_5, "main.tf": BEYOND_OLD_TOY})
    assert pinned.details["schema"].endswith("aws_provider_schema_5.100.0.slim.json.gz")
    assert pinned.stage == T.VALIDATE_FAIL, pinned.feedback
    assert "region" in pinned.feedback
    five_ok = v.verify_config({"versions.tf": PIN_5, "main.tf": BEYOND_OLD_TOY.replace(
        '  region = "eu-west-1"\n', "")})
    assert five_ok.stage == T.PASS, five_ok.feedback


def test_a_given_schema_is_used_whatever_the_constraint(tmp_path):
    from verifirst.verifiers.terraform.verifier import BUILTIN_SCHEMA

    v = TerraformVerifier(backend="python", schema=str(BUILTIN_SCHEMA))
    res = v.verify_config({"versions.tf": PIN_5, "main.tf": BEYOND_OLD_TOY})
    assert res.details["schema"] == str(BUILTIN_SCHEMA)
    assert res.stage == T.VALIDATE_FAIL and T.INVALID_RESOURCE_TYPE in res.error_classes
