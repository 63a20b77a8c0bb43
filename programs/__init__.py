"""Programs: the DSPy modules verifirst optimizes (NL->Bash, NL->Terraform, and the judges' registered names).

`register` adds them to the component registry (entry point `programs` of the group
`verifirst.components`, declared in verifirst's pyproject.toml as a plugin declares its own).
"""


def register(registry) -> None:
    """The programs experiment files name (the judge programs' kinds live in verifirst.judge.programs)."""
    add = registry.add
    add("program", "bash-generator", "verifirst.programs.bash:BashGenerator", "NL->Bash (options: variant=predict|cot)")
    add("program", "iac-generator", "verifirst.programs.builders:iac_program",
        "NL->Terraform (options: strategy=cot|react-rag|react-mcp|repair|repair-rag, k)")
    add("program", "passfail-judge", "verifirst.programs.builders:passfail_judge",
        "PASS/FAIL judge over an outcome view (options: view, prompt, prompt_file)")
    add("program", "rubric-judge", "verifirst.programs.builders:rubric_judge",
        "weighted-rubric judge (options: view, prompt, prompt_file, threshold)")
