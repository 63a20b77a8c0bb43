"""Verifiers outside a verifirst run: vf.mlflow_scorer in mlflow.genai.evaluate and
optimize_prompts, vf.dspy_metric in dspy.Evaluate, and vf.Metric(...).for_optimizer on plain
dspy.Examples. A verdict that decided nothing is never a pass; partial credit is no pass."""
from __future__ import annotations

import re

import dspy
import pytest

import verifirst as vf
from verifirst.core.errors import InputError, LeakageError
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.base import Verdict
from verifirst.verifiers.exact import ExactMatch


class Shy:
    """A verifier that never observes anything it could decide on."""

    name = "shy"

    def verify(self, item, candidate):
        return Verdict.undecided("nothing observable")


class Cmd(dspy.Signature):
    """Write one bash command for the task."""

    task: str = dspy.InputField()
    command: str = dspy.OutputField()


def answer(messages):  # right (ls -l) on even-numbered tasks, wrong (ls) on odd ones
    n = int(re.search(r"task (\d+)", messages[-1]["content"]).group(1))
    return json_answer(command="ls -l" if n % 2 == 0 else "ls")


def examples(n=4):
    return [dspy.Example(task=f"task {k}", answer="ls -l").with_inputs("task") for k in range(n)]


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    mlflow = pytest.importorskip("mlflow")
    old = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db")
    mlflow.set_experiment("scorers")
    yield mlflow
    mlflow.set_tracking_uri(old)


def rows(n=4):
    return [{"inputs": {"task": f"task {k}"}, "expectations": {"answer": "ls -l"}} for k in range(n)]


def predict(task: str) -> str:
    return "ls -l" if int(task.split()[-1]) % 2 == 0 else "ls"


# -- MLflow --------------------------------------------------------------------------------

def test_mlflow_scorer_in_genai_evaluate_reports_the_pass_rate_with_feedback(mlflow_store):
    scorer = vf.mlflow_scorer(ExactMatch(), gold={"command": "answer"})
    res = mlflow_store.genai.evaluate(data=rows(), predict_fn=predict, scorers=[scorer])
    assert res.metrics["exact/mean"] == pytest.approx(0.5)
    df = res.result_df
    assert list(df["exact/value"]) == ["yes", "no", "yes", "no"]
    assert "Expected exactly `ls -l` but got `ls`" in df["exact/rationale"][1]
    fb = scorer.run(inputs={"task": "task 1"}, outputs="ls", expectations={"answer": "ls -l"})
    assert fb.value == "no" and fb.metadata["stage"] == "MISMATCH" and fb.metadata["error_classes"] == "MISMATCH"
    assert not res.passed  # MLflow's own assertion reads the yes/no rating


def test_an_inconclusive_verdict_is_an_error_feedback_never_a_pass(mlflow_store):
    fb = vf.mlflow_scorer(Shy()).run(inputs={"task": "t"}, outputs="ls", expectations={"command": "ls"})
    assert fb.value is None and fb.error.error_code == "INCONCLUSIVE" and "nothing observable" in fb.error.error_message
    res = mlflow_store.genai.evaluate(data=rows(2), predict_fn=predict,
                                      scorers=[vf.mlflow_scorer(Shy()), vf.mlflow_scorer(ExactMatch(), gold={
                                          "command": "answer"})])
    assert "shy/mean" not in res.metrics and res.metrics["exact/mean"] == pytest.approx(0.5)
    assert res.result_df["shy/value"].isna().all() and not res.passed
    assert "shy: nothing observable" in res.reason


def test_a_verifier_that_raises_is_an_error_feedback(mlflow_store):
    class Broken:
        name = "broken"

        def verify(self, item, candidate):
            raise RuntimeError("sandbox gone")

    fb = vf.mlflow_scorer(Broken()).run(inputs={}, outputs="ls", expectations={})
    assert fb.value is None and fb.error.error_code == "ERROR" and "sandbox gone" in fb.error.error_message

    class TimedOut:  # the verifier's own "could not judge" verdict
        name = "timed_out"

        def verify(self, item, candidate):
            return Verdict.error("the check timed out")

    fb = vf.mlflow_scorer(TimedOut()).run(inputs={}, outputs="ls", expectations={})
    assert fb.value is None and fb.error.error_code == "ERROR" and fb.metadata["stage"] == "ERROR"
    metric = vf.dspy_metric(TimedOut(), "command")
    assert metric(examples(1)[0], dspy.Prediction(command="ls")) is False and metric.counts()["not_judged"] == 1


