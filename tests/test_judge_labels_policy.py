"""`calibrate --labels POLICY` (issue 34): records labelled by two people who disagree on a known 20%:
Krippendorff's α matches the reference implementation (the `krippendorff` package), is said before any
model is called, and each policy keeps the expected items with the expected labels."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verifirst.lm.testing import json_answer, scripted_lm

N, DISAGREE = 40, 8  # 20% of the items: alice and bob disagree


def _records() -> list[dict]:
    out = []
    for k in range(N):
        alice = "FAIL" if k % 2 else "PASS"
        bob = alice if k >= DISAGREE else ("PASS" if alice == "FAIL" else "FAIL")
        out.append({"id": f"r{k}", "diff": f"+ y = {'eval' if k % 2 else 'int'}(s{k})",
                    "labels": {"alice": alice, "bob": bob}})
    return out


@pytest.fixture
def outcomes(tmp_path):
    path = tmp_path / "two_labellers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    return path


def _suite(path):
    from verifirst.judge.options import load_outcome_suite

    return load_outcome_suite(path, require_label=False)


def test_alpha_matches_the_reference_implementation(outcomes):
    import krippendorff

    from verifirst.judge.labellers import apply_label_policy
    from verifirst.judge.labels import LabelRule

    lines = []
    got = apply_label_policy(_suite(outcomes), "majority", LabelRule.of(None, None), lines.append, n_boot=200)
    code = {"PASS": 1, "FAIL": 0}
    data = [[code[r["labels"][who]] for r in _records()] for who in ("alice", "bob")]
    want = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert got["alpha"] == pytest.approx(want, abs=1e-9)
    assert got["alpha_ci"][0] <= got["alpha"] <= got["alpha_ci"][1]
    assert got["disagreements"] == DISAGREE and got["n_pairable"] == N
    assert "Krippendorff's α" in lines[0] and f"{DISAGREE} disagreement(s)" in lines[0]


@pytest.mark.parametrize("policy,kept,label_of", [
    ("majority", N - DISAGREE, "alice"),  # two labellers: a disagreement is a tie, dropped
    ("unanimous", N - DISAGREE, "alice"),
    ("alice", N, "alice"),
    ("bob", N, "bob"),
])
def test_each_policy_selects_the_expected_items(outcomes, policy, kept, label_of):
    from verifirst.judge.labellers import apply_label_policy
    from verifirst.judge.labels import LabelRule

    suite = _suite(outcomes)
    apply_label_policy(suite, policy, LabelRule.of(None, None), lambda m: None, n_boot=50)
    by_id = {r["id"]: r["labels"][label_of] for r in _records()}
    assert len(suite.items) == kept
    assert all(it.gold["label"] == by_id[it.id] for it in suite.items)


def test_calibrate_says_the_agreement_before_any_model_call_and_reports_it(outcomes, tmp_path):
    import verifirst as vf

    calls, lines = [], []
    lm = scripted_lm(lambda m: calls.append(1) or json_answer(reasoning="r", verdict="PASS"), role="judge",
                     name="labels-policy")
    est = vf.calibrate(outcomes, models={"judge": lm}, workdir=tmp_path / "wd", labels="unanimous", dry_run=True,
                       echo=lines.append)
    assert calls == [] and any("Krippendorff's α" in ln and "keeps 32" in ln for ln in lines)
    assert est is not None


def test_an_unknown_labeller_is_refused_naming_the_flag_before_anything_is_written(outcomes, tmp_path):
    from verifirst.cli import app

    r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(outcomes), "--labels", "carol", "--workdir",
                                 str(tmp_path / "wd")])
    assert r.exit_code == 2 and "--labels" in r.output and "alice" in r.output, r.output
    assert not (tmp_path / "wd").exists()


def test_the_labellers_alpha_stands_beside_the_judges_pi_in_every_report_form():
    """report.md, report.html and the console say the labellers' α with its interval and the
    calibrated judge's held-out π on one line (a judge fitted to labels that people agree on at
    α 0.6 cannot be expected to reach π 0.9)."""
    import io

    from rich.console import Console

    from verifirst.report import labellers_line, markdown, print_report
    from verifirst.report.html import _judge_section

    rep = {"experiment": "e", "labels": {"agreement": {
               "policy": "majority", "labellers": ["alice", "bob"], "n_items": 40, "kept": 32, "alpha": 0.61,
               "alpha_ci": [0.45, 0.77]}},
           "judge": {"test": {"judges": {"calibrated": {"pi": 0.58, "n": 8, "confusion": {}}}}}}
    line = labellers_line(rep)
    assert line == ("labellers alice, bob: Krippendorff's α 0.610 [0.450, 0.770]; --labels majority kept 32 of 40 "
                    "records; the calibrated judge's held-out π 0.580")
    assert line in markdown(rep)
    assert "α 0.610" in _judge_section(rep) and "π 0.580" in _judge_section(rep)
    out = io.StringIO()
    print_report(rep, Console(file=out, width=200))
    assert line in out.getvalue()
    assert labellers_line({"judge": {}}) is None


def test_labelled_traces_with_several_humans_are_measured_and_selected_like_records(tmp_path):
    """--from-mlflow --labels: each trace's human assessments named --label (one per labeller, an LLM judge's
    none) are its labels; α, the disagreements and the policy's items are those of the same records in a file."""
    import mlflow
    from mlflow.entities import AssessmentSource

    import verifirst as vf

    uri = f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("two-labellers")
    prev = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        for r in _records():
            span = client.start_trace("generate", inputs={"diff": r["diff"]}, experiment_id=exp,
                                      tags={"verifirst.item_id": r["id"]})
            client.end_trace(span.trace_id, outputs="ok")
            for who, value in r["labels"].items():
                mlflow.log_feedback(trace_id=span.trace_id, name="label", value=value,
                                    source=AssessmentSource(source_type="HUMAN", source_id=who))
            mlflow.log_feedback(trace_id=span.trace_id, name="label", value="PASS",  # a judge: no labeller
                                source=AssessmentSource(source_type="LLM_JUDGE", source_id="gpt"))
    finally:
        mlflow.set_tracking_uri(prev)
    calls, lines = [], []
    lm = scripted_lm(lambda m: calls.append(1) or json_answer(reasoning="r", verdict="PASS"), role="judge",
                     name="labels-traces")
    est = vf.calibrate(None, from_mlflow="two-labellers", tracking=vf.MLflow(uri=uri), labels="unanimous",
                       dry_run=True, workdir=tmp_path / "wd", echo=lines.append, models={"judge": lm})
    assert est is not None and calls == []
    said = [ln for ln in lines if "Krippendorff's α" in ln]
    assert said and said[0].startswith("labellers alice, bob:") and f"{DISAGREE} disagreement(s)" in said[0]
    assert f"keeps {N - DISAGREE}, drops {DISAGREE}" in said[0], said


def test_labels_on_an_input_with_one_grade_per_item_is_refused_naming_the_flag_and_file(tmp_path):
    """ICE-Score grades (one execution grade per snippet) have no labellers: exit 2, the file and --labels."""
    from pathlib import Path

    from verifirst.cli import app

    grades = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ice-score" / "humaneval_python_grade.json"
    if not grades.exists():
        pytest.skip("the shared ICE-Score grades are not here")
    r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(grades), "--labels", "majority", "--limit", "2",
                                 "--snippets", "2", "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 2, r.output
    assert "--labels" in r.output and "humaneval_python_grade.json" in r.output and "ICE-Score" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "wd").exists()
