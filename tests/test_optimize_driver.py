"""The optimizer driver with GEPA and a rule-following scripted LM: GEPA must find the rule,
test must be scored only through the guard, and a rerun must be served from the cache."""
import json

import dspy
import pytest

from verifirst import lm as L
from verifirst.core.errors import ErrorRateExceeded, LeakageError
from verifirst.loop.evaluation import Scorer, evaluate
from verifirst.loop.driver import optimize
from verifirst.optimizers import Budget, EngineContext, VerifierMetric, get_engine
from verifirst.programs.bash import BashGenerator
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.base import Verdict

RULE = "Always answer with printf."


class ExactCommand:
    name = "exact"

    def verify(self, item, candidate):
        ok = (candidate or "").strip() == item.gold["command"]
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "OUTPUT",
                       feedback="" if ok else f"expected `{item.gold['command']}`, got `{candidate}`; use printf")


def task_fn(messages):
    system = messages[0]["content"]
    return json_answer(command="printf hi" if "printf" in system else "echo hi")


def reflection_fn(messages):
    return json_answer(new_instruction=RULE)


@pytest.fixture
def setup(tmp_path):
    items = [Item(id=f"i{k}", inputs={"task": f"say hi #{k}"}, gold={"command": "printf hi"}) for k in range(12)]
    manifest = make_splits(items, ratios=(0.5, 0.25, 0.25), seed=0)
    task_lm = scripted_lm(task_fn)
    refl = scripted_lm(reflection_fn, role="reflection")
    return items, manifest, task_lm, refl, tmp_path


def test_gepa_discovers_rule_and_reports_every_split(setup):
    items, manifest, task_lm, refl, tmp = setup
    with dspy.context(lm=task_lm, adapter=dspy.JSONAdapter()):
        res = optimize(BashGenerator(), Scorer(ExactCommand(), "command"), items, manifest,
                       get_engine("gepa"), Budget(max_metric_calls=30), EngineContext(tmp, reflection_lm=refl),
                       progress=False)
    rep = res.report
    assert rep["splits"]["test"]["before"]["pass_rate"] == 0.0
    assert rep["splits"]["test"]["after"]["pass_rate"] == 1.0
    comp = rep["splits"]["test"]["comparison"]
    assert comp["c_after_only"] == len(manifest.test) and comp["b_before_only"] == 0
    assert "printf" in json.dumps(rep["instructions"])
    assert manifest.seen == set(manifest.train + manifest.val)
    assert (tmp / "optimized_program.json").exists()
    assert any("val_score" in h for h in rep["history"])


def test_engine_never_sees_test_items(setup):
    items, manifest, task_lm, refl, tmp = setup
    seen = []

    class Spy:
        name = "spy"

        def compile(self, program, metric, trainset, valset, budget, ctx):
            from verifirst.optimizers import EngineResult

            seen.extend(ex.item_id for ex in trainset + valset)
            return EngineResult(program)

    with dspy.context(lm=task_lm, adapter=dspy.JSONAdapter()):
        optimize(BashGenerator(), Scorer(ExactCommand(), "command"), items, manifest, Spy(), Budget(),
                 EngineContext(tmp), progress=False)
    assert seen and not set(seen) & set(manifest.test)


def test_test_metric_refused_for_seen_items(setup):
    items, manifest, task_lm, refl, tmp = setup
    manifest.seen.add(manifest.test[0])
    test_items = manifest.select(items, "test")
    with dspy.context(lm=task_lm, adapter=dspy.JSONAdapter()):
        with pytest.raises(LeakageError):
            evaluate(BashGenerator(), test_items, Scorer(ExactCommand(), "command"), split="test",
                     manifest=manifest, progress=False)


def test_metric_adapter_forms(setup):
    items, *_ = setup
    m = VerifierMetric(ExactCommand(), "command", items)
    ex = items[0].example()
    good, bad = dspy.Prediction(command="printf hi"), dspy.Prediction(command="echo hi")
    assert m(ex, good) == 1.0 and m(ex, bad) == 0.0
    fb = m(ex, bad, None, "generate.predict", [])
    assert fb.score == 0.0 and "printf" in fb.feedback


def test_lm_errors_are_counted_apart_and_stop_the_run(tmp_path):
    items = [Item(id=f"e{k}", inputs={"task": "x"}, gold={"command": "printf hi"}) for k in range(12)]

    def broken(messages):
        raise RuntimeError("HTTP 503 upstream unavailable")

    with dspy.context(lm=scripted_lm(broken), adapter=dspy.JSONAdapter()):
        with pytest.raises(ErrorRateExceeded, match="LM errors"):
            evaluate(BashGenerator(), items, Scorer(ExactCommand(), "command"), split="val", retries=1,
                     backoff_s=0.0, max_error_rate=0.3, checkpoint=tmp_path / "c.jsonl", progress=False,
                     first_calls_all_failed=0)  # the rate rule alone (the early stop: tests/test_faults.py)
    with dspy.context(lm=scripted_lm(broken), adapter=dspy.JSONAdapter()):
        r = evaluate(BashGenerator(), items[:3], Scorer(ExactCommand(), "command"), split="val", retries=1,
                     backoff_s=0.0, progress=False)
    assert r.n_errors == 3 and r.n_pass == 0 and r.pass_rate == 0.0
    assert all(row.error_kind == "lm" and row.score is None and row.attempts == 2 for row in r.rows)


