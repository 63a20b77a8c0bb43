"""Backend-2 verdicts on the IaC-Eval dev40 references and template plan agreement, as JSON,
for comparison with the terraform backend: `python -m verifirst.verifiers.terraform._hcl_dev40`."""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from verifirst.verifiers.terraform.hcl_check import check
from verifirst.verifiers.terraform.plan_synth import synthesize_plan
from verifirst.verifiers.terraform.tf_schema import default_schema_path, load_schema

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "iac-eval-v1"


def dev40_verdicts(csv_path=DATA / "iac_eval_v1_dev40.csv", schema=None) -> list[dict]:
    schema = load_schema(schema or default_schema_path())
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for i, row in enumerate(rows):
        t0 = time.perf_counter()
        stage, errors, warnings = check({"main.tf": row["Reference output"]}, schema)
        out.append({"row": i, "resource": row["Resource"], "stage": stage,
                    "errors": [e.as_dict() for e in errors], "warnings": warnings,
                    "ms": round((time.perf_counter() - t0) * 1000, 2)})
    return out


def template_agreement(schema=None) -> dict:
    schema = load_schema(schema or default_schema_path())
    exp_total = exp_same = after_total = after_same = attr_total = attr_same = 0
    for main in sorted((DATA / "templates").glob("*/main.tf")):
        real_p = main.parent / "tfplan.json"
        if not real_p.exists():
            continue
        real = json.loads(real_p.read_text())
        syn = synthesize_plan({"main.tf": main.read_text()}, schema, base_dir=str(main.parent))
        got = {r["address"]: r for r in syn["configuration"]["root_module"]["resources"]}
        for r in real["configuration"]["root_module"]["resources"]:
            exp_total += 1
            exp_same += got.get(r["address"]) == r
        changes = {r["address"]: r["change"] for r in syn.get("resource_changes", [])}
        for r in real["resource_changes"]:
            if r["change"]["actions"] != ["create"]:
                continue
            mine = changes.get(r["address"], {}).get("after") or {}
            after_total += 1
            after_same += mine == r["change"]["after"]
            for k, v in r["change"]["after"].items():
                attr_total += 1
                attr_same += mine.get(k, "<absent>") == v
    return {"expressions_match": [exp_same, exp_total], "after_exact": [after_same, after_total],
            "after_attributes": [attr_same, attr_total]}


def main(argv=None) -> int:
    verdicts = dev40_verdicts()
    # steady-state timing: second pass, parser and schema already loaded
    t0 = time.perf_counter()
    verdicts = dev40_verdicts()
    ms = (time.perf_counter() - t0) * 1000 / max(len(verdicts), 1)
    report = {"backend": "python", "ms_per_config": round(ms, 2),
              "pass": sum(v["stage"] == "PASS" for v in verdicts), "n": len(verdicts),
              "templates": template_agreement(), "verdicts": verdicts}
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
