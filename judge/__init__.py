"""The judge domain: calibrating an LLM judge on workflow outcomes and keeping it current.

Calibration (`vf.calibrate`, `verifirst calibrate`), the judge programs, labels and label maps,
promotion, the review queue, the baseline, monitoring (`vf.monitor`), the `verifirst judge` verb,
AutoRefine and the MLflow aligner. It imports the kernel (verifirst.core, lm, loop, tracking,
report, api, config) and the kernel never imports it (lint-imports: kernel-names-no-judge).
"""
