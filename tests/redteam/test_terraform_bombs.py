"""Terraform expansion bombs: a candidate configuration that would keep the Terraform verifier
(python backend, verify_config) from giving a verdict: too many instances, exponential
collections or strings, deep nesting, module recursion, and calls whose cost the ceilings do
not count (a backtracking regex, a huge power, jsonencode of a doubled structure). Each runs in
its own child Python under RLIMIT_AS 2 GiB and RLIMIT_CPU, four at a time, with WALL_S to answer
once verifirst is imported.
Success (the attack works): no verdict within WALL_S (a hang), the verifier raising or being
killed (no verdict), or a PASS. Any FAIL (a LIMIT finding or another error) is the verifier
holding."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import REPORT, Attack, attack_ids

pytestmark = pytest.mark.security
F = "terraform"
WALL_S = 20  # the ceilings' own backstop is 10 s of evaluation; the rest is room for a loaded machine

CHILD = r"""
import json, sys, time
from verifirst.verifiers.terraform.verifier import verify_config
print("READY", flush=True)  # the clock starts here: importing is not the bomb's work
t = time.time()
v = verify_config(sys.argv[1], backend="python")
print(json.dumps({"s": round(time.time() - t, 2), "passed": v.passed, "stage": v.stage, "feedback": v.feedback[:600]}))
"""


def _res(body: str) -> str:
    return f'resource "aws_s3_bucket" "b" {{\n  bucket = {body}\n}}\n'


def _doubling(leaf: str, use: str, n: int = 40) -> str:
    lines = "".join(f"  a{i} = [local.a{i - 1}, local.a{i - 1}]\n" for i in range(1, n))
    return f"locals {{\n  a0 = [{leaf}]\n{lines}}}\n" + _res(use.replace("LAST", f"local.a{n - 1}"))


BOMBS = {
    "count": ("count = 50,000,000 instances", 'resource "aws_s3_bucket" "b" {\n  count  = 50000000\n'
                                               '  bucket = "b-${count.index}"\n}\n'),
    "for_each": ("for_each over 3,000,000 keys",
                 'resource "aws_s3_bucket" "b" {\n  for_each = toset([for i in range(3000000) : tostring(i)])\n'
                 '  bucket   = "b-${each.key}"\n}\n'),
    "setproduct": ("setproduct of three 1,000-element ranges (10^9 elements)",
                   'locals {\n  p = setproduct(range(1000), range(1000), range(1000))\n}\n' + _res('"b${length(local.p)}"')),
    "string_doubling": ("a string doubled 15 times from 1 MB", 'locals {\n  a = join("", [for i in range(100000) : '
                        '"xxxxxxxxxx"])\n' + "".join(f'  a{i} = "${{local.a{i - 1 if i > 1 else ""}}}${{local.a{i - 1 if i > 1 else ""}}}"\n'
                                                     for i in range(1, 16)) + "}\n" + _res("substr(local.a15, 0, 10)")),
    "list_doubling_flatten": ("a list doubled 39 times (shared, 2^40 leaves) flattened", _doubling("1, 2", '"b${length(flatten(LAST))}"')),
    "list_doubling_jsonencode": ("a list doubled 39 times (shared, 2^39 leaves) passed to jsonencode",
                                 _doubling('"xxxxxxxxxxxxxxxx"', "substr(jsonencode(LAST), 0, 5)")),
    "nesting": ("3,000 nested brackets", "locals {\n  x = " + "[" * 3000 + "1" + "]" * 3000 + "\n}\n" + _res('"b"')),
    "format_width": ("format with a 999,999,999-character width", _res('substr(format("%0999999999d", 1), 0, 5)')),
    "regex_backtracking": ("a regex with catastrophic backtracking on 52 characters",
                           _res('regex("(a+)+$", "' + "a" * 52 + '!")')),
    "huge_power": ("pow(2, 1e9) (a 125 MB integer)", _res("tostring(pow(2, 1000000000) % 7)")),
    "module_recursion": ("a local module that calls itself", {"main.tf": 'module "m" {\n  source = "./"\n}\n'
                                                                          + _res('"b"')}),
}


def _verdict_missing(r: dict, c) -> str | None:
    if r.get("timed_out"):
        return f"no verdict within {WALL_S} s"
    v = r.get("verdict")
    if v is None:
        return f"no verdict: the verifier died (exit {r.get('rc')}): {r.get('stderr', '')[-200:]!r}"
    if v["passed"] is True:
        return "PASS"
    if v["passed"] is None:
        return f"no verdict ({v['stage']}): {v['feedback'][:160]!r}"
    return None


ATTACKS = [Attack(f"tf_{name}", F, f"{what}: the python backend gives no verdict within {WALL_S} s, dies, or passes it",
                  {"kind": "terraform", "config": cfg}, _verdict_missing, modes=())
           for name, (what, cfg) in BOMBS.items()]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (WALL_S + 5, WALL_S + 5))


def _run(attack: Attack) -> dict:
    cfg = attack.spec["config"]
    with tempfile.TemporaryDirectory(prefix="vfrt-tf-") as d:
        files = cfg if isinstance(cfg, dict) else {"main.tf": cfg}
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        with tempfile.TemporaryFile("w+") as err:
            env = dict(os.environ)
            if os.environ.get("VERIFIRST_REDTEAM_SRC"):  # another copy of verifirst (conftest.py)
                env["PYTHONPATH"] = os.environ["VERIFIRST_REDTEAM_SRC"]
            p = subprocess.Popen([sys.executable, "-c", CHILD, d], stdout=subprocess.PIPE, stderr=err, text=True,
                                 preexec_fn=_limits, cwd=d, env=env)
            try:
                p.stdout.readline()  # READY (or nothing, if it died importing)
                stdout, _ = p.communicate(timeout=WALL_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                return {"timed_out": True}
            err.seek(0)
            out = {"rc": p.returncode, "stderr": err.read()[-2000:]}
    try:
        out["verdict"] = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pass
    return out


def run_beside() -> dict:
    """All bombs at once (conftest's batteries fixture runs this beside the sandbox batteries)."""
    with ThreadPoolExecutor(max_workers=4) as ex:
        return dict(zip([a.id for a in ATTACKS], ex.map(_run, ATTACKS)))


@pytest.fixture(scope="module")
def bombs(batteries) -> dict:
    done = batteries.get("beside", {}).get(__name__)
    return done if done and "error" not in done else run_beside()


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_bomb_fails(bombs, attack):
    evidence = attack.succeeded(bombs[attack.id], None)
    REPORT.setdefault(attack.id, {})["host (python backend)"] = "SUCCEEDS" if evidence else "FAILS"
    assert evidence is None, f"{attack.id} SUCCEEDED ({attack.success}): {evidence}"
