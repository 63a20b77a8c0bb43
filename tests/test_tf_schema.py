import gzip
import json
from pathlib import Path

import pytest

from verifirst.errors import InputError
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
