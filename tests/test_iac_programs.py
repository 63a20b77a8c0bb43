"""IaC generators with scripted LMs and a scripted verifier: extraction, CoT, repair loop,
policy injection, ReAct over the MCP server, and the experiment report."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest
from dspy.utils import DummyLM

from verifirst.benchmarks.studies import iac_experiment as exp
from verifirst.benchmarks.iac_pack import SCHEMA_PATH
from verifirst.programs import iac
from verifirst.programs._iac_extract import extract_hcl
from verifirst.core.task import Item
from verifirst.verifiers.base import Verdict, VerifierError

VPC = 'resource "aws_vpc" "main" {\n  cidr_block = "10.0.0.0/16"\n}\n'
POLICY = "package terraform.validation\nimport rego.v1\ndefault valid := false\nvalid if { true }\n"
ITEM = Item("t1", {"prompt": "Create a VPC 10.0.0.0/16"}, {"rego_policy": POLICY}, group="t1")


class ScriptedVerifier:
    """Verdict by content: the first rule whose marker is in the config decides."""

    name = "scripted"

    def __init__(self, rules):
        self.rules = rules  # [(marker, stage)], stage PASS passes
        self.seen: list[str] = []

    def verify(self, item, candidate):
        self.seen.append(candidate)
        for marker, stage in self.rules:
            if marker in candidate:
                ok = stage == "PASS"
                errs = [] if ok else [VerifierError("SELF_DEFINED_PROPERTY", f"bad {marker}", "aws_vpc.main")]
                return Verdict(float(ok), ok, stage, errs, feedback=f"fix {marker}", backend="scripted")
        return Verdict(0.0, False, "VALIDATE_FAIL", [VerifierError("SYNTAX", "no config")],
                       feedback="no config", backend="scripted")


def fenced(body: str) -> str:
    return f"Here is the configuration:\n```hcl\n{body}```\nIt creates the VPC."


def user_texts(lm) -> list[str]:
    return ["\n".join(m["content"] for m in h["messages"] if m["role"] == "user") for h in lm.history]


# -- extraction ----------------------------------------------------------------------------------

def test_extract_from_fence_prose_and_cut_off_output():
    assert extract_hcl(fenced(VPC)) == VPC
    prose = 'Sure.\nresource "aws_vpc" "a" {\n  tags = { Name = "x}" }\n}\nThat makes { things }.'
    assert extract_hcl(prose) == 'resource "aws_vpc" "a" {\n  tags = { Name = "x}" }\n}\n'
    assert extract_hcl('```terraform\nresource "aws_vpc" "a" {\n  cidr_block = "x"\n') == \
        'resource "aws_vpc" "a" {\n  cidr_block = "x"\n'
    assert extract_hcl("I cannot help with that.") == ""
    assert extract_hcl(None) == ""


def test_extract_joins_hcl_fences_and_skips_other_languages():
    text = ('```json\n{"a": 1}\n```\n```\nprovider "aws" {\n  region = "us-east-1"\n}\n```\n'
            '```hcl\nresource "aws_iam_policy" "p" {\n  policy = <<EOF\n{ "x": "}" }\nEOF\n}\n```')
    out = extract_hcl(text)
    assert out.startswith('provider "aws"') and out.rstrip().endswith("EOF\n}")
    assert '"a": 1' not in out


# -- single pass ---------------------------------------------------------------------------------

def test_cot_generator_returns_extracted_config():
    lm = DummyLM([{"reasoning": "one vpc", "config": fenced(VPC)}])
    with dspy.context(lm=lm):
        pred = iac.IaCGenerator("cot")(prompt=ITEM.inputs["prompt"])
    assert pred.config == VPC and pred.reasoning == "one vpc"
    assert "Create a VPC 10.0.0.0/16" in user_texts(lm)[0]
    assert POLICY not in user_texts(lm)[0]


def test_policy_injection_shows_the_policy_text_found_by_prompt():
    lm = DummyLM([{"reasoning": "r", "config": VPC}])
    gen = iac.IaCGenerator("cot", show_policy=True, items=[ITEM])
    with dspy.context(lm=lm):
        gen(prompt=ITEM.inputs["prompt"])  # evaluate() passes only the inputs
    assert "default valid := false" in user_texts(lm)[0]


# -- repair loop ---------------------------------------------------------------------------------

def test_repair_stops_on_pass_and_shows_feedback():
    ver = ScriptedVerifier([("BROKEN", "VALIDATE_FAIL"), ("aws_vpc", "PASS")])
    lm = DummyLM([{"reasoning": "r", "config": fenced('resource "aws_vpc" "main" {\n  BROKEN = 1\n}\n')},
                  {"config": fenced(VPC)},
                  {"config": "never used"}])
    loop = iac.RepairLoop(iac.IaCGenerator("cot"), ver, k=4)
    with dspy.context(lm=lm):
        pred = loop(prompt=ITEM.inputs["prompt"], item=ITEM)
    assert pred.stages == ["VALIDATE_FAIL", "PASS"]
    assert pred.converged_at == 2 and pred.config == VPC
    assert len(lm.history) == 2  # one generation, one repair, then stop
    repair_prompt = user_texts(lm)[1]
    assert "fix BROKEN" in repair_prompt and "SELF_DEFINED_PROPERTY at aws_vpc.main" in repair_prompt
    assert [a["attempt"] for a in pred.attempts] == [1, 2]


def test_repair_respects_budget_and_records_every_stage():
    ver = ScriptedVerifier([("A1", "VALIDATE_FAIL"), ("A2", "PLAN_FAIL"), ("A3", "OPA_FAIL"), ("A4", "PASS")])
    answers = [{"reasoning": "r", "config": "```hcl\nresource \"aws_vpc\" \"m\" { # A1\n}\n```"}]
    answers += [{"config": f"resource \"aws_vpc\" \"m\" {{ # A{i}\n}}\n"} for i in (2, 3, 4)]
    with dspy.context(lm=DummyLM(answers)):
        pred = iac.RepairLoop(iac.IaCGenerator("cot"), ver, k=4)(prompt="p", item=ITEM)
    assert pred.stages == ["VALIDATE_FAIL", "PLAN_FAIL", "OPA_FAIL", "PASS"]
    assert pred.converged_at == 4

    ver2 = ScriptedVerifier([("A", "VALIDATE_FAIL")])
    lm = DummyLM(answers)
    with dspy.context(lm=lm):
        pred = iac.RepairLoop(iac.IaCGenerator("cot"), ver2, k=3)(prompt="p", item=ITEM)
    assert len(pred.attempts) == 3 and len(ver2.seen) == 3
    assert len(lm.history) == 3  # 1 generation + 2 repairs: the k-th verdict ends the loop
    assert pred.converged_at is None and pred.stages == ["VALIDATE_FAIL"] * 3


def test_repair_keeps_last_config_when_answer_has_no_code():
    ver = ScriptedVerifier([("aws_vpc", "PLAN_FAIL")])
    lm = DummyLM([{"reasoning": "r", "config": VPC}, {"config": "Sorry, I am not sure."}])
    with dspy.context(lm=lm):
        pred = iac.RepairLoop(iac.IaCGenerator("cot"), ver, k=2)(prompt="p", item=ITEM)
    assert ver.seen == [VPC] * 2 and pred.config == VPC


def test_repair_with_policy_shows_rego_to_generator_and_repairer():
    ver = ScriptedVerifier([("OPA", "OPA_FAIL"), ("aws_vpc", "PASS")])
    lm = DummyLM([{"reasoning": "r", "config": 'resource "aws_vpc" "m" { # OPA\n}\n'}, {"config": VPC}])
    loop = iac.RepairLoop(iac.IaCGenerator("cot", show_policy=True), ver, k=4, show_policy=True, items=[ITEM])
    with dspy.context(lm=lm):
        pred = loop(prompt=ITEM.inputs["prompt"])
    texts = user_texts(lm)
    assert all("default valid := false" in t for t in texts) and pred.converged_at == 2


# -- ReAct over the MCP server --------------------------------------------------------------------

@pytest.fixture(scope="module")
def toolbox():
    from verifirst.retrieval.mcp_server import MCPToolbox, make_server

    tb = MCPToolbox(make_server(SCHEMA_PATH))  # no store: lexical search_docs
    yield tb
    tb.close()


def test_react_mcp_calls_the_tool_and_sees_the_schema(toolbox):
    lm = DummyLM([
        {"next_thought": "look it up", "next_tool_name": "lookup_resource_schema",
         "next_tool_args": {"resource_type": "aws_s3_bucket_versioning"}},
        {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}},
        {"reasoning": "r", "config": fenced(VPC)},
    ])
    gen = iac.build_strategy("react-mcp", toolbox=toolbox)
    n0 = len(toolbox.calls)
    with dspy.context(lm=lm):
        pred = gen(prompt="versioned bucket")
    assert pred.config == VPC and pred.tool_calls == ["lookup_resource_schema"]
    assert toolbox.calls[n0:] == [{"tool": "lookup_resource_schema",
                                   "arguments": {"resource_type": "aws_s3_bucket_versioning"},
                                   "is_error": False}]
    assert "versioning_configuration" in pred.trajectory["observation_0"]
    assert "versioning_configuration" in user_texts(lm)[1]  # observation reached the model


def test_build_strategy_refuses_missing_parts():
    for name, kw in [("react-mcp", {}), ("react-rag", {}), ("repair", {}), ("nope", {})]:
        with pytest.raises(ValueError):
            iac.build_strategy(name, **kw)
    assert isinstance(iac.build_strategy("repair", verifier=ScriptedVerifier([])), iac.RepairLoop)


# -- experiment report ----------------------------------------------------------------------------

def _result(name, stages, classes=None):
    rows = []
    for i, st in enumerate(stages):
        rows.append(exp.ItemResult(f"i{i}", "ERROR" if st == "ERROR" else ("PASS" if st == "PASS" else "FAIL"),
                                   None if st == "ERROR" else st,
                                   (classes or {}).get(i, [])))
    return exp.StrategyResult(name, rows)


def test_report_counts_stages_classes_and_pairs():
    a = _result("cot", ["VALIDATE_FAIL"] * 6 + ["PASS"] * 2 + ["OPA_FAIL", "ERROR"],
                {0: ["SELF_DEFINED_PROPERTY"], 1: ["SELF_DEFINED_PROPERTY", "TYPE"]})
    b = _result("repair", ["PASS"] * 8 + ["OPA_FAIL", "PASS"])
    rep = exp.stage_report([a, b])
    ra = rep["strategies"]["cot"]
    assert ra["stages"] == {"VALIDATE_FAIL": 6, "PLAN_FAIL": 0, "OPA_FAIL": 1, "SCANNER_FAIL": 0, "DECEPTIVE_FIX": 0,
                            "PASS": 2, "ERROR": 1}
    assert ra["error_classes"]["SELF_DEFINED_PROPERTY"] == 2 and ra["error_classes"]["TYPE"] == 1
    assert ra["pass"] == 2 and ra["scored"] == 9 and ra["errors"] == 1
    assert ra["ci_lo"] < ra["pass_at_1"] < ra["ci_hi"]
    pair = rep["pairs"][0]
    assert (pair["a"], pair["b"]) == ("cot", "repair")
    # paired on the 9 items both scored: cot-only passes 0, repair-only passes 6
    assert pair["n"] == 9 and pair["b_count"] == 0 and pair["c_count"] == 6
    assert pair["p_value"] == pytest.approx(2 * 0.5 ** 6)


def test_report_refuses_results_over_different_items():
    a = _result("x", ["PASS"])
    b = exp.StrategyResult("y", [exp.ItemResult("other", "PASS", "PASS", [])])
    with pytest.raises(ValueError):
        exp.stage_report([a, b])


def test_rego_transition_matrix_and_exact_test():
    before = _result("repair", ["OPA_FAIL"] * 14 + ["PASS"] * 4 + ["VALIDATE_FAIL"] * 2)
    after = _result("repair+policy", ["PASS"] * 11 + ["OPA_FAIL"] * 3 + ["PASS"] * 4 + ["VALIDATE_FAIL", "PASS"])
    t = exp.rego_transition(before, after)
    assert t["matrix"]["OPA_FAIL"]["PASS"] == 11 and t["matrix"]["OPA_FAIL"]["OPA_FAIL"] == 3
    assert t["matrix"]["VALIDATE_FAIL"]["PASS"] == 1
    assert sum(sum(r.values()) for r in t["matrix"].values()) == 20  # every item, none dropped
    assert t["opa_fail_before"] == 14 and t["opa_resolved"] == 11
    # exact McNemar on OPA failures: 11 resolved vs 0 newly failing (S3's 11-vs-3 is a
    # different, and mis-stated, test; see the review of S3)
    assert t["opa"]["b"] == 0 and t["opa"]["c"] == 11
    assert t["opa"]["p_value"] == pytest.approx(2 * 0.5 ** 11)


def test_repair_loop_with_the_real_verifier_fixes_a_self_defined_property():
    mod = pytest.importorskip("verifirst.verifiers.terraform.verifier")
    from verifirst.benchmarks.iac_pack import load_pack

    item = load_pack().by_id()["s3-versioned-bucket"]
    wrong = 'resource "aws_s3_bucket" "artifacts" {\n  bucket = "verifirst-artifacts"\n  versioning_enabled = true\n}\n'
    lm = DummyLM([{"reasoning": "r", "config": fenced(wrong)}, {"config": fenced(item.gold["reference"])}])
    ver = mod.TerraformVerifier(backend="python", schema=str(SCHEMA_PATH))
    with dspy.context(lm=lm):
        pred = iac.RepairLoop(iac.IaCGenerator("cot"), ver, k=4, items=[item])(prompt=item.inputs["prompt"])
    assert pred.stages == ["VALIDATE_FAIL", "PASS"]
    assert pred.attempts[0]["error_classes"] == ["SELF_DEFINED_PROPERTY"]
    assert "versioning_enabled" in user_texts(lm)[1]  # the verifier's message reached the repairer


def test_run_strategy_and_report_on_the_pack_with_scripted_lm():
    mod = pytest.importorskip("verifirst.verifiers.terraform.verifier")
    from verifirst.benchmarks.iac_pack import load_pack

    items = load_pack().items[:3]
    ver = mod.TerraformVerifier(backend="python", schema=str(SCHEMA_PATH))
    # item 0 right, item 1 policy-violating, item 2 an LM failure (script runs out)
    lm = DummyLM([{"reasoning": "r", "config": items[0].gold["reference"]},
                  {"reasoning": "r", "config": items[1].gold["counterexample"]}])
    with dspy.context(lm=lm):
        res = exp.run_strategy("cot", iac.IaCGenerator("cot"), items, ver)
    assert [r.status for r in res.rows] == ["PASS", "FAIL", "ERROR"]
    assert res.rows[1].stage == "OPA_FAIL" and res.rows[1].error_classes == ["POLICY"]
    assert res.rows[2].error.startswith("lm:")
    summary = exp.stage_report([res])["strategies"]["cot"]
    assert summary["stages"]["OPA_FAIL"] == 1 and summary["errors"] == 1 and summary["scored"] == 2


def test_a_verifier_crash_inside_the_repair_loop_is_a_verifier_error():
    class Crashing:
        name = "crashing"

        def verify(self, item, candidate):
            raise RuntimeError("checkov exited during scan")

    lm = DummyLM([{"reasoning": "r", "config": VPC}])
    with dspy.context(lm=lm):
        res = exp.run_strategy("repair", iac.RepairLoop(iac.IaCGenerator("cot"), Crashing(), k=2), [ITEM], None)
    row = res.rows[0]
    assert row.status == "ERROR" and row.stage is None and row.error.startswith("verifier: VerifierFailure")
    assert "checkov exited during scan" in row.error and exp.strategy_summary(res)["scored"] == 0
