"""The sandbox's own code (Python + C) stays below the 3,780 lines it had when issue 33 asked for
less (`wc -l` of the files benchmarks/perf/sandbox.py counts): a line count, not a timing, so it
cannot grow back unnoticed."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from verifirst.benchmarks.perf.sandbox import CODE_LINES_GOAL, SANDBOX_FILES, code_lines

HERE = Path(importlib.util.find_spec("verifirst.verifiers.bash").submodule_search_locations[0])


def test_the_sandbox_code_is_smaller_than_when_issue_33_was_filed():
    got = code_lines()
    assert got["total"] < CODE_LINES_GOAL == 3780, got
    wc = subprocess.run(["wc", "-l", *SANDBOX_FILES], cwd=HERE, capture_output=True, text=True, check=True).stdout
    assert int(wc.split()[-2]) == got["total"] and all(n > 0 for n in got["per_file"].values()), wc


def test_every_c_file_of_the_sandbox_is_counted():
    """New C code beside the launcher counts too: it cannot be moved out of the count."""
    assert {p.name for p in HERE.glob("*.c")} <= set(SANDBOX_FILES)
