"""Spend control in the LM layer (issue 22): every request is admitted against the remaining budget
before it is sent. Scripted LMs priced through a Prices table; the scripted engine counts the
requests that reached it, so "not sent" is checked where it matters."""
from __future__ import annotations

import json
import pickle
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest

from verifirst.core.errors import InputError
from verifirst.lm import USAGE, AccountedLM, FastJSONAdapter
from verifirst.lm.spend import (
    BudgetExceeded,
    Limits,
    Prices,
    SpendMeter,
    active_meter,
    metering,
)
from verifirst.lm.testing import ScriptedEngine, json_answer, scripted_lm

# 10 USD per 1M tokens, in and out: a token costs 1e-5 USD.
PRICES = Prices({"local/scripted": {"input": 10.0, "output": 10.0}})
PROMPT = "x" * 400  # 100 tokens reserved (characters / 4); the scripted engine reports 101
MAX_TOKENS = 50
RESERVED_TOKENS = 100 + MAX_TOKENS  # 150: one call's worst case
REAL_TOKENS = 101 + 1  # the reply "ok" is 1 token
TOKEN_USD = 1e-5


def priced_lm(role: str = "task", latency_s: float = 0.0, fn=lambda m: "ok", **kw) -> AccountedLM:
    return scripted_lm(fn, role=role, latency_s=latency_s, max_tokens=MAX_TOKENS, **kw)


def ask(lm: AccountedLM, text: str = PROMPT):
    return lm(text)


def calls_until_refused(lm: AccountedLM, n: int) -> list[BudgetExceeded]:
    """Make n sequential calls; the refusals, in order (a refused call raises, the next is tried)."""
    refused = []
    for _ in range(n):
        try:
            ask(lm)
        except BudgetExceeded as e:
            refused.append(e)
    return refused


def test_max_usd_sends_exactly_the_calls_that_fit_then_stops_hard():
    lm = priced_lm()
    meter = SpendMeter(Limits(max_usd=0.005), prices=PRICES)
    # worst case 150 tokens = 0.0015; real 102 tokens = 0.00102. After 4 calls 0.00408 is spent and
    # the 5th would need up to 0.0015 more: 0.00558 > 0.005.
    with metering(meter):
        refused = calls_until_refused(lm, 10)
    assert lm.engine.calls == 4
    assert len(refused) == 6  # the 5th and every later call, none of them sent
    first = refused[0]
    assert (first.limit, first.role, first.cap) == ("max_usd", None, 0.005)
    assert first.spent == pytest.approx(4 * REAL_TOKENS * TOKEN_USD)
    assert first.exit_code == 1
    assert str(first) == ("stopped by budget: max_usd 0.005 for the run reached "
                          "(0.0041 spent; the call needing up to 0.0015 was not sent)")
    assert all(str(e) == str(first) for e in refused)  # a hard stop: the same reason every time
    assert meter.stopped_by == str(first)
    spent = meter.spent()
    assert spent["run"] == {"usd": pytest.approx(0.00408), "tokens": 4 * REAL_TOKENS, "lm_calls": 4}
    assert spent["roles"]["task"] == spent["run"]
    assert spent["limits"] == {"run": {"max_usd": 0.005}, "roles": {}}
    assert spent["stopped_by"] == str(first) and spent["in_flight"] == 0
    assert json.loads(json.dumps(spent)) == spent


def test_the_message_formats_a_cent_cap_as_money():
    e = BudgetExceeded("max_usd", None, 0.4993, 0.5, 0.012)
    assert str(e) == ("stopped by budget: max_usd 0.50 for the run reached "
                      "(0.4993 spent; the call needing up to 0.0120 was not sent)")
    e2 = pickle.loads(pickle.dumps(BudgetExceeded("max_lm_calls", "judge", 3, 3, 1)))
    assert (e2.limit, e2.role, e2.spent, e2.cap) == ("max_lm_calls", "judge", 3.0, 3.0)
    assert str(e2) == ("stopped by budget: max_lm_calls 3 for role judge reached "
                       "(3 spent; the call needing up to 1 was not sent)")


