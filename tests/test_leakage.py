"""The leakage guard's touched-items branch, reached through an engine: items the metric scores
are recorded in the split manifest, a test item is refused right where the metric sees it, and
an engine that swallows that refusal still cannot get a clean test score afterwards."""
import json

import dspy
import pytest

from verifirst.core.errors import LeakageError
from verifirst.loop.evaluation import Scorer
from verifirst.loop.driver import optimize
from verifirst.optimizers import Budget, EngineContext, EngineResult, VerifierMetric
from verifirst.programs.bash import BashGenerator
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.base import Verdict


class ExactCommand:
    name = "exact"

    def verify(self, item, candidate):
        ok = (candidate or "").strip() == item.gold["command"]
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "OUTPUT")


class Smuggler:
    """An engine whose compile() scores one held-out test item through the metric it was given.

    swallow: catch the metric's exception the way dspy.Evaluate does (a failed example), and
    return normally.
    """

    name = "smuggler"

    def __init__(self, test_item: Item, swallow: bool):
        self.test_item, self.swallow = test_item, swallow
        self.caught: list[BaseException] = []

    def compile(self, program, metric, trainset, valset, budget, ctx):
        metric(trainset[0], dspy.Prediction(command="printf hi"))  # a legitimate call
        try:
            metric(self.test_item.example(), dspy.Prediction(command="printf hi"))
        except Exception as e:
            if not self.swallow:
                raise
            self.caught.append(e)
        return EngineResult(program)


@pytest.fixture
def world(tmp_path):
    items = [Item(id=f"i{k}", inputs={"task": f"say hi #{k}"}, gold={"command": "printf hi"}) for k in range(12)]
    manifest = make_splits(items, ratios=(0.5, 0.25, 0.25), seed=0)
    lm = scripted_lm(lambda messages: json_answer(command="printf hi"))
    return items, manifest, lm, tmp_path


def _run(world, engine):
    items, manifest, lm, tmp = world
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return optimize(BashGenerator(), Scorer(ExactCommand(), "command"), items, manifest, engine, Budget(),
                        EngineContext(tmp / "run"), progress=False)


def test_metric_refuses_a_test_item_smuggled_in_by_an_engine(world):
    items, manifest, _, tmp = world
    test_item = manifest.select(items, "test")[0]
    with pytest.raises(LeakageError, match="held-out test item"):
        _run(world, Smuggler(test_item, swallow=False))
    saved = json.loads((tmp / "run" / "split_manifest.json").read_text())
    assert test_item.id in saved["seen"], "the attempt is on record in the run's manifest"


def test_a_swallowed_refusal_still_blocks_the_test_score(world):
    items, manifest, _, tmp = world
    test_item = manifest.select(items, "test")[0]
    engine = Smuggler(test_item, swallow=True)
    with pytest.raises(LeakageError, match="seen or evaluated by an optimizer"):
        _run(world, engine)
    assert isinstance(engine.caught[0], LeakageError)
    assert test_item.id in manifest.seen
    assert (tmp / "run" / "eval" / "before_test.jsonl").exists(), "the untouched program was scored before"
    assert not (tmp / "run" / "eval" / "after_test.jsonl").exists(), "the touched split is never scored after"


def test_metric_without_a_manifest_names_an_unknown_item_as_leakage(world):
    items, manifest, _, _ = world
    train = manifest.select(items, "train")
    m = VerifierMetric(ExactCommand(), "command", train)
    with pytest.raises(LeakageError, match="not among the train and validation items"):
        m(manifest.select(items, "test")[0].example(), dspy.Prediction(command="printf hi"))


def test_metric_records_every_scored_item_in_the_manifest(world):
    items, manifest, _, _ = world
    train = manifest.select(items, "train")
    m = VerifierMetric(ExactCommand(), "command", train, manifest=manifest)
    assert m(train[0].example(), dspy.Prediction(command="printf hi")) == 1.0
    assert manifest.seen == {train[0].id}
    manifest.check_test(manifest.test)  # touching train items leaves the test split clean
