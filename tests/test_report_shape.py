"""`verifirst run` and `verifirst calibrate` are one driver: their reports have the same shape.

The run side is an experiment file (examples/bash_gepa.toml, scripted models, a few items); the
calibrate side is an outcomes file with the rule-following scripted LM. Calibrate's report is
the run's report plus a `judge` section, and both print the same tables.
"""
import io
import json
from pathlib import Path

from rich.console import Console

from test_autorefine import RuleFollowingLM
from test_calibrate import write_outcomes
from verifirst import api, config, experiment
from verifirst.judge.calibrate import calibrate_outcomes
from verifirst.judge.printing import print_calibration
from verifirst.lm import Models
from verifirst.report import HEADERS, JUDGE_HEADERS, markdown, print_report
from verifirst.lm.testing import json_answer, scripted_lm

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_report(tmp_path) -> dict:
    exp = config.load(EXAMPLES / "bash_gepa.toml")
    exp.sections["experiment"]["workdir"] = str(tmp_path / "wd-run")
    exp.sections["suite"]["limit"] = 9
    exp.sections["optimizer"]["max_metric_calls"] = 8
    exp.sections["tracking"]["enabled"] = False
    models = Models(task=scripted_lm(lambda m: json_answer(reasoning="short", command="ls /"), name="shape-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Be precise."),
                                           role="reflection", name="shape-refl"))
    return api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None).report


def calibrate_report(tmp_path) -> dict:
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    return calibrate_outcomes(src, workdir=tmp_path / "wd-cal", models={"judge": lm, "teacher": lm, "reflection": lm},
                              max_iters=2, tracking=False, echo=lambda m: None)


def test_run_and_calibrate_reports_have_the_same_shape(tmp_path):
    run, cal = run_report(tmp_path), calibrate_report(tmp_path)
    # the same top-level keys; calibrate adds its judge section, review queue and how it read the labels,
    # a verifier with stages its funnel
    assert set(cal) - set(run) == {"judge", "review_queue", "labels"}
    assert set(run) - set(cal) <= {"stage_order"}
    assert set(run["splits"]) == set(cal["splits"]) == {"train", "val", "test"}
    for split in run["splits"]:
        r, c = run["splits"][split], cal["splits"][split]
        assert set(r) == set(c) == {"before", "after", "comparison"}
        for part in ("before", "after", "comparison"):
            assert set(r[part]) == set(c[part]), (split, part)
    assert cal["engine"] == "autorefine" and cal["history"] and cal["instructions_changed"] is True
    # the judge section is computed from the driver's evaluations of the same items
    test = cal["judge"]["test"]
    assert test["n_items"] == cal["splits"]["test"]["before"]["n"] == cal["sizes"]["test"]
    assert test["judges"]["calibrated"]["pi"] > test["judges"]["uncalibrated"]["pi"]
    after = cal["splits"]["test"]["after"]
    assert test["judges"]["calibrated"]["accuracy"] == after["pass"] / after["scored"]
    assert json.loads((Path(cal["run_dir"]) / "report.json").read_text())["judge"]["kind"] == "passfail"


def test_calibrate_prints_the_common_tables_plus_the_judge_table(tmp_path, capsys):
    cal = calibrate_report(tmp_path)
    md = markdown(cal)
    assert all(h in md for _, h in HEADERS) and all(h in md for h in JUDGE_HEADERS)
    assert "calibrated_vs_uncalibrated: Δπ" in md
    assert (Path(cal["run_dir"]) / "report.md").read_text() == md
    buf = io.StringIO()
    print_report(cal, Console(file=buf, width=200))
    shown = buf.getvalue()
    assert "before pass [95% Wilson]" in shown and "judge agreement on the held-out test split" in shown
    print_calibration(cal)
    out = capsys.readouterr().out
    assert "calibrate-passfail: autorefine on outcomes" in out and "judge agreement" in out
    assert "teacher: keep" in out and "Items without a verdict" in out
