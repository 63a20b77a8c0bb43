"""A user's own LM object (a plain dspy.LM, DSPy's DummyLM, the LM set with dspy.configure) is counted
and capped as verifirst's own LMs are: each request admitted and journaled before it is sent, in the
report's usage, and a max_lm_calls cap that holds across a stop and a resume. Counted at the endpoint."""
import dspy
import pytest

import verifirst as vf
from verifirst.lm.local_server import serve_local
from verifirst.lm.spend import BudgetExceeded
from verifirst.lm.testing import ScriptedEngine
from verifirst.lm.user_lm import MeteredLM, metered

from test_api import QA, metric, records


@pytest.fixture(scope="module")
def endpoint():
    engine = ScriptedEngine(lambda messages: "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]")
    url, stop = serve_local(engine)
    yield url, engine
    stop()


def _plain_lm(url: str) -> dspy.LM:
    return dspy.LM("openai/plain", api_base=url, api_key="unused", cache=False, num_retries=0)


def test_a_plain_dspy_lm_is_capped_and_counted_across_a_resume(endpoint, tmp_path):
    url, engine = endpoint
    lm = _plain_lm(url)
    kw = dict(models={"task": lm}, run_dir=tmp_path / "run", workdir=tmp_path)
    start = engine.calls
    with pytest.raises(BudgetExceeded):
        vf.evaluate(dspy.Predict(QA), records(), metric, budget={"max_lm_calls": 5}, **kw)
    assert engine.calls - start == 5  # the cap held: the sixth request was refused before it was sent
    res = vf.evaluate(dspy.Predict(QA), records(), metric, budget={"max_lm_calls": 40}, **kw)
    received = engine.calls - start
    assert received == 12  # every item once: the stopped run's rows were kept
    assert res.report["usage_run_dir"]["requests"] == received  # both invocations, journaled
    assert res.report["usage_this_run"]["lm_calls"] == received - 5
    assert res.report["splits"]["test"]["before"]["pass_rate"] == 1.0  # answered through the user's LM
    assert lm.history and not isinstance(lm, MeteredLM)  # the user's object itself is left as it was


def test_dspy_configured_lm_and_dummy_lm_are_counted(endpoint, tmp_path):
    url, engine = endpoint
    start = engine.calls
    with dspy.context(lm=_plain_lm(url)):
        res = vf.evaluate(dspy.Predict(QA), records(), metric, run_dir=tmp_path / "a", workdir=tmp_path)
    assert res.report["usage_run_dir"]["requests"] == engine.calls - start == 12
    dummy = dspy.utils.DummyLM([{"answer": "42"}] * 12)
    res = vf.evaluate(dspy.Predict(QA), records(), metric, models={"task": dummy}, run_dir=tmp_path / "b",
                      workdir=tmp_path)
    assert res.report["usage_run_dir"]["requests"] == len(dummy.history) == 12
    assert res.report["usage_this_run"]["lm_calls"] == 12


def test_the_wrapper_is_the_users_lm_in_all_but_counting(endpoint):
    url, _ = endpoint
    lm = _plain_lm(url)
    wrapped = metered(lm, "reflection")
    assert metered(wrapped) is wrapped and metered(None) is None
    assert (wrapped.model, wrapped.kwargs, wrapped.history) == (lm.model, lm.kwargs, lm.history)
    wrapped.kwargs["temperature"] = 0.5
    assert lm.kwargs["temperature"] == 0.5
    assert isinstance(wrapped.copy(), MeteredLM) and wrapped.copy().role == "reflection"
