"""The Python API: a user's own program, data, plain metric and optimizer, all under the split guard."""
import csv
import json
import re

import dspy
import pytest

import verifirst as vf
from verifirst.core.data import to_suite
from verifirst.core.errors import ConfigError, InputError
from verifirst.lm.testing import json_answer, scripted_lm

RULE = "Always answer with the number 42."
MARK = "FEEDBACK-MARK"


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def task_fn(messages):
    return json_answer(answer="42" if "42" in messages[0]["content"] else "41")


def records(n=12):
    return [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(n)]


def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    ok = (pred.answer or "").strip() == example.answer
    return dspy.Prediction(score=float(ok), feedback="right" if ok else f"{MARK}: the answer is {example.answer}")


def models(reflection_fn=lambda m: json_answer(new_instruction=RULE)):
    return {"task": scripted_lm(task_fn), "reflection": scripted_lm(reflection_fn, role="reflection")}


class Recorder(dspy.teleprompt.Teleprompter):
    """A user's teleprompter: records every example it is handed and scores each with its metric."""

    def __init__(self):
        super().__init__()
        self.metric = None
        self.seen = []

    def compile(self, student, *, trainset, teacher=None, valset=None, **kw):
        for ex in trainset + (valset or []):
            self.seen.append(ex.item_id)
            self.metric(ex, student(**ex.inputs()))
        return student


def test_teleprompter_never_sees_a_test_item_and_report_has_every_split(tmp_path):
    tp = Recorder()
    res = vf.optimize(dspy.Predict(QA), records(), metric, tp, models=models(), run_dir=tmp_path / "run",
                      workdir=tmp_path)
    m = res.manifest
    assert tp.seen and set(tp.seen) == set(m.train + m.val)
    assert not set(tp.seen) & set(m.test)
    assert m.seen <= set(m.train + m.val)
    rep = res.report
    assert rep["engine"] == "Recorder"
    for s in ("train", "val", "test"):
        assert {"before", "after", "comparison"} <= set(rep["splits"][s])
        assert rep["splits"][s]["before"]["n"] == len(getattr(m, s))
        assert "ci_lo" in rep["splits"][s]["after"]
    assert rep["details"]["metric"]["calls"] == len(tp.seen)
    assert "usage_this_run" in rep and (tmp_path / "run" / "report.json").exists()
    assert tp.metric is None  # its own metric is put back


def test_plain_metric_feedback_reaches_gepa(tmp_path):
    asked = []

    def reflect(messages):
        asked.append("\n".join(m["content"] for m in messages))
        return json_answer(new_instruction=RULE)

    res = vf.optimize(dspy.Predict(QA), records(), metric, "gepa", models=models(reflect),
                      budget=vf.Budget(max_metric_calls=30), run_dir=tmp_path / "run", workdir=tmp_path)
    assert any(MARK in a for a in asked)
    test = res.report["splits"]["test"]
    assert test["before"]["pass_rate"] == 0.0 and test["after"]["pass_rate"] == 1.0
    assert "42" in json.dumps(res.report["instructions"])
    out = res.save(tmp_path / "out")
    assert {p.name for p in out} == {"report.json", "report.md", "program.json", "split_manifest.json"}


def _write(tmp_path, recs):
    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cv = tmp_path / "d.csv"
    with open(cv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(recs[0]))
        w.writeheader()
        w.writerows(recs)
    return jl, cv


