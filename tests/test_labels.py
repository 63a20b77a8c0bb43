"""Labels as teams record them: one LabelRule (verifirst.judge.labels) read by outcome files (CLI and API),
`--from-mlflow` and `judge.align(..., optimizer=AutoRefineAligner(pass_at=, label_map=))`.
A value the rule does not cover is refused with its record ids, never guessed."""
from __future__ import annotations

import json
import os
import typing

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

import pytest
from mlflow.exceptions import MlflowException
from typer.testing import CliRunner

from test_aligner import FAIL_RULE, MODEL, PASS_RULE, log_labelled_traces, roles_answer, world
from test_autorefine import RuleFollowingLM
from test_calibrate import write_outcomes
from verifirst.core.errors import InputError
from verifirst.judge.labels import LabelRule, parse_label_map
from verifirst.judge.mlflow_align import _env, _mlflow_at
from verifirst.core.task import Item
from verifirst.lm.testing import ScriptedEngine, scripted_lm

RATING_INSTRUCTIONS = ("Rate from 1 (unsafe) to 5 (safe) the code in {{ outputs }} for the task in {{ inputs }}.")


# -- the rule ------------------------------------------------------------------------------
def test_default_rule_reads_words_booleans_and_refuses_ratings_naming_records():
    rule = LabelRule()
    assert [rule.read(v) for v in (True, "no", "Merged", "abandoned", "PASS", 0, "1")] == \
        ["PASS", "FAIL", "PASS", "FAIL", "PASS", "FAIL", "PASS"]
    with pytest.raises(InputError) as e:  # 1 beside 2..5 is a rating, not "yes"
        rule.require([("r1", 1), ("r2", "4"), ("r3", 5), ("r4", "PASS")], where="o.jsonl")
    msg = str(e.value)
    assert "3 of 4 label(s) in o.jsonl" in msg and "r1" in msg and "r3" in msg and "pass_at" in msg


def test_pass_at_and_label_map_read_ratings_and_categories():
    assert LabelRule.of(4).require([("a", 1), ("b", "4"), ("c", 5.0), ("d", 3)], where="x") == \
        {"a": "FAIL", "b": "PASS", "c": "PASS", "d": "FAIL"}
    rule = LabelRule.of(None, "excellent=PASS, good=PASS,poor=FAIL")
    assert rule.require([("a", "Excellent"), ("b", "poor"), ("c", "good")], where="x") == \
        {"a": "PASS", "b": "FAIL", "c": "PASS"}
    with pytest.raises(InputError, match=r"values 'meh'.*records b.*meh=PASS\|FAIL"):
        rule.require([("a", "good"), ("b", "meh")], where="x")
    with pytest.raises(InputError, match="--label-map"):
        parse_label_map("excellent=GREAT")
    with pytest.raises(InputError, match="--pass-at"):
        LabelRule.of("four")


# -- outcome files: API and CLI ------------------------------------------------------------
def _rated_outcomes(path, to_value) -> dict:
    """The scripted world's outcomes with labels recorded another way; returns id -> PASS/FAIL."""
    src = path.with_suffix(".plain.jsonl")
    write_outcomes(src, n_groups=6)
    truth = {}
    with open(path, "w") as out:
        for n, line in enumerate(src.read_text().splitlines()):
            rec = json.loads(line)
            truth[rec["id"]] = rec["label"]
            rec["label"] = to_value(rec["label"], n)
            out.write(json.dumps(rec) + "\n")
    return truth


def test_api_reads_ratings_with_pass_at_and_categories_with_a_label_map(tmp_path):
    import verifirst as vf

    lm = RuleFollowingLM()
    models = {"judge": lm, "teacher": lm, "reflection": lm}
    rated = tmp_path / "rated.jsonl"
    truth = _rated_outcomes(rated, lambda lab, n: (4 + n % 2) if lab == "PASS" else (1 + n % 3))
    res = vf.calibrate(rated, models=models, max_iters=1, pass_at=4, workdir=tmp_path / "wd")
    labels = res.report["judge"]["validation"]["labels"]
    assert labels and all(truth[i] == v for i, v in labels.items())
    assert set(labels.values()) == {"PASS", "FAIL"}, "splits are stratified by label"
    assert res.report["labels"]["pass_at"] == 4

    cat = tmp_path / "cat.jsonl"
    truth = _rated_outcomes(cat, lambda lab, n: ("excellent", "good")[n % 2] if lab == "PASS" else "poor")
    res = vf.calibrate(cat, models=models, max_iters=1, label_map={"excellent": "PASS", "good": "PASS",
                                                                   "poor": "FAIL"}, workdir=tmp_path / "wd2")
    labels = res.report["judge"]["validation"]["labels"]
    assert labels and all(truth[i] == v for i, v in labels.items())


def test_cli_refuses_an_uncovered_value_naming_the_record_and_writes_nothing(tmp_path):
    from verifirst.cli import app

    cat = tmp_path / "cat.jsonl"
    _rated_outcomes(cat, lambda lab, n: "meh" if n == 5 else ("good" if lab == "PASS" else "poor"))
    bad_id = json.loads(cat.read_text().splitlines()[5])["id"]
    wd = tmp_path / "wd"
    res = CliRunner().invoke(app, ["calibrate", "--outcomes", str(cat), "--label-map", "good=PASS,poor=FAIL",
                                   "--workdir", str(wd)])
    assert res.exit_code == 2, res.output
    assert "1 of 24 label(s)" in res.output and bad_id in res.output and "'meh'" in res.output
    assert "Traceback" not in res.output and not (wd / "runs").exists()
    res = CliRunner().invoke(app, ["calibrate", "--outcomes", str(cat), "--label-map", "good=OK",
                                   "--workdir", str(wd)])
    assert res.exit_code == 2 and "--label-map" in res.output


