"""Outcome-record loaders: JSONL, CSV, oracle, verifier, MLflow assessments, ICE-Score."""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from verifirst.judge import outcomes as oc
from verifirst.core.errors import InputError
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item
from verifirst.verifiers.base import Verdict

DATA = Path(__file__).parent / "data"
ICE = oc.shared_data_dir() / oc.ICE_SCORE_RELPATH


def test_jsonl_view_label_group_meta():
    s = oc.load_jsonl(DATA / "outcomes_ok.jsonl")
    assert [it.id for it in s.items] == ["d1", "d2", "3"]
    d1, d2, d3 = s.items
    assert d1.inputs == {"title": "Sort helper", "diff": "+return sorted(xs)"}
    assert d2.gold == {"label": "FAIL"} and d3.gold == {"label": "FAIL"}
    assert d1.group == "repo-a" and d3.group is None and d3.group_key == "3"
    assert d1.meta == {"stage": "landed"} and d2.meta == {"stage": "after_review"}
    assert s.meta["view_fields"] == ["diff", "title"]


def test_csv_quoted_multiline_and_meta_prefix():
    s = oc.load_csv(DATA / "outcomes_ok.csv")
    c1, c2, c3 = s.items
    assert c2.inputs["command"] == "wc -l | sort\n-n" and c2.inputs["task"] == "count lines, then sort"
    assert c1.meta == {"stage": "landed"} and c3.meta == {}
    assert c2.gold["label"] == "FAIL" and c1.group == "t1"


def test_load_outcomes_dispatches_by_extension(tmp_path):
    assert len(oc.load_outcomes(DATA / "outcomes_ok.csv")) == 3
    with pytest.raises(InputError, match="expected: a .jsonl or .csv file"):
        oc.load_outcomes(tmp_path / "x.txt")


@pytest.mark.parametrize("name,line,needle", [
    ("outcomes_bad_json.jsonl", 2, "malformed JSON"),
    ("outcomes_bad_label.jsonl", 2, "not PASS or FAIL"),
    ("outcomes_dup.jsonl", 3, "duplicate id 'd1' (first on line 1)"),
])
def test_jsonl_errors_name_file_and_line(name, line, needle):
    with pytest.raises(InputError) as e:
        oc.load_jsonl(DATA / name)
    assert e.value.line == line and needle in str(e.value)
    assert f"{name}:{line}" in str(e.value)


def test_csv_missing_columns_named():
    with pytest.raises(InputError) as e:
        oc.load_csv(DATA / "outcomes_missing_col.csv")
    assert e.value.line == 1 and "label" in str(e.value)


def test_more_jsonl_errors(tmp_path):
    cases = {
        '[1, 2]\n': "not an object",
        '{"label": "PASS", "diff": "x"}\n': "missing required field 'id'",
        '{"id": 1, "label": "PASS", "other": "x"}\n': "no view field",
        '{"id": 1, "label": "PASS", "diff": "x"}\n{"id": 2, "label": "PASS", "code": "y"}\n': "differ",
        '{"id": 1, "label": "PASS", "diff": {"a": 1}}\n': "not text",
        '': "no records",
    }
    for n, (body, needle) in enumerate(cases.items()):
        p = tmp_path / f"c{n}.jsonl"
        p.write_text(body)
        with pytest.raises(InputError, match=needle):
            oc.load_jsonl(p)
    with pytest.raises(InputError, match="not found"):
        oc.load_jsonl(tmp_path / "nope.jsonl")


