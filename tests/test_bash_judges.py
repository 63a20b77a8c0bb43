import dspy
import pytest
from dspy.utils import DummyLM

from verifirst.programs.bash_judges import (BashJudgeError, CombinedJudge, FunctionalityMatchJudge,
                                            IceScoreJudge, JudgeVerifier, LogicRepresentationJudge,
                                            make_bash_judge, parse_bool, parse_score)
from verifirst.core.task import Item

REQS = {"requirements": ["print the numbers 1 to 10", "one per line"]}
DESC = {"functionality": ["prints 1..10, one per line"]}
LOGIC = {"logic": "1. for i from 1 to 10: print i"}


def match(covers, only, feedback="none"):
    return {"reasoning": "compared", "covers_required": covers, "only_required": only, "feedback": feedback}


def check(covers, feedback="none"):
    return {"reasoning": "checked", "covers": covers, "feedback": feedback}


def run(judge, answers, task="Print 1 to 10", command="seq 1 10"):
    lm = DummyLM(answers)
    with dspy.context(lm=lm):
        return judge(task=task, command=command), lm


@pytest.mark.parametrize("covers, only, verdict", [(True, True, True), (True, False, False),
                                                   (False, True, False), (False, False, False)])
def test_bfm_needs_both_directions(covers, only, verdict):
    p, lm = run(FunctionalityMatchJudge(), [REQS, DESC, match(covers, only)])
    assert p.verdict is verdict
    assert p.details["covers_required"] is covers and p.details["only_required"] is only
    assert len(lm.history) == 3
    if verdict:
        assert p.feedback == ""
    else:
        assert p.feedback  # a rejection always says something a reviser can act on


def test_bfm_passes_requirements_and_description_to_the_match_step():
    _, lm = run(FunctionalityMatchJudge(), [REQS, DESC, match(True, True)])
    last = lm.history[-1]["messages"][-1]["content"]
    assert "print the numbers 1 to 10" in last and "prints 1..10, one per line" in last


def test_bfm_feedback_from_lm_is_kept():
    p, _ = run(FunctionalityMatchJudge(), [REQS, DESC, match(False, True, "it prints 0 too; use seq 1 10")])
    assert p.verdict is False and p.feedback == "it prints 0 too; use seq 1 10"


@pytest.mark.parametrize("covers", [True, False])
def test_logic_judge(covers):
    p, _ = run(LogicRepresentationJudge(), [REQS, LOGIC, check(covers, "none" if covers else "misses 10")])
    assert p.verdict is covers
    assert p.details["logic"] == LOGIC["logic"]
    assert p.feedback == ("" if covers else "misses 10")


@pytest.mark.parametrize("mode, a, b, verdict", [("and", True, False, False), ("and", True, True, True),
                                                 ("or", True, False, True), ("or", False, False, False)])
def test_combined_modes_share_one_extraction(mode, a, b, verdict):
    p, lm = run(CombinedJudge(mode=mode), [REQS, DESC, match(a, True, "bfm says"), LOGIC, check(b, "logic says")])
    assert len(lm.history) == 5  # requirements extracted once, not once per metric
    assert p.verdict is verdict and p.details["bfm"] is a and p.details["logic"] is b
    assert p.score == (a + b) / 2
    if not verdict:
        assert ("[logic] logic says" in p.feedback) is (not b)


@pytest.mark.parametrize("score, threshold, verdict", [("4", 3, True), ("3", 3, True), ("2", 3, False),
                                                       ("3", 4, False), ("Score: 4", 4, True), ("3/4", 3, True)])
def test_ice_threshold(score, threshold, verdict):
    p, _ = run(IceScoreJudge(threshold=threshold), [{"reasoning": "steps", "score": score}])
    assert p.verdict is verdict
    assert p.details["threshold"] == threshold
    assert bool(p.feedback) is (not verdict)


def test_ice_out_of_range_is_an_error_not_a_fail():
    with pytest.raises(BashJudgeError, match="outside"):
        run(IceScoreJudge(), [{"reasoning": "x", "score": "7"}])
    with pytest.raises(BashJudgeError, match="no number"):
        run(IceScoreJudge(), [{"reasoning": "x", "score": "excellent"}])


def test_unparseable_boolean_is_an_error():
    # ChatAdapter retries through JSONAdapter on a parse failure, so give it enough answers
    bad = {"reasoning": "?", "covers_required": "perhaps", "only_required": "maybe", "feedback": "?"}
    with pytest.raises(BashJudgeError):
        run(FunctionalityMatchJudge(), [REQS, DESC, bad, bad, bad])


def test_lm_failure_is_a_judge_error():
    class DownEngine:
        supports_response_schema = False

        def complete(self, request):
            raise ConnectionError("down")
    with dspy.context(lm=dspy.LM("local/down", engine=DownEngine(), num_retries=0)):
        with pytest.raises(BashJudgeError, match="down|ConnectionError"):
            IceScoreJudge()(task="t", command="ls")


def test_parsers():
    assert parse_bool("Yes") is True and parse_bool("false.") is False and parse_bool(True) is True
    with pytest.raises(BashJudgeError):
        parse_bool("unsure")
    assert parse_score(3) == 3.0 and parse_score("3.5 out of 4") == 3.5
    with pytest.raises(BashJudgeError):
        parse_score("-1")


