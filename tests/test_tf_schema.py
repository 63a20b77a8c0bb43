import gzip
import json
from pathlib import Path

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform import tf_schema

ROOT = Path(__file__).resolve().parents[1]
AWS = ROOT.parent / "shared" / "data" / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"
needs_aws = pytest.mark.skipif(not AWS.exists(), reason=f"AWS schema not found at {AWS}")

TINY = {"format_version": "1.0", "provider_schemas": {"registry.terraform.io/hashicorp/aws": {
    "provider": {"version": 0, "block": {"attributes": {"region": {"type": "string", "optional": True}}}},
    "resource_schemas": {"aws_thing": {"version": 2, "block": {"attributes": {
        "name": {"type": "string", "required": True}, "id": {"type": "string", "computed": True}}}}},
    "data_source_schemas": {"aws_thing": {"version": 0, "block": {"attributes": {
        "name": {"type": "string", "optional": True}}}}}}}}


def test_plain_json_and_lookups(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(TINY))
    s = tf_schema.load_schema(p)
    assert s.raw == TINY
    assert s.resource("aws_thing")["attributes"]["name"]["required"] is True
    assert s.resource("aws_nothing") is None
    assert "name" in s.data_source("aws_thing")["attributes"]
    assert s.data_source("aws_other") is None
    assert s.provider_config()["attributes"]["region"]["type"] == "string"
    assert s.schema_version("managed", "aws_thing") == 2
    assert s.provider_address("managed", "aws_thing") == "registry.terraform.io/hashicorp/aws"


def test_gz_and_cache_per_path(tmp_path):
    p = tmp_path / "s.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump(TINY, fh)
    a = tf_schema.load_schema(p)
    assert tf_schema.load_schema(str(p)) is a


@pytest.mark.parametrize("doc,field", [
    ({"format_version": "1.0"}, "provider_schemas"),
    ({"provider_schemas": {"x": {"provider": {}}}}, "provider_schemas.x.resource_schemas"),
    ({"provider_schemas": {"x": {"resource_schemas": {"aws_a": {"version": 0}}}}},
     "provider_schemas.x.resource_schemas.aws_a.block"),
])
def test_wrong_shape_names_file_and_key(tmp_path, doc, field):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError) as exc:
        tf_schema.load_schema(p)
    assert str(p) in str(exc.value) and field in str(exc.value)
    assert exc.value.field == field


def test_not_json_and_missing_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{\n nope")
    with pytest.raises(InputError, match="bad.json:2"):
        tf_schema.load_schema(p)
    with pytest.raises(InputError, match="cannot read"):
        tf_schema.load_schema(tmp_path / "absent.json")


@needs_aws
def test_aws_schema():
    s = tf_schema.load_schema(AWS)
    b = s.resource("aws_s3_bucket")
    assert "bucket" in b["attributes"] and "versioning" in b["block_types"]
    assert "versioning_enabled" not in b["attributes"]
    assert s.data_source("aws_ami") is not None
    assert len(s.resource_types()) > 1500
    assert s.provider_names() == ["aws"]


# -- the shipped AWS schemas ----------------------------------------------------------------------

def test_shipped_aws_schemas_newest_first_with_notice():
    ships = tf_schema.shipped_schemas("aws")
    assert [s.version for s in ships] == ["6.47.0", "5.100.0"]
    assert "MIT License" in (ships[0].path.parent / "NOTICE").read_text()
    assert "lonegunmanb/terraform-aws-schema" in (ships[0].path.parent / "NOTICE").read_text()
    assert tf_schema.default_schema_path() == str(ships[0].path)


@pytest.mark.parametrize("constraint,version", [
    (None, "6.47.0"), ("~> 5.0", "5.100.0"), ("~>5.100.0", "5.100.0"), (">= 5.0, < 6.0", "5.100.0"),
    ("< 6", "5.100.0"), (">= 6.0", "6.47.0"), ("~> 6.1", "6.47.0"), ("5.100.0", "5.100.0"),
    ("~> 4.0", "6.47.0"),  # no shipped version meets it: the newest, terraform says the rest
    ("not a version", "6.47.0")])
def test_required_providers_constraint_picks_the_shipped_version(constraint, version):
    assert tf_schema.choose_shipped(constraint).version == version


def test_version_constraint_terms():
    ok = tf_schema.version_satisfies
    assert ok("5.100.0", "~> 5.0") and not ok("6.0.0", "~> 5.0")
    assert ok("5.1.9", "~> 5.1.2") and not ok("5.2.0", "~> 5.1.2") and not ok("5.1.1", "~> 5.1.2")
    assert ok("6.47.0", ">= 6, != 6.1.0") and not ok("6.1.0", "!= 6.1.0")
    with pytest.raises(ValueError):
        ok("6.0.0", "latest")


def test_constraint_is_read_from_required_providers():
    tf = ('terraform {\n  required_version = ">= 1.3"\n  required_providers {\n    random = {\n'
          '      source = "hashicorp/random"\n      version = "3.1.0"\n    }\n    aws = {\n'
          '      source  = "hashicorp/aws"\n      version = "~> 5.0"\n    }\n  }\n}\n')
    assert tf_schema.provider_constraint({"versions.tf": tf, "main.tf": ""}) == "~> 5.0"
    assert tf_schema.schema_for_config({"versions.tf": tf}).endswith("5.100.0.slim.json.gz")
    assert tf_schema.provider_constraint({"main.tf": 'provider "aws" {}\n'}) is None
    assert tf_schema.schema_for_config({"main.tf": ""}).endswith("6.47.0.slim.json.gz")


def test_shipped_schema_is_parsed_once_per_process():
    # the parse time is measured by benchmarks/perf/iac_verify.py (schema_load_ms)
    path = tf_schema.shipped_schemas("aws")[0].path
    first = tf_schema.load_schema(path)
    assert tf_schema.load_schema(str(path)) is first


def test_schema_list_cli():
    from typer.testing import CliRunner

    from verifirst.cli import app

    res = CliRunner().invoke(app, ["schema", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [(r["provider"], r["version"], r["licence"]) for r in rows] == [
        ("aws", "6.47.0", "MIT"), ("aws", "5.100.0", "MIT"), ("azurerm", "4.79.0", "MIT"), ("google", "6.50.0", "MIT"),
        ("kubernetes", "2.38.0", "MIT")]
    assert rows[0]["resources"] > 1600 and rows[0]["data_sources"] > 600
    assert rows[1]["resources"] > 1500
    helped = CliRunner().invoke(app, ["schema", "list", "--help"], env={"COLUMNS": "200"})
    assert "terraform providers schema -json" in helped.output and "schema pull" in helped.output