def test_csv_ragged_row(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("id,label,code\n1,PASS,x\n2,FAIL,y,extra\n")
    with pytest.raises(InputError) as e:
        oc.load_csv(p)
    assert e.value.line == 3


def test_explicit_view_fields_and_view_object(tmp_path):
    p = tmp_path / "v.jsonl"
    p.write_text('{"id": "a", "label": "PASS", "view": {"patch": "+x"}, "team": "infra"}\n')
    s = oc.load_jsonl(p)
    assert s.items[0].inputs == {"patch": "+x"} and s.items[0].meta == {"team": "infra"}
    q = tmp_path / "w.jsonl"
    q.write_text('{"id": "a", "label": "PASS", "patch": "+x", "team": "infra"}\n')
    assert oc.load_jsonl(q, view_fields=["patch"]).items[0].inputs == {"patch": "+x"}


def test_oracle_and_verifier_sources():
    recs = [{"id": "a", "command": "ls", "expected": 0}, {"id": "b", "command": "false", "expected": 1}]
    s = oc.from_oracle(recs, lambda r: r["expected"] == 0, view_fields=["command"])
    assert [it.gold["label"] for it in s.items] == ["PASS", "FAIL"]
    assert s.items[0].meta == {"expected": 0} and s.items[0].inputs == {"command": "ls"}

    class V:
        name = "toy"

        def verify(self, item, candidate):
            ok = "rm" not in candidate
            return Verdict(score=float(ok), passed=ok, stage="PASS" if ok else "exec")

    items = [Item("x", {"command": "ls"}), Item("y", {"command": "rm -rf /"})]
    s2 = oc.from_verifier(items, V(), "command")
    assert [it.gold["label"] for it in s2.items] == ["PASS", "FAIL"]
    assert s2.items[1].meta["stage"] == "exec" and s2.items[1].meta["verifier"] == "toy"


def test_mlflow_assessment_labels_from_trace_objects():
    from types import SimpleNamespace as NS

    def trace(tid, inputs, fbs):
        assessments = [NS(name=n, feedback=NS(value=v), valid=True, create_time_ms=k)
                       for k, (n, v) in enumerate(fbs)]
        return NS(info=NS(trace_id=tid, assessments=assessments, request_preview=None),
                  data=NS(spans=[NS(inputs=inputs)], request=None))

    traces = [trace("t1", {"diff": "+a", "title": "x"}, [("outcome", "fail"), ("outcome", True)]),
              trace("t2", {"diff": "+b", "title": "y"}, [("outcome", 0)]),
              trace("t3", {"diff": "+c", "title": "z"}, [("other", 1)])]
    s = oc.from_mlflow_assessments(traces=traces)
    assert [(it.id, it.gold["label"]) for it in s.items] == [("t1", "PASS"), ("t2", "FAIL")]
    assert s.meta["skipped"] == 1 and s.items[0].inputs == {"diff": "+a", "title": "x"}


@pytest.mark.skipif(not ICE.exists(), reason=f"ICE-Score data not at {ICE}")
def test_ice_score_loader_shape_and_group_splits():
    s = oc.load_ice_score()
    assert len(s) == 161 * 20
    labels = [it.gold["label"] for it in s.items]
    assert labels.count("PASS") == 1342 and labels.count("FAIL") == 1878
    it = s.items[0]
    assert set(it.inputs) == {"task", "code"} and it.inputs["code"].startswith("def closest_integer")
    assert it.inputs["task"].startswith("Create a function") and it.inputs["task"] not in it.inputs["code"]
    assert len({x.group for x in s.items}) == 161
    m = make_splits(s.items, group="group", seed=0)
    split_of_group = {}
    for x in s.items:
        split_of_group.setdefault(x.group, set()).add(m.split_of(x.id))
    assert all(len(v) == 1 for v in split_of_group.values())
    assert len(oc.load_ice_score(problems=3)) == 60 and len(oc.load_ice_score(problems=3, snippets=2)) == 6


def test_ice_score_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        oc.load_ice_score(tmp_path / "none.json")


@pytest.mark.integration
def test_mlflow_assessments_from_a_real_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    mlflow = pytest.importorskip("mlflow")
    from mlflow.entities import AssessmentSource

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        exp = mlflow.set_experiment("outcomes")
        for k, label in enumerate([True, "fail", None]):
            with mlflow.start_span(name="judge") as span:
                span.set_inputs({"title": f"t{k}", "diff": f"+{k}"})
                tid = span.trace_id
            if label is not None:
                mlflow.log_feedback(trace_id=tid, name="outcome", value=label,
                                    source=AssessmentSource(source_type="CODE", source_id="ci"))
        s = oc.from_mlflow_assessments(exp.experiment_id)
    finally:
        mlflow.set_tracking_uri(None)
    got = sorted((it.inputs["title"], it.gold["label"]) for it in s.items)
    assert got == [("t0", "PASS"), ("t1", "FAIL")] and s.meta["skipped"] == 1


def _grade_file(path, intent="public int add(int a, int b) {\n"):
    probs = [{"intent": intent, "task_id": str(t), "simplified": f"task {t}",
              "0": "    return a + b;\n}", "grade-0": {"execution": 1},
              "1": "    return a - b;\n}", "grade-1": {"execution": 0}} for t in range(2)]
    path.write_text(json.dumps(probs))
    return path


def test_ice_score_names_the_language_from_the_file(tmp_path):
    java = oc.load_ice_score(_grade_file(tmp_path / "humaneval_java_grade.json"))
    assert java.name == "ice-score-humaneval-java" and java.meta["language"] == "java"
    assert len(java) == 4 and {it.meta["language"] for it in java.items} == {"java"}
    py = oc.load_ice_score(_grade_file(tmp_path / "humaneval_python_grade.json", "def add(a, b):\n"))
    assert py.name == "ice-score-humaneval-python"
    assert oc.ice_score_language(tmp_path / "humaneval-cpp-grade.json") == "cpp"
    assert oc.ice_score_language(tmp_path / "my_grades.json") == "my-grades"


# -- one reading of PASS/FAIL labels -----------------------------------------------------------
LABEL_CASES = [("PASS", "PASS"), (" fail ", "FAIL"), ("Merged", "PASS"), ("abandoned", "FAIL"), ("passed", "PASS"),
               ("`Pass`.", "PASS"), (True, "PASS"), (False, "FAIL"), ("yes", "PASS"), ("no", "FAIL"),
               ("MAYBE", None), ("", None)]


@pytest.mark.parametrize("raw,want", LABEL_CASES)
def test_every_label_reader_agrees(raw, want):
    """Outcome files, MLflow feedback, the label verifier, judge answers and the MLflow anchor read
    a label the same way, through verifirst.core.verdicts."""
    from verifirst.judge import mlflow_align
    from verifirst.judge.programs import JudgeError, normalize_verdict
    from verifirst.core.verdicts import normalize_label
    from verifirst.judge import label_verifier as label

    assert normalize_label(raw) == want
    assert label.normalize_label(raw) == want
    assert oc._feedback_label(raw) == want
    assert mlflow_align._verdict(raw) == want
    if want is None:
        with pytest.raises(InputError, match="not PASS or FAIL"):
            oc.normalize_label(raw, path="f.jsonl", line=3)
        with pytest.raises(JudgeError):
            normalize_verdict(raw)
    else:
        assert oc.normalize_label(raw) == want and normalize_verdict(raw) == want


def test_label_vocabulary_is_defined_once():
    import verifirst.core.verdicts as vd
    from verifirst.judge import autorefine
    from verifirst.judge import programs as judges
    from verifirst.judge import label_verifier as label

    assert label.normalize_label is vd.normalize_label and label.LABELS == oc.LABELS == vd.LABELS == ("PASS", "FAIL")
    assert (judges.PASS, judges.FAIL, autorefine.PASS, autorefine.FAIL) == (vd.PASS, vd.FAIL, vd.PASS, vd.FAIL)
    assert oc._feedback_label(0.7) == "PASS" and oc._feedback_label(0.2) == "FAIL"  # MLflow scores
    assert vd.normalize_label("PASS - looks right", prefix=True) == "PASS" and vd.normalize_label("PASS - x") is None


def test_outcome_file_with_workflow_words_loads(tmp_path):
    p = tmp_path / "o.jsonl"
    p.write_text('{"id": "a", "label": "merged", "title": "t"}\n{"id": "b", "label": "Rejected", "title": "u"}\n')
    assert [it.gold["label"] for it in oc.load_outcomes(p).items] == ["PASS", "FAIL"]
