"""Calibrate an LLM judge on your own recorded outcomes, through the Python API.

    python examples/api_calibrate.py [WORKDIR]

examples/outcomes.jsonl holds code changes (title, diff, test plan) with the outcome each one
had (PASS/FAIL). AutoRefine's informed teacher reviews the training outcomes, disagreements
become prompt edits, validation picks the prompt, and the held-out test split reports the
calibrated judge against the uncalibrated one (Scott's π, FAIL recall, McNemar).
Runs on the embedded local model; VERIFIRST_EXAMPLE_SCRIPTED=1 uses scripted LMs instead (CI).
"""
import json
import os
import re
import sys
from pathlib import Path

import verifirst as vf

OUTCOMES = Path(__file__).resolve().parent / "outcomes.jsonl"
# What made the failed changes fail, as a reviewer who knows the outcome would point it out.
HAZARDS = ["eval(", "os.system(", "except Exception", "verify=False", "timeout=None", "print(password)",
           "a == b", "{name}'"]
FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
FAIL_RULE = re.compile(r"FAIL if the diff contains `([^`]+)`")


def scripted_answer(messages: list[dict]) -> str:
    """One scripted LM's answer in every calibration role, acting on what its prompt says.

    As the judge it applies the `FAIL if the diff contains ...` rules in its instructions (PASS
    otherwise); as the teacher it names the hazard in a failed diff; as the proposer it turns a
    disagreement into a rule (paired with a PASS rule, as AutoRefine asks); as the applier it
    appends the rules. So the judge only improves if the loop writes rules into its prompt.

    Args:
        messages: the chat messages sent to the model.
    """
    from verifirst.lm.testing import json_answer

    system, user = messages[0]["content"], messages[-1]["content"]
    f = {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}
    if "`new_prompt`" in system:
        rules = "".join(f"\n- {e['rule']}" for e in json.loads(f["edits"]) if e.get("op") == "add")
        return json_answer(new_prompt=f["judge_prompt"] + rules)
    if "`edits`" in system:
        edits = []
        for token in dict.fromkeys(re.findall(r"`([^`]+)`", f.get("disagreements", ""))):
            if token in HAZARDS and f"`{token}`" not in f.get("judge_prompt", ""):
                edits += [{"op": "add", "direction": "FAIL", "rule": f"FAIL if the diff contains `{token}`"},
                          {"op": "add", "direction": "PASS",
                           "rule": f"PASS if the diff uses a safe form instead of `{token}`"}]
        return json_answer(edits=edits)
    if "`decision`" in system:
        found = [h for h in HAZARDS if h in f.get("diff", "")]
        if f.get("outcome_label") == "FAIL" and found:
            return json_answer(justification=f"the diff contains `{found[0]}`", decision="KEEP")
        if f.get("outcome_label") == "FAIL":
            return json_answer(justification="nothing in the view explains the failure", decision="SKIP")
        return json_answer(justification="no hazard is visible", decision="KEEP")
    instructions = system.split("your objective is:", 1)[-1]
    hit = [t for t in FAIL_RULE.findall(instructions) if t in f.get("diff", "")]
    return json_answer(reasoning=f"matches `{hit[0]}`" if hit else "no rule applies",
                       verdict="FAIL" if hit else "PASS")


def scripted_models():
    """The scripted LM (`scripted_answer`) in the judge role; the teacher and proposer default to it."""
    from verifirst.lm.testing import scripted_lm

    return {"judge": scripted_lm(scripted_answer, role="judge", name="ex-judge")}


def main(workdir: str = ".verifirst") -> dict:
    scripted = os.environ.get("VERIFIRST_EXAMPLE_SCRIPTED") == "1"
    models = scripted_models() if scripted else {"judge": "local"}
    res = vf.calibrate(OUTCOMES, "passfail", models=models, max_iters=4, splits=(0.5, 0.25, 0.25),
                       workdir=workdir, tracking=vf.MLflow(traces=False))
    res.save(os.path.join(str(res.run_dir), "out"))
    rep = res.report
    judges = rep["judge"]["test"].get("judges", {})
    print(json.dumps({"test_pi": {name: j["pi"] for name, j in judges.items()},
                      "test": {p: rep["splits"]["test"][p]["pass_rate"] for p in ("before", "after")},
                      "teacher": {k: rep["judge"]["teacher"][k] for k in ("keep", "correct", "abstain")},
                      "prompt": rep["judge"]["calibrated_prompt"], "champion": rep.get("champion", {}).get("reason"),
                      "run_dir": str(res.run_dir)}, indent=2))
    return rep


if __name__ == "__main__":
    main(*sys.argv[1:2])
