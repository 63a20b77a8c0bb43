"""Benchmarks: suite loaders (built-in packs, public datasets, a user's tasks and outcomes) and the
research studies `verifirst bench NAME` runs.

`register` adds them to the component registry (entry point `benchmarks` of the group
`verifirst.components`, declared in verifirst's pyproject.toml as a plugin declares its own).
"""

_STUDIES = "verifirst.benchmarks.studies."


def register(registry) -> None:
    """The suites experiment files name, the built-in pack's verifier, and the studies."""
    add = registry.add
    add("suite", "bash-builtin", "verifirst.benchmarks.bash_pack:load_bash_pack", "built-in NL->Bash pack (40+ tasks)")
    add("suite", "nl2sh-alfa", "verifirst.benchmarks.nl2sh:load_nl2sh", "NL2SH-ALFA test, 300 tasks (PyPI icalfa)",
        "source")
    add("suite", "intercode-bash", "verifirst.benchmarks.intercode:load_intercode", "InterCode-Bash from a path")
    add("suite", "eabench", "verifirst.benchmarks.eabench:load_eabench", "NL2Bash-EAbench from a path")
    add("suite", "iac-builtin", "verifirst.benchmarks.iac_pack:load_pack",
        "built-in NL->Terraform packs (options: provider=aws|google|azurerm|kubernetes)", "directory")
    add("suite", "iac-eval-v1", "verifirst.benchmarks.iac_eval:load_iac_eval_v1", "IaC-Eval v1 CSV")
    add("suite", "iac-eval-v2", "verifirst.benchmarks.iac_eval:load_iac_eval_v2", "IaC-Eval v2 CSV")
    add("suite", "iac-tasks", "verifirst.benchmarks.iac_tasks:load_tasks", "a user's NL->Terraform tasks (folders or JSONL)")
    add("verifier", "bash-pack", "verifirst.benchmarks.bash_pack:PackVerifier", "the built-in pack's own checks")
    for name, module, help in (
        ("judge-validation", "judge_validation", "S0 Task 1: bash judges vs execution ground truth"),
        ("refinement", "refinement", "S0 Task 2: generator vs reflection agents, paired McNemar"),
        ("feh-quality", "feh_quality", "FEH accuracy/P/R/F1 on the 600 NL2SH-ALFA pairs"),
        ("iac-experiment", "iac_experiment", "S3 strategies: stage-decomposed pass@1, McNemar"),
        ("iac-references", "iac_reference_check", "IaC-Eval dev40 references through the gates"),
        ("noise-injection", "noise_injection", "S2 IV-A: teacher vs flipped labels, Fisher exact"),
        ("judge-anchor", "judge_anchor", "calibrated judge vs MLflow make_judge + align()"),
    ):
        add("study", name, f"{_STUDIES}{module}:main", help)
