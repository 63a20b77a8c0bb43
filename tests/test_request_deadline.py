"""A request's deadline: the embedded model stops generating at its timeout or at the run's
max_wall_s, and the request fails as a timeout (counted, never a result)."""
from __future__ import annotations

import time

import pytest
from dspy.lm15 import Config, Message, Request

from verifirst import lm as _lm
from verifirst.lm import _local_engine, make_lm
from verifirst.lm._local_engine import LocalTimeout
from verifirst.lm import spend as _spend
from verifirst.lm._deadline import deadline_for_request, request_deadline
from verifirst.lm.spend import BudgetExceeded, Limits, SpendMeter

TOKEN_S = 0.002  # one fake token's generation time


class FakeLlama:
    """llama_cpp.Llama's two calls as the engine uses them: the chat call goes through
    create_completion (as llama_cpp's chat handlers do), which honours stopping criteria per token."""

    def __init__(self):
        self.generated = []

    def create_completion(self, *, max_tokens, stopping_criteria=None, **_):
        n = 0
        while n < max_tokens:
            n += 1
            time.sleep(TOKEN_S)
            if stopping_criteria is not None and stopping_criteria(None, None):
                break
        self.generated.append(n)
        return {"choices": [{"text": "x" * n, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": n}}

    def create_chat_completion(self, *, messages, max_tokens, **kw):
        out = self.create_completion(max_tokens=max_tokens, stopping_criteria=None)
        return {"id": "fake", "choices": [{"message": {"content": out["choices"][0]["text"]}, "finish_reason": "stop"}],
                "usage": out["usage"]}


@pytest.fixture
def engine(monkeypatch):
    eng = _local_engine.LlamaCppEngine(isolate=False)  # the stand-in model runs in this process
    fake = FakeLlama()
    monkeypatch.setattr(eng, "_model", lambda: fake)
    return eng, fake


def _request(max_tokens: int) -> Request:
    return Request(model="local", messages=(Message.user("count"),), config=Config(max_tokens=max_tokens))


def test_generation_stops_at_the_deadline_and_fails_as_a_timeout(engine):
    eng, fake = engine
    with deadline_for_request(time.monotonic() + 0.05):
        with pytest.raises(LocalTimeout, match="deadline"):
            eng.complete(_request(1000))  # 2 s of tokens without the deadline
    assert 0 < fake.generated[-1] < 500
    assert "create_completion" not in vars(fake)  # the model's own method again


def test_without_a_deadline_or_before_it_the_reply_is_whole(engine):
    eng, fake = engine
    assert eng.complete(_request(20)).usage.output_tokens == 20
    with deadline_for_request(time.monotonic() + 60):
        assert eng.complete(_request(20)).usage.output_tokens == 20
    assert request_deadline() is None


def test_a_deadline_passed_before_the_call_generates_nothing(engine):
    eng, fake = engine
    with deadline_for_request(time.monotonic() - 1):
        with pytest.raises(LocalTimeout, match="after 0 generated tokens"):
            eng.complete(_request(20))
    assert fake.generated == []


def test_ticket_deadline_is_the_first_wall_cap_it_falls_under():
    meter = SpendMeter(Limits(max_wall_s=30), {"judge": Limits(max_wall_s=10)})
    t0 = meter._t0
    assert meter.admit("task", "local", 4, 8).deadline == pytest.approx(t0 + 30)
    assert meter.admit("judge", "local", 4, 8).deadline == pytest.approx(t0 + 10)
    meter.hold_back(Limits(max_wall_s=25))  # the test split's share: the optimizer's calls end earlier
    assert meter.admit("task", "local", 4, 8).deadline == pytest.approx(t0 + 5)
    assert SpendMeter(Limits(max_lm_calls=5)).admit("task", "local", 4, 8).deadline is None


def test_max_wall_s_stops_an_embedded_call_in_flight(engine, monkeypatch):
    """The run's wall cap ends a generation already running (before: only the next request was
    refused, so one long reply could run minutes past it); the next request is refused."""
    eng, fake = engine
    monkeypatch.setattr("verifirst.lm.local_engine", lambda: eng)
    lm = make_lm("local", role="task", max_tokens=5000, cache=False, num_retries=2)  # 10 s of tokens
    meter = SpendMeter(Limits(max_wall_s=0.3))
    t0 = time.monotonic()
    with _spend.metering(meter), pytest.raises(LocalTimeout):
        lm("count to a million")
    assert time.monotonic() - t0 < 5  # the in-flight reply ended at the cap, not after 5000 tokens
    assert len(fake.generated) == 1 and fake.generated[0] < 5000  # and was not retried
    with _spend.metering(meter), pytest.raises(BudgetExceeded) as got:
        lm("the next request")
    assert got.value.limit == "max_wall_s" and len(fake.generated) == 1


def test_request_timeout_s_applies_to_the_embedded_model_and_is_not_retried(engine, monkeypatch):
    eng, fake = engine
    monkeypatch.setattr("verifirst.lm.local_engine", lambda: eng)
    lm = make_lm("local", role="task", max_tokens=5000, cache=False, num_retries=3, timeout_s=0.1)
    with pytest.raises(LocalTimeout):
        lm("count to a million")
    assert len(fake.generated) == 1 and fake.generated[0] < 5000  # the same tokens would come again
    assert make_lm("local", role="task").request_timeout_s == _lm.LOCAL_TIMEOUT_S


@pytest.mark.integration
def test_the_real_embedded_model_stops_at_its_deadline():
    eng = _local_engine.LlamaCppEngine()
    try:
        eng.complete(_request(4))  # load the model before the clock starts
        t0 = time.monotonic()
        with deadline_for_request(time.monotonic() + 0.2), pytest.raises(LocalTimeout):
            eng.complete(Request(model="local", messages=(Message.user(
                "Write a very long story about a dragon, at least 2000 words."),), config=Config(max_tokens=1500)))
        assert time.monotonic() - t0 < 30  # 1500 tokens would take far longer on a loaded 2-core machine
        assert eng.complete(_request(4)).message  # the model answers the next request
    finally:
        eng.release()


@pytest.mark.integration
def test_a_long_max_tokens_with_a_schema_does_not_crash_the_process(tmp_path):
    """One string field and max_tokens 1500 made a grammar of 3750 nested groups: llama.cpp died
    with SIGSEGV. Run in a child process, so a crash fails this test instead of the suite."""
    import subprocess
    import sys

    assert _local_engine._bounded({"type": "string"}, 1500)["maxLength"] == _local_engine.MAX_STRING_CHARS
    script = tmp_path / "long.py"
    script.write_text(
        "import time\n"
        "from dspy.lm15 import Config, Message, Request\n"
        "from verifirst.lm import _local_engine\n"
        "from verifirst.lm._deadline import deadline_for_request\n"
        "schema = {'type': 'json_schema', 'name': 'x', 'schema': {'type': 'object', "
        "'properties': {'story': {'type': 'string'}}, 'required': ['story']}}\n"
        "eng = _local_engine.LlamaCppEngine()\n"
        "try:\n"
        "    with deadline_for_request(time.monotonic() + 20):\n"
        "        eng.complete(Request(model='local', messages=(Message.user('Tell a long story.'),), "
        "config=Config(max_tokens=1500, response_format=schema)))\n"
        "except _local_engine.LocalTimeout:\n"
        "    pass\n"
        "print('alive')\n")
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0 and "alive" in got.stdout, got.stderr[-500:]