def test_a_wrong_field_is_refused_naming_both_names(mlflow_store):
    scorer = vf.mlflow_scorer(ExactMatch(), gold={"command": "reference"})
    with pytest.raises(InputError, match=r"\[gold.command\].*no field 'reference'.*\['answer'\]"):
        scorer.run(inputs={"task": "t"}, outputs="ls", expectations={"answer": "ls"})
    with pytest.raises(InputError, match=r"\[candidate.cmd\].*outputs has no field 'cmd'"):
        vf.mlflow_scorer(ExactMatch(), "cmd").run(inputs={}, outputs={"command": "ls"}, expectations={})
    res = mlflow_store.genai.evaluate(data=rows(2), predict_fn=predict, scorers=[scorer])
    assert "exact/mean" not in res.metrics and res.result_df["exact/value"].isna().all()
    assert "no field 'reference'" in res.result_df["exact/error_message"][0]
    with pytest.raises(InputError, match=r"\[gold\]"):
        vf.mlflow_scorer(ExactMatch(), gold=["command"])


def test_partial_credit_does_not_inflate_the_pass_rate():
    """FEH scores a non-equivalent command by its similarity (0.71 here): the value is the verdict."""
    from verifirst.verifiers.bash.feh import FehVerifier

    outs = {"wc -l a": "3 a\n", "cat a | wc -l": "3\n", "ls": "a\nb\n"}

    def run_pair(gold, cand, fixture):
        return [{"stdout": outs[c.splitlines()[-1]], "stderr": "", "exit_code": 0, "timed_out": False,
                 "signal": None, "truncated": False, "fs_diff": {"added": [], "deleted": [], "modified": []}}
                for c in (gold, cand)]

    feh = FehVerifier(run_pair=run_pair, embed=bag_embed)
    pairs = [("wc -l a", "cat a | wc -l"), ("ls", "ls")]
    scorer = vf.mlflow_scorer(feh, gold={"command": "ref"})
    fbs = [scorer.run(inputs={"task": "count"}, outputs=c, expectations={"ref": g}) for g, c in pairs]
    assert [fb.value for fb in fbs] == ["no", "yes"]
    assert 0 < float(fbs[0].metadata["score"]) < 1  # the partial credit a naive wrapper would count
    metric = vf.dspy_metric(feh, "command", gold={"command": "ref"})
    got = [metric(dspy.Example(task="count", ref=g).with_inputs("task"), dspy.Prediction(command=c))
           for g, c in pairs]
    assert got == [False, True] and metric.counts() == {"calls": 2, "passed": 1, "failed": 1, "not_judged": 0}


def test_mlflow_scorer_in_optimize_prompts(mlflow_store):
    pytest.importorskip("mlflow.genai.optimize")
    if not hasattr(mlflow_store.genai, "optimize_prompts"):
        pytest.skip("this MLflow has no mlflow.genai.optimize_prompts")
    from mlflow.genai.optimize.optimizers import BasePromptOptimizer
    from mlflow.genai.optimize.types import PromptOptimizerOutput

    from verifirst.scorers import pass_rate_objective

    class TryEach(BasePromptOptimizer):
        """Scores the starting template and each candidate with MLflow's eval_fn; keeps the best."""

        def __init__(self, candidates):
            self.candidates, self.scores = candidates, {}

        def optimize(self, eval_fn, train_data, target_prompts, enable_tracking=True):
            start = target_prompts["cmd"]
            for t in [start, *self.candidates]:
                recs = eval_fn({"cmd": t}, train_data)
                self.scores[t] = sum(r.score for r in recs) / len(recs)
            best = max(self.scores, key=self.scores.get)
            return PromptOptimizerOutput(optimized_prompts={"cmd": best}, initial_eval_score=self.scores[start],
                                         final_eval_score=self.scores[best])

    prompt = mlflow_store.genai.register_prompt(name="cmd", template="Write a command for: {{task}}")

    def predict_fn(task):
        text = mlflow_store.genai.load_prompt(prompt.uri).format(task=task)
        return "ls -l" if "long" in text else "ls"

    opt = TryEach(["Write a long-listing command for: {{task}}"])
    data = [{"inputs": {"task": f"list {k}"}, "expectations": {"command": "ls -l"}} for k in range(3)]
    res = mlflow_store.genai.optimize_prompts(predict_fn=predict_fn, train_data=data, prompt_uris=[prompt.uri],
                                              optimizer=opt, scorers=[vf.mlflow_scorer(ExactMatch())],
                                              aggregation=pass_rate_objective)
    assert (res.initial_eval_score, res.final_eval_score) == (0.0, 1.0)
    assert "long-listing" in res.optimized_prompts[0].template
    from mlflow.entities import AssessmentError, Feedback

    undecided = Feedback(error=AssessmentError(error_code="INCONCLUSIVE", error_message="x"))
    assert pass_rate_objective({"a": Feedback(value="yes"), "b": undecided}) == 0.5  # a number, never a pass