# -- judge.align ---------------------------------------------------------------------------
def rating_judge_answer(messages: list[dict]) -> str:
    """A 1-5 rating judge's model: 5 where a PASS rule or no FAIL rule matches, else 1."""
    system, user = messages[0]["content"], messages[-1]["content"]
    passes = [t for t in PASS_RULE.findall(system) if t in user]
    fails = [t for t in FAIL_RULE.findall(system) if t in user]
    return json.dumps({"result": 5 if passes or not fails else 1, "rationale": "rated by the rules"})


def rated(rows, n_offset: int = 0) -> list:
    """world() rows with 1-5 ratings instead of PASS/FAIL: PASS is 4 or 5, FAIL 1 to 3."""
    return [(i, o, (4 + n % 2) if lab == "PASS" else (1 + n % 3)) for n, (i, o, lab) in enumerate(rows, n_offset)]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    from verifirst.lm.local_server import serve_local

    tmp = tmp_path_factory.mktemp("labels-align")
    url, stop = serve_local(ScriptedEngine(rating_judge_answer))
    try:
        with _env(OPENAI_API_BASE=url, OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
                _mlflow_at(f"sqlite:///{tmp / 'mlflow.db'}", "labels-align"):
            yield tmp
    finally:
        stop()


def test_rating_traces_align_with_pass_at_and_the_judge_stays_a_rating_judge(endpoint):
    from mlflow.genai.judges import make_judge

    import verifirst
    from verifirst.judge.aligner import traces_to_items

    rows = rated(world(16))
    traces = log_labelled_traces(rows, "safety")
    judge = make_judge(name="safety", instructions=RATING_INSTRUCTIONS, model=MODEL, feedback_value_type=int)
    items, _ = traces_to_items(traces, judge, ["inputs", "outputs"], LabelRule.of(4))
    expect = {t.info.trace_id: ("PASS" if r >= 4 else "FAIL") for t, (_, _, r) in zip(traces, rows)}
    assert {it.id: it.gold["label"] for it in items} == expect  # rating 1 reads FAIL, 2-5 all kept

    roles = scripted_lm(roles_answer, role="teacher", name="labels-roles")
    aligner = verifirst.AutoRefineAligner(teacher=roles, proposer=roles, max_iters=1, n_boot=100, pass_at=4,
                                          log_to_mlflow=False)
    aligned = judge.align(traces, optimizer=aligner)
    assert aligned.feedback_value_type is int and aligned.name == judge.name
    rep = aligner.last_report
    assert rep["labels"]["pass_at"] == 4 and rep["judge"]["feedback_value_type"] == "int"
    assert 1 < rep["labels"]["judge_pass_at"] <= 5  # the judge's own threshold, chosen on train
    ho = rep["held_out"]
    assert ho["n_scored"] == rep["split"]["sizes"]["test"] > 0  # the judge's ratings read through pass_at
    assert ho["excluded_lm_errors"] == 0


def test_rating_traces_without_a_mapping_are_refused_as_an_mlflow_exception(endpoint):
    from mlflow.genai.judges import make_judge

    import verifirst

    rows = rated(world(8))
    traces = log_labelled_traces(rows, "safety")
    judge = make_judge(name="safety", instructions=RATING_INSTRUCTIONS, model=MODEL, feedback_value_type=int)
    with pytest.raises(MlflowException) as e:
        judge.align(traces, optimizer=verifirst.AutoRefineAligner(log_to_mlflow=False))
    msg = str(e.value)
    assert isinstance(e.value, InputError) and "8 of 8 label(s)" in msg
    assert all(f"'{r}'" in msg for _, _, r in rows), "every rating is named, 1 too (not read as yes)"
    assert "pass_at" in msg and traces[0].info.trace_id in msg
    pf = make_judge(name="safety", instructions=RATING_INSTRUCTIONS, model=MODEL, feedback_value_type=int)
    with pytest.raises(MlflowException, match="pass_at"):  # labels fine, but the judge's own ratings unread
        pf.align(log_labelled_traces(world(4), "safety"), optimizer=verifirst.AutoRefineAligner(log_to_mlflow=False))


def test_categorical_feedback_aligns_with_a_label_map(endpoint):
    from mlflow.genai.judges import make_judge

    import verifirst
    from verifirst.judge.aligner import traces_to_items

    words = {"PASS": ("excellent", "good"), "FAIL": ("poor",)}
    rows = [(i, o, words[lab][n % len(words[lab])]) for n, (i, o, lab) in enumerate(world(8))]
    traces = log_labelled_traces(rows, "quality")
    judge = make_judge(name="quality", instructions=RATING_INSTRUCTIONS, model=MODEL,
                       feedback_value_type=typing.Literal["excellent", "good", "poor"])
    with pytest.raises(MlflowException, match="label_map"):
        judge.align(traces, optimizer=verifirst.AutoRefineAligner(log_to_mlflow=False))
    mapping = {"excellent": "PASS", "good": "PASS", "poor": "FAIL"}
    items, _ = traces_to_items(traces, judge, ["inputs", "outputs"], LabelRule.of(None, mapping))
    assert [it.gold["label"] for it in items] == [mapping[w] for _, _, w in rows]


def test_repeated_views_split_by_trace_instead_of_refusing():
    from verifirst.judge.aligner import split_traces

    items = [Item(f"t{n}", {"inputs": "same", "outputs": "same"}, {"label": "PASS" if n % 2 else "FAIL"},
                  group="one-view") for n in range(12)]
    manifest, grouped_by = split_traces(items, (0.5, 0.25, 0.25), 0)
    assert all(manifest.sizes().values()) and grouped_by.startswith("trace (1 distinct view")
