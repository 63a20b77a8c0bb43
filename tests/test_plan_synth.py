import json
from pathlib import Path

import pytest

from verifirst.verifiers.terraform.plan_synth import PlanSynthesisError, synthesize_plan

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
AWS = DATA / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"
TEMPLATES = sorted(p for p in (DATA / "iac-eval-v1" / "templates").glob("*/main.tf")
                   if (p.parent / "tfplan.json").exists()) if (DATA / "iac-eval-v1").exists() else []
pytestmark = pytest.mark.skipif(not AWS.exists(), reason=f"AWS schema not found at {AWS}")


def plan(text, **kw):
    return synthesize_plan({"main.tf": text}, AWS, **kw)


def test_shape_and_unknowns():
    p = plan('''
resource "aws_vpc" "v" {
  cidr_block = "10.0.0.0/16"
}
resource "aws_subnet" "s" {
  vpc_id     = aws_vpc.v.id
  cidr_block = cidrsubnet(aws_vpc.v.cidr_block, 8, 1)
  tags       = { Name = "s" }
}
''')
    assert p["format_version"] and p["terraform_version"]
    rc = {r["address"]: r for r in p["resource_changes"]}
    s = rc["aws_subnet.s"]
    assert s["mode"] == "managed" and s["provider_name"] == "registry.terraform.io/hashicorp/aws"
    ch = s["change"]
    assert ch["actions"] == ["create"] and ch["before"] is None and ch["before_sensitive"] is False
    assert ch["after"]["cidr_block"] == "10.0.1.0/24"          # evaluated from a known attribute
    assert "vpc_id" not in ch["after"] and ch["after_unknown"]["vpc_id"] is True
    assert ch["after_unknown"]["id"] is True and ch["after_unknown"]["arn"] is True
    assert ch["after"]["outpost_arn"] is None                  # optional, unset -> null
    assert ch["after"]["tags_all"] == {"Name": "s"}
    assert ch["after"]["timeouts"] is None
    pv = {r["address"]: r for r in p["planned_values"]["root_module"]["resources"]}
    assert pv["aws_subnet.s"]["values"] == ch["after"] and pv["aws_subnet.s"]["schema_version"] == 1
    cfg = {r["address"]: r for r in p["configuration"]["root_module"]["resources"]}
    ex = cfg["aws_subnet.s"]["expressions"]
    assert ex["vpc_id"] == {"references": ["aws_vpc.v.id", "aws_vpc.v"]}
    assert ex["cidr_block"] == {"references": ["aws_vpc.v.cidr_block", "aws_vpc.v"]}
    assert ex["tags"] == {"constant_value": {"Name": "s"}}
    assert cfg["aws_subnet.s"]["provider_config_key"] == "aws"
    assert p["configuration"]["provider_config"]["aws"]["full_name"].endswith("hashicorp/aws")


