"""GEPA on your own DSPy program with a plain metric function, through the Python API.

    python examples/api_gepa.py [WORKDIR]

The metric returns dspy.Prediction(score=, feedback=): GEPA's reflection reads the feedback.
Runs on the embedded local model; VERIFIRST_EXAMPLE_SCRIPTED=1 uses scripted LMs instead (CI).
"""
import json
import os
import re
import sys

import dspy

import verifirst as vf


class Slugify(dspy.Signature):
    """Turn a product name into a URL slug."""

    name: str = dspy.InputField()
    slug: str = dspy.OutputField()


NAMES = ["Blue Widget", "Red Gadget", "Solar Lamp", "Paper Cup", "Steel Bottle", "Wool Scarf", "Desk Chair",
         "Glass Jar", "Oak Table", "Silk Tie", "Clay Pot", "Iron Pan", "Linen Shirt", "Cotton Bag", "Brass Key"]
DATA = [{"id": f"p{k}", "name": n, "slug": n.lower().replace(" ", "-")} for k, n in enumerate(NAMES)]


def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    """1.0 for the exact slug; the feedback says what is wrong, for GEPA's reflection."""
    got = (pred.slug or "").strip()
    if got == example.slug:
        return dspy.Prediction(score=1.0, feedback="correct")
    hint = "use lowercase words joined by hyphens" if "-" not in got else "lowercase only"
    return dspy.Prediction(score=0.0, feedback=f"expected {example.slug!r}, got {got!r}: {hint}")


def scripted_models():
    """LMs that follow the instruction: hyphens once the prompt asks for them."""
    from verifirst.lm.testing import json_answer, scripted_lm

    def task(messages):
        name = re.search(r"\[\[ ## name ## \]\]\n(.*)", messages[-1]["content"]).group(1).strip()
        hyphens = "hyphen" in messages[0]["content"]
        return json_answer(slug=name.lower().replace(" ", "-") if hyphens else name.replace(" ", "_"))

    return {"task": scripted_lm(task, name="ex-slug"),
            "reflection": scripted_lm(lambda m: json_answer(
                new_instruction="Write the name in lowercase words joined by hyphens."), role="reflection",
                name="ex-slug-refl")}


def main(workdir: str = ".verifirst") -> dict:
    scripted = os.environ.get("VERIFIRST_EXAMPLE_SCRIPTED") == "1"
    models = scripted_models() if scripted else {"task": "local", "reflection": "local"}
    res = vf.optimize(dspy.Predict(Slugify), DATA, metric, optimizer="gepa", splits=(0.6, 0.2, 0.2),
                      models=models, budget=vf.Budget(max_metric_calls=30), workdir=workdir, name="api-gepa")
    res.save(os.path.join(str(res.run_dir), "out"))
    test = res.report["splits"]["test"]
    print(json.dumps({"test_before": test["before"]["pass_rate"], "test_after": test["after"]["pass_rate"],
                      "instructions": res.report["instructions"], "run_dir": str(res.run_dir)}, indent=2))
    return res.report


if __name__ == "__main__":
    main(*sys.argv[1:2])