@pytest.mark.parametrize("with_ids", [True, False])
def test_every_data_form_gives_the_same_split(tmp_path, with_ids):
    from verifirst.api import make_manifest

    recs = records(20) if with_ids else [{k: v for k, v in r.items() if k != "id"} for r in records(20)]
    jl, cv = _write(tmp_path, recs)
    exs = [dspy.Example(**r).with_inputs("question") for r in recs]
    forms = {"dicts": recs, "examples": exs, "jsonl": jl, "csv": str(cv)}
    prog = dspy.Predict(QA)
    manifests = {k: make_manifest(to_suite(v, program=prog).items, (0.6, 0.2, 0.2), 0) for k, v in forms.items()}
    first = manifests["dicts"]
    for k, m in manifests.items():
        assert (m.train, m.val, m.test) == (first.train, first.val, first.test), k
    if with_ids:
        assert set(first.train + first.val + first.test) == {r["id"] for r in recs}
    items = to_suite(recs, program=prog).items
    assert items[0].inputs == {"question": recs[0]["question"]} and items[0].gold == {"answer": "42"}


def test_groups_stay_in_one_split_and_ids_are_stable():
    from verifirst.api import make_manifest

    recs = [{"question": f"q{k}", "answer": "42", "group": f"g{k // 3}"} for k in range(18)]
    items = to_suite(recs, inputs=["question"]).items
    again = to_suite(list(reversed(recs)), inputs=["question"]).items
    assert {it.inputs["question"]: it.id for it in items} == {it.inputs["question"]: it.id for it in again}
    m = make_manifest(items, (0.5, 0.25, 0.25), 0)
    split_of = {i: s for s in ("train", "val", "test") for i in getattr(m, s)}
    for g in {it.group for it in items}:
        assert len({split_of[it.id] for it in items if it.group == g}) == 1


def test_bad_data_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "x", "answer": "1"}\nnot json\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2"):
        to_suite(bad, inputs=["question"])
    with pytest.raises(InputError, match=r"data\[1\].*'question'"):
        to_suite([{"question": "x"}, {"q": "y"}], inputs=["question"])
    with pytest.raises(InputError, match="which fields are inputs"):
        to_suite([{"question": "x"}])


def test_hugging_face_id_without_datasets_or_cache_is_a_clear_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_datasets(name, *a, **kw):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(InputError, match="westenfelder/NL2SH-ALFA"):
        to_suite("westenfelder/NL2SH-ALFA", inputs=["nl"])


def test_hugging_face_id_not_in_the_offline_cache_is_a_clear_error(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(InputError, match="acme/no-such-set.*online or in the local cache"):
        to_suite("acme/no-such-set", inputs=["nl"])


class TinyDataset:
    """Shaped like datasets.Dataset: column names and dict rows."""

    column_names = ["question", "answer"]

    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)

    def to_list(self):
        return list(self.rows)


def test_dataset_objects_are_read_as_records():
    recs = [{"question": f"q{k}", "answer": "42"} for k in range(5)]
    s = to_suite(TinyDataset(recs), program=dspy.Predict(QA))
    assert [it.inputs["question"] for it in s.items] == [r["question"] for r in recs]
    datasets = pytest.importorskip("datasets")
    s2 = to_suite(datasets.Dataset.from_list(recs), program=dspy.Predict(QA))
    assert [it.id for it in s2.items] == [it.id for it in s.items]


def test_bootstrap_fewshot_runs_through_the_guard(tmp_path):
    tp = dspy.BootstrapFewShot(max_bootstrapped_demos=2, max_labeled_demos=0, max_rounds=1)

    class Solver(dspy.Module):
        def __init__(self):
            super().__init__()
            self.qa = dspy.Predict(QA)

        def forward(self, question):
            return self.qa(question=question)

    def task(messages):  # right on even-numbered questions
        n = int(re.search(r"#(\d+)\?", messages[-1]["content"]).group(1))
        return json_answer(answer="42" if n % 2 == 0 else "41")

    bootstrapped = []  # BootstrapFewShot scores with a trace; evaluations without

    def recording(example, pred, trace=None):
        if trace is not None:
            bootstrapped.append(example.item_id)
        return metric(example, pred, trace)

    data = records(15)
    res = vf.optimize(Solver(), data, recording, tp, models={"task": scripted_lm(task)},
                      run_dir=tmp_path / "r", workdir=tmp_path)
    m = res.manifest
    assert res.report["engine"] == "BootstrapFewShot"
    assert bootstrapped and set(bootstrapped) <= set(m.train)  # it takes no valset: train only
    assert res.report["details"]["metric"]["calls"] == len(bootstrapped)
    id_of = {r["question"]: r["id"] for r in data}
    demos = res.program.qa.demos
    assert demos and all(id_of[d["question"]] in m.train for d in demos)
    assert all(int(d["question"].split("#")[1][:-1]) % 2 == 0 for d in demos)  # only passing traces kept
    assert set(res.report["splits"]) == {"train", "val", "test"}


