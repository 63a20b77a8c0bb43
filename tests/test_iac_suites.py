"""IaC suites: built-in pack (schema, references vs own policies), IaC-Eval v1/v2 CSV loaders."""
from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest

from verifirst.benchmarks import iac_eval, iac_pack
from verifirst.core.errors import InputError

REAL_SCHEMA = iac_eval.shared_data_dir() / "aws-provider-schema" / "aws_provider_schema_6.47.0.slim.json.gz"
AWS = "registry.terraform.io/hashicorp/aws"


def _policy_result(policy: str, plan: dict) -> dict:
    regopy = pytest.importorskip("regopy")
    interp = regopy.Interpreter()
    interp.add_module("policy", policy)
    interp.set_input_term(json.dumps(plan))
    out = interp.query("data." + iac_pack.POLICY_PACKAGE)
    return json.loads(str(out))["expressions"][0]


@pytest.fixture(scope="module")
def pack():
    return iac_pack.load_pack()


def test_pack_has_twenty_tasks_with_full_gold(pack):
    assert len(pack) >= 20
    ids = [it.id for it in pack.items]
    assert len(set(ids)) == len(ids)
    for it in pack.items:
        assert set(it.inputs) == {"prompt"} and it.inputs["prompt"].strip()
        assert {"reference", "rego_policy", "intent"} <= set(it.gold)
        assert it.group == it.id
        assert it.meta["difficulty"] in (1, 2, 3)
        assert "import rego.v1" in it.gold["rego_policy"]
        assert "default valid := false" in it.gold["rego_policy"]


def test_every_reference_passes_and_every_counterexample_fails_its_policy(pack):
    for it in pack.items:
        ok = _policy_result(it.gold["rego_policy"], iac_pack.stored_plan(it.id, "reference"))
        assert ok["valid"] is True, it.id
        bad = _policy_result(it.gold["rego_policy"], iac_pack.stored_plan(it.id, "counterexample"))
        assert bad["valid"] is False, it.id


def test_stored_plans_are_the_current_configs(pack):
    # a plan made from an older reference.tf would make the policy test above meaningless
    for it in pack.items:
        plan = iac_pack.stored_plan(it.id, "reference")
        addrs = {r["address"] for r in plan["configuration"]["root_module"]["resources"]}
        declared = {f"{t}.{n}" for t, n in re.findall(r'resource\s+"(\w+)"\s+"(\w+)"', it.gold["reference"])}
        assert addrs == declared, it.id


def test_pack_uses_only_types_of_the_builtin_schema(pack):
    from verifirst.verifiers.terraform.tf_schema import load_schema

    schema = load_schema(iac_pack.SCHEMA_PATH)
    for it in pack.items:
        for text in (it.gold["reference"], it.gold["counterexample"]):
            for t in re.findall(r'resource\s+"(\w+)"', text):
                assert schema.resource(t) is not None, (it.id, t)


def _compare(ours: dict, real: dict, path: str, diffs: list):
    for name, a in ours.get("attributes", {}).items():
        ra = real.get("attributes", {}).get(name)
        if ra is None:
            diffs.append(f"{path}.{name}: not in the provider")
            continue
        for k in ("required", "optional", "computed", "deprecated"):
            if bool(a.get(k)) != bool(ra.get(k)):
                diffs.append(f"{path}.{name}: {k} {a.get(k)} vs {ra.get(k)}")
        if a["type"] != ra["type"]:
            diffs.append(f"{path}.{name}: type {a['type']} vs {ra['type']}")
    for name, b in ours.get("block_types", {}).items():
        rb = real.get("block_types", {}).get(name)
        if rb is None:
            diffs.append(f"{path}.{name}: block not in the provider")
            continue
        for k in ("nesting_mode", "min_items", "max_items"):
            if b.get(k, 0) != rb.get(k, 0):
                diffs.append(f"{path}.{name}: {k} {b.get(k)} vs {rb.get(k)}")
        _compare(b["block"], rb["block"], f"{path}.{name}", diffs)
    if bool(ours.get("deprecated")) != bool(real.get("deprecated")):
        diffs.append(f"{path}: deprecated {ours.get('deprecated')} vs {real.get('deprecated')}")


def test_builtin_schema_flags_agree_with_the_real_provider():
    if not REAL_SCHEMA.exists():
        pytest.skip(f"real AWS schema not found at {REAL_SCHEMA}")
    ours = json.loads(iac_pack.SCHEMA_PATH.read_text())["provider_schemas"][AWS]
    with gzip.open(REAL_SCHEMA, "rt") as fh:
        real = json.load(fh)["provider_schemas"][AWS]
    assert len(ours["resource_schemas"]) >= 15
    diffs: list[str] = []
    for table in ("resource_schemas", "data_source_schemas"):
        for t, entry in ours[table].items():
            assert t in real[table], t
            assert entry["version"] == real[table][t]["version"], t
            _compare(entry["block"], real[table][t]["block"], t, diffs)
    assert diffs == []


def test_bad_pack_folder_names_file_and_field(tmp_path):
    task = tmp_path / "t1"
    task.mkdir()
    (task / "task.json").write_text(json.dumps({"id": "t1", "prompt": "p"}))
    with pytest.raises(InputError) as e:
        iac_pack.load_pack(tmp_path)
    assert "task.json" in str(e.value) and "intent" in str(e.value)


# -- IaC-Eval v1 --------------------------------------------------------------------------------