def test_blocks_count_functions_and_variables(tmp_path):
    (tmp_path / "p.json").write_text('{"a": 1}')
    p = synthesize_plan({"main.tf": '''
provider "aws" {
  region = "us-east-1"
}
variable "n" {
  default = 2
}
resource "aws_s3_bucket" "b" {
  count  = var.n
  bucket = "b-${count.index}"
}
resource "aws_s3_bucket_versioning" "v" {
  bucket = aws_s3_bucket.b[0].id
  versioning_configuration {
    status = "Enabled"
  }
}
resource "aws_iam_policy" "p" {
  name   = "p"
  policy = file("p.json")
}
output "names" {
  value = aws_s3_bucket.b[*].bucket
}
'''}, AWS, base_dir=str(tmp_path))
    rc = {r["address"]: r for r in p["resource_changes"]}
    assert rc["aws_s3_bucket.b[1]"]["index"] == 1
    assert rc["aws_s3_bucket.b[1]"]["change"]["after"]["bucket"] == "b-1"
    v = rc["aws_s3_bucket_versioning.v"]["change"]["after"]
    assert v["versioning_configuration"] == [{"status": "Enabled"}]  # mfa_delete: optional+computed
    assert rc["aws_s3_bucket_versioning.v"]["change"]["after_unknown"]["versioning_configuration"] == [
        {"mfa_delete": True}]
    assert rc["aws_iam_policy.p"]["change"]["after"]["policy"] == '{"a": 1}'
    cfg = {r["address"]: r for r in p["configuration"]["root_module"]["resources"]}
    assert cfg["aws_s3_bucket.b"]["count_expression"] == {"references": ["var.n"]}
    assert cfg["aws_s3_bucket_versioning.v"]["expressions"]["versioning_configuration"] == [
        {"status": {"constant_value": "Enabled"}}]
    assert cfg["aws_s3_bucket_versioning.v"]["expressions"]["bucket"]["references"] == [
        "aws_s3_bucket.b[0].id", "aws_s3_bucket.b[0]", "aws_s3_bucket.b"]
    assert cfg["aws_iam_policy.p"]["expressions"]["policy"] == {}   # function call: no constant
    assert p["variables"] == {"n": {"value": 2}}
    assert p["planned_values"]["outputs"]["names"]["value"] == ["b-0", "b-1"]
    assert p["configuration"]["provider_config"]["aws"]["expressions"] == {
        "region": {"constant_value": "us-east-1"}}


def test_security_group_blocks_as_attribute():
    p = plan('resource "aws_security_group" "g" {\n  name = "g"\n  ingress {\n    from_port = 80\n'
             '    to_port = 80\n    protocol = "tcp"\n    cidr_blocks = ["0.0.0.0/0"]\n  }\n}\n')
    ex = p["configuration"]["root_module"]["resources"][0]["expressions"]["ingress"]
    row = ex["constant_value"][0]
    assert row["from_port"] == 80 and row["cidr_blocks"] == ["0.0.0.0/0"] and row["self"] is None
    after = p["resource_changes"][0]["change"]["after"]["ingress"]
    assert after[0]["protocol"] == "tcp" and after[0]["description"] is None


def test_syntax_error_raises():
    with pytest.raises(PlanSynthesisError, match="line"):
        plan('resource "aws_s3_bucket" "b" {\n')


@pytest.mark.skipif(not TEMPLATES, reason="IaC-Eval templates not found")
def test_templates_configuration_expressions_match_real_plans():
    total = same = after_total = after_same = 0
    for main in TEMPLATES:
        real = json.loads((main.parent / "tfplan.json").read_text())
        syn = synthesize_plan({"main.tf": main.read_text()}, AWS, base_dir=str(main.parent))
        assert syn["configuration"]["provider_config"] == real["configuration"]["provider_config"]
        got = {r["address"]: r for r in syn["configuration"]["root_module"]["resources"]}
        for r in real["configuration"]["root_module"]["resources"]:
            total += 1
            same += got.get(r["address"]) == r
        changes = {r["address"]: r["change"] for r in syn["resource_changes"]}
        for r in real["resource_changes"]:
            if r["change"]["actions"] == ["create"]:
                after_total += 1
                after_same += changes[r["address"]]["after"] == r["change"]["after"]
    print(f"\nconfiguration.expressions match {same}/{total}; change.after exact {after_same}/{after_total}")
    assert total >= 10 and same == total


def test_data_source_read_at_plan_or_deferred():
    p = plan('''
data "aws_availability_zones" "az" {
  state = "available"
}
resource "aws_s3_bucket" "b" {
  bucket = "bk"
}
data "aws_iam_policy_document" "d" {
  statement {
    actions   = ["s3:GetObject"]
    resources = ["${aws_s3_bucket.b.arn}/*"]
  }
}
''')
    prior = [r["address"] for r in p["prior_state"]["values"]["root_module"]["resources"]]
    assert prior == ["data.aws_availability_zones.az"]
    rc = {r["address"]: r for r in p["resource_changes"]}
    assert rc["data.aws_iam_policy_document.d"]["change"]["actions"] == ["read"]
    assert rc["aws_s3_bucket.b"]["change"]["actions"] == ["create"]