def test_max_lm_calls():
    lm = priced_lm()
    meter = SpendMeter(Limits(max_lm_calls=3), prices=PRICES)
    with metering(meter):
        refused = calls_until_refused(lm, 6)
    assert lm.engine.calls == 3 and len(refused) == 3
    assert refused[0].limit == "max_lm_calls" and refused[0].spent == 3 and refused[0].cap == 3
    assert meter.spent()["run"]["lm_calls"] == 3


def test_max_tokens():
    lm = priced_lm()
    meter = SpendMeter(Limits(max_tokens=500))  # no price needed for a token cap
    # 4 calls spend 408 tokens; a 5th reserves 150 more: 558 > 500
    with metering(meter):
        refused = calls_until_refused(lm, 6)
    assert lm.engine.calls == 4 and len(refused) == 2
    assert (refused[0].limit, refused[0].spent, refused[0].need) == ("max_tokens", 408, RESERVED_TOKENS)
    assert meter.spent()["run"]["tokens"] == 408


def test_max_tokens_reserves_1000_completion_tokens_when_the_call_sets_none():
    lm = scripted_lm(lambda m: "ok")  # no max_tokens
    meter = SpendMeter(Limits(max_tokens=1099))  # 100 prompt + 1000 completion = 1100 does not fit
    with metering(meter), pytest.raises(BudgetExceeded, match="needing up to 1100"):
        ask(lm)
    assert lm.engine.calls == 0


def test_max_wall_s():
    sent_at: list[float] = []

    def slow(messages):
        sent_at.append(time.monotonic() - t0)
        time.sleep(0.05)
        return "ok"

    lm = priced_lm(fn=slow)
    t0 = time.monotonic()
    meter = SpendMeter(Limits(max_wall_s=0.2), prices=PRICES)
    with metering(meter):
        refused = calls_until_refused(lm, 12)
    assert 1 <= lm.engine.calls <= 5 and len(sent_at) == lm.engine.calls
    assert len(refused) == 12 - lm.engine.calls
    assert refused[0].limit == "max_wall_s" and refused[0].spent >= 0.2
    assert "max_wall_s 0.2 for the run reached" in str(refused[0])
    assert max(sent_at) < 0.2 + 0.05  # admitted before the limit; nothing was sent after it


def test_a_role_limit_stops_only_that_role():
    judge, task = priced_lm(role="judge"), priced_lm(role="task")
    meter = SpendMeter(Limits(), per_role={"judge": Limits(max_lm_calls=2)}, prices=PRICES)
    with metering(meter):
        judged = calls_until_refused(judge, 4)
        tasked = calls_until_refused(task, 4)
        again = calls_until_refused(judge, 1)
    assert judge.engine.calls == 2 and len(judged) == 2 and len(again) == 1
    assert task.engine.calls == 4 and tasked == []
    assert (judged[0].limit, judged[0].role) == ("max_lm_calls", "judge")
    assert "for role judge" in meter.stopped_by
    spent = meter.spent()
    assert spent["roles"]["judge"]["lm_calls"] == 2 and spent["roles"]["task"]["lm_calls"] == 4
    assert spent["run"]["lm_calls"] == 6
    assert spent["limits"]["roles"] == {"judge": {"max_lm_calls": 2}}


def test_a_run_limit_stops_every_role():
    judge, task = priced_lm(role="judge"), priced_lm(role="task")
    meter = SpendMeter(Limits(max_lm_calls=2), per_role={"judge": Limits(max_lm_calls=5)}, prices=PRICES)
    with metering(meter):
        ask(task)
        ask(judge)
        with pytest.raises(BudgetExceeded) as e:
            ask(judge)
        with pytest.raises(BudgetExceeded):
            ask(task)
    assert e.value.role is None and judge.engine.calls == 1 and task.engine.calls == 1


def _hammer(lm: AccountedLM, threads: int = 8, per_thread: int = 20) -> tuple[int, int]:
    """Every thread calls until refused twice in a row; (calls answered, refusals)."""
    ok, refused = [0], [0]
    lock = threading.Lock()

    def worker(_):
        for _ in range(per_thread):
            try:
                ask(lm)
            except BudgetExceeded:
                with lock:
                    refused[0] += 1
                continue
            with lock:
                ok[0] += 1

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return ok[0], refused[0]


