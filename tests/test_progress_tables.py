"""Result tables stay readable at 80 columns: no cell cut with an ellipsis (`[29.…`, `Wils…`); a
table whose words cannot all fit is printed one row at a time (header: value), a table that fits
stays one table with its cells folded, never cut."""
from __future__ import annotations

import io
import re

import dspy
from rich.console import Console
from rich.table import Table

import verifirst as vf
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.report import print_report
from verifirst.report.tables import fit, min_width


def report(tmp_path) -> dict:
    data = [{"id": f"q{k}", "question": f"what is {k} + {k}?", "answer": str(2 * k)} for k in range(30)]

    def answer(messages):
        k = int(messages[-1]["content"].split("what is ")[1].split(" ")[0])
        return json_answer(answer=str(2 * k) if k % 3 else "0")

    def exact(example, pred, trace=None):
        return float(pred.answer == example.answer)

    return vf.evaluate(dspy.Predict("question -> answer"), data, exact, models={"task": scripted_lm(answer)},
                       workdir=tmp_path, tracking=None).report


def printed(rep: dict, width: int) -> str:
    buf = io.StringIO()
    print_report(rep, Console(file=buf, width=width, force_terminal=False, color_system=None))
    return buf.getvalue()


def intervals(text: str) -> list[str]:
    return re.findall(r"\d+\.\d%\s+\[\d+\.\d%,\s+\d+\.\d%\]", text)


def test_the_report_at_80_columns_cuts_no_cell(tmp_path):
    rep = report(tmp_path)
    narrow, wide = printed(rep, 80), printed(rep, 200)
    assert "…" not in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert sorted(intervals(narrow)) == sorted(intervals(wide)) and intervals(wide)  # every number whole
    assert "before pass [95% Wilson]" in narrow and "McNemar p" in narrow  # every header whole
    assert "…" not in wide and re.search(r"┃ split ┃ n\s+┃ before pass \[95% Wilson\]", wide)  # one table there


def test_a_table_that_fits_stays_one_table_and_folds_rather_than_cuts():
    t = Table(title="t")
    for h in ("split", "pass"):
        t.add_column(h)
    t.add_row("train", "a-very-long-unbroken-token-of-forty-chars!!")
    con = Console(file=io.StringIO(), width=80)
    assert fit(t, con) is t and all(c.overflow == "fold" for c in t.columns)
    assert min_width(t) == 1 + (5 + 3) + (43 + 3)
    narrow = Console(file=io.StringIO(), width=40)
    assert fit(t, narrow) is not t  # the token cannot fit whole in 40: rows one at a time
