"""The OPA gate: regopy (or an opa binary) on plan JSON; IaC-Eval and v2 decision rules."""
from __future__ import annotations

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform.opa import Policy, evaluate_policy, false_leaves, opa_binary

PLAN = {"resource_changes": [{"type": "aws_s3_bucket", "change": {"actions": ["create"],
                                                                  "after": {"bucket": "logs"}}}],
        "configuration": {"root_module": {"resources": [
            {"type": "aws_s3_bucket", "expressions": {"bucket": {"constant_value": "logs"}}}]}}}

V0 = """package terraform.validation
default has_bucket = false
has_bucket {
    r := input.configuration.root_module.resources[_]
    r.type == "aws_s3_bucket"
    r.expressions.bucket.constant_value == "logs"
}
deny[msg] { not has_bucket; msg := "no bucket" }
"""

V1 = """package terraform.validation
import rego.v1
default allow := false
default named := false
allow if { some rc in input.resource_changes; rc.type == "aws_s3_bucket" }
named if { some rc in input.resource_changes; rc.change.after.bucket == "logs" }
helper := false
"""


def test_v0_policy_iac_eval_rule_pass_and_fail():
    assert Policy(V0).mode == "conftest"  # its deny rule: conftest's reading by default
    p = Policy(V0, mode="iac-eval")
    assert p.mode == "iac-eval" and not p.is_v1 and p.package == "terraform.validation"
    ok = p.evaluate(PLAN)
    assert ok.passed and ok.decided and ok.errors == []
    other = {"configuration": {"root_module": {"resources": []}}}
    bad = p.evaluate(other)
    assert not bad.passed and bad.false_rules == ["data.terraform.validation.has_bucket"]
    assert [e.cls for e in bad.errors] == [T.POLICY]


def test_v1_policy_defaults_rule_ignores_non_default_false_rules():
    p = Policy(V1)
    assert p.is_v1 and p.mode == "defaults" and p.defaults == ["allow", "named"]
    assert p.evaluate(PLAN).passed  # `helper := false` is not a default rule
    # the IaC-Eval rule on the same policy fails because of that false leaf
    leafy = Policy(V1, mode="iac-eval").evaluate(PLAN)
    assert not leafy.passed and leafy.false_rules == ["data.terraform.validation.helper"]
    renamed = {"resource_changes": [{"type": "aws_s3_bucket", "change": {"after": {"bucket": "x"}}}]}
    res = p.evaluate(renamed)
    assert not res.passed and res.false_rules == ["named"]
    assert res.errors[0].address == "data.terraform.validation.named"


def test_false_leaves_walks_lists_like_iac_eval():
    doc = {"p": {"a": True, "b": [True, {"c": False}], "d": "text", "e": None}}
    assert false_leaves(doc) == ["data.p.b.c"]
    assert false_leaves({}) == []  # an empty document passes, as in IaC-Eval


def test_missing_builtin_is_an_engine_gap_not_a_policy_failure():
    pol = """package vpc
default valid := false
valid { net.cidr_is_valid(input.cidr) }
"""
    p = Policy(pol)
    if p.engine != "regopy":
        pytest.skip("an opa binary implements net.cidr_*")
    assert p.missing_builtins == ["net.cidr_is_valid"]
    res = p.evaluate({"cidr": "10.0.0.0/16"})
    assert not res.passed and not res.decided
    assert [e.cls for e in res.errors] == [T.POLICY_ENGINE_GAP]
    assert "net.cidr_is_valid" in res.errors[0].message


def test_rego_that_does_not_compile_is_input_error_with_line():
    with pytest.raises(InputError) as ei:
        Policy("package p\n\nok { input.a == }\n", path="bad.rego")
    assert ei.value.path == "bad.rego" and ei.value.line == 3 and "does not compile" in str(ei.value)
    with pytest.raises(InputError, match="package"):
        Policy("ok { true }\n")
    with pytest.raises(InputError, match="empty policy"):
        Policy("   ")
    with pytest.raises(InputError, match="mode"):
        Policy(V0, mode="strict")


def test_policy_from_file(tmp_path):
    f = tmp_path / "p.rego"
    f.write_text(V0)
    assert evaluate_policy(str(f), PLAN).passed
    with pytest.raises(InputError, match="not found"):
        Policy.from_file(tmp_path / "missing.rego")


@pytest.mark.skipif(opa_binary() is None, reason="no opa binary on PATH (none in any registry)")
def test_opa_binary_agrees_with_regopy():
    for text in (V0, V1):
        a = Policy(text, engine="opa").evaluate(PLAN)
        b = Policy(text, engine="regopy").evaluate(PLAN)
        assert a.passed == b.passed


def test_a_kept_interpreter_sees_each_plan_anew_in_every_thread_and_pickles_without_it():
    """A policy keeps one interpreter per thread (a fresh one costs milliseconds per query): no
    input lingers from one plan to the next, threads do not share one, and a pickled policy
    (shipped to a Ray worker) rebuilds its own."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    p = Policy(V0)
    other = {"configuration": {"root_module": {"resources": []}}}
    assert [p.evaluate(x).passed for x in (PLAN, other, PLAN, other)] == [True, False, True, False]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: p.evaluate(PLAN if i % 2 else other).passed, range(40)))
    assert got == [bool(i % 2) for i in range(40)]
    assert len(p._interpreters) >= 2  # the pool's threads built their own
    q = pickle.loads(pickle.dumps(p))
    assert "_interpreters" not in q.__dict__ and q.evaluate(PLAN).passed and not q.evaluate(other).passed
