"""Report files: report.json is strict JSON (a number that is not finite is null with its reason
beside it), every report the project writes passes json.dumps(allow_nan=False), and reports and
run files get the mode the umask gives a new file (they were 0600 whatever the umask)."""
from __future__ import annotations

import copy
import io
import json
import math
import os
import stat
from pathlib import Path

import pytest
from rich.console import Console

from verifirst import api
from verifirst import config, experiment
from verifirst.core import atomic
from verifirst.report.html import write_html
from verifirst.lm import Models
from verifirst.report import NAN_REASON, markdown, print_report, strict_json, write_reports
from verifirst.lm.testing import json_answer, scripted_lm

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _strict_load(path: Path):
    def refuse(constant):
        raise ValueError(f"{path.name} holds {constant}: not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _run(tmp_path: Path, name: str = "run"):
    exp = config.from_dict({
        "experiment": {"name": "files", "workdir": str(tmp_path / "wd"), "seed": 0},
        "suite": {"name": "bash-builtin", "limit": 8}, "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"}, "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": 8}, "models": {"task": "local"},
        "tracking": {"enabled": False}})
    models = Models(task=scripted_lm(lambda m: json_answer(command="printf hi"), name="files-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Be precise."),
                                           role="reflection", name="files-refl"))
    return api.run(exp, run_dir=tmp_path / name, progress=False, models=models, echo=lambda m: None)


@pytest.fixture
def umask():
    """Set the process umask for one test, restoring it after."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.fixture(scope="module")
def run027(tmp_path_factory):
    """One run made under umask 027 (neither 0600 nor the 0644 of umask 022)."""
    old = os.umask(0o027)
    try:
        return _run(tmp_path_factory.mktemp("files"))
    finally:
        os.umask(old)


def test_not_finite_numbers_are_null_with_their_reason_and_every_view_still_renders(tmp_path, run027):
    rep = copy.deepcopy(run027.report)
    comp = rep["splits"]["test"]["comparison"]
    comp["mcnemar_p"], comp["delta"] = float("nan"), float("inf")
    rep["splits"]["test"]["before"]["ci_lo"] = float("nan")
    one_class = "undefined: one label class"
    rep["judge"] = {"test": {"judges": {"calibrated": {"pi": float("nan"), "pi_null_reason": one_class,
                                                       "fail_recall": 1.0, "fail_precision": float("nan"),
                                                       "pass_recall": 1.0, "accuracy": 1.0}},
                             "comparisons": {"vs uncalibrated": {"pi_delta": float("nan"),
                                                                 "pi_ci95": [float("nan"), float("nan")],
                                                                 "mcnemar_exact": {"p_value": 1.0}}}}}
    out = tmp_path / "out"
    write_reports(rep, out)
    got = _strict_load(out / "report.json")
    c = got["splits"]["test"]["comparison"]
    assert c["mcnemar_p"] is None and c["mcnemar_p_null_reason"] == NAN_REASON
    assert c["delta"] is None and "infinite" in c["delta_null_reason"]
    assert got["splits"]["test"]["before"]["ci_lo"] is None and got["splits"]["test"]["before"]["ci_lo_null_reason"]
    j = got["judge"]["test"]["judges"]["calibrated"]
    assert j["pi"] is None and j["pi_null_reason"] == one_class  # the producer's reason stays
    assert j["fail_precision"] is None and j["fail_precision_null_reason"] == NAN_REASON
    cmp_ = got["judge"]["test"]["comparisons"]["vs uncalibrated"]
    assert cmp_["pi_ci95"] == [None, None] and cmp_["pi_ci95_null_reason"] == NAN_REASON
    assert not any(k.endswith("_null_reason") for k in got["splits"]["train"]["comparison"])  # finite: untouched
    assert math.isnan(rep["splits"]["test"]["comparison"]["mcnemar_p"])  # the caller's report is left as it was
    # the strict file reads back into every view (n/a where a number is missing)
    for r in (rep, got):
        assert "n/a" in markdown(r)
        buf = io.StringIO()
        print_report(r, Console(file=buf, width=200))
        assert "n/a" in buf.getvalue()
    write_html(got, out / "report.html", run_dir=out)
    json.dumps(strict_json(rep), allow_nan=False)


def test_every_report_the_project_writes_is_strict_json(tmp_path, run027):
    from test_autorefine import RuleFollowingLM
    from test_calibrate import write_outcomes

    from verifirst.judge.calibrate import calibrate_outcomes

    run = run027
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    calibrate_outcomes(src, workdir=tmp_path / "wd-cal", models={"judge": lm, "teacher": lm, "reflection": lm},
                       max_iters=1, tracking=False, echo=lambda m: None)
    reports = [run.run_dir / "report.json", *(tmp_path / "wd-cal").rglob("report.json")]
    assert len(reports) == 2
    for p in reports:
        json.dumps(_strict_load(p), allow_nan=False)


def test_strict_write_refuses_nan_rather_than_writing_it(tmp_path):
    with pytest.raises(ValueError):
        atomic.write_json(tmp_path / "x.json", {"a": float("nan")}, strict=True)
    assert not (tmp_path / "x.json").exists()
    atomic.write_json(tmp_path / "ck.json", {"a": float("nan")})  # a checkpoint keeps Python's reading
    assert math.isnan(json.loads((tmp_path / "ck.json").read_text())["a"])


def test_reports_and_run_files_follow_the_umask(tmp_path, run027, umask):
    for n in ("report.json", "report.md", "report.html", "run_state.json", "split_manifest.json"):
        p = run027.run_dir / n
        assert stat.S_IMODE(p.stat().st_mode) == 0o640, (n, oct(p.stat().st_mode))
    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        umask(mask)
        out = tmp_path / f"m{mask:o}"
        paths = write_reports(run027.report, out) + [atomic.write_text(out / "t.txt", "x"),
                                                    write_html(run027.report, out / "report.html", run_dir=out)]
        for p in paths:
            assert stat.S_IMODE(p.stat().st_mode) == mode, (p.name, oct(mask), oct(p.stat().st_mode))


def test_a_strict_report_reads_back_through_report_json_and_every_view(tmp_path, run027):
    from typer.testing import CliRunner

    from verifirst.cli import app

    d = tmp_path / "r"
    rep = copy.deepcopy(run027.report)
    rep["splits"]["test"]["comparison"]["mcnemar_p"] = float("nan")
    write_reports(rep, d)
    res = CliRunner().invoke(app, ["report", str(d), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"--json printed {c}"))
    assert got["splits"]["test"]["comparison"]["mcnemar_p_null_reason"] == NAN_REASON
    text = markdown(rep)
    buf = io.StringIO()
    print_report(got, Console(file=buf, width=200))
    assert "n/a" in text and "n/a" in buf.getvalue()
