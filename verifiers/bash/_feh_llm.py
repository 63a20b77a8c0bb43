"""S1's LLM equivalence check as a DSPy module: task, both commands, both outputs (<= 1000
chars each) -> true/false. Runs with whatever LM is configured (dspy.settings or dspy.context)."""
from __future__ import annotations

import os
import re

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

OUTPUT_CHARS = 1000


class BashEquivalence(dspy.Signature):
    """You are given a task, two Bash commands and the output of each. The first command is the
    ground truth. Answer true if the second command accomplishes the task, otherwise false."""

    task: str = dspy.InputField()
    ground_truth_command: str = dspy.InputField()
    model_command: str = dspy.InputField()
    ground_truth_output: str = dspy.InputField()
    model_command_output: str = dspy.InputField()
    equivalent: bool = dspy.OutputField(desc="true or false")


class LlmEquivalenceCheck(dspy.Module):
    def __init__(self):
        super().__init__()
        self.judge = dspy.Predict(BashEquivalence)

    def forward(self, task: str, gold_command: str, candidate_command: str,
                gold_output: str, candidate_output: str) -> dspy.Prediction:
        return self.judge(task=task or "(no task text)", ground_truth_command=gold_command,
                          model_command=candidate_command,
                          ground_truth_output=gold_output[:OUTPUT_CHARS] or "(no output)",
                          model_command_output=candidate_output[:OUTPUT_CHARS] or "(no output)")


_YES, _NO = {"true"}, {"false"}


def as_bool(v) -> bool:
    """DSPy usually parses bool; small models sometimes return text. Text that says neither
    true nor false (or both) is an LM failure, raised, never read as false."""
    if isinstance(v, bool):
        return v
    words = set(re.findall(r"[a-z]+", str(v).lower()))
    yes, no = bool(words & _YES), bool(words & _NO)
    if yes != no:
        return yes
    raise ValueError(f"the LM answered {str(v)[:80]!r}, neither true nor false")
