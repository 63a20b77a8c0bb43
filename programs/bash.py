"""NL -> Bash generator: Predict or ChainOfThought over one signature."""
from __future__ import annotations

import dspy


class NLToBash(dspy.Signature):
    """Translate the task into a single bash command that does exactly what is asked.
    Output only the command, no explanation."""

    task: str = dspy.InputField(desc="what the command must do, in natural language")
    command: str = dspy.OutputField(desc="one bash command (or a short script)")


class BashGenerator(dspy.Module):
    """`variant="predict"` answers directly; `"cot"` reasons first."""

    output_field = "command"

    def __init__(self, variant: str = "predict", instructions: str | None = None):
        super().__init__()
        if variant not in ("predict", "cot"):
            raise ValueError(f"variant must be 'predict' or 'cot', got {variant!r}")
        sig = NLToBash if instructions is None else NLToBash.with_instructions(instructions)
        self.variant = variant
        self.generate = dspy.Predict(sig) if variant == "predict" else dspy.ChainOfThought(sig)

    def forward(self, task: str):
        pred = self.generate(task=task)
        return dspy.Prediction(command=(pred.command or "").strip(), reasoning=getattr(pred, "reasoning", None))
