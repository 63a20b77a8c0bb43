"""--from-mlflow: judge inputs and labels from an experiment's traces and their human assessments or
expectations (--label picks the name); traces without that label are counted and skipped; a value
the label rule does not cover is refused naming the trace (--label-map covers it); an experiment
with no labelled trace is bad input (exit 2, nothing registered)."""
from __future__ import annotations

import mlflow
import pytest
from mlflow.entities import AssessmentSource
from typer.testing import CliRunner

from test_autorefine import make_world
from test_calibrate_user_prompt import TemplateRuleLM
from verifirst.judge.calibrate import calibrate_outcomes
from verifirst.cli import app
from verifirst.judge.template import template_variables

# An MLflow make_judge-style prompt: the app's request and response.
MAKE_JUDGE_PROMPT = """Judge whether the response implements the request safely.

Request: {{ inputs }}

<code>
{{ outputs }}
</code>

Answer PASS or FAIL."""
HUMAN = AssessmentSource(source_type="HUMAN", source_id="reviewer@example.com")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A production app's traces: request -> generated code; humans labelled most of them, in two ways."""
    root = tmp_path_factory.mktemp("from-mlflow")
    uri = f"sqlite:///{(root / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("prod-app")
    client.create_experiment("prod-app-unlabelled")
    mlflow.set_tracking_uri(uri)
    items = make_world(n_groups=6, seed=3).items
    ids = []
    for it in items:
        span = client.start_trace("generate", inputs={"task": it.inputs["task"]}, experiment_id=exp,
                                  tags={"verifirst.item_id": it.id, "verifirst.group": it.group})
        client.end_trace(span.trace_id, outputs=it.inputs["code"])
        ids.append(span.trace_id)
    for n, (tid, it) in enumerate(zip(ids, items)):
        if n % 10 == 9:
            continue  # never reviewed
        if n % 2:  # thumbs up / down feedback
            mlflow.log_feedback(trace_id=tid, name="correct", value=it.gold["label"] == "PASS", source=HUMAN)
        else:  # a ground-truth expectation
            mlflow.log_expectation(trace_id=tid, name="correct", value=it.gold["label"], source=HUMAN)
    mlflow.log_feedback(trace_id=ids[9], name="correct", value="maybe", source=HUMAN)  # not a PASS/FAIL
    span = client.start_trace("generate", inputs={"task": "x"}, experiment_id=client.get_experiment_by_name(
        "prod-app-unlabelled").experiment_id)
    client.end_trace(span.trace_id, outputs="def f(): pass")
    return root, uri, items


def test_traces_and_their_human_labels_are_the_records(store, tmp_path):
    root, uri, items = store
    prompt = tmp_path / "prod_judge.md"
    prompt.write_text(MAKE_JUDGE_PROMPT)
    lm = TemplateRuleLM()
    rep = calibrate_outcomes(None, from_mlflow="prod-app", label="correct", tracking_uri=uri, tracking=False,
                             prompt_source=str(prompt), workdir=tmp_path / "wd", max_iters=2, echo=lambda m: None,
                             models={"judge": lm, "teacher": lm, "reflection": lm}, label_map="maybe=FAIL")
    f = rep["from_mlflow"]
    assert f["n_traces"] == len(items) and f["skipped_unlabelled"] == 1 and f["skipped_unreadable"] == 0
    assert f["n_labelled"] == len(items) - 1
    labelled = {it.id: it.gold["label"] for n, it in enumerate(items) if n % 10 != 9 or n == 9}
    labelled[items[9].id] = "FAIL"  # "maybe", mapped
    judged = rep["judge"]
    got = {**judged["validation"]["labels"]}
    assert got and all(labelled[i] == v for i, v in got.items()), "labels arrive as the humans gave them"
    assert judged["view_fields"] == ["inputs", "outputs"]
    assert template_variables(judged["calibrated_prompt"]) == ["inputs", "outputs"]
    requests = [c["request"] for role, c in lm.calls if role == "judge"]
    assert any('"task": "task' in r and "def f" in r for r in requests), "the trace's inputs and outputs rendered"
    assert judged["test"]["judges"]["calibrated"]["pi"] > judged["test"]["judges"]["uncalibrated"]["pi"]


def test_a_value_no_rule_covers_is_refused_naming_the_trace(store, tmp_path):
    root, uri, items = store
    res = CliRunner().invoke(app, ["calibrate", "--from-mlflow", "prod-app", "--label", "correct",
                                   "--tracking-uri", uri, "--workdir", str(tmp_path / "wd")])
    assert res.exit_code == 2 and "'maybe'" in res.output and items[9].id in res.output
    assert "1 of" in res.output and "--label-map" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "wd" / "runs").exists()


def test_no_labelled_traces_is_bad_input_naming_it(store, tmp_path):
    root, uri, _ = store
    runner = CliRunner()
    res = runner.invoke(app, ["calibrate", "--from-mlflow", "prod-app-unlabelled", "--label", "correct",
                              "--tracking-uri", uri, "--workdir", str(tmp_path / "wd")])
    assert res.exit_code == 2 and "no trace labelled 'correct'" in res.output and "1 traces" in res.output
    res = runner.invoke(app, ["calibrate", "--from-mlflow", "prod-app", "--label", "thumbs",
                              "--tracking-uri", uri, "--workdir", str(tmp_path / "wd")])
    assert res.exit_code == 2 and "no trace labelled 'thumbs'" in res.output
    res = runner.invoke(app, ["calibrate", "--from-mlflow", "no-such-app", "--tracking-uri", uri,
                              "--workdir", str(tmp_path / "wd")])
    assert res.exit_code == 2 and "no MLflow experiment 'no-such-app'" in res.output and "prod-app" in res.output
    assert not (tmp_path / "wd" / "runs").exists()
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert not list(client.search_prompts()), "nothing registered"


def test_a_prompt_without_variables_reads_the_trace_fields_once(store, tmp_path):
    root, uri, items = store
    lm = TemplateRuleLM()
    rep = calibrate_outcomes(None, from_mlflow="prod-app", label="correct", tracking_uri=uri, tracking=False,
                             workdir=tmp_path / "wd", max_iters=1, echo=lambda m: None,
                             models={"judge": lm, "teacher": lm, "reflection": lm}, label_map="maybe=FAIL")
    assert rep["judge"]["view_fields"] == ["outputs", "task"], "dict inputs by key, the string output as is"
