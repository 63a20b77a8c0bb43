"""The review queue of a calibration run: the train/validation items the final judge still gets wrong and
the teacher's abstentions, with the judge's reasoning beside the teacher's justification, as
review_queue.jsonl and as an MLflow evaluation dataset; a label a reviewer adds comes back with
--from-mlflow."""
from __future__ import annotations

import json

import mlflow
import pytest

from test_autorefine import RuleFollowingLM
from test_calibrate import write_outcomes
from verifirst.judge.calibrate import calibrate_outcomes
from verifirst.judge.printing import print_calibration
from verifirst.judge.traces import load_trace_suite


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("queue")
    src = root / "outcomes.jsonl"
    suite = write_outcomes(src, n_groups=8)  # 32 records: small, with opaque failures in train to queue
    lm = RuleFollowingLM()
    with pytest.MonkeyPatch.context() as mp:
        import verifirst.tracking.callback

        mp.setattr(verifirst.tracking.callback, "log_report_files", lambda *a, **k: None)  # plots are not under test here
        rep = calibrate_outcomes(src, workdir=root / "wd", models={"judge": lm, "teacher": lm, "reflection": lm},
                                 max_iters=1, echo=lambda m: None, experiment="queue-exp")
    return rep, suite


def test_the_queue_holds_unfixed_disagreements_and_abstentions_with_both_reasons(run, capsys):
    rep, suite = run
    path = rep["run_dir"] + "/review_queue.jsonl"
    rows = [json.loads(line) for line in open(path)]
    assert rows and rep["review_queue"]["n"] == len(rows)
    test_ids = set(rep["judge"]["test_verdicts"]["calibrated"])
    assert not test_ids & {r["id"] for r in rows}, "the test split stays held out of the queue"
    by_id = {it.id: it for it in suite.items}
    abstained = [r for r in rows if r["reason"] == "teacher_abstained"]
    assert abstained and all(r["teacher_decision"] == "SKIP" and r["split"] == "train" for r in abstained)
    assert all(r["teacher_justification"] and r["judge_reasoning"] for r in abstained)
    disagreements = [r for r in rows if r["reason"] == "disagreement"]
    assert disagreements, "opaque failures read as correct: the final judge still disagrees on some"
    for r in disagreements:
        assert r["verdict"] in ("PASS", "FAIL") and r["verdict"] != r["calibration_label"]
        assert r["judge_reasoning"] and r["label"] == by_id[r["id"]].gold["label"]
        assert r["view"] == by_id[r["id"]].inputs
    assert {r["split"] for r in disagreements} <= {"train", "val"}
    print_calibration(rep)
    assert "review queue:" in capsys.readouterr().out


def test_the_queue_is_an_mlflow_dataset_and_a_reviewers_label_comes_back(run):
    rep, _ = run
    q = rep["review_queue"]["mlflow"]
    uri = rep["tracking_uri"]
    mlflow.set_tracking_uri(uri)
    from mlflow.genai.datasets import get_dataset

    ds = get_dataset(dataset_id=q["dataset_id"])
    df = ds.to_df()
    assert len(df) == rep["review_queue"]["n"] == len(q["trace_ids"])
    assert ds.name == q["dataset"] and q["experiment"] == "queue-exp-review"
    client = mlflow.MlflowClient(tracking_uri=uri)
    tr = client.get_trace(q["trace_ids"][0])
    names = {a.name for a in tr.info.assessments}
    assert {"judge", "teacher", "recorded_label"} <= names

    # nobody has labelled anything yet: nothing to calibrate on, said so
    from verifirst.core.errors import InputError

    with pytest.raises(InputError, match="no trace labelled 'label'"):
        load_trace_suite("queue-exp-review", uri, label="label")
    # a reviewer labels one queued trace (as a labeling session would), and it comes back
    item_id = tr.info.tags["verifirst.item_id"]
    mlflow.log_expectation(trace_id=tr.info.trace_id, name="label", value="FAIL",
                           source=mlflow.entities.AssessmentSource(source_type="HUMAN", source_id="reviewer"))
    suite, stats = load_trace_suite("queue-exp-review", uri, label="label")
    assert [it.id for it in suite.items] == [item_id] and suite.items[0].gold["label"] == "FAIL"
    assert stats["skipped_unlabelled"] == len(q["trace_ids"]) - 1
    assert set(suite.meta["default_view"]) == {"code", "task"}
