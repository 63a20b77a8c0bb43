"""HTML report: plots inlined, tables from a real (scripted) experiment, judge and teacher
sections when present, and `verifirst report RUN --html`."""
import base64
import copy
import json
import os
import re

import pytest
from typer.testing import CliRunner

from _mlflow_server import run_tiny
from verifirst.report import html as html_report
from verifirst.report import plots
from verifirst.cli import app

IMG = re.compile(r"<img [^>]*data-plot='([a-z_]+)' src='data:image/png;base64,([A-Za-z0-9+/=]+)'")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    out = run_tiny(root / "wd", root / "run", tracking=False)
    return out


def _images(html: str) -> dict[str, bytes]:
    return {name: base64.b64decode(b64) for name, b64 in IMG.findall(html)}


def judged(report: dict) -> dict:
    r = copy.deepcopy(report)
    r["splits"]["test"]["before"]["stages"] = {"VALIDATE_FAIL": 3, "PASS": 2, "OPA_FAIL": 1, "PLAN_FAIL": 2}
    r["test"] = {"judges": {
        "calibrated": {"n": 20, "accuracy": 0.8, "pi": 0.6,
                       "confusion": {"labels": ["PASS", "FAIL"], "matrix": [[8, 2], [2, 8]], "accuracy": 0.8}},
        "uncalibrated": {"n": 20, "accuracy": 0.6, "pi": 0.2,
                         "confusion": {"labels": ["PASS", "FAIL"], "matrix": [[9, 1], [7, 3]]}}},
        "n_items": 21, "n_scored": 20, "excluded_lm_errors": 1, "label_counts": {"PASS": 10, "FAIL": 10},
        "comparisons": {"calibrated_vs_uncalibrated": {"pi_delta": 0.4, "pi_ci95": [0.1, 0.7],
                                                       "mcnemar_exact": {"b": 1, "c": 5, "p_value": 0.2188}}}}
    r["champion"] = {"moved": False, "reason": "held-out pi 0.6 does not beat 0.65", "pi": 0.6}
    r["teacher"] = {"used": True, "keep": 73, "correct": 0, "abstain": 12, "error": 0, "stats": {
        "overall": {"n": 85, "keep": 73, "correct": 0, "skip": 12},
        "by_label": {"FAIL": {"n": 13, "keep": 1, "correct": 0, "skip": 12},
                     "PASS": {"n": 72, "keep": 72, "correct": 0, "skip": 0}},
        "by_label_fisher": {"p_value": 1.5e-12, "odds_ratio": 1000.0}}}
    return r


def test_page_from_a_run_has_plots_tables_and_per_item_rows(tiny, tmp_path):
    rep = tiny.report
    page = html_report.write_html(rep, tmp_path / "r.html")  # run dir taken from the report
    html = page.read_text()
    imgs = _images(html)
    assert {"pass_rate", "stage_funnel", "optimization_curve", "lm_usage"} <= set(imgs)
    assert all(b.startswith(b"\x89PNG\r\n\x1a\n") and len(b) > 2000 for b in imgs.values())
    # self-contained: nothing fetched from elsewhere
    assert not re.search(r"(src|href)=['\"](https?:|//|/)", html) and "<script" not in html and "<link" not in html
    assert rep["split_digest"] in html
    for split in ("train", "val", "test"):
        assert f"<td>{split}</td>" in html
        b, a = rep["splits"][split]["before"], rep["splits"][split]["after"]
        assert f"{b['pass']}/{b['scored']} = " in html and f"{a['pass']}/{a['scored']} = " in html
    c = rep["splits"]["test"]["comparison"]
    assert c["c_after_only"] > 0  # the scripted run improves, so the page has gains to show
    per_item = html.split("<details open data-split='test'>")[1].split("</table>")[0]
    assert "Per item (test)" in per_item and per_item.count("<tr class='gained'>") == c["c_after_only"]
    test_ids = [json.loads(l)["id"] for l in (tiny.run_dir / "eval" / "before_test.jsonl").read_text().splitlines()]
    assert all(re.search(rf"<tr class='[a-z]*'><td>{re.escape(i)}<br>", per_item) for i in test_ids)
    assert "McNemar p (exact)" in html and "95% paired bootstrap" in html
    assert "LM usage and cost" in html and "task/optimize" in html


def test_judge_and_teacher_sections_when_present(tiny, tmp_path):
    rep = judged(tiny.report)
    html = html_report.write_html(rep, tmp_path / "j.html", plot_dir=tmp_path / "plots").read_text()
    assert set(_images(html)) == set(plots.PLOTS)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(f"{n}.png" for n in plots.PLOTS)
    judges = html.split("<h2>Judges</h2>")[1].split("<h2>")[0]
    assert "<td>calibrated</td>" in judges and "<td>7</td><td>3</td>" in judges  # uncalibrated FAIL row
    assert "20 of 21 items scored (1 left out for judge LM errors)" in judges
    assert "champion</code> not moved: held-out pi 0.6 does not beat 0.65" in html
    assert "calibrated_vs_uncalibrated" in judges and "[0.1, 0.7]" in judges and "0.2188" in judges
    teacher = html.split("<h2>Teacher</h2>")[1].split("<h2>")[0]
    assert "<td>FAIL</td><td>13</td><td>1</td><td>0</td><td>12</td><td>92.3%</td>" in teacher
    assert "Fisher" in teacher


