"""Any dspy.Teleprompter through the split guard: BootstrapFewShot on your own program.

    python examples/api_teleprompter.py [WORKDIR]

The teleprompter is handed the train split only (BootstrapFewShot takes no valset; one that
does gets validation too) and scores with the run's metric, which refuses any test item; the
test split is scored once, after, in the same report as every other optimizer.
Runs on the embedded local model; VERIFIRST_EXAMPLE_SCRIPTED=1 uses a scripted LM instead (CI).
"""
import json
import os
import re
import sys

import dspy

import verifirst as vf


class Capital(dspy.Signature):
    """Name the capital city of the country."""

    country: str = dspy.InputField()
    capital: str = dspy.OutputField()


PAIRS = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Egypt", "Cairo"),
         ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Norway", "Oslo"), ("Chile", "Santiago"), ("Cuba", "Havana"),
         ("Greece", "Athens"), ("Poland", "Warsaw"), ("Austria", "Vienna"), ("Ireland", "Dublin"),
         ("Portugal", "Lisbon")]
DATA = [{"country": c, "capital": k} for c, k in PAIRS]  # no ids: each record's content gives a stable one


def metric(example, pred, trace=None):
    """True when the capital matches, case and spaces aside."""
    return (pred.capital or "").strip().lower() == example.capital.lower()


def scripted_models():
    """An LM that knows every other capital, and all of them once its prompt carries demos."""
    from verifirst.lm.testing import json_answer, scripted_lm

    known, every = dict(PAIRS[::2]), dict(PAIRS)

    def task(messages):
        country = re.findall(r"\[\[ ## country ## \]\]\n(.*)", messages[-1]["content"])[-1].strip()
        with_demos = len(messages) > 2  # demos come as earlier user/assistant turns
        return json_answer(capital=(every if with_demos else known).get(country, "Unknown"))

    return {"task": scripted_lm(task, name="ex-capital")}


def main(workdir: str = ".verifirst") -> dict:
    scripted = os.environ.get("VERIFIRST_EXAMPLE_SCRIPTED") == "1"
    models = scripted_models() if scripted else {"task": "local"}
    tp = dspy.BootstrapFewShot(max_bootstrapped_demos=3, max_labeled_demos=0, max_rounds=1)
    res = vf.optimize(dspy.Predict(Capital), DATA, metric, optimizer=tp, models=models, workdir=workdir,
                      name="api-teleprompter")
    res.save(os.path.join(str(res.run_dir), "out"))
    rep = res.report
    print(json.dumps({s: {p: rep["splits"][s][p]["pass_rate"] for p in ("before", "after")} for s in rep["splits"]}
                     | {"demos": len(res.program.demos), "metric_calls": rep["details"]["metric"]["calls"],
                        "run_dir": str(res.run_dir)}, indent=2))
    return rep


if __name__ == "__main__":
    main(*sys.argv[1:2])
