"""The judge domain: calibrating an LLM judge on workflow outcomes and keeping it current.

Calibration (`vf.calibrate`, `verifirst calibrate`), the judge programs, labels and label maps,
promotion, the review queue, the baseline, monitoring (`vf.monitor`), the `verifirst judge` verb,
AutoRefine and the MLflow aligner. It imports the kernel (verifirst.core, lm, loop, tracking,
report, api, config) and the kernel never imports it (lint-imports: kernel-names-no-judge).
"""


def register(registry) -> None:
    """What the judge domain adds to the component registry (entry point `judge` of the group
    `verifirst.components`): the AutoRefine engine, the label verifier, the outcome and ICE-Score
    suites, and `verifirst.calibrate`, `verifirst.monitor`, `verifirst.monitor_recorded` and
    `verifirst.AutoRefineAligner`."""
    add = registry.add
    add("engine", "autorefine", "verifirst.judge.autorefine:AutoRefineEngine", "AutoRefine judge calibration")
    add("verifier", "label", "verifirst.judge.label_verifier:LabelVerifier", "judge verdict vs recorded outcome")
    add("suite", "outcomes", "verifirst.judge.outcomes:load_outcomes", "outcome records (JSONL/CSV)")
    add("suite", "ice-score", "verifirst.judge.outcomes:load_ice_score", "HumanEval snippets with execution grades")
    add("public", "calibrate", "verifirst.judge.calibrate:calibrate", "calibrate a judge on outcomes (vf.calibrate)")
    add("public", "monitor", "verifirst.judge.monitoring:monitor", "a deployed judge per time window (vf.monitor)")
    add("public", "monitor_recorded", "verifirst.judge.recorded_verdicts:monitor_recorded",
        "the deployed judge's recorded verdicts per time window, no model call (vf.monitor_recorded)")
    add("public", "AutoRefineAligner", "verifirst.judge.aligner:AutoRefineAligner",
        "AutoRefine as an MLflow judge aligner")