def test_under_eight_threads_no_call_is_sent_past_a_call_cap():
    lm = priced_lm(latency_s=0.002)
    meter = SpendMeter(Limits(max_lm_calls=25), prices=PRICES)
    with metering(meter):
        ok, refused = _hammer(lm)
    assert lm.engine.calls == ok == 25  # admission is atomic: cap + 0
    assert refused == 8 * 20 - 25
    assert meter.spent()["run"]["lm_calls"] == 25 and meter.spent()["in_flight"] == 0


def test_under_eight_threads_money_stays_within_the_cap():
    lm = priced_lm(latency_s=0.002)
    cap = 0.05
    meter = SpendMeter(Limits(max_usd=cap), prices=PRICES)
    with metering(meter):
        ok, _ = _hammer(lm)
    spent = meter.spent()["run"]
    assert lm.engine.calls == ok == spent["lm_calls"]
    assert spent["usd"] <= cap + RESERVED_TOKENS * TOKEN_USD  # the only overshoot: usage above a reservation
    assert spent["usd"] == pytest.approx(ok * REAL_TOKENS * TOKEN_USD)
    # the stop came when what was spent and reserved by the calls in flight (at most 8) left less
    # than one worst case
    assert cap - spent["usd"] < 8 * RESERVED_TOKENS * TOKEN_USD


def test_a_cache_hit_is_free(tmp_path):
    from verifirst.lm import configure_cache

    old = dspy.cache
    configure_cache(tmp_path / "cache")
    try:
        lm = priced_lm(cache=True)
        meter = SpendMeter(Limits(max_usd=1.0), prices=PRICES)
        text = f"{PROMPT} {uuid.uuid4().hex}"
        with metering(meter):
            assert ask(lm, text) == ask(lm, text)
        assert lm.engine.calls == 1
        spent = meter.spent()["run"]
        assert spent["lm_calls"] == 1 and spent["tokens"] > 0
        assert spent["usd"] == pytest.approx(spent["tokens"] * TOKEN_USD)
    finally:
        dspy.cache = old


def test_through_an_adapter_and_a_program():
    lm = scripted_lm(lambda m: json_answer(answer="ok"), max_tokens=MAX_TOKENS)
    meter = SpendMeter(Limits(max_lm_calls=2), prices=PRICES)
    with metering(meter), dspy.context(lm=lm, adapter=FastJSONAdapter()):
        for i in range(2):
            assert dspy.Predict("question -> answer")(question=f"q{i}").answer == "ok"
        with pytest.raises(BudgetExceeded):
            dspy.Predict("question -> answer")(question="q2")
    assert lm.engine.calls == 2


def test_a_refused_retry_is_not_retried_and_not_an_lm_error(monkeypatch):
    from dspy._vendor.lm15.errors import ServerError

    from verifirst import lm as vlm

    monkeypatch.setattr(vlm, "_sleep", lambda s: None)

    def down(messages):
        raise ServerError("503 upstream unavailable")

    lm = AccountedLM("local/scripted", engine=ScriptedEngine(down), num_retries=5, cache=False,
                     max_tokens=MAX_TOKENS)
    meter = SpendMeter(Limits(max_lm_calls=2), prices=PRICES)
    u0 = USAGE.total()
    with metering(meter), pytest.raises(BudgetExceeded):
        ask(lm)
    u = USAGE.total()
    assert lm.engine.calls == 2  # two attempts sent, the third refused
    assert (u.attempts - u0.attempts, u.failed_attempts - u0.failed_attempts) == (2, 2)
    assert (u.calls - u0.calls, u.errors - u0.errors) == (0, 0)  # the refused call records nothing
    assert meter.spent()["run"] == {"usd": 0.0, "tokens": 0, "lm_calls": 2}  # failed: a call, free


def test_a_failed_request_counts_a_call_and_costs_nothing():
    def broken(messages):
        raise ValueError("not retryable")

    lm = priced_lm(fn=broken)
    meter = SpendMeter(Limits(max_usd=1.0), prices=PRICES)
    with metering(meter), pytest.raises(Exception, match="not retryable"):
        ask(lm)
    assert meter.spent()["run"] == {"usd": 0.0, "tokens": 0, "lm_calls": 1}
    assert meter.spent()["in_flight"] == 0