def test_verifier_metric_and_evaluate_without_optimizer(tmp_path):
    class Exact:
        name = "exact"

        def verify(self, item, candidate):
            from verifirst.verifiers.base import Verdict

            ok = candidate == item.gold["answer"]
            return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "WRONG")

    with dspy.context(lm=scripted_lm(lambda m: json_answer(answer="42")), adapter=dspy.JSONAdapter()):
        res = vf.evaluate(dspy.Predict(QA), records(10), Exact(), splits=["val", "test"], run_dir=tmp_path / "r",
                          workdir=tmp_path)
    assert set(res.report["splits"]) == {"val", "test"}
    assert res.report["splits"]["test"]["before"]["pass_rate"] == 1.0
    assert res.report["engine"] == "none" and res.program is not None


def test_unjudgeable_items_are_counted_apart(tmp_path):
    def shy(example, pred, trace=None):
        return None if example.question.endswith("#0?") else pred.answer == example.answer

    with dspy.context(lm=scripted_lm(task_fn), adapter=dspy.JSONAdapter()):
        res = vf.evaluate(dspy.Predict(QA), records(10), shy, run_dir=tmp_path / "r", workdir=tmp_path)
    total = sum(res.report["splits"][s]["before"]["inconclusive"] for s in ("train", "val", "test"))
    assert total == 1
    assert sum(res.report["splits"][s]["before"]["pass"] for s in ("train", "val", "test")) == 0


def test_float_metric_threshold(tmp_path):
    def half(example, pred, trace=None):
        return 0.5

    with dspy.context(lm=scripted_lm(task_fn), adapter=dspy.JSONAdapter()):
        lo = vf.evaluate(dspy.Predict(QA), records(10), half, run_dir=tmp_path / "a", workdir=tmp_path)
        hi = vf.evaluate(dspy.Predict(QA), records(10), half, threshold=0.5, run_dir=tmp_path / "b",
                         workdir=tmp_path)
    assert lo.report["splits"]["test"]["before"]["pass_rate"] == 0.0
    assert hi.report["splits"]["test"]["before"]["pass_rate"] == 1.0


