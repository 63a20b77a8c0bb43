"""Path-function arguments that only an evaluation resolves (a variable, a local) stay inside the
configuration directory: the evaluated half of confine.py's checks.

It runs hcl_check's analysis, which reaches confine through the evaluator (_hcl_eval reads
paths with confine.is_inside); kept apart from confine.py so that confine imports nothing of
the analysis and no import cycle runs through it. hcl_check is imported only when a
configuration has such a call.
"""
from __future__ import annotations

import re

from verifirst.verifiers.terraform.confine import OUTSIDE_MARK, PATH_FUNCS, OutsideConfiguration, _line

_CALL_ANY = re.compile(r'\b(?:' + "|".join(PATH_FUNCS) + r')\s*\(\s*[^"\s)]')


def check_evaluated_paths(files: dict[str, str], schema=None, variables: dict | None = None) -> None:
    """Refuse a configuration whose path-function argument is an expression (a variable, a local)
    that evaluates outside the directory: terraform would read it; the pure-Python evaluator finds
    it first. Costs an evaluation only when such a call exists.

    Args:
        files: {file name: HCL text}.
        schema: the provider schema, as hcl_check.analyze takes it.
        variables: variable values (tfvars).

    Raises:
        OutsideConfiguration: naming the file and line of the read.
    """
    calls = [(n, _line(t, m.start())) for n, t in files.items() if n.endswith(".tf") and isinstance(t, str)
             for m in _CALL_ANY.finditer(t)]
    if not calls:
        return
    from verifirst.verifiers.terraform import hcl_check

    a = hcl_check.analyze(files, schema, variables)
    for f in (a.ev.findings if a.ev is not None else ()):
        if OUTSIDE_MARK in f.message:
            # where the evaluation does not say (an output's value), the first such call does
            name, line = (f.file, f.line) if f.file and f.line else calls[0]
            raise OutsideConfiguration(f"a path function reads outside the configuration directory: {f.message}",
                                       path=name, line=line, expected="paths inside the configuration")