def test_settle_by_hand():
    meter = SpendMeter(Limits(max_lm_calls=2), prices=PRICES)
    t = meter.admit("task", "local/scripted", 40, 10)
    assert (t.tokens, t.usd) == (20, pytest.approx(20 * TOKEN_USD))
    assert meter.spent()["in_flight"] == 1
    meter.settle(t, 12, 3, cache_hit=False)
    meter.settle(t, 12, 3, cache_hit=False)  # a second settle does nothing
    assert meter.spent()["run"] == {"usd": pytest.approx(15 * TOKEN_USD), "tokens": 15, "lm_calls": 1}
    hit = meter.admit("task", "local/scripted", 40, 10)
    meter.settle(hit, None, None, cache_hit=True)
    assert meter.spent()["run"]["lm_calls"] == 1
    failed = meter.admit("task", "local/scripted", 40, 10)
    meter.settle(failed, None, None, cache_hit=False)
    assert meter.spent()["run"] == {"usd": pytest.approx(15 * TOKEN_USD), "tokens": 15, "lm_calls": 2}
    with pytest.raises(BudgetExceeded):
        meter.admit("task", "local/scripted", 40, 10)


def test_prices_from_litellm_offline_a_table_and_local_models():
    prices = Prices()
    known = prices.per_token("openai/gpt-4o-mini")
    assert known is not None and known[0] > 0 and known[1] > known[0]
    assert prices.per_token("gpt-4o-mini") == known  # the part after the provider prefix
    assert prices.per_token("hosted_vllm/my-model") is None
    with pytest.raises(InputError) as e:
        prices.require({"task": "openai/gpt-4o-mini", "judge": "hosted_vllm/my-model"})
    assert "hosted_vllm/my-model" in str(e.value) and e.value.field == "prices"
    assert '"MODEL" = {input = 0.15, output = 0.60}' in e.value.expected
    for local in ("local", "local/smollm2-135m-instruct", "local/scripted"):
        assert prices.per_token(local) == (0.0, 0.0)
    prices.require({"task": "local", "teacher": [{"model": "openai/gpt-4o-mini", "api_base": "http://x/v1"}]})

    table = Prices({"hosted_vllm/my-model": {"input": 0.15, "output": 0.60}})
    assert table.per_token("hosted_vllm/my-model") == (pytest.approx(0.15e-6), pytest.approx(0.60e-6))
    table.require({"judge": "hosted_vllm/my-model", "task": "openai/gpt-4o-mini"})
    with pytest.raises(InputError, match="hosted_vllm/other"):  # an endpoint list is checked per endpoint
        table.require({"task": [{"model": "hosted_vllm/my-model"}, {"model": "hosted_vllm/other"}]})


def test_max_usd_with_an_unpriced_model_refuses_before_sending():
    lm = scripted_lm(lambda m: "ok", name="unpriced")  # "local/unpriced" costs 0: give it another name
    lm.model = "hosted_vllm/my-model"
    meter = SpendMeter(Limits(max_usd=1.0))
    with metering(meter), pytest.raises(InputError, match="hosted_vllm/my-model"):
        ask(lm)
    assert lm.engine.calls == 0
    free = SpendMeter(Limits(max_lm_calls=5))  # no money limit: counted, at no price
    with metering(free):
        ask(lm)
    assert free.spent()["unpriced"] == ["hosted_vllm/my-model"] and free.spent()["run"]["usd"] == 0


def test_metering_is_process_wide_and_nests():
    a, b = SpendMeter(Limits()), SpendMeter(Limits())
    seen = []
    assert active_meter() is None
    with metering(a):
        t = threading.Thread(target=lambda: seen.append(active_meter()))
        t.start()
        t.join()
        with metering(b):
            assert active_meter() is b
        assert active_meter() is a
    assert active_meter() is None and seen == [a]


def test_without_a_meter_nothing_is_admitted():
    lm = priced_lm()
    assert active_meter() is None
    for _ in range(3):
        ask(lm)
    assert lm.engine.calls == 3


# -- a role served by several endpoints (LiteLLM's Router) ---------------------------------------

