import csv
from pathlib import Path

import pytest

from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.hcl_check import check, check_dir, feedback

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
AWS = DATA / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"
DEV40 = DATA / "iac-eval-v1" / "iac_eval_v1_dev40.csv"
pytestmark = pytest.mark.skipif(not AWS.exists(), reason=f"AWS schema not found at {AWS}")


def run(text, **kw):
    return check({"main.tf": text}, AWS, **kw)


def classes(errors):
    return sorted({e.cls for e in errors})


def test_versioning_enabled_is_self_defined_property():
    stage, errors, _ = run('resource "aws_s3_bucket" "b" {\n  bucket = "x"\n  versioning_enabled = true\n}\n')
    assert stage == T.VALIDATE_FAIL and classes(errors) == [T.SELF_DEFINED_PROPERTY]
    assert 'An argument named "versioning_enabled" is not expected here' in errors[0].message
    assert "line 3" in errors[0].message and errors[0].address == "aws_s3_bucket.b"


SG = '''resource "aws_security_group" "%s" {
  name = "%s"
  ingress {
    from_port       = 0
    to_port         = 0
    protocol        = "-1"
    security_groups = [aws_security_group.%s.id]
  }
}
'''


def test_security_groups_referencing_each_other_cycle():
    stage, errors, _ = run(SG % ("a", "a", "b") + SG % ("b", "b", "a"))
    assert stage == T.VALIDATE_FAIL and classes(errors) == [T.CYCLE]
    assert "aws_security_group.a, aws_security_group.b" in errors[0].message


def test_one_way_reference_is_not_a_cycle():
    stage, errors, _ = run(SG % ("a", "a", "b") + 'resource "aws_security_group" "b" {\n  name = "b"\n}\n')
    assert stage == T.PASS, errors


def test_deprecated_resource_warns_but_passes():
    stage, errors, warnings = run('resource "aws_s3_bucket_object" "o" {\n  bucket = "b"\n  key = "k"\n}\n')
    assert stage == T.PASS and errors == []
    assert any('"aws_s3_bucket_object" is deprecated' in w for w in warnings)