def test_malformed_output_is_an_error_not_a_fail():
    items = [Item(id="m0", inputs={"task": "x"}, gold={"command": "printf hi"})]
    with dspy.context(lm=scripted_lm(lambda m: "not json at all {"), adapter=dspy.JSONAdapter()):
        r = evaluate(BashGenerator(), items, Scorer(ExactCommand(), "command"), split="val", retries=0,
                     progress=False)
    assert r.rows[0].status == "ERROR"


def test_evaluation_resumes_from_checkpoint(tmp_path):
    items = [Item(id=f"r{k}", inputs={"task": f"t{k}"}, gold={"command": "printf hi"}) for k in range(6)]
    lm1 = scripted_lm(task_fn)
    ck = tmp_path / "ck.jsonl"
    with dspy.context(lm=lm1, adapter=dspy.JSONAdapter()):
        evaluate(BashGenerator(), items[:4], Scorer(ExactCommand(), "command"), split="val", checkpoint=ck,
                 progress=False)
    ck.write_text(ck.read_text() + '{"id": "r4", "status": "PA')  # a line cut by kill -9
    lm2 = scripted_lm(task_fn)
    with dspy.context(lm=lm2, adapter=dspy.JSONAdapter()):
        r = evaluate(BashGenerator(), items, Scorer(ExactCommand(), "command"), split="val", checkpoint=ck,
                     progress=False, threads=2)
    assert lm2.engine.calls == 2 and r.n == 6


def test_usage_ledger_counts_cache_hits(tmp_path):
    L.configure_cache(tmp_path / "cache")
    lm = scripted_lm(task_fn, cache=True, name="cached")
    items = [Item(id=f"u{k}", inputs={"task": f"t{k}"}, gold={"command": "printf hi"}) for k in range(3)]
    L.USAGE.reset()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for _ in range(2):
            with L.usage_split("val"):
                evaluate(BashGenerator(), items, Scorer(ExactCommand(), "command"), split="val", progress=False)
    t = L.USAGE.total(split="val")
    assert t.calls == 6 and t.cache_hits == 3 and t.lm_calls == 3 and lm.engine.calls == 3


class Unjudgeable:
    """Raises on one item, is inconclusive on another, gives no score on a third."""

    name = "unjudgeable"

    def __init__(self, crash, undecided, unscored):
        self.crash, self.undecided, self.unscored = crash, undecided, unscored

    def verify(self, item, candidate):
        if item.id == self.crash:
            raise RuntimeError("sandbox died")
        if item.id == self.undecided:
            return Verdict.undecided("the gold command has no observable effect")
        if item.id == self.unscored:
            return Verdict(None, False, "OUTPUT", feedback="")
        return Verdict(1.0, True, "PASS")


def test_metric_never_hands_none_to_dspy_and_counts_what_it_could_not_judge(setup):
    items, *_ = setup
    m = VerifierMetric(Unjudgeable("i0", "i1", "i2"), "command", items)
    p = dspy.Prediction(command="printf hi")
    scores = [m(items[k].example(), p) for k in range(4)]
    assert scores == [0.0, 0.0, 0.0, 1.0] and all(isinstance(s, float) for s in scores)
    fb = m(items[0].example(), p, None, "generate.predict", [])
    assert fb.score == 0.0 and fb.feedback == "verifier error: RuntimeError: sandbox died"
    fb = m(items[1].example(), p, None, "generate.predict", [])
    assert fb.score == 0.0 and "inconclusive: the gold command has no observable effect" in fb.feedback
    fb = m(items[2].example(), p, None, "generate.predict", [])
    assert fb.score == 0.0 and "inconclusive" in fb.feedback
    assert (m.verifier_errors, m.inconclusive) == (1, 2), "counted once per item and candidate"


def test_driver_reports_metric_counts(setup):
    items, manifest, task_lm, refl, tmp = setup
    tr = manifest.train

    class ScoreTrain:
        name = "score-train"

        def compile(self, program, metric, trainset, valset, budget, ctx):
            from verifirst.optimizers import EngineResult

            for ex in trainset:
                metric(ex, dspy.Prediction(command="printf hi"))
            return EngineResult(program)

    with dspy.context(lm=task_lm, adapter=dspy.JSONAdapter()):
        res = optimize(BashGenerator(), Scorer(Unjudgeable(tr[0], tr[1], None), "command"), items, manifest,
                       ScoreTrain(), Budget(), EngineContext(tmp), progress=False, splits=("train",))
    assert res.report["details"]["metric"] == {"calls": len(tr), "verifier_errors": 1, "inconclusive": 1}
    assert json.loads((tmp / "engine_done.json").read_text())["details"]["metric"]["verifier_errors"] == 1