@pytest.fixture
def endpoints():
    from verifirst.lm.local_server import serve_local

    engines = [ScriptedEngine(lambda m: json_answer(answer="ok")) for _ in range(2)]
    served = [serve_local(e) for e in engines]
    yield engines, [url for url, _ in served]
    for _, stop in served:
        stop()


def test_routed_role_is_admitted_and_priced_at_the_endpoint_that_answered(endpoints):
    from verifirst.lm import make_lm

    (ea, eb), (ua, ub) = endpoints
    lm = make_lm([{"model": "openai/cheap", "api_base": ua}, {"model": "openai/dear", "api_base": ub}],
                 role="judge", cache=False, max_tokens=MAX_TOKENS)
    prices = Prices({"openai/cheap": {"input": 1.0, "output": 1.0}, "openai/dear": {"input": 100.0, "output": 100.0}})
    meter = SpendMeter(Limits(max_lm_calls=4), prices=prices)
    USAGE.reset()
    with metering(meter), dspy.context(lm=lm, adapter=FastJSONAdapter()):
        for i in range(4):
            dspy.Predict("question -> answer")(question=f"q{i}")
        with pytest.raises(BudgetExceeded):
            dspy.Predict("question -> answer")(question="q4")
    assert ea.calls + eb.calls == 4
    per = USAGE.endpoints_as_dict()["judge"]
    tokens = {ep: c["prompt_tokens"] + c["completion_tokens"] for ep, c in per.items()}
    expected = tokens.get(f"openai/cheap@{ua}", 0) * 1e-6 + tokens.get(f"openai/dear@{ub}", 0) * 1e-4
    assert expected > 0 and meter.spent()["run"]["usd"] == pytest.approx(expected)


def test_router_retries_are_counted_as_calls(endpoints):
    from verifirst.lm import make_lm

    (ea, eb), (ua, ub) = endpoints
    dead = "http://127.0.0.1:9/v1"  # nothing listens: every attempt there fails
    lm = make_lm([{"model": "openai/m", "api_base": dead, "cooldown_s": 60},
                  {"model": "openai/m", "api_base": ub, "fallback": True}], role="judge", cache=False,
                 max_tokens=MAX_TOKENS)
    meter = SpendMeter(Limits(), prices=Prices({"openai/m": {"input": 1.0, "output": 1.0}}))
    USAGE.reset()
    with metering(meter), dspy.context(lm=lm, adapter=FastJSONAdapter()):
        for i in range(3):
            assert dspy.Predict("question -> answer")(question=f"q{i}").answer == "ok"
    per = USAGE.endpoints_as_dict()["judge"]
    sent = sum(c["calls"] for c in per.values())
    assert sent > 3 and eb.calls == 3  # the dead endpoint was tried and failed
    assert meter.spent()["run"]["lm_calls"] == sent


def test_held_back_limits_stop_early_and_release_gives_them_back():
    """What is held for the test split is not the optimizer's: a request that fits the run's cap but
    not the cap less the held part is refused (naming what is held); release lifts that stop only."""
    meter = SpendMeter(Limits(max_lm_calls=5), {"task": Limits(max_lm_calls=4)})
    meter.hold_back(Limits(max_lm_calls=2))
    for _ in range(3):
        meter.settle(meter.admit("reflection", "local/x", 10, 5), 3, 1, cache_hit=False)
    with pytest.raises(BudgetExceeded) as e:
        meter.admit("reflection", "local/x", 10, 5)
    assert e.value.held and "held back to score the test split" in str(e.value) and meter.refusals == 1
    with pytest.raises(BudgetExceeded):  # the stop holds for every role until released
        meter.admit("task", "local/x", 10, 5)
    meter.release()
    meter.settle(meter.admit("task", "local/x", 10, 5), 3, 1, cache_hit=False)  # the 4th and 5th calls
    meter.settle(meter.admit("task", "local/x", 10, 5), 3, 1, cache_hit=False)
    with pytest.raises(BudgetExceeded) as e:  # the run's own cap: not lifted by a release
        meter.admit("task", "local/x", 10, 5)
    assert not e.value.held and "max_lm_calls 5 for the run reached" in str(e.value)
    meter.release()
    with pytest.raises(BudgetExceeded):
        meter.admit("task", "local/x", 10, 5)
    assert meter.first_refusal.held and meter.refusals == 4