@pytest.mark.parametrize("text,stage,cls,needle", [
    ('resource "aws_s3_bucket" "b" {\n  bucket = "x"\n', T.VALIDATE_FAIL, T.SYNTAX, "Unclosed configuration block"),
    ('resource "aws_s3_buckett" "b" {\n}\n', T.VALIDATE_FAIL, T.INVALID_RESOURCE_TYPE, 'Did you mean "aws_s3_bucket"'),
    ('resource "aws_s3_object" "o" {\n  key = "k"\n}\n', T.VALIDATE_FAIL, T.MISSING_REQUIRED, '"bucket" is required'),
    ('resource "aws_db_instance" "d" {\n  instance_class = "db.t3.micro"\n  allocated_storage = "lots"\n}\n',
     T.VALIDATE_FAIL, T.TYPE, 'Inappropriate value for attribute "allocated_storage"'),
    ('resource "aws_s3_bucket" "b" {\n  arn = "x"\n}\n', T.VALIDATE_FAIL, T.SELF_DEFINED_PROPERTY,
     "Value for unconfigurable attribute"),
    ('resource "aws_s3_bucket_versioning" "v" {\n  bucket = "x"\n}\n', T.VALIDATE_FAIL, T.BLOCK_COUNT,
     'At least 1 "versioning_configuration"'),
    ('resource "aws_s3_bucket" "b" {\n  website {\n  }\n  website {\n  }\n}\n', T.VALIDATE_FAIL, T.BLOCK_COUNT,
     'No more than 1 "website"'),
    ('resource "aws_s3_bucket" "b" {\n  tags {\n    a = "1"\n  }\n}\n', T.VALIDATE_FAIL, T.SELF_DEFINED_PROPERTY,
     "use the equals sign"),
    ('resource "aws_s3_object" "o" {\n  bucket = aws_s3_bucket.nope.id\n  key = "k"\n}\n', T.VALIDATE_FAIL,
     T.BAD_REFERENCE, 'A managed resource "aws_s3_bucket" "nope" has not been declared'),
    ('resource "aws_s3_object" "o" {\n  bucket = var.b\n  key = local.k\n}\n', T.VALIDATE_FAIL, T.BAD_REFERENCE,
     'input variable with the name "b"'),
    ('resource "aws_s3_object" "o" {\n  bucket = "b"\n  key = "k-${count.index}"\n}\n', T.VALIDATE_FAIL,
     T.BAD_REFERENCE, 'non-counted context'),
    ('resource "aws_s3_object" "o" {\n  bucket = "b"\n  key = each.key\n}\n', T.VALIDATE_FAIL,
     T.BAD_REFERENCE, 'without for_each'),
    ('resource "aws_s3_bucket" "b" {\n  count = 2\n}\nresource "aws_s3_object" "o" {\n  bucket = aws_s3_bucket.b.id\n  key = "k"\n}\n',
     T.VALIDATE_FAIL, T.BAD_REFERENCE, "Missing resource instance key"),
    ('resource "aws_s3_bucket" "b" {}\nresource "aws_s3_object" "o" {\n  bucket = aws_s3_bucket.b.bukket\n  key = "k"\n}\n',
     T.VALIDATE_FAIL, T.BAD_REFERENCE, 'exported attribute named "bukket"'),
    ('resource "aws_s3_bucket" "b" {}\nresource "aws_s3_object" "o" {\n  count = length(aws_s3_bucket.b.id)\n  bucket = "b"\n  key = "k"\n}\n',
     T.PLAN_FAIL, T.OTHER, "Invalid count argument"),
    ('variable "name" {}\nresource "aws_s3_bucket" "b" {\n  bucket = var.name\n}\n', T.PLAN_FAIL,
     T.MISSING_REQUIRED, "No value for required variable"),
    ('resource "aws_s3_bucket" "b" {\n  bucket = file("nope.txt")\n}\n', T.VALIDATE_FAIL, T.OTHER,
     'no file exists at "nope.txt"'),
    ('resource "aws_s3_bucket" "b" {\n  bucket = nosuchfn("x")\n}\n', T.VALIDATE_FAIL, T.OTHER,
     'no function named "nosuchfn"'),
    ('resource "aws_s3_bucket" "b" {\n  for_each = ["a", "b"]\n  bucket = each.key\n}\n', T.PLAN_FAIL, T.TYPE,
     "must be a map, or set of strings"),
])
def test_error_classes(text, stage, cls, needle):
    got_stage, errors, _ = run(text)
    assert got_stage == stage, errors
    assert cls in classes(errors), errors
    assert any(needle in e.message for e in errors), [e.message for e in errors]


def test_valid_features_pass(tmp_path):
    (tmp_path / "policy.json").write_text('{"Version": "2012-10-17"}')
    (tmp_path / "main.tf").write_text('''
variable "names" {
  default = ["a", "b"]
}
locals {
  prefix = "demo"
  tags   = { Team = "x" }
}
resource "aws_s3_bucket" "b" {
  for_each = toset(var.names)
  bucket   = "${local.prefix}-${each.key}"
  tags     = merge(local.tags, { Name = each.value })
}
resource "aws_iam_policy" "p" {
  name   = format("%s-policy", local.prefix)
  policy = file("${path.module}/policy.json")
}
resource "aws_security_group" "sg" {
  name = "sg"
  dynamic "ingress" {
    for_each = [80, 443]
    content {
      from_port   = ingress.value
      to_port     = ingress.value
      protocol    = "tcp"
      cidr_blocks = ["0.0.0.0/0"]
    }
  }
}
output "arns" {
  value = [for k, b in aws_s3_bucket.b : b.arn]
}
''')
    stage, errors, _ = check_dir(tmp_path, AWS)
    assert stage == T.PASS, errors
    assert "validate and plan succeeded" in feedback(stage, errors, [])


def _dev40():
    with open(DEV40, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.skipif(not DEV40.exists(), reason=f"dev40 not found at {DEV40}")
def test_dev40_references_pass_except_missing_local_files():
    verdicts = {}
    for i, row in enumerate(_dev40()):
        ref = row["Reference output"]
        stage, errors, _ = check({"main.tf": ref}, AWS)
        verdicts[i] = stage
        if stage != T.PASS:
            assert "file(" in ref and any("no file exists" in e.message for e in errors), (i, errors)
    assert sum(v == T.PASS for v in verdicts.values()) >= 39