def test_judge_as_verifier_and_registry():
    item = Item("a", {"task": "Print 1 to 10"}, {"command": "seq 10"})
    with dspy.context(lm=DummyLM([{"reasoning": "ok", "score": "1"}])):
        v = JudgeVerifier(IceScoreJudge()).verify(item, "seq 0 10")
    assert v.passed is False and v.score == 0.0 and v.details["judge_score"] == 1.0 and v.feedback
    assert isinstance(make_bash_judge("logic"), LogicRepresentationJudge)
    with pytest.raises(ValueError):
        make_bash_judge("nope")
    with pytest.raises(ValueError):
        IceScoreJudge(threshold=5)


# ---- S0 Task 1 on a scripted setup ----------------------------------------------------------

from verifirst.benchmarks.studies.judge_validation import binary_metrics, group_by_suite, validate_judges  # noqa: E402
from verifirst.verifiers.base import Verdict  # noqa: E402


class FakeVerifier:
    """Passes when the candidate equals the gold; `boom` commands make the verifier fail."""

    name = "fake"

    def verify(self, item, candidate):
        if candidate == "boom":
            raise RuntimeError("sandbox broke")
        ok = candidate == item.gold["command"]
        return Verdict(float(ok), ok)


class TableJudge:
    def __init__(self, table):
        self.table = table

    def __call__(self, task, command):
        v = self.table.get(task, True)
        if isinstance(v, Exception):
            raise v
        return dspy.Prediction(verdict=v, feedback="" if v else "no", reasoning="r", score=float(v))


TRUTH = [True] * 4 + [False] * 4
A = [True, True, True, False, False, False, False, True]
ICE = [True, False, False, False, True, True, False, False]


def scripted_setup():
    items = [Item(f"i{k}", {"task": f"t{k}"}, {"command": f"c{k}"}, meta={"suite": "s1" if k < 5 else "s2"})
             for k in range(9)]
    cands = {f"i{k}": (f"c{k}" if TRUTH[k] else "wrong") for k in range(8)}
    cands["i8"] = "boom"
    judges = {"bfm": TableJudge({f"t{k}": A[k] for k in range(8)}),
              "logic": TableJudge({**{f"t{k}": TRUTH[k] for k in range(8)}, "t0": BashJudgeError("lm down")}),
              "ice": TableJudge({f"t{k}": ICE[k] for k in range(8)})}
    return items, cands, judges


def test_validation_confusion_and_mcnemar_against_ice():
    items, cands, judges = scripted_setup()
    rep = validate_judges({"all8": items}, judges, FakeVerifier(), candidates=cands)
    s = rep["suites"]["all8"]
    assert (s["items"], s["scored"], s["positives"], s["verifier_errors"]) == (9, 8, 4, 1)
    a = s["judges"]["bfm"]
    assert (a["tp"], a["fn"], a["tn"], a["fp"], a["n"]) == (3, 1, 3, 1, 8)
    assert a["accuracy"] == 0.75 and a["precision"] == 0.75 and a["recall"] == 0.75 and a["f1"] == 0.75
    lo, hi = a["accuracy_ci"]
    assert lo < 0.75 < hi
    ice = s["judges"]["ice"]
    assert (ice["tp"], ice["fn"], ice["fp"], ice["tn"], ice["accuracy"]) == (1, 3, 2, 2, 3 / 8)
    lg = s["judges"]["logic"]
    assert lg["lm_errors"] == 1 and lg["n"] == 7 and lg["accuracy"] == 1.0  # the error is not a FAIL
    m = s["mcnemar_vs_baseline"]["bfm"]
    assert m["n_pairs"] == 8 and (m["test"]["b"], m["test"]["c"]) == (4, 1)
    assert m["test"]["p_value"] == pytest.approx(12 / 32) and m["test"]["exact"] is True
    assert s["mcnemar_vs_baseline"]["logic"]["n_pairs"] == 7  # paired only where both judged
    assert "ice" not in s["mcnemar_vs_baseline"]
    assert len(rep["rows"]) == 9 and rep["verifier"] == "fake"
    import json
    json.dumps(rep)  # JSON-able


def test_validation_per_suite_with_all_and_generator_extraction():
    items, _, judges = scripted_setup()
    calls = []

    def generator(task):
        calls.append(task)
        k = int(task[1:])
        text = f"Here you go:\n```bash\nc{k}\n```" if k % 2 == 0 else "I do not know."
        return dspy.Prediction(command=text)
    rep = validate_judges(group_by_suite(items[:8]), judges, FakeVerifier(), generator=generator)
    assert set(rep["suites"]) == {"s1", "s2", "all"} and len(calls) == 8
    # odd tasks give prose, nothing extractable: counted, and the raw text fails execution
    assert rep["suites"]["all"]["extraction_failures"] == 4 and rep["suites"]["all"]["positives"] == 4
    assert rep["suites"]["s1"]["items"] == 5 and rep["suites"]["s2"]["items"] == 3


def test_validation_input_checks_and_empty_metrics():
    items, cands, judges = scripted_setup()
    with pytest.raises(Exception, match="baseline"):
        validate_judges(items, {"bfm": judges["bfm"]}, FakeVerifier(), candidates=cands)
    with pytest.raises(Exception, match="no candidate"):
        validate_judges(items, judges, FakeVerifier())
    assert binary_metrics([], [])["accuracy"] is None
    m = binary_metrics([False, False], [False, False])  # nothing accepted: precision undefined, not 0
    assert m["accuracy"] == 1.0 and m["precision"] is None and m["recall"] is None and m["f1"] is None