# -- DSPy ----------------------------------------------------------------------------------

def test_dspy_metric_in_dspy_evaluate_outside_any_run():
    lm = scripted_lm(answer, name="scorers-cmd")
    metric = vf.dspy_metric(ExactMatch(), "command", gold={"command": "answer"})
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        res = dspy.Evaluate(devset=examples(4), metric=metric, num_threads=1, display_progress=False)(
            dspy.Predict(Cmd))
    assert res.score == pytest.approx(50.0)
    assert [s for _, _, s in res.results] == [True, False, True, False]
    assert metric.counts() == {"calls": 4, "passed": 2, "failed": 2, "not_judged": 0}
    gepa = vf.dspy_metric(ExactMatch(), "command", gold={"command": "answer"}, feedback=True)
    out = gepa(examples(1)[0], dspy.Prediction(command="ls"), None, "predict", None)
    assert out.score == 0.0 and "Expected exactly `ls -l`" in out.feedback


def test_dspy_metric_never_passes_an_undecided_verdict():
    metric = vf.dspy_metric(Shy(), "command")
    assert metric(examples(1)[0], dspy.Prediction(command="ls -l")) is False
    fb = vf.dspy_metric(Shy(), "command", feedback=True)(examples(1)[0], dspy.Prediction(command="ls -l"))
    assert fb.score == 0.0 and fb.feedback.startswith("not judged (nothing observable)")
    assert metric.counts()["not_judged"] == 1 and metric.counts()["failed"] == 0

    class Unknown:  # `passed` None: the convention for a verdict without an observation
        name = "unknown"

        def verify(self, item, candidate):
            return Verdict(0.0, None, "PASS")

    assert vf.dspy_metric(Unknown(), "command")(examples(1)[0], dspy.Prediction(command="ls")) is False


def test_dspy_metric_refuses_a_wrong_field_naming_it():
    ex = examples(1)[0]
    with pytest.raises(InputError, match=r"\[gold.command\].*example has no field 'reference'"):
        vf.dspy_metric(ExactMatch(), "command", gold={"command": "reference"})(ex, dspy.Prediction(command="ls"))
    with pytest.raises(InputError, match=r"\[candidate.cmd\].*prediction has no field 'cmd'.*\['command'\]"):
        vf.dspy_metric(ExactMatch(), "cmd", gold={"command": "answer"})(ex, dspy.Prediction(command="ls"))
    with pytest.raises(InputError, match=r"\[candidate\]"):
        vf.dspy_metric(ExactMatch(), None)


def test_metric_for_optimizer_takes_plain_examples_of_its_items_and_refuses_others():
    v = ExactMatch()
    plain = dspy.Example(task="task 1", command="ls -l").with_inputs("task")
    # the items given as plain dspy.Examples, as a user outside a run has them
    m2 = vf.Metric(v, "command").for_optimizer([dspy.Example(task="task 1", command="ls -l").with_inputs("task")])
    assert m2(plain, dspy.Prediction(command="ls -l")) == 1.0  # the same content: that item
    assert m2(plain, dspy.Prediction(command="ls")) == 0.0
    with pytest.raises(LeakageError, match="not one of the 1 train and validation items"):
        m2(dspy.Example(task="task 9", command="ls -l").with_inputs("task"), dspy.Prediction(command="ls -l"))
    items = [vf.Item(f"i{k}", {"task": f"task {k}"}, {"command": "ls -l"}) for k in range(2)]
    m3 = vf.Metric(v, "command").for_optimizer(items)
    with dspy.context(lm=scripted_lm(answer, name="scorers-cmd"), adapter=dspy.JSONAdapter()):
        res = dspy.Evaluate(devset=[dspy.Example(task=f"task {k}", command="ls -l").with_inputs("task")
                                    for k in range(2)], metric=m3, display_progress=False)(dspy.Predict(Cmd))
    assert [s for _, _, s in res.results] == [1.0, 0.0] and m3.counts()["calls"] == 2


