"""A finished run in ./.verifirst on a scripted model (seconds, no model weights): what
`verifirst report latest` needs when the pages' own runs (the embedded model, `integration`)
were not selected. Used by a `setup` directive in docs/journeys/inspect.md (tests/test_doc_commands.py)."""
from __future__ import annotations

import dspy

import verifirst as vf
from verifirst.lm.testing import json_answer, scripted_lm

data = [{"id": f"q{k}", "question": f"what is {k} + {k}?", "answer": str(2 * k)} for k in range(12)]


def answer(messages):
    k = int(messages[-1]["content"].split("what is ")[1].split(" ")[0])
    return json_answer(answer=str(2 * k) if k % 3 else "0")


def exact(example, pred, trace=None):
    return float(pred.answer == example.answer)


if __name__ == "__main__":
    vf.evaluate(dspy.Predict("question -> answer"), data, exact, models={"task": scripted_lm(answer)},
                workdir=".verifirst", name="doc-scripted")