def test_calibration_loop_is_the_curve(tmp_path):
    rep = {"judge": "passfail", "suite": "outcomes", "loop": {"iterations": [
        {"iteration": 0, "train_pi": 0.1, "val_pi": 0.0, "prompt_chars": 200},
        {"iteration": 1, "train_pi": 0.5, "val_pi": 0.4, "prompt_chars": 260}]}}
    assert set(plots.make_all(rep, tmp_path)) == {"optimization_curve"}
    html = html_report.write_html(rep, tmp_path / "c.html").read_text()
    assert "judge calibration (passfail) on outcomes" in html


def test_stage_order_follows_the_iac_funnel():
    assert plots.stage_order(["PASS", "OPA_FAIL", "ERROR", "VALIDATE_FAIL", "PLAN_FAIL"]) == [
        "ERROR", "VALIDATE_FAIL", "PLAN_FAIL", "OPA_FAIL", "PASS"]
    assert plots.stage_order(["PASS", "MISMATCH"]) == ["MISMATCH", "PASS"]


def test_absent_data_is_skipped_not_an_error(tmp_path):
    assert plots.make_all({}, tmp_path) == {}
    assert plots.make_all({"splits": {}, "history": [{"iteration": 0}], "usage": {"total": {}}}, tmp_path) == {}
    html = html_report.write_html({"experiment": "empty <x>"}, tmp_path / "e.html").read_text()
    assert "No plottable data" in html and "empty &lt;x&gt;" in html


def test_cost_uses_the_price_list_and_self_hosted_is_free():
    assert html_report.cost_usd("local", 10_000, 10_000) == 0.0
    assert html_report.cost_usd("hosted_vllm/Qwen/Qwen3-8B", 10, 10) == 0.0
    assert html_report.cost_usd("no-such-model-xyz", 10, 10) is None
    c = html_report.cost_usd("openai/gpt-4o-mini", 1_000_000, 0)
    assert c is not None and 0 < c < 10


def test_cli_report_writes_html(tiny, tmp_path):
    out = tmp_path / "cli.html"
    res = CliRunner().invoke(app, ["report", str(tiny.run_dir), "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    assert len(_images(out.read_text())) >= 4


def test_cli_report_latest_and_clear_errors(tmp_path):
    wd = tmp_path / "wd"
    runs = wd / "runs"
    for name, exp in (("old", "first"), ("new", "second")):
        (runs / name).mkdir(parents=True)
        (runs / name / "report.json").write_text(json.dumps({"experiment": exp}))
    os.utime(runs / "old" / "report.json", (1, 1))
    (runs / "unfinished").mkdir()
    res = CliRunner().invoke(app, ["report", "latest", "--workdir", str(wd), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["experiment"] == "second"
    res = CliRunner().invoke(app, ["report", str(runs / "unfinished"), "--workdir", str(wd)])
    assert res.exit_code == 2 and "did not finish" in res.output
    res = CliRunner().invoke(app, ["report", "latest", "--workdir", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no finished run" in res.output
    res = CliRunner().invoke(app, ["report", "0123deadbeef", "--workdir", str(wd)])
    assert res.exit_code == 2 and "[--workdir]" in res.output and "nothing was created" in res.output, res.output
    assert not (wd / "mlflow.db").exists()  # a run id is not looked up in a store that is not there


def test_stage_rows_show_the_whole_iac_funnel():
    from verifirst.report import stage_rows

    rep = {"splits": {s: {"before": {"stages": {"VALIDATE_FAIL": 3, "PASS": 1}},
                          "after": {"stages": {"OPA_FAIL": 1, "PASS": 3}}} for s in ("train", "test")}}
    stages, rows = stage_rows(rep)
    assert stages == ["VALIDATE_FAIL", "PLAN_FAIL", "OPA_FAIL", "SCANNER_FAIL", "PASS"]
    assert rows[0] == ["train", "before", "3", "0", "0", "0", "1"] and rows[3] == ["test", "after", "0", "0", "1", "0", "3"]
    assert stage_rows({"splits": {"t": {"before": {"stages": {"OUTPUT": 2, "PASS": 1}}}}})[0] == ["OUTPUT", "PASS"]
    assert stage_rows({"splits": {}}) == ([], [])


def test_markdown_and_terminal_report_carry_the_stage_table(tiny, capsys):
    from verifirst.report import markdown, print_report

    md = markdown(tiny.report)
    assert "Where the items ended in the verifier" in md
    print_report(tiny.report)
    assert "verifier stage reached" in capsys.readouterr().out


def test_a_tracked_run_draws_its_plots_once(tmp_path, monkeypatch):
    """publish draws the plots into RUN/plots for report.html; the MLflow observer logs those files
    instead of drawing them again."""
    drawn = []
    make_all = plots.make_all

    def counting(report, out_dir):
        drawn.append(str(out_dir))
        return make_all(report, out_dir)

    monkeypatch.setattr(plots, "make_all", counting)
    out = run_tiny(tmp_path / "wd", tmp_path / "run", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert drawn == [str(tmp_path / "run" / "plots")]
    from mlflow.tracking import MlflowClient

    logged = {f.path for f in MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").list_artifacts(
        out.report["run_id"], "report/plots")}
    assert logged == {f"report/plots/{p.name}" for p in (tmp_path / "run" / "plots").glob("*.png")} and logged