def test_bad_optimizer_and_models_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="unknown optimizer 'nope'"):
        vf.optimize(dspy.Predict(QA), records(), metric, "nope", models=models(), run_dir=tmp_path / "r")
    with pytest.raises(InputError, match="unknown role"):
        vf.optimize(dspy.Predict(QA), records(), metric, "none", models={"task": "local", "critic": "x"},
                    run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_configured_dspy_gepa_scores_with_the_run_metric_on_train_and_val(tmp_path):
    asked = []

    def reflect(messages):
        asked.append("\n".join(m["content"] for m in messages))
        return json_answer(new_instruction=RULE)

    ms = models(reflect)
    tp = dspy.GEPA(metric=metric, reflection_lm=ms["reflection"], max_metric_calls=30, seed=0)
    res = vf.optimize(dspy.Predict(QA), records(), metric, tp, models=ms, run_dir=tmp_path / "r", workdir=tmp_path)
    assert res.report["engine"] == "GEPA" and res.report["details"]["valset_passed"] is True
    assert res.report["details"]["metric"]["calls"] > 0  # the run's metric, not the one GEPA was built with
    assert tp.metric_fn is metric
    assert any(MARK in a for a in asked)
    assert res.report["splits"]["test"]["after"]["pass_rate"] == 1.0


def test_a_callback_hears_the_run_its_rows_and_each_iteration(tmp_path):
    heard = {"start": 0, "rows": [], "iterations": 0, "end": None, "evals": []}

    class Ears(vf.RunCallback):
        def on_run_start(self, e):
            heard["start"] += 1
            return "rid-1"

        def on_row(self, e):
            heard["rows"].append((e.phase, e.split, e.item.id, e.row.status))

        def on_evaluation_end(self, e):
            heard["evals"].append((e.phase, e.split, e.result.n))

        def on_iteration(self, e):
            heard["iterations"] += 1

        def on_run_end(self, e):
            heard["end"] = e.status

    res = vf.optimize(dspy.Predict(QA), records(), metric, "gepa", models=models(), tracking=Ears(),
                      budget=vf.Budget(max_metric_calls=20), run_dir=tmp_path / "r", workdir=tmp_path)
    assert heard["start"] == 1 and heard["end"] == "FINISHED" and res.report["run_id"] == "rid-1"
    assert heard["iterations"] > 0
    assert len(heard["rows"]) == 2 * 12 and {r[0] for r in heard["rows"]} == {"before", "after"}
    assert sorted(heard["evals"]) == sorted((p, s, len(getattr(res.manifest, s)))
                                            for p in ("before", "after") for s in ("train", "val", "test"))


def test_a_run_directory_resumes_only_its_own_run(tmp_path):
    with dspy.context(lm=scripted_lm(task_fn), adapter=dspy.JSONAdapter()):
        first = vf.evaluate(dspy.Predict(QA), records(), metric, run_dir=tmp_path / "r", workdir=tmp_path)
        again = vf.evaluate(dspy.Predict(QA), records(), metric, run_dir=tmp_path / "r", workdir=tmp_path)
        assert again.report["splits"] == first.report["splits"]
        with pytest.raises(InputError, match="run_state.json.*another run"):
            vf.evaluate(dspy.Predict(QA), records(), metric, threshold=0.5, run_dir=tmp_path / "r",
                        workdir=tmp_path)


def test_models_by_role_from_lm_objects_and_dicts_with_api_base():
    from verifirst.api import build_models

    task = scripted_lm(task_fn)
    base = "http://127.0.0.1:9/v1"
    ms = build_models({"task": task, "reflection": {"model": "openai/gpt-4o-mini", "api_base": base}})
    assert ms.task is task and ms.judge is task
    assert ms.reflection.kwargs.get("api_base") == base and ms.reflection.model == "openai/gpt-4o-mini"
    assert ms.teacher is ms.reflection


def test_an_engine_object_is_used_as_it_is(tmp_path):
    got = {}

    class Rewrite:
        name = "rewrite"

        def compile(self, program, metric, trainset, valset, budget, ctx):
            got["ids"] = {ex.item_id for ex in trainset + valset}
            got["scores"] = [metric(ex, program(**ex.inputs())) for ex in valset]
            program.signature = program.signature.with_instructions(RULE)
            return vf.EngineResult(program, [{"iteration": 0}])

    res = vf.optimize(dspy.Predict(QA), records(), metric, Rewrite(), models=models(), run_dir=tmp_path / "r",
                      workdir=tmp_path)
    m = res.manifest
    assert got["ids"] == set(m.train + m.val) and got["scores"] == [0.0] * len(m.val)
    assert res.report["engine"] == "rewrite" and res.report["splits"]["test"]["after"]["pass_rate"] == 1.0

    class Nameless:
        def compile(self, *a):
            raise AssertionError("never called")

    with pytest.raises(ConfigError, match="has no name"):
        vf.optimize(dspy.Predict(QA), records(), metric, Nameless(), models=models(), run_dir=tmp_path / "n")