# -- the bash verifier for real (sandboxed runs; the embedder replaced by a hashed bag of words)

from _feh_testkit import bag_embed  # noqa: E402  (the hashed bag of words the FEH tests use)


def test_the_bash_verifier_in_mlflow_and_dspy(mlflow_store):
    from verifirst.verifiers.bash.feh import FehVerifier

    feh = FehVerifier(embed=bag_embed)
    try:
        feh.preflight()
    except Exception as e:  # no usable bubblewrap here
        pytest.skip(f"bash sandbox unavailable: {e}")
    data = [("print hi", "echo hi", "echo hi"),       # identical: PASS
            ("print hi", "echo hi", "false"),         # exit status and output differ: FAIL
            ("go to /tmp", "cd /tmp", "cd /")]        # no observable effect: INCONCLUSIVE
    recs = [{"inputs": {"task": t}, "expectations": {"reference": g}, "outputs": c} for t, g, c in data]
    res = mlflow_store.genai.evaluate(data=recs, scorers=[vf.mlflow_scorer(feh, gold={"command": "reference"})])
    df = res.result_df
    assert list(df["bash-feh/value"][:2]) == ["yes", "no"] and df["bash-feh/value"].isna().iloc[2]
    assert res.metrics["bash-feh/mean"] == pytest.approx(0.5)  # the inconclusive item is left out
    metric = vf.dspy_metric(feh, "command", gold={"command": "reference"})
    got = [metric(dspy.Example(task=t, reference=g).with_inputs("task"), dspy.Prediction(command=c))
           for t, g, c in data]
    assert got == [True, False, False] and metric.counts()["not_judged"] == 1


def test_the_docs_snippet_runs(mlflow_store, capsys):
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs/integrations.md").read_text(encoding="utf-8")
    section = text.split("## Use a verifier in MLflow or DSPy", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/integrations.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "0.5" and out[-1].startswith("False {'calls': 1, 'passed': 0, 'failed': 1")


def test_one_verdict_type_in_the_kernel():
    """The verifier protocol is the kernel's; verifiers.base re-exports it; a plain metric's answer,
    an optimizer metric's could-not-judge answer and a verifier's verdict are one type."""
    import verifirst.core.verdicts as kernel
    import verifirst.verifiers.base as base
    from verifirst.core.metric import VERIFIER_ERROR, Metric

    for name in ("Verdict", "Verifier", "VerifierError", "PASS", "INCONCLUSIVE", "ERROR", "UNDECIDED"):
        assert getattr(base, name) is getattr(kernel, name), name
    assert VERIFIER_ERROR == kernel.VERIFIER_ERROR and VERIFIER_ERROR in kernel.UNDECIDED
    assert isinstance(ExactMatch(), kernel.Verifier)

    plain = Metric(lambda ex, pred: 0.5)
    v = plain.plain(dspy.Example(q="x"), dspy.Prediction(a="y"))
    assert type(v) is kernel.Verdict and (v.passed, v.stage, v.error_classes) == (False, "FAIL", [])
    u = Metric(lambda ex, pred: None).plain(dspy.Example(q="x"), dspy.Prediction(a="y"))
    assert type(u) is kernel.Verdict and u.passed is None and u.inconclusive and u.feedback.startswith("inconclusive")

    def boom(ex, pred):
        raise RuntimeError("down")

    items = [vf.Item("a", {"q": "x"}, {})]
    om = Metric(boom).for_optimizer(items)
    _, _, e = om.verdict(items[0].example(), dspy.Prediction(a="y"))
    assert type(e) is kernel.Verdict and e.stage == VERIFIER_ERROR and e.passed is None
    assert om.counts()["verifier_errors"] == 1