def test_dev40_loads_as_forty_items():
    if not iac_eval.dev40_path().exists():
        pytest.skip(f"dev40 CSV not found at {iac_eval.dev40_path()}")
    suite = iac_eval.load_dev40()
    assert len(suite) == 40
    assert len({it.id for it in suite.items}) == 40
    first = suite.items[0]
    assert first.inputs["prompt"] == "create a memory optimized PostgresSQL"
    assert first.meta["resource"] == "aws_db_instance" and first.meta["difficulty"] == 1
    assert 'resource "aws_db_instance"' in first.gold["reference"]
    assert "package terraform.validation" in first.gold["rego_policy"]
    assert first.gold["intent"].startswith('Has one "aws_db_instance"')
    assert all(it.group == it.id for it in suite.items)


def test_v1_ids_stay_stable_for_the_same_rows(tmp_path):
    rows = [{"Resource": "aws_vpc", "Prompt": f"make vpc {i}", "Rego intent": "package x",
             "Difficulty": "1", "Reference output": "", "Intent": ""} for i in range(3)]
    p = tmp_path / "v1.csv"
    with open(p, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(iac_eval.V1_COLUMNS))
        w.writeheader()
        w.writerows(rows)
    a, b = iac_eval.load_iac_eval_v1(p), iac_eval.load_iac_eval_v1(p)
    assert [i.id for i in a.items] == [i.id for i in b.items]
    assert len({i.id for i in a.items}) == 3


def test_v1_missing_column_is_an_input_error(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("Resource,Prompt,Difficulty\naws_vpc,make a vpc,1\n")
    with pytest.raises(InputError) as e:
        iac_eval.load_iac_eval_v1(p)
    assert str(p) in str(e.value) and "Rego intent" in str(e.value)


# -- IaC-Eval v2 layout -------------------------------------------------------------------------

V2_HEADER = ["task_id", "suite", "difficulty", "resource", "prompt", "intent", "rego_policy",
             "reference_output", "opa_input_path", "notes"]


def _write_v2(path: Path, rows: list[dict], header=V2_HEADER):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


def test_v2_layout_loads_with_extra_columns_in_meta(tmp_path):
    p = tmp_path / "v2.csv"
    _write_v2(p, [
        {"task_id": "265", "suite": "iam", "difficulty": "2", "resource": "aws_iam_group",
         "prompt": "Create an IAM group", "intent": "Has one aws_iam_group",
         "rego_policy": "package terraform.validation\nimport rego.v1\ndefault valid := false\n",
         "reference_output": 'resource "aws_iam_group" "g" {\n  name = "devs"\n}\n',
         "opa_input_path": "plan.json", "notes": "multi\nline"},
        {"task_id": "266", "suite": "s3", "difficulty": "L3", "resource": "aws_s3_bucket",
         "prompt": "Create a bucket", "intent": "", "rego_policy": "package x",
         "reference_output": "", "opa_input_path": "", "notes": ""}])
    suite = iac_eval.load_iac_eval_v2(p)
    assert [i.id for i in suite.items] == ["265", "266"]
    it = suite.items[0]
    assert it.inputs == {"prompt": "Create an IAM group"}
    assert it.gold["reference"].startswith('resource "aws_iam_group"')
    assert it.meta["suite"] == "iam" and it.meta["opa_input_path"] == "plan.json"
    assert it.meta["notes"] == "multi\nline" and it.meta["difficulty"] == 2
    assert suite.items[1].meta["difficulty"] == "L3"
    assert it.group == "265"


def test_v2_missing_column_and_duplicate_ids_are_input_errors(tmp_path):
    p = tmp_path / "v2.csv"
    _write_v2(p, [{"task_id": "1", "prompt": "x"}], header=["task_id", "prompt", "difficulty"])
    with pytest.raises(InputError) as e:
        iac_eval.load_iac_eval_v2(p)
    assert str(p) in str(e.value) and "'resource'" in str(e.value)
    q = tmp_path / "dup.csv"
    row = {k: "1" for k in V2_HEADER}
    _write_v2(q, [row, dict(row)])
    with pytest.raises(InputError) as e:
        iac_eval.load_iac_eval_v2(q)
    assert ":3" in str(e.value) and "duplicate" in str(e.value)


# -- the pack through the real verifier -----------------------------------------------------------

def _verifier(backend: str):
    mod = pytest.importorskip("verifirst.verifiers.terraform.verifier")
    return mod.TerraformVerifier(backend=backend, schema=str(iac_pack.SCHEMA_PATH))


def _check_pack(pack, backend: str):
    v = _verifier(backend)
    for it in pack.items:
        ok = v.verify(it, it.gold["reference"])
        assert ok.stage == "PASS", (it.id, ok.feedback)
        bad = v.verify(it, it.gold["counterexample"])
        assert bad.stage == "OPA_FAIL", (it.id, bad.stage, bad.feedback)
    return ok.backend


def test_pack_references_pass_and_counterexamples_fail_opa_python_backend(pack):
    assert _check_pack(pack, "python") == "python"


@pytest.mark.integration
def test_pack_references_pass_and_counterexamples_fail_opa_terraform_backend(pack):
    import shutil

    if shutil.which("terraform") is None:
        pytest.skip("no terraform binary on PATH")
    assert _check_pack(pack, "terraform") == "terraform"


def test_pack_passes_with_the_default_shipped_schema(pack):
    # the verifier's default (the full AWS schema) is a superset of the pack's 21-type schema
    mod = pytest.importorskip("verifirst.verifiers.terraform.verifier")
    v = mod.TerraformVerifier(backend="python")
    assert v.schema.endswith("aws_provider_schema_6.47.0.slim.json.gz")
    for it in pack.items:
        ok = v.verify(it, it.gold["reference"])
        assert ok.stage == "PASS", (it.id, ok.feedback)
        assert v.verify(it, it.gold["counterexample"]).stage == "OPA_FAIL", it.id
